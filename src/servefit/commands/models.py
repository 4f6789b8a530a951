"""`servefit models [PATH...]`: what each server's model resolved to and from where;
`servefit models lock [PATH...]`: read every model the servers reference from the Hub into
servefit.lock, so later runs size them offline (docs/model-lock.md)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from dataclasses import replace
from typing import Any

from servefit.core import UsageError
from servefit.termsafe import one_line


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list the model each server resolves to; `models lock` pins them from the Hub",
                       description="List what each server's model resolved to (lock, catalog, HF cache, local "
                                   "config, config mapping, assumed base). `servefit models lock [PATH...]` reads "
                                   "every model the servers reference from the Hugging Face Hub (HF_TOKEN for "
                                   "gated repositories, HF_ENDPOINT for a mirror) into servefit.lock at the "
                                   "repository root; lint, estimate, explain and tune then read it offline.")
    p.add_argument("paths", nargs="*", metavar="[lock] PATH",
                   help="files or directories (default: the current directory); start with `lock` to write the lock")
    p.add_argument("--output-format", "--format", dest="format", choices=["text", "json"], default="text",
                   help="text (default) or json")
    p.add_argument("--lockfile", help="the lock file to write (default: servefit.lock at the repository root)")
    p.add_argument("--config", metavar="PATH", help="a servefit.toml / pyproject.toml to use")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    paths = list(args.paths)
    if paths and paths[0] == "lock":
        return lock(paths[1:] or ["."], args)
    return listing(paths or ["."], args)


def _servers(paths: list[str], args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """servefit's config and the parsed servers under `paths` (nothing evaluated)."""
    from servefit import config
    from servefit.linter.run import LintOptions, lint_paths

    for p in paths:
        if not os.path.exists(p):
            raise UsageError(f"{p}: no such file or directory")
    cfg = config.load(paths[0], None, args.config)
    # each file's nearest configuration, as lint reads it (`--config PATH`: that one for all)
    result = lint_paths(paths, LintOptions(evaluate=False, configs=config.Configs(None, args.config)))
    return cfg, [r for r in result.sites if r.config is not None]


def _context(file: str, forced: Any) -> Any:
    """The model lock and [tool.servefit.models] of the file's own configuration (`forced`: the
    one named with --config), as lint and estimate resolve them."""
    from servefit.models.lock import context_for

    return context_for(file, config=forced)


def _show(path: str) -> str:
    """A path relative to the working directory when it lies below it, else as it is."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def _where(rep: Any) -> str:
    return f"{_show(rep.site.file)}:{rep.site.line}"


def _size(n: int | None) -> str:
    return f"{n / 1e9:.2f}B" if n and n >= 1e9 else f"{n / 1e6:.1f}M" if n else "size unknown"


# ------------------------------------------------------------------------- servefit models


def listing(paths: list[str], args: argparse.Namespace) -> int:
    from servefit import engines
    from servefit.models.server_refs import resolve_server

    cfg, reps = _servers(paths, args)
    rows: list[dict[str, Any]] = []
    for rep in reps:
        engine = engines.get(rep.site.engine or "")
        ecfg, override = rep.config, getattr(rep.target, "model", None)
        if override is not None:  # `# servefit: model=` or [[targets]] model: what estimate sizes
            ref = str(override.value)
            ecfg = replace(ecfg, model_ref=ref, settings={**ecfg.settings, "model": ref})
        res = resolve_server(engine, ecfg, _context(rep.site.file, cfg if args.config else None))
        rows.append({"file": rep.site.file, "line": rep.site.line, "server": rep.site.name,
                     "engine": rep.site.engine, "ref": rep.config.model_ref if override is not None else res.ref,
                     "model": res.model, "params": res.params,
                     "source": (f"{res.source} ({override.source})" if override is not None and res.source
                                else res.source or None),
                     "assumptions": res.assumptions, "error": res.error})
    failed = any(r["error"] and r["ref"] for r in rows)
    if args.format == "json":
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 1 if failed else 0
    if not rows:
        print("no servers found")
        return 0
    places = Counter(_where(rep) for rep in reps)
    for r, rep in zip(rows, reps, strict=True):
        # servers at one place (a chart rendered once per values file) are told apart by name
        where = _where(rep) if places[_where(rep)] == 1 else f"{_where(rep)} ({one_line(rep.site.name)})"
        head = f"{where}  {r['engine']}  {r['ref'] or '(none)'}"
        if not r["ref"] and not r["model"]:  # none written, and none given beside it (a directive, a values key)
            why = r["error"] or "the server loads models on request"
            print(f"{head}  -> no model named here ({why})" if "on request" in why else f"{head}  -> not resolved: {why}")
            continue
        if r["error"]:
            print(f"{head}  -> not resolved: {r['error']}")
            continue
        print(f"{head}  -> {r['model']} ({_size(r['params'])}) from {r['source']}")
        for a in r["assumptions"]:
            print(f"    assumed: {a}")
    return 1 if failed else 0


# ------------------------------------------------------------------------- servefit models lock


def lock_path(paths: list[str], cfg: Any, explicit: str | None) -> str:
    """--lockfile, an existing servefit.lock above the first path, else the repository root
    (the directory of servefit's config, else of .git), else the first path's directory."""
    from servefit.models.lock import LOCK_NAME, find_lock

    if explicit:
        return explicit
    found = find_lock(paths[0])
    if found:
        return found
    if cfg.path:
        return os.path.join(os.path.dirname(os.path.abspath(cfg.path)), LOCK_NAME)
    start = os.path.abspath(paths[0])
    d = start if os.path.isdir(start) else os.path.dirname(start)
    probe = d
    while True:
        if os.path.exists(os.path.join(probe, ".git")):
            return os.path.join(probe, LOCK_NAME)
        parent = os.path.dirname(probe)
        if parent == probe:
            return os.path.join(d, LOCK_NAME)
        probe = parent


def lock(paths: list[str], args: argparse.Namespace) -> int:
    from servefit import engines
    from servefit.models import hub
    from servefit.models.lock import read_lock, write_lock
    from servefit.models.server_refs import resolve_server, server_ref

    cfg, reps = _servers(paths, args)
    target = lock_path(paths, cfg, args.lockfile)
    wanted: dict[str, str] = {}  # lock key -> kind
    offline: dict[str, str] = {}  # refs the Hub cannot be asked about -> why they cannot be sized
    for rep in reps:
        ctx = _context(rep.site.file, cfg if args.config else None)
        sref = server_ref(rep.config, ctx)
        if sref is None:
            continue
        if sref.key is not None:
            wanted[sref.key] = sref.kind
            continue
        if "$" in sref.ref:
            continue  # SF001 reports the variable
        res = resolve_server(engines.get(rep.site.engine or ""), rep.config, ctx)
        if res.error:
            offline[sref.ref] = (f"{sref.note}; map it to a Hub id or a config.json in [tool.servefit.models]"
                                 if sref.note else res.error)
    old = read_lock(target) if os.path.isfile(target) else None
    models: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = dict(offline)
    errors = len(offline)
    for key in sorted(wanted):
        try:
            entry = hub.fetch(key, wanted[key])
        except UsageError:
            raise
        except Exception as exc:  # gated, missing, offline: listed with the reason
            why, errors = hub.reason(exc), errors + 1
            kept = old.models.get(key) if old is not None else None
            if kept is not None:  # a failed refresh never drops what was locked before
                models[key] = kept
                why += "; kept the entry locked before"
            else:
                failed[key] = why
            print(f"failed  {key}: {why}", file=sys.stderr)
            continue
        models[key] = entry
        print(f"locked  {key}  ({_summary(entry)})", file=sys.stderr)
    for ref, why in sorted(offline.items()):
        print(f"failed  {ref}: {why}", file=sys.stderr)
    if old is not None and not _covers(paths, target):  # locking part of the repository keeps the rest
        for key, entry in old.models.items():
            models.setdefault(key, entry)
        for key, why in old.unresolved.items():
            if key not in models:
                failed.setdefault(key, why)
    changed = write_lock(target, models, failed)
    state = "wrote" if changed else "unchanged:"
    print(f"{state} {_show(target)} ({len(models)} model{'s' * (len(models) != 1)}"
          + (f", {len(failed)} not resolved" if failed else "") + ")")
    return 1 if errors or failed else 0


def _covers(paths: list[str], lock_file: str) -> bool:
    root = os.path.dirname(os.path.abspath(lock_file))
    return any(os.path.abspath(p) == root for p in paths)


def _summary(entry: dict[str, Any]) -> str:
    rev = str(entry.get("revision") or "")[:12]
    if entry.get("kind") == "gguf":
        n = len((entry.get("gguf") or {}).get("tensors") or [])
        return f"revision {rev}, GGUF {', '.join(entry.get('files') or [])}, {n} tensors"
    params = entry.get("params") or (entry.get("parameters") or {}).get("total")
    size = f", {_size(params)} parameters" if params else ""
    return f"revision {rev}{size}"
