"""`servefit lint PATH...`: every server in the given files or directories, checked against
the GPU it will run on."""

from __future__ import annotations

import argparse
import sys

from servefit.core import SEVERITY_RANK, UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lint", help="find every server in a deployment repo and check its settings",
                       description="Find the inference servers in k8s manifests, Helm values, compose "
                                   "files, Dockerfiles, scripts, systemd units, SkyPilot and llama-swap "
                                   "configs, and report the settings that will not start or will OOM.")
    p.add_argument("paths", nargs="*", help="files or directories (default: the current directory)")
    p.add_argument("--gpu", help="GPU for servers whose file does not say (any name: nvidia-smi, k8s label, "
                                 "GKE name, instance type)")
    p.add_argument("--gpus", type=int, help="GPU count for servers whose file does not say")
    p.add_argument("--gpu-memory", help="override the GPU's memory (e.g. 48GiB)")
    p.add_argument("--engine-version", help="engine version to model where the image tag does not say")
    p.add_argument("--online", action="store_true", help="allow reading model configs from the Hugging Face Hub")
    p.add_argument("--list-sites", action="store_true", help="list the servers found (engine, model, "
                                                             "settings, hardware) instead of linting")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when errors are found")
    p.set_defaults(run=run)


def options_from(args: argparse.Namespace):  # -> LintOptions
    from servefit.linter.run import LintOptions
    from servefit.units import parse_size

    if args.gpus is not None and args.gpus < 1:
        raise UsageError(f"--gpus must be at least 1 (got {args.gpus})")
    return LintOptions(gpu=args.gpu, gpus=args.gpus,
                       gpu_memory=parse_size(args.gpu_memory) if args.gpu_memory else None,
                       engine_version=args.engine_version, online=bool(args.online),
                       evaluate=not args.list_sites)


def run(args: argparse.Namespace) -> int:
    import os

    from servefit.linter.run import lint_paths

    for p in args.paths:
        if not os.path.exists(p):
            raise UsageError(f"{p}: no such file or directory")
    result = lint_paths(list(args.paths), options_from(args))
    if args.list_sites:
        from servefit.report import sites

        out = sites.to_json(result.sites) if args.format == "json" else sites.to_table(result.sites)
        sys.stdout.write(out)
        return 0
    if args.format == "json":
        sys.stdout.write(_json(result.findings))
    else:
        from servefit.report.lint_text import render

        sys.stdout.write(render(result.findings, result.files, len(result.sites), color=sys.stdout.isatty()))
    if args.exit_zero:
        return 0
    return 1 if any(SEVERITY_RANK[f.severity] >= SEVERITY_RANK["error"] for f in result.findings) else 0


def _json(findings: list) -> str:  # type: ignore[type-arg]
    try:
        from servefit.report.formats import to_json
    except ImportError:  # pragma: no cover - formats belongs to the output-formats module
        import json

        return json.dumps([f.as_dict() for f in findings], indent=2) + "\n"
    return to_json(findings)
