"""`servefit explain`: the memory stack per GPU, sweeps to the OOM boundary, max users per
context for each KV dtype and quantization the engine allows."""

from __future__ import annotations

import argparse
import json
import sys

from servefit.commands.common import add_target_args
from servefit.conventions import use_color
from servefit.core import UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain", help="draw the memory stack and sweep context / batch to the OOM boundary",
                       description="Show the memory stack the engine will plan, and where it runs out.")
    add_target_args(p)
    p.set_defaults(format="text")
    for a in p._actions:  # explain also writes HTML
        if a.dest == "format":
            a.choices = ["text", "json", "html"]
    p.add_argument("--sweep", help="context, batch, block (paged block sizes), or a comma list")
    p.add_argument("--batch", type=int, default=8, help="users for the context sweep (default 8)")
    p.add_argument("--context", default="2048", help="tokens per user for the batch sweep (default 2048)")
    p.add_argument("-o", "--output", help="write the report to this file")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from servefit import sweep
    from servefit.commands.estimate import evaluations, exit_code, json_shape
    from servefit.report import sweep as sweep_report
    from servefit.report.plan import plan_dict, render_text
    from servefit.units import parse_tokens

    evs = evaluations(args)
    kinds = [k.strip() for k in (args.sweep or "").split(",") if k.strip()]
    bad = [k for k in kinds if k not in ("context", "batch", "block")]
    if bad:
        raise UsageError(f"--sweep takes context, batch, block or a comma list (got {args.sweep!r})")
    context = parse_tokens(str(args.context))
    if args.format == "html":
        from servefit.report.html import explain_page

        page = explain_page(evs, kinds, args.batch, context)
        _emit(page, args.output)
        return exit_code(evs, args)
    if args.format == "json":
        out = []
        for ev in evs:
            obj = plan_dict(ev)
            if "context" in kinds:
                obj["sweep_context"] = [r.__dict__ for r in sweep.context_sweep(ev, args.batch)]
            if "batch" in kinds:
                obj["sweep_batch"] = [r.__dict__ for r in sweep.batch_sweep(ev, context)]
            obj["max_users"] = sweep.max_users(ev, sweep.variants(ev))
            out.append(obj)
        _emit(json.dumps(json_shape(out, args), indent=2) + "\n", args.output)
        return exit_code(evs, args)
    parts = []
    for ev in evs:
        parts.append(render_text(ev, color=use_color(getattr(args, "color", None)) and not args.output,
                                 named=len(evs) > 1))
        if "context" in kinds:
            parts.append(f"Context sweep at {args.batch} users:\n" + sweep_report.table(sweep.context_sweep(ev, args.batch), "context"))
        if "batch" in kinds:
            parts.append(f"Batch sweep at {context:,} tokens per user:\n" + sweep_report.table(sweep.batch_sweep(ev, context), "batch"))
        if "block" in kinds:
            parts.append(sweep_report.paging_table(sweep.paging(ev, context, args.batch), context, args.batch))
        if "context" in kinds and "batch" in kinds:
            parts.append(sweep_report.grid_table(sweep.grid(ev)))
        users = sweep.max_users(ev, sweep.variants(ev))
        parts.append(sweep_report.users_table(users, sweep.none_served(ev, users)))
    _emit("\n\n".join(parts) + "\n", args.output)
    return exit_code(evs, args)


def _emit(text: str, path: str | None) -> None:
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
