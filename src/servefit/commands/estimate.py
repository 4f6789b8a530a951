"""`servefit estimate`: the memory plan one engine will make for one server."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from servefit.commands.common import add_target_args, one_word_target, split_trailing
from servefit.conventions import use_color
from servefit.core import UsageError
from servefit.pipeline import Evaluation, site_from_argv


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("estimate", help="predict the engine's GPU memory plan for a launch command or file",
                       description="Predict what the engine will log at start: weights, activation peak, "
                                   "CUDA graphs, KV cache, max concurrency and the verdict.")
    add_target_args(p)
    p.set_defaults(run=run)


def servers(args: argparse.Namespace):  # -> list[Server]
    """The servers in the given files, or the command after `--`, through the shared assembly
    (the same servers, links, configuration and target lint sees)."""
    from servefit.sources.assemble import assemble_named, assemble_sites, flags_from

    words = one_word_target(split_trailing(list(args.target), args), args)
    flags = flags_from(args)
    if not words:
        raise UsageError("nothing to estimate: give a file, or `-- vllm serve MODEL ...`")
    args.input_kind = "file"
    if words == ["-"]:  # a file on standard input
        from servefit.conventions import read_stdin, stdin_name
        from servefit.sources import scan_file

        text = read_stdin()
        name = stdin_name(text, getattr(args, "stdin_filename", None))
        sites = scan_file(name, text).sites
        if not sites:
            raise UsageError(f"{name}: no serving engine found in standard input")
        return assemble_sites(sites, flags).servers
    if all(os.path.exists(w) for w in words) and any(os.path.isfile(w) or os.path.isdir(w) for w in words):
        # files and directories, as lint takes them (a compose file with its override, a repo)
        asm = assemble_named(words, flags)
        asm.warn_ignored_directives()
        return asm.servers
    args.input_kind = "command"
    return assemble_sites([site_from_argv(words)], flags).servers


def json_shape(objs: list[Any], args: argparse.Namespace) -> Any:
    """One JSON shape per input kind (docs/output.md): a command after `--` gives one object,
    files (or standard input) give a list of servers, even when they hold a single one."""
    return objs[0] if getattr(args, "input_kind", "file") == "command" and len(objs) == 1 else objs


def evaluations(args: argparse.Namespace) -> list[Evaluation]:
    """The plan of every server; one that cannot be planned is named on stderr, and when none
    can, the first one's reason is the one-line error (exit 2), after the others named, unless
    they all have that reason."""
    srvs = servers(args)
    evs = [s.evaluation for s in srvs if s.evaluation is not None]
    skipped = [s for s in srvs if s.evaluation is None]
    if not evs:  # the first one's reason is the error; one reason for all (no target GPU) is said once
        s = skipped[0]
        where = f"{s.site.file}:{s.site.line}: " if len(srvs) > 1 else ""
        for o in skipped[1:]:
            if len({x.error for x in skipped}) > 1:
                sys.stderr.write(f"servefit: {o.site.file}:{o.site.line} ({o.site.name}) not estimated: {o.error}\n")
        raise UsageError(f"{where}{s.error or 'this server could not be planned'}")
    for s in skipped:
        sys.stderr.write(f"servefit: {s.site.file}:{s.site.line} ({s.site.name}) not estimated: {s.error}\n")
    args.servers_skipped = len(skipped)
    for ev in evs:
        _unresolved_to_assumptions(ev)
    return evs


def _unresolved_to_assumptions(ev: Evaluation) -> None:
    """A plan finding on a variable's text: an assumption here, as the assembly made the parse's
    (pipeline.py::unresolved_to_assumptions)."""
    from servefit.pipeline import unresolved_to_assumptions

    unresolved_to_assumptions(ev.site, ev.config, ev.plan)


def exit_code(evs: list[Evaluation], args: argparse.Namespace) -> int:
    """lint's contract: 1 when a server will not start, has an error finding, or could not be
    estimated at all; 0 otherwise (2, usage errors, is raised before this)."""
    if getattr(args, "servers_skipped", 0):
        return 1
    for ev in evs:
        if ev.plan.outcome != "started" or any(f.severity == "error" for f in ev.config.findings + ev.plan.findings):
            return 1
    return 0


def input_error(ev: Evaluation) -> str | None:
    """The first flag or value the engine cannot parse, as one line (where, engine, message,
    code); None when the command parses."""
    from servefit.rules.catalog import rules

    cat = rules()
    for f in ev.config.findings + ev.plan.findings:
        if cat.get(f.code, {}).get("input_error"):
            sp = f.span  # in a file, say where (as lint does): the engine alone does not say which line
            where = f"{sp.file}:{sp.line}:{sp.col}: " if sp is not None and sp.file and \
                not sp.file.startswith("<") else ""
            from servefit import engines

            try:
                title = engines.get(ev.plan.engine).title
            except Exception:  # noqa: BLE001 - a plugin without a title: its name
                title = ev.plan.engine
            return f"{where}{title}: {f.message} [{f.code}]"
    return None


def refuse_bad_input(evs: list[Evaluation], args: argparse.Namespace | None = None) -> list[Evaluation]:
    """A flag or value the engine cannot parse makes that server's estimate meaningless: with one
    server, one line and exit 2; among several (a directory, a llama-swap file), that server is
    named on stderr as not estimated, like one that cannot be planned, and the others are
    estimated (exit 1). Lint reports the same as findings with their spans; tune says it for that
    server. Returns the servers to estimate."""
    bad = [(ev, why) for ev in evs if (why := input_error(ev))]
    if not bad:
        return evs
    if len(bad) == len(evs):
        for ev, why in bad[1:]:
            sys.stderr.write(f"servefit: {ev.site.file}:{ev.site.line} ({ev.site.name}) not estimated: {why}\n")
        raise UsageError(bad[0][1])
    for ev, why in bad:
        sys.stderr.write(f"servefit: {ev.site.file}:{ev.site.line} ({ev.site.name}) not estimated: {why}\n")
    if args is not None:
        args.servers_skipped = getattr(args, "servers_skipped", 0) + len(bad)
    return [ev for ev in evs if all(ev is not b for b, _ in bad)]


def run(args: argparse.Namespace) -> int:
    from servefit.report.plan import plan_dict, render_text

    evs = refuse_bad_input(evaluations(args), args)
    if args.format == "json":
        objs = [plan_dict(ev) for ev in evs]
        json.dump(json_shape(objs, args), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        color = use_color(getattr(args, "color", None))
        sys.stdout.write("\n\n".join(render_text(ev, color=color, named=len(evs) > 1) for ev in evs))
    return exit_code(evs, args)
