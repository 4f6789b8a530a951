"""`servefit lint PATH...`: every server in the given files or directories, checked against
the GPU it will run on."""

from __future__ import annotations

import argparse
import os
import sys

from servefit.core import UsageError


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
    p.add_argument("--format", action="append", choices=list(FORMATS),
                   help="text (default; github under GitHub Actions), json, sarif, github, html; repeat "
                        "with --output for several reports in one run")
    p.add_argument("-o", "--output", action="append", help="file for the matching --format (default stdout; - is stdout)")
    p.add_argument("--config", action="append", default=[], metavar="PATH|KEY=VALUE",
                   help="a servefit.toml / pyproject.toml to use, or one setting to override")
    p.add_argument("--select", help="comma-separated rule codes or prefixes to run")
    p.add_argument("--ignore", help="comma-separated rule codes or prefixes to skip")
    p.add_argument("--fail-on", choices=["error", "warning", "info", "never"],
                   help="lowest severity that makes the exit code 1 (default: the config's, else error)")
    p.add_argument("--baseline", help="report only findings not recorded in this baseline file")
    p.add_argument("--write-baseline", metavar="FILE", help="record today's findings and exit 0")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when findings are at or above fail-on")
    p.set_defaults(run=run)


FORMATS = ("text", "json", "sarif", "github", "html")


def load_config(args: argparse.Namespace):  # -> Config
    from servefit import config

    path = None
    overrides = []
    for item in args.config:
        if "=" in item and not os.path.isfile(item):
            overrides.append(item)
        elif os.path.isfile(item):
            path = item
        else:
            raise UsageError(f"--config {item}: no such file, and not KEY=VALUE")
    if args.select:
        overrides.append(f"select={[c.strip() for c in args.select.split(',') if c.strip()]!r}".replace("'", '"'))
    if args.ignore:
        overrides.append(f"ignore={[c.strip() for c in args.ignore.split(',') if c.strip()]!r}".replace("'", '"'))
    if args.fail_on:
        overrides.append(f'fail-on="{args.fail_on}"')
    start = args.paths[0] if args.paths else "."
    return config.load(start, overrides, path)


def options_from(args: argparse.Namespace, cfg=None):  # -> LintOptions
    from servefit.linter.run import LintOptions
    from servefit.units import parse_size

    if args.gpus is not None and not 1 <= args.gpus <= 65536:
        raise UsageError(f"--gpus must be 1 to 65,536 (got {args.gpus})")
    mem = args.gpu_memory or (cfg.gpu_memory if cfg is not None else None)
    return LintOptions(gpu=args.gpu, gpus=args.gpus, gpu_memory=parse_size(mem) if mem else None,
                       engine_version=args.engine_version, online=bool(args.online) or bool(cfg and cfg.online),
                       evaluate=not args.list_sites, config=cfg,
                       default_gpu=cfg.gpu if cfg is not None else None,
                       default_gpu_count=cfg.gpus if cfg is not None else None)


def run(args: argparse.Namespace) -> int:
    from servefit.linter.policy import apply
    from servefit.linter.run import lint_paths

    for p in args.paths:
        if not os.path.exists(p):
            raise UsageError(f"{p}: no such file or directory")
    formats = args.format or [("github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text")]
    outputs = list(args.output or [])
    if len(outputs) > len(formats):
        raise UsageError("more --output than --format: pair each --output with a --format")
    if args.baseline and not os.path.exists(args.baseline):
        raise UsageError(f"--baseline {args.baseline}: no such file")
    cfg = load_config(args)
    result = lint_paths(list(args.paths), options_from(args, cfg))
    if args.list_sites:
        from servefit.report import sites

        out = sites.to_json(result.sites) if formats[0] == "json" else sites.to_table(result.sites)
        _write(out, outputs[0] if outputs else None)
        return 0
    findings = apply(result, cfg, args.baseline)
    if args.write_baseline:
        from servefit import baseline

        n = baseline.write(args.write_baseline, findings, cfg.relative)
        sys.stderr.write(f"servefit: wrote {n} finding(s) to {args.write_baseline}\n")
        return 0
    dests = [outputs[i] if i < len(outputs) and outputs[i] != "-" else None for i in range(len(formats))]
    for fmt, dest in zip(formats, dests, strict=True):
        _write(render(fmt, findings, result, color=dest is None and sys.stdout.isatty()), dest)
    if None not in dests:  # every report went to a file: say on the terminal what they hold
        from servefit.report.lint_text import summary

        sys.stderr.write(f"servefit: {summary(findings, result.files, len(result.sites))}; "
                         f"wrote {', '.join(dests)}\n")  # type: ignore[arg-type]
    if args.exit_zero:
        return 0
    return 1 if any(cfg.fails(f.severity) for f in findings) else 0


def render(fmt: str, findings: list, result, color: bool = False) -> str:  # type: ignore[type-arg]
    from servefit.report import formats

    if fmt == "json":
        return formats.to_json(findings)
    if fmt == "sarif":
        return formats.to_sarif(findings)
    if fmt == "github":
        return formats.to_github(findings)
    if fmt == "html":
        from servefit.report.html import lint_page

        by_site: dict[str, list] = {}  # type: ignore[type-arg]
        for f in findings:
            by_site.setdefault(f.site, []).append(f)
        rows = [(rep.evaluation, by_site.pop(rep.site.name, []), tune_note(rep), f"{rep.site.file}: {rep.site.name}")
                for rep in result.sites]
        rest = [f for fs in by_site.values() for f in fs]
        return lint_page(rows, rest)
    from servefit.report.lint_text import render as text

    return text(findings, result.files, len(result.sites), color=color)


def tune_note(rep) -> str | None:  # type: ignore[no-untyped-def]
    """What `servefit tune` would change for a server with an error (HTML report only: this is
    the one lint output that pays for importing the tuner)."""
    if rep.evaluation is None or not any(f.severity == "error" for f in rep.findings):
        return None
    try:
        from servefit.commands import tune as tune_cmd
        from servefit.report.tune import render_site
        from servefit.tune.session import Session

        parser = argparse.ArgumentParser()
        tune_cmd.add_parser(parser.add_subparsers())
        args = parser.parse_args(["tune", rep.site.file, "--gpu", rep.evaluation.gpu.name])
        args.gpus = rep.evaluation.count or None
        session = Session(args, tune_cmd.needs_from(args), rep.evaluation and _target(rep))
        session.read = _reader()
        return "\n".join(render_site(session.tune_site(rep.site), False)[1:])
    except Exception as exc:  # noqa: BLE001 - a suggestion that cannot be made is left out, not the report
        return f"(tune could not run here: {type(exc).__name__}: {exc})"


def _target(rep):  # type: ignore[no-untyped-def]
    from servefit.pipeline import Target

    ev = rep.evaluation
    return Target(gpu=ev.gpu.name, gpus=ev.count or None, engine_version=ev.plan.engine_version, source=ev.gpu_source)


def _reader():  # type: ignore[no-untyped-def]
    from servefit.tune.session import reader

    return reader()


def _write(text: str, dest: str | None) -> None:
    if dest is None:
        sys.stdout.write(text)
        return
    with open(dest, "w", encoding="utf-8") as fh:
        fh.write(text)
