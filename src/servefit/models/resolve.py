"""Turn a model reference into a ModelSpec, in this order:

1. `config_path`: a config.json file, or a directory holding one          -> "config"
2. `ref` is a local directory with a config.json                           -> "local"
3. the local Hugging Face cache (models--org--name/snapshots/*/config.json) -> "hf-cache"
4. the catalog: repo id or alias, the name without its organization, then name heuristics
   for quantized / variant names                                           -> "catalog"
5. with `online`, config.json downloaded from the Hub                      -> "hub"
6. otherwise a one-line UsageError naming the nearest catalog entries.
"""

from __future__ import annotations

import os
from typing import Any

from servefit.core import UsageError
from servefit.models import catalog
from servefit.models.config_json import from_config, params_from_safetensors, read_config
from servefit.models.spec import ModelSpec

__all__ = ["from_config", "resolve_model", "hub_cache_dir"]


def _from_dir_or_file(path: str, name: str, source: str) -> ModelSpec:
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


def _from_hub(ref: str) -> ModelSpec | None:
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise UsageError("--online needs huggingface_hub: pip install 'servefit[hub]'") from None
    try:
        path = hf_hub_download(ref, "config.json")
    except Exception:  # repository missing, gated, offline: fall through to the usage error
        return None
    from servefit.models.config_json import load_json_bounded

    cfg: Any = load_json_bounded(path)
    spec = from_config(cfg, ref, resolved_from="hub")
    spec.assumptions.append(f"config.json of '{ref}' read from the Hugging Face Hub; parameters "
                            f"counted from the architecture ({spec.params / 1e9:.2f}B)")
    return spec


def resolve_model(ref: str, *, online: bool = False, config_path: str | None = None,
                  hf_home: str | None = None) -> ModelSpec:
    """The ModelSpec for a model reference (repo id, local directory, quantized variant name)."""
    if config_path:
        path = os.path.expanduser(config_path)
        default = os.path.basename(os.path.dirname(os.path.abspath(path))
                                   if os.path.isfile(path) else os.path.abspath(path).rstrip("/"))
        return _from_dir_or_file(path, ref or default, "config")
    ref = (ref or "").strip()
    if not ref:
        raise UsageError("no model given: pass --model REF or --model-config PATH/config.json")
    local = os.path.expanduser(ref)
    if os.path.isdir(local) and os.path.isfile(os.path.join(local, "config.json")):
        return _from_dir_or_file(local, ref, "local")
    snapshot = _cached_snapshot(ref, hf_home)
    if snapshot is not None:
        return _from_dir_or_file(snapshot, ref, "hf-cache")
    spec = catalog.lookup(ref)
    if spec is not None:
        return spec
    if online:
        spec = _from_hub(ref)
        if spec is not None:
            return spec
    near = ", ".join(catalog.nearest(ref, 3))
    where = "; not found on the Hub either" if online else ""
    raise UsageError(f"unknown model '{ref}'{where}; nearest: {near}. Pass --model-config PATH/config.json, "
                     f"a local model directory, or --online to read it from the Hub")
