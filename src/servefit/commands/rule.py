"""`servefit rule CODE`: a rule's documentation in ruff's shape."""

from __future__ import annotations

import argparse
import sys

from servefit.core import UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rule", help="print a rule's documentation")
    p.add_argument("code", help="rule code (VLLM003) or name (max-model-len-exceeds-kv-cache)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from servefit.rules.catalog import lookup
    from servefit.rules.docs import render

    entry = lookup(args.code)
    if entry is None:
        import difflib

        from servefit.rules.catalog import rules

        names = list(rules()) + [r["name"] for r in rules().values()]
        near = difflib.get_close_matches(args.code.upper() if args.code[:1].isalpha() and args.code[-1:].isdigit()
                                         else args.code, names, n=3)
        raise UsageError(f"unknown rule {args.code!r}" + (f"; did you mean: {', '.join(near)}?" if near else
                                                           " (servefit rules lists them)"))
    sys.stdout.write(render(entry))
    return 0
