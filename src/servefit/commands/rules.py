"""`servefit rules`: the rule catalogue, one line each."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rules", help="list every rule with its code, name and default severity")
    p.add_argument("--format", choices=["text", "json", "markdown"], default="text")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from servefit.rules.catalog import rules

    cat = rules()
    if args.format == "markdown":
        from servefit.rules.docs import markdown

        sys.stdout.write(markdown(cat))
        return 0
    if args.format == "json":
        json.dump([{k: v for k, v in r.items()} for r in cat.values()], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for code, r in sorted(cat.items()):
        sys.stdout.write(f"{code:<9} {r['severity']:<8} {r['name']:<40} {r.get('summary', '')}\n")
    return 0
