"""`servefit diagnose`: name the root cause of an OOM from engine logs and tracebacks."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from servefit.core import UsageError

if TYPE_CHECKING:
    from servefit.core import LaunchSite
    from servefit.diagnose.model import Diagnosis
    from servefit.sources.server_build import Server



def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diagnose", help="name an OOM's root cause from engine logs and tracebacks",
                       description="Read engine logs (vLLM, llama.cpp, Ollama, TGI, SGLang), torch tracebacks and "
                                   "kernel OOM-killer lines; classify the root cause (KV cache overflow, batch "
                                   "misconfiguration, fragmentation, model too large), quote the evidence and "
                                   "name the fix. Each LOG is diagnosed on its own.")
    p.add_argument("logs", nargs="*", metavar="LOG", help="log files (.gz too); `-` or nothing reads stdin")
    p.add_argument("--output-format", "--format", dest="format", choices=["text", "json"], default="text",
                   help="text (default) or json")
    p.add_argument("--config-file", metavar="FILE", help="the config the server runs from, to name the setting")
    p.add_argument("--repo", metavar="DIR", help="a deployment repo: find the server's config in it")
    p.add_argument("--no-progress", action="store_true", help="never print progress on stderr")
    p.set_defaults(run=run)


def _servers(paths: list[str]) -> list[Server]:
    """The servers of a config file or a repo, through the shared assembly (parsed, not planned:
    matching a log needs each server's engine, model and GPU, not its memory plan)."""
    from servefit.sources.assemble import assemble

    return assemble(paths, plan=False).servers


def _sites_in(path: str) -> list[Server]:
    if not os.path.isfile(path):
        raise UsageError(f"{path}: no such file")
    return _servers([path])


def _repo_sites(root: str) -> list[Server]:
    if not os.path.isdir(root):
        raise UsageError(f"{root}: not a directory")
    return _servers([root])


def _mentions(site: LaunchSite, text: str) -> bool:
    return any(text in t.text for t in site.argv) or any(text in t.text for t in site.env.values())


def _model_key(ref: str) -> str:
    """`Qwen/Qwen2.5-32B-Instruct-AWQ`, `/models/qwen2.5-32b-instruct-awq` -> `qwen2.5-32b-instruct-awq`."""
    return ref.rstrip("/").rsplit("/", 1)[-1].lower().removesuffix(".gguf")


def _gpu_key(name: object) -> str | None:
    if not isinstance(name, str) or not name:
        return None
    from servefit.hardware import resolve_target

    try:
        return resolve_target(name)[0].name
    except (UsageError, ValueError, KeyError):
        return name.lower()


def _score(srv: Server, diag: Diagnosis) -> int:
    """How well a server matches the log: its model (8 exact, 6 same name, 4 mentioned), its
    GPU (2) and its engine (1)."""
    score = 0
    model = diag.settings_in_log.get("model")
    if isinstance(model, str) and model:
        ref = srv.model_ref or ""
        if ref == model:
            score += 8
        elif ref and _model_key(ref) == _model_key(model):
            score += 6
        elif _mentions(srv.site, model):
            score += 4
    log_gpu = _gpu_key(diag.figures.get("gpu_name"))
    if log_gpu and srv.gpu_name and _gpu_key(srv.gpu_name) == log_gpu:
        score += 2
    if diag.engine not in (None, "torch") and srv.site.engine == diag.engine:
        score += 1
    return score


def _contradiction(srv: Server, diag: Diagnosis) -> str | None:
    """A number the server's config sets and the log shows otherwise (`max_model_len` 8192 here,
    131072 in the log): that config did not write this log."""
    cfg = srv.config
    if cfg is None:
        return None
    for key in sorted(cfg.explicit):
        mine, logged = cfg.settings.get(key), diag.settings_in_log.get(key)
        if isinstance(mine, bool) or isinstance(logged, bool):
            continue
        if isinstance(mine, (int, float)) and isinstance(logged, (int, float)) and mine != logged:
            return f"{key}={mine:g} here, {logged:g} in the log"
    return None


def pick_site(servers: list[Server], diag: Diagnosis, where: str = "",
              repo: bool = False) -> tuple[Server | None, str | None]:
    """The server the log came from: one of the log's engine, the one running the log's model
    first, then one whose numbers do not contradict the log's, then the best match on GPU;
    (server, note). None when no server runs the log's engine, or (in a repo) none runs its model
    and every one contradicts it: fixes for another server's flags would only mislead."""
    if not servers:
        return None, None
    known = diag.engine not in (None, "torch")
    cands = [s for s in servers if not known or s.site.engine in (None, diag.engine)]
    if not cands:
        from servefit import engines

        title = engines.get(str(diag.engine)).title
        return None, f"this log is {title}'s, and no server in {where or 'the config'} runs {title}: the fixes name no file"
    clash = {id(s): _contradiction(s, diag) for s in cands}

    def rank(s: Server) -> tuple[bool, bool, int]:  # the model named, then no contradiction, then the rest
        return _score(s, diag) >= 4, clash[id(s)] is None, _score(s, diag)

    best = max(rank(s) for s in cands)
    chosen = [s for s in cands if rank(s) == best]
    why = clash[id(chosen[0])]
    if why is not None and repo and not best[0]:  # no server of that engine in the repo fits the log
        return None, (f"no server in {where} matches this log ({chosen[0].site.file}:{chosen[0].site.line} sets "
                      f"{why}): the fixes name no file")
    notes = []
    if why is not None:
        notes.append(f"{chosen[0].site.file}:{chosen[0].site.line} sets {why}: the log may come from another version "
                     "of this config")
    if len(chosen) > 1:
        names = ", ".join(f"{s.site.file}:{s.site.line}" for s in chosen[:5])
        notes.append(f"{len(chosen)} servers could have written this log ({names}); used the first")
    return chosen[0], "; ".join(notes) or None


def _with_target(srv: Server) -> LaunchSite:
    """The site with the GPU the assembly resolved (flag > directive > repo > config)."""
    from dataclasses import replace

    from servefit.core import GpuHint

    if srv.gpu_name is None:
        return srv.site
    return replace(srv.site, gpu=GpuHint(srv.gpu_name, srv.gpu_count, srv.gpu_source))


def run(args: argparse.Namespace) -> int:
    from servefit.diagnose import diagnose_path
    from servefit.report.diagnose import render_text, to_json

    if args.config_file and args.repo:
        raise UsageError("give --config-file or --repo, not both")
    sites: list[Server] = []
    if args.config_file:
        sites = _sites_in(args.config_file)
        if not sites:
            raise UsageError(f"{args.config_file}: no serving engine found in this file")
    elif args.repo:
        sites = _repo_sites(args.repo)
    paths = list(args.logs) or ["-"]
    if paths == ["-"] and sys.stdin is not None and sys.stdin.isatty():
        raise UsageError("no log given: pass a log file, or pipe one in (`kubectl logs POD | servefit diagnose`)")
    if paths.count("-") > 1:
        raise UsageError("stdin (`-`) can be read only once")
    diags = []
    for path in paths:
        diag = diagnose_path(path, progress=False if args.no_progress else None)
        if sites:
            from servefit.diagnose import fixes

            site, note = pick_site(sites, diag, args.repo or args.config_file, repo=bool(args.repo))
            if site is not None:
                diag.server = {"file": site.site.file, "line": site.site.line, "name": site.site.name,
                               "engine": site.site.engine}
                fixes.apply(diag, _with_target(site))
            if note:
                diag.notes.append(note)
        elif args.repo:
            diag.notes.append(f"no server config found under {args.repo}")
        diags.append(diag)
    if args.format == "json":
        sys.stdout.write(to_json(diags))
    else:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        sys.stdout.write("\n".join(render_text(d, color=color) for d in diags))
    return 0
