"""Turn a model reference into a ModelSpec, in this order (DESIGN.md):

1. `config_path` (--model-config: said on the command line, so it wins): a config.json file,
   or a directory holding one                                              -> "config"
2. `[tool.servefit.models]` maps the reference to a Hub id or a config.json -> "mapping"
3. the model lock (servefit.lock, `servefit models lock`)                   -> "lock"
4. `ref` is a local directory with a config.json                           -> "local"
5. the local Hugging Face cache (what `--online` fetched, or
   models--org--name/snapshots/*/config.json)                              -> "hf-cache"
6. the catalog: repo id or alias, the name without its organization, then name heuristics
   for quantized / variant names                                           -> "catalog"
7. with `online`, the Hub through models/hub.py (the code `models lock` uses) -> "hub"
8. otherwise a one-line UsageError naming the nearest catalog entries.

The lock and the mapping travel in a `ModelContext` (models/lock.py).
"""

from __future__ import annotations

import os

from servefit.core import UsageError
from servefit.models import catalog
from servefit.models.lock import ModelContext, gguf_key, spec_from_entry
from servefit.models.names import has_size
from servefit.models.seq2seq import name_line
from servefit.models.spec import ModelSpec

__all__ = ["resolve_model", "resolve_gguf", "hub_cache_dir"]


def _from_dir_or_file(path: str, name: str, source: str) -> ModelSpec:
    # a checkpoint's own files (and the json module) only when one is read: a catalogued model needs neither
    from servefit.models.checkpoint_files import params_from_safetensors, read_config
    from servefit.models.config_json import from_config

    try:
        cfg, directory = read_config(path)
    except FileNotFoundError:
        raise UsageError(f"model config {path}: no config.json there") from None
    except (OSError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
        raise UsageError(f"model config {path}: cannot read it ({exc})") from None
    try:
        spec = from_config(cfg, name, resolved_from=source)
    except (ValueError, TypeError, KeyError) as exc:
        raise UsageError(f"model config {path}: {exc}") from None
    counted = params_from_safetensors(directory, spec)
    if counted:
        spec.params = counted
    else:
        spec.assumptions.append(f"parameters of '{name}' counted from the architecture "
                                f"({spec.params / 1e9:.2f}B); no safetensors headers read")
    return spec


def hub_cache_dir(hf_home: str | None = None) -> str:
    """The Hugging Face hub cache: `hf_home`/hub, $HF_HUB_CACHE, $HF_HOME/hub, or
    ~/.cache/huggingface/hub."""
    if hf_home:
        return os.path.join(hf_home, "hub")
    env = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if env:
        return env
    home = os.environ.get("HF_HOME")
    if home:
        return os.path.join(home, "hub")
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "huggingface", "hub")


def _cached_snapshot(ref: str, hf_home: str | None) -> str | None:
    """The snapshot directory of `ref` in the hub cache that holds a config.json."""
    if not ref or ref.startswith((".", "/", "~")) or ":" in ref or ref.count("/") > 1:
        return None
    hub = hub_cache_dir(hf_home)
    folder = "models--" + ref.replace("/", "--")
    repo = os.path.join(hub, folder)
    if not os.path.isdir(repo):
        try:
            match = next((d for d in os.listdir(hub) if d.lower() == folder.lower()), None)
        except OSError:
            return None
        if match is None:
            return None
        repo = os.path.join(hub, match)
    snaps = os.path.join(repo, "snapshots")
    try:
        with open(os.path.join(repo, "refs", "main"), encoding="utf-8") as fh:
            main = os.path.join(snaps, fh.read().strip())
        if os.path.isfile(os.path.join(main, "config.json")):
            return main
    except OSError:
        pass
    try:
        found = [os.path.join(snaps, d) for d in os.listdir(snaps)
                 if os.path.isfile(os.path.join(snaps, d, "config.json"))]
    except OSError:
        return None
    return max(found, key=os.path.getmtime) if found else None


def _from_hub(ref: str, kind: str, hf_home: str | None) -> tuple[ModelSpec | None, str]:
    """(spec, "") from the Hub, cached on disk for the next run, or (None, why not)."""
    from servefit.models import hub

    try:
        entry = hub.fetch(ref, kind)
    except UsageError:
        raise
    except Exception as exc:  # repository missing, gated, offline: said in the usage error
        return None, hub.reason(exc)
    hub.store_entry(ref, kind, entry, hf_home)
    return spec_from_entry(entry, ref, "hub"), ""


def _from_lock(key: str, ctx: ModelContext | None, kind: str) -> ModelSpec | None:
    if ctx is None or ctx.lock is None:
        return None
    entry = ctx.lock.entry(key)
    if entry is None or (entry.get("kind") == "gguf") != (kind == "gguf"):
        return None
    try:
        return spec_from_entry(entry, key, "lock")
    except (ValueError, TypeError, KeyError) as exc:
        raise UsageError(f"{ctx.lock.path}: entry {key!r} is damaged ({exc}); run `servefit models lock` "
                         "again") from None


def _from_cache(key: str, kind: str, hf_home: str | None) -> ModelSpec | None:
    from servefit.models import hub

    entry = hub.cached_entry(key, kind, hf_home)
    if entry is None:
        return None
    try:
        return spec_from_entry(entry, key, "hf-cache")
    except (UsageError, ValueError, TypeError, KeyError):
        return None  # a stale or foreign file: the next --online run rewrites it


def _mapped(ref: str, target: str, ctx: ModelContext, online: bool, hf_home: str | None) -> ModelSpec:
    where = os.path.basename(ctx.mapping_file) if ctx.mapping_file else "the configuration"
    path = ctx.mapped_path(target)
    if path is not None:
        spec = _from_dir_or_file(path, ref, "mapping")
        spec.assumptions.append(f"'{ref}' sized from {target}, as [tool.servefit.models] in {where} says")
        return spec
    inner = ModelContext(lock=ctx.lock, root=ctx.root, online=ctx.online, hf_home=ctx.hf_home)
    spec = resolve_model(target, online=online, hf_home=hf_home, context=inner)
    spec.assumptions.append(f"'{ref}' is {target}, as [tool.servefit.models] in {where} says")
    return spec


def _looks_like_repo(ref: str) -> bool:
    return ref.count("/") == 1 and not ref.startswith((".", "/", "~", "$")) and ":" not in ref \
        and not ref.lower().endswith(".gguf") and " " not in ref


def resolve_gguf(ref: str, hf_repo: str | None = None, context: ModelContext | None = None, *,
                 online: bool = False, fetch: bool = False) -> ModelSpec | None:
    """A GGUF reference (`ORG/REPO[:QUANT]`, `--hf-repo` + `--hf-file`) from the lock, then the
    HF cache, then (with `fetch` and online) the Hub; None when none of them has it."""
    if hf_repo and hf_repo != ref:
        key = gguf_key(hf_repo, os.path.basename(ref) if ref.lower().endswith(".gguf") else ref)
    elif ref.startswith(("hf.co/", "huggingface.co/")) or (ref.split(":", 1)[0].count("/") == 1
                                                            and not ref.startswith((".", "/", "~", "$"))):
        key = gguf_key(ref)
    else:
        return None
    hf_home = context.hf_home if context is not None else None
    spec = _from_lock(key, context, "gguf") or _from_cache(key, "gguf", hf_home)
    if spec is None and fetch and (online or (context is not None and context.online)):
        spec, why = _from_hub(key, "gguf", hf_home)
        if spec is None:
            raise UsageError(f"{ref}: not read from the Hub ({why})")
    return spec


def resolve_model(ref: str, *, online: bool = False, config_path: str | None = None,
                  hf_home: str | None = None, context: ModelContext | None = None) -> ModelSpec:
    """The ModelSpec for a model reference (repo id, local directory, quantized variant name);
    `context` carries the model lock and the config's model mapping."""
    if context is not None:
        online = online or context.online
        hf_home = hf_home or context.hf_home
    if config_path:
        path = os.path.expanduser(config_path)
        default = os.path.basename(os.path.dirname(os.path.abspath(path))
                                   if os.path.isfile(path) else os.path.abspath(path).rstrip("/"))
        return _from_dir_or_file(path, ref or default, "config")
    ref = (ref or "").strip()
    if not ref:
        raise UsageError("no model given: pass --model REF or --model-config PATH/config.json")
    if context is not None:
        target = context.mapped(ref)
        if target is not None:
            return _mapped(ref, target, context, online, hf_home)
        locked = _from_lock(ref, context, "safetensors")
        if locked is not None:
            return locked
    local = os.path.expanduser(ref)
    if os.path.isdir(local) and os.path.isfile(os.path.join(local, "config.json")):
        return _from_dir_or_file(local, ref, "local")
    cached = _from_cache(ref, "safetensors", hf_home) if _looks_like_repo(ref) else None
    if cached is not None:
        return cached
    snapshot = _cached_snapshot(ref, hf_home)
    if snapshot is not None:
        return _from_dir_or_file(snapshot, ref, "hf-cache")
    spec = catalog.lookup(ref)
    if spec is not None:
        return spec
    why = ""
    if online and _looks_like_repo(ref):
        spec, why = _from_hub(ref, "safetensors", hf_home)
        if spec is not None:
            return spec
    seq2seq = name_line(ref)
    if seq2seq:  # an encoder-decoder family: one clear line, not a nearest-name search
        raise UsageError(seq2seq)
    near = ", ".join(catalog.nearest(ref, 3))
    where = f"; not found on the Hub either ({why})" if why else "; not a Hub repository id" if online else ""
    if context is not None and context.lock is not None and ref in context.lock.unresolved:
        where += f"; `servefit models lock` could not read it: {context.lock.unresolved[ref]}"
    if near:
        near = f"nearest: {near}"
    elif has_size(ref) and (sizes := catalog.family_sizes(ref)):  # the family, at other sizes only
        shown = ", ".join(sizes[:8]).upper() + (", ..." if len(sizes) > 8 else "")
        near = f"no catalogued model of its family at that size (the catalog has it at {shown})"
    else:
        near = "no catalogued model has a similar family and size"
    # a path is no Hub repository: --online cannot read it
    hub = ", or --online to read it from the Hub" if _looks_like_repo(ref) else ""
    raise UsageError(f"unknown model '{ref}'{where}; {near}. Pass --model-config PATH/config.json"
                     f"{', a local model directory' if hub else ' or a local model directory'}{hub}")
