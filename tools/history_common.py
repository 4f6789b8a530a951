"""The command line every option extractor shares (tools/extract_<engine>_options.py): read one
folder per release (named by its version), write the per-release flag lists the tests walk and
the history servefit loads (schema: servefit/schemas/option_history.schema.json)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from extract_vllm_options import _dump_history, history, vkey


def main_for(engine: str, extract: Callable[[Path], dict[str, Any]], doc: str, header: str,
             argv: list[str] | None = None) -> int:
    import yaml

    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("roots", nargs="+", help="source folders, each named by its release")
    ap.add_argument("--flags-out", help="per-release flag and variable lists (YAML)")
    ap.add_argument("--history-out", help="the option history (YAML)")
    args = ap.parse_args(argv)
    per = {os.path.basename(os.path.normpath(r)): extract(Path(r)) for r in args.roots}
    if args.flags_out:
        flat = {v: {"flags": sorted(per[v]["flags"]), "env": sorted(per[v]["env"])}
                for v in sorted(per, key=vkey)}
        Path(args.flags_out).write_text(header + yaml.safe_dump(flat, sort_keys=False, width=120,
                                                                default_flow_style=None))
    if args.history_out:
        h = history(per, engine)
        if h.get("underscore_dash_same_since") is None:
            h.pop("underscore_dash_same_since", None)
        if not h.get("env"):
            h.pop("env", None)
        Path(args.history_out).write_text(header + "# Schema: servefit/schemas/option_history.schema.json\n"
                                          + _dump_history(h))
    for v in sorted(per, key=vkey):
        print(f"{v}: {len(per[v]['flags'])} flags, {len(per[v]['env'])} variables")
    return 0
