"""Catalogs and option tables shipped as YAML, read once per process.

Parsing the YAML is most of a one-file lint's own time, so the parsed data is kept in the user's
cache directory as `marshal` (plain dicts, lists and scalars: it cannot run code when loaded),
keyed by the file's name, size and mtime. A cache that cannot be read or written is ignored.
"""

from __future__ import annotations

import marshal
import os
from functools import cache
from pathlib import Path
from typing import Any

import yaml

DATA_DIR = Path(__file__).parent

try:  # the C loader is ~10x faster; fall back where libyaml is missing
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader


def _cache_dir() -> Path | None:
    if os.environ.get("SERVEFIT_NO_CACHE"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "servefit" / "data"


@cache
def load(name: str) -> Any:
    """Load `data/<name>` (e.g. "gpus.yaml", "engines/vllm.yaml")."""
    path = DATA_DIR / name
    st = path.stat()
    cdir = _cache_dir()
    cfile = None
    if cdir is not None:
        cfile = cdir / f"{name.replace('/', '_')}-{st.st_size}-{st.st_mtime_ns}.marshal"
        try:
            return marshal.loads(cfile.read_bytes())
        except (OSError, ValueError, EOFError, TypeError):
            pass
    with open(path, encoding="utf-8") as fh:
        value = yaml.load(fh, Loader=_Loader)
    if cfile is not None:
        try:
            cfile.parent.mkdir(parents=True, exist_ok=True)
            tmp = cfile.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(marshal.dumps(value))
            os.replace(tmp, cfile)
        except (OSError, ValueError):
            pass
    return value
