"""`servefit gpus`: the GPU catalog with memory as the driver reports it."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gpus", help="list the GPUs servefit knows (memory as the driver reports it)")
    p.add_argument("name", nargs="?", help="show what this name resolves to")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from servefit.hardware import all_gpus, resolve_target

    if args.name:
        gpu, count = resolve_target(args.name)
        gpus = [gpu]
    else:
        gpus, count = all_gpus(), None
    if args.format == "json":
        rows = [{"key": g.key, "name": g.name, "vendor": g.vendor, "memory_bytes": g.memory_bytes,
                 "memory_gib": round(g.memory_bytes / 2**30, 2), "compute_capability": g.compute_capability,
                 "fp8": g.fp8, "bf16": g.bf16, "unified_memory": g.unified_memory, "aliases": g.aliases} for g in gpus]
        if count:
            rows[0]["count"] = count
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    sys.stdout.write(f"{'key':<22} {'name':<42} {'GiB':>8} {'cc':>5} {'fp8':>4} {'bf16':>4}  memory\n")
    for g in gpus:
        cc = f"{g.compute_capability / 10:.1f}" if g.compute_capability else "-"
        kind = "unified" if g.unified_memory else "dedicated"
        sys.stdout.write(f"{g.key:<22} {g.name:<42} {g.memory_bytes / 2**30:8.2f} {cc:>5} {'yes' if g.fp8 else 'no':>4} "
                         f"{'yes' if g.bf16 else 'no':>4}  {kind}\n")
    if count:
        sys.stdout.write(f"({args.name} has {count} of them)\n")
    return 0
