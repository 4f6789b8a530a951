"""Which model a parsed server references, in the terms the model lock uses: a Hub repository
(`ORG/NAME`, config.json + safetensors), a GGUF on the Hub (llama.cpp `-hf ORG/REPO[:QUANT]`,
`--hf-repo` + `--hf-file`, Ollama `hf.co/ORG/REPO:QUANT`), or something only offline sources
can size (a local path, an Ollama library tag, a variable).

Also what each server's model resolved to and from where (`servefit models`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from servefit.core import EngineConfig, UsageError
from servefit.models.lock import ModelContext, gguf_key


@dataclass
class ServerRef:
    """The model a server names, in the model lock's terms: the key to ask the Hub with, or why only offline
    sources can size it."""

    ref: str  # as the server names it
    key: str | None = None  # the lock key when the Hub can be asked (None: offline sources only)
    kind: str = "safetensors"  # safetensors | gguf
    note: str = ""  # why there is no key
    hf_repo: str | None = None


def _is_repo(ref: str) -> bool:
    return ref.count("/") == 1 and not ref.startswith((".", "/", "~")) and not ref.lower().endswith(".gguf") \
        and " " not in ref and not os.path.exists(ref)


def server_ref(cfg: EngineConfig, ctx: ModelContext | None = None) -> ServerRef | None:
    """The model reference of a parsed server, or None when it names none (`ollama serve`)."""
    s = cfg.settings
    ref = str(s.get("model") or cfg.model_ref or "")
    hf_repo = s.get("hf_repo")  # llama.cpp -hf / --hf-repo; no other engine sets it
    if not ref:
        return None
    if "$" in ref:
        return ServerRef(ref, note="a variable: servefit cannot tell which model it holds")
    name = ref  # what the Hub would be asked for: the reference, or what the config maps it to
    mapped = ctx.mapped(ref) if ctx is not None else None
    if mapped is not None:
        if ctx is not None and ctx.mapped_path(mapped) is not None:
            return ServerRef(ref, note=f"sized from {mapped} ([tool.servefit.models])")
        name, hf_repo = mapped, None
    if hf_repo:
        file = name if hf_repo != name and name.lower().endswith(".gguf") else None
        return ServerRef(ref, gguf_key(str(hf_repo), file), "gguf", hf_repo=str(hf_repo))
    if name.startswith(("hf.co/", "huggingface.co/")) or (":" in name and _is_repo(name.split(":", 1)[0])):
        return ServerRef(ref, gguf_key(name), "gguf")
    if _is_repo(name):
        return ServerRef(ref, name, "safetensors")
    if os.path.exists(os.path.expanduser(ref)):
        return ServerRef(ref, note="a local file or directory")
    library_tag = "/" not in ref and not ref.lower().endswith(".gguf")  # llama3.1:8b, qwen3
    what = "a model library tag (sized from servefit's tag table)" if library_tag else "not a Hub repository id"
    return ServerRef(ref, note=what)


def no_model(engine: Any, cfg: EngineConfig) -> str:
    """Why a server names no model, with the model the engine then loads where its parser has a default
    (vLLM: facebook/opt-125m, Qwen/Qwen3-0.6B from 0.10; TGI's launcher: bigscience/bloom-560m)."""
    from servefit.engines.option_data import flag_default
    from servefit.sources.detect import engine_data

    flags = (engine_data(engine.name).get("model") or {}).get("flags") or ()
    default = next((d for f in flags if (d := flag_default(engine.name, f, cfg.version))), None)
    if default is None:
        return "no model given in the command (pass --model REF)"
    release = f"{engine.title} {cfg.version}" if cfg.version else engine.title
    return f"no model given in the command: {release} would load its default, {default} (pass --model REF to " \
           "check the model you mean)"


# ------------------------------------------------------------------------- what it resolved to

_SOURCES = {"lock": "lock", "catalog": "catalog", "hf-cache": "HF cache", "local": "local config",
            "config": "config file", "mapping": "config mapping", "hub": "Hub", "gguf": "GGUF file",
            "derivative": "assumed base"}


@dataclass
class Resolution:
    """What a server's model resolved to for `servefit models`: the model, its parameter count and where it
    came from, or why it did not resolve."""

    ref: str
    model: str | None = None
    params: int = 0
    source: str = ""
    assumptions: list[str] = field(default_factory=list)
    error: str | None = None


def resolve_server(engine: Any, cfg: EngineConfig, ctx: ModelContext) -> Resolution:
    """The model a server loads, resolved the way estimate and lint resolve it (offline)."""
    from servefit.models.resolve import resolve_model
    from servefit.pipeline import Target

    sref = server_ref(cfg, ctx)
    ref = sref.ref if sref is not None else ""
    out = Resolution(ref)
    if not ref:  # as lint says it: only an engine that loads what requests name runs without one
        from servefit.sources.server_plan import own_build_model

        own = own_build_model(cfg.site, engine.title) if cfg.site is not None else ""
        out.error = ("the server loads models on request" if getattr(engine, "models_on_request", False)
                     else own or no_model(engine, cfg))
        return out
    from servefit.sources.shell import placeholder

    if placeholder(ref):  # as estimate says it (sources/server_plan.py)
        out.error = f"the model is a placeholder to fill in ({ref}): pass --model REF"
        return out
    if "$" in ref:  # as estimate says it (sources/assemble.py), not "cannot tell which model this GGUF is"
        out.error = (f"the model is a variable ({ref}): its value is not known here (add "
                     "`# servefit: model=ORG/NAME` to the file, or pass --model REF to estimate)")
        return out
    custom = getattr(engine, "resolve_model", None)
    try:
        if cfg.site is not None:  # as the pipeline does: a path without a model name is sized from what the
            from servefit.pipeline import resolve_site_model  # file says about it (a mount, --tokenizer-path)

            spec = resolve_site_model(engine, cfg.site, cfg, Target(models=ctx, online=ctx.online))
        elif custom is not None:
            spec = custom(cfg, Target(models=ctx, online=ctx.online))
        else:
            spec = resolve_model(ref, context=ctx)
    except UsageError as exc:
        out.error = str(exc)
        return out
    out.model, out.params, out.assumptions = spec.name, int(spec.params or 0), list(spec.assumptions)
    source = _SOURCES.get(spec.resolved_from, spec.resolved_from)
    notes = " ".join(spec.assumptions + (list(cfg.assumptions) if spec.resolved_from == "catalog" else []))
    if spec.resolved_from in ("catalog", "hub", "hf-cache") and (" by name" in notes or " by its name" in notes):
        source = "assumed base"
    if "as [tool.servefit.models] in" in notes and spec.resolved_from != "mapping":  # models/resolve.py _mapped's words
        source += " via config mapping"
    out.source = source
    return out
