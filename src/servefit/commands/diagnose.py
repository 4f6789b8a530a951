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

SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache", ".ruff_cache",
             "dist", "build"}
MAX_CONFIG_BYTES = 2 * 1024 * 1024


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diagnose", help="name an OOM's root cause from engine logs and tracebacks",
                       description="Read engine logs (vLLM, llama.cpp, Ollama, TGI, SGLang), torch tracebacks and "
                                   "kernel OOM-killer lines; classify the root cause (KV cache overflow, batch "
                                   "misconfiguration, fragmentation, model too large), quote the evidence and "
                                   "name the fix. Each LOG is diagnosed on its own.")
    p.add_argument("logs", nargs="*", metavar="LOG", help="log files (.gz too); `-` or nothing reads stdin")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--config-file", metavar="FILE", help="the config the server runs from, to name the setting")
    p.add_argument("--repo", metavar="DIR", help="a deployment repo: find the server's config in it")
    p.add_argument("--no-progress", action="store_true", help="never print progress on stderr")
    p.set_defaults(run=run)


def _scan_file():  # type: ignore[no-untyped-def]
    try:
        from servefit.sources import scan_file
    except ImportError:
        raise UsageError("--config-file and --repo need servefit.sources.scan_file, which this build does not "
                         "have yet; diagnose the log without them") from None
    return scan_file


def _sites_in(path: str) -> list[LaunchSite]:
    if not os.path.isfile(path):
        raise UsageError(f"{path}: no such file")
    return list(_scan_file()(path).sites)


def _walk(root: str) -> list[str]:
    """Files under root: servefit.sources' walker (honours .gitignore) when present."""
    try:
        from servefit.sources import iter_files
    except ImportError:
        out: list[str] = []
        for d, dirs, files in os.walk(root):
            dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("."))
            out.extend(os.path.join(d, f) for f in sorted(files))
        return out
    return list(iter_files([root]))


def _repo_sites(root: str) -> list[LaunchSite]:
    if not os.path.isdir(root):
        raise UsageError(f"{root}: not a directory")
    scan_file = _scan_file()
    out: list[LaunchSite] = []
    for path in _walk(root):
        try:
            if os.path.getsize(path) > MAX_CONFIG_BYTES:
                continue
            out.extend(scan_file(path).sites)
        except (UsageError, OSError, ValueError, UnicodeDecodeError):
            continue
    return out


def _mentions(site: LaunchSite, text: str) -> bool:
    return any(text in t.text for t in site.argv) or any(text in t.text for t in site.env.values())


def pick_site(sites: list[LaunchSite], diag: Diagnosis) -> tuple[LaunchSite | None, str | None]:
    """The server the log came from: same engine, then same model; (site, note)."""
    if not sites:
        return None, None
    cands = [s for s in sites if diag.engine in (None, "torch") or s.engine in (None, diag.engine)] or sites
    model = diag.settings_in_log.get("model")
    if isinstance(model, str) and model:
        by_model = [s for s in cands if _mentions(s, model)]
        cands = by_model or cands
    note = None
    if len(cands) > 1:
        names = ", ".join(f"{s.file}:{s.line}" for s in cands[:5])
        note = f"{len(cands)} servers could have written this log ({names}); used the first"
    return cands[0], note


def run(args: argparse.Namespace) -> int:
    from servefit.diagnose import diagnose_path
    from servefit.report.diagnose import render_text, to_json

    if args.config_file and args.repo:
        raise UsageError("give --config-file or --repo, not both")
    sites: list[LaunchSite] = []
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

            site, note = pick_site(sites, diag)
            if site is not None:
                fixes.apply(diag, site)
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
