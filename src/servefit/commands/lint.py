"""`servefit lint PATH...`: every server in the given files or directories, checked against
the GPU it will run on."""

from __future__ import annotations

import argparse
import os
import sys

from servefit.conventions import add_color_arg, use_color
from servefit.core import UsageError

COMMAND_FILE = "<command line>"  # the name a launch command given in place of paths is reported under


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lint", help="find every server in a deployment repo and check its settings",
                       description="Find the inference servers in k8s manifests, Helm values, compose "
                                   "files, Dockerfiles, scripts, systemd units, supervisord programs, SkyPilot and llama-swap "
                                   "configs, and report the settings that will not start or will OOM.")
    p.add_argument("paths", nargs="*", help="files or directories (default: the current directory), or "
                                            "`-- COMMAND...` (a launch command, linted as a one-line script)")
    p.add_argument("--gpu", help="GPU for every server, over what the files and the config say (any name: "
                                 "nvidia-smi, k8s label, GKE name, instance type)")
    p.add_argument("--gpus", type=int, help="GPU count for every server, over what the files say")
    p.add_argument("--gpu-memory", help="override the GPU's memory (e.g. 48GiB)")
    p.add_argument("--engine-version", help="engine version to model for every server, over what image tags say")
    p.add_argument("--model", help="model reference for every server, over the one its command names")
    p.add_argument("--model-config", help="path to the model's config.json (or its directory), for every server")
    p.add_argument("--online", action="store_true", help="allow reading model configs from the Hugging Face Hub")
    p.add_argument("--values", action="append", metavar="FILE",
                   help="values file for the Helm charts found (repeat, or comma-separate; later files win, as "
                        "in helm): default, each values file the repository pairs with the chart")
    p.add_argument("--no-render", action="store_true",
                   help="do not render Helm charts with helm, even when it is on PATH")
    p.add_argument("--list-sites", action="store_true", help="list the servers found (engine, model, "
                                                             "settings, hardware) instead of linting")
    p.add_argument("--output-format", "--format", dest="format", action="append", choices=list(FORMATS),
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
    p.add_argument("--fix", action="store_true", help="apply the safe fixes to the files")
    p.add_argument("--unsafe-fixes", action="store_true",
                   help="also apply (with --fix) or show (with --diff) the unsafe fixes, e.g. a shorter context")
    p.add_argument("--diff", action="store_true", help="print the fixes as a unified diff instead of writing them")
    p.add_argument("-q", "--quiet", action="store_true", help="print the findings and nothing else (no summary)")
    p.add_argument("--statistics", action="store_true", help="print the number of findings per rule instead")
    p.add_argument("--show-source", action="store_true", help="show the source line under each finding")
    p.add_argument("--stdin-filename", metavar="NAME",
                   help="the file name standard input stands for (`lint -`): it decides how the text is read")
    add_color_arg(p)
    p.set_defaults(run=run)


FORMATS = ("text", "json", "sarif", "github", "html")


def config_args(args: argparse.Namespace) -> tuple[str | None, list[str]]:
    """(the --config file, the KEY=VALUE overrides, --select / --ignore / --fail-on included)."""
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
    return path, overrides


def load_config(args: argparse.Namespace):  # -> Config
    """The run's configuration (the first path's): baseline paths and suppression policy. Each
    file's own findings follow its nearest configuration (options_from)."""
    from servefit import config

    path, overrides = config_args(args)
    start = args.paths[0] if args.paths else "."
    if start == "-":  # standard input: the configuration of the file it stands for, as ruff finds it
        start = os.path.dirname(getattr(args, "stdin_filename", None) or "") or "."
    return config.load(start, overrides, path)


def options_from(args: argparse.Namespace, cfg=None):  # -> LintOptions
    from servefit.config import Configs, user_online
    from servefit.linter.run import LintOptions
    from servefit.units import parse_size

    if args.gpus is not None and not 1 <= args.gpus <= 65536:
        raise UsageError(f"--gpus must be 1 to 65,536 (got {args.gpus})")
    path, overrides = config_args(args)
    return LintOptions(gpu=args.gpu, gpus=args.gpus, gpu_memory=parse_size(args.gpu_memory) if args.gpu_memory else None,
                       engine_version=args.engine_version, model=args.model, model_config=args.model_config,
                       online=user_online(args),
                       configs=Configs(overrides, path), values=_values(args),
                       render=not getattr(args, "no_render", False))


def _values(args: argparse.Namespace) -> list[str] | None:
    vals = [v.strip() for item in (getattr(args, "values", None) or []) for v in item.split(",") if v.strip()]
    for v in vals:
        if not os.path.isfile(v):
            raise UsageError(f"--values {v}: no such file")
    return vals or None


def check_gpu_names(args: argparse.Namespace, cfg) -> None:  # type: ignore[no-untyped-def]
    """A GPU the user names for the run (--gpu, the config's default) that the catalog does not
    know is a usage error with the nearest names, as in estimate; with --gpu-memory (or the
    config's gpu-memory) it is an unlisted card of that size."""
    from servefit.hardware import resolve_target

    if args.gpu_memory or (cfg is not None and cfg.gpu_memory):
        return
    for name, where in ((args.gpu, "--gpu"), (cfg.gpu if cfg is not None else None, "config gpu")):
        if name:
            try:
                resolve_target(name)
            except UsageError as exc:
                raise UsageError(f"{where}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    from servefit.linter.policy import apply
    from servefit.linter.run import lint_paths

    command = _command(args)
    for p in args.paths:
        if p != "-" and not os.path.exists(p):
            raise UsageError(f"{p}: no such file or directory")
    formats = args.format or [("github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text")]
    outputs = list(args.output or [])
    if len(outputs) > len(formats):
        raise UsageError("more --output than --format: pair each --output with a --format")
    if args.baseline and not os.path.exists(args.baseline):
        raise UsageError(f"--baseline {args.baseline}: no such file")
    cfg = load_config(args)
    check_gpu_names(args, cfg)
    options = options_from(args, cfg)
    if command is not None:
        options.stdin = (COMMAND_FILE, command)
    elif "-" in args.paths:
        from servefit.conventions import read_stdin, stdin_name

        text = read_stdin()
        options.stdin = (stdin_name(text, args.stdin_filename), text)
    result = lint_paths(list(args.paths), options)
    if args.list_sites:
        from servefit.report import sites

        out = sites.to_json(result.sites) if formats[0] == "json" else sites.to_table(result.sites)
        _write(out, outputs[0] if outputs else None)
        return 0
    findings = apply(result, cfg, args.baseline)
    if args.fix or args.diff:
        return _fixes(args, result, findings, cfg)
    if args.write_baseline:
        from servefit import baseline

        n = baseline.write(args.write_baseline, findings, cfg.relative)
        sys.stderr.write(f"servefit: wrote {n} finding(s) to {args.write_baseline}\n")
        return 0
    dests = [outputs[i] if i < len(outputs) and outputs[i] != "-" else None for i in range(len(formats))]
    if args.statistics:
        from servefit.report.lint_text import statistics

        formats, dests = ["statistics"], [dests[0]]
        _write(statistics(findings), dests[0])
    for fmt, dest in zip(formats, dests, strict=True):
        if fmt == "statistics":
            continue
        source = None
        if args.show_source:
            from servefit.report.snippet import reader

            source = reader(dict([options.stdin]) if options.stdin else None)
        _write(render(fmt, findings, result, color=dest is None and use_color(args.color), quiet=args.quiet,
                      source=source), dest)
    if None not in dests and not args.quiet:  # every report went to a file: say on the terminal what they hold
        from servefit.report.lint_text import summary

        sys.stderr.write(f"servefit: {summary(findings, result.files, len(result.sites))}; "
                         f"wrote {', '.join(dests)}\n")  # type: ignore[arg-type]
    if args.exit_zero:
        return 0
    return 1 if any(result.config_for(f.span.file if f.span else None, cfg).fails(f.severity)
                    for f in findings) else 0


def _command(args: argparse.Namespace) -> str | None:
    """A launch command in place of paths (`lint -- vllm serve MODEL ...`, or quoted whole), as
    estimate and explain take it: linted as a one-line script read from standard input's place."""
    words = list(args.paths)
    if not words or any(os.path.exists(w) or w == "-" for w in words):
        return None
    from servefit import engines
    from servefit.commands.common import one_word_target, split_trailing

    fmt = args.format
    words = one_word_target(split_trailing(words, args), args)
    if isinstance(args.format, str):  # `--format json` after the command: lint's formats are a list
        args.format = (fmt or []) + [args.format]
    if isinstance(args.gpus, str):
        try:
            args.gpus = int(args.gpus)
        except ValueError:
            raise UsageError(f"--gpus: not a count: {args.gpus!r}") from None
    if engines.detect(words, None) is None:
        return None
    import shlex

    args.paths = ["-"]
    return shlex.join(words) + "\n"


def _fixes(args: argparse.Namespace, result, findings: list, cfg) -> int:  # type: ignore[no-untyped-def,type-arg]
    """`--diff`: the patch of the allowed fixes (exit 1 when there is one); `--fix`: write them
    and report what remains."""
    from servefit.linter import fixes
    from servefit.redact import site_secret_values
    from servefit.tune.diff import unified

    fixes.attach(result.sites)
    run = fixes.plan(findings, unsafe=args.unsafe_fixes)
    if args.diff:
        secrets = site_secret_values([s.site for s in result.sites])
        sys.stdout.write("".join(unified(p, old, new, secrets) for p, (old, new) in sorted(run.changes.items())))
        held = [f for f in findings if f.fix is not None and f.fix.applicability == "unsafe" and f not in run.fixed]
        if held:
            sys.stderr.write(f"servefit: {len(held)} unsafe fix(es) not shown (pass --unsafe-fixes)\n")
        return 1 if run.changes else 0
    fixes.write(run)
    for path, why in run.refused.items():
        sys.stderr.write(f"servefit: {path}: not written: {why}\n")
    written = [f for f in run.fixed if not any(e.span.file in run.refused for e in (f.fix.edits if f.fix else ()))]
    remaining = [f for f in findings if f not in written]
    sys.stderr.write(f"servefit: fixed {len(written)} finding(s)\n")
    formats = args.format or ["text"]
    out = args.output[0] if args.output else None
    _write(render(formats[0], remaining, result, color=out is None and use_color(args.color)), out)
    if args.exit_zero:
        return 0
    return 1 if any(result.config_for(f.span.file if f.span else None, cfg).fails(f.severity)
                    for f in remaining) else 0


def render(fmt: str, findings: list, result, color: bool = False, quiet: bool = False,  # type: ignore[type-arg]
           source=None) -> str:  # type: ignore[no-untyped-def]
    if fmt in ("json", "sarif", "github"):
        from servefit.report import formats

        return {"json": formats.to_json, "sarif": formats.to_sarif, "github": formats.to_github}[fmt](findings)
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

    return text(findings, result.files, len(result.sites), color=color, quiet=quiet, source=source)


def tune_note(rep) -> str | None:  # type: ignore[no-untyped-def]
    """What `servefit tune` would change for a server with an error (HTML report only: this is
    the one lint output that pays for importing the tuner)."""
    if rep.evaluation is None or not any(f.severity == "error" for f in rep.findings):
        return None
    try:
        from servefit.commands import tune as tune_cmd
        from servefit.report.tune import render_site
        from servefit.tune.session import Session, reader

        args = tune_cmd.default_args()
        session = Session(args, tune_cmd.needs_from(args), None)
        session.read = reader()
        return "\n".join(render_site(session.tune_server(rep), False)[1:])
    except Exception as exc:  # noqa: BLE001 - a suggestion that cannot be made is left out, not the report
        return f"(tune could not run here: {type(exc).__name__}: {exc})"


def _write(text: str, dest: str | None) -> None:
    if dest is None:
        sys.stdout.write(text)
        return
    with open(dest, "w", encoding="utf-8") as fh:
        fh.write(text)
