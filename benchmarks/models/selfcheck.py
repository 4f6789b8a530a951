"""Breadth self-check: the share of public lists of popular models that servefit sizes offline.

    python benchmarks/models/selfcheck.py          # per list: sized / total
    python benchmarks/models/selfcheck.py -v       # and every reference it cannot size, with the reason

The lists (selfcheck/*.txt, one `ENGINE REF` a line, their source in the header) are not deployment
files and not held out: they measure how much of what people run the catalog, the name rules and
the Ollama tag table cover, and they were read while the catalog grew. The held-out figure is
run.py's fresh part. Each reference is resolved as run.py resolves one (sockets off, an empty
Hugging Face cache, an empty working directory)."""

from __future__ import annotations

import argparse
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import run as bench  # noqa: E402  (benchmarks/models/run.py)


def load(path: str) -> list[dict[str, str]]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip() and not line.startswith("#"):
                engine, ref = line.split(None, 1)
                out.append({"ref": ref.strip(), "engine": engine, "source": os.path.basename(path), "kind": "shell"})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--verbose", "-v", action="store_true")
    args = ap.parse_args(argv)
    total = sized = 0
    for path in sorted(glob.glob(os.path.join(HERE, "selfcheck", "*.txt"))):
        outcomes = bench.run(load(path))
        ok = sum(o.status != "unknown" for o in outcomes)
        total, sized = total + len(outcomes), sized + ok
        print(f"{os.path.basename(path):28} {ok:4}/{len(outcomes):<4} {100 * ok / len(outcomes):5.1f}%")
        if args.verbose:
            for o in outcomes:
                if o.status == "unknown":
                    print(f"    {o.engine:8} {o.ref}: {o.reason[:160]}")
    print(f"{'all':28} {sized:4}/{total:<4} {100 * sized / total:5.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
