"""One launch site through the whole model: engine parse -> model -> GPU -> plan.

Every command (estimate, explain, lint, tune, accuracy benchmark) goes through `evaluate`,
so they all see the same numbers; the commands reach it through sources.assemble, which
resolves the target (GPU, model, version) with one precedence for all of them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from servefit import engines
from servefit.core import EngineConfig, GpuHint, LaunchSite, MemoryPlan, Token, UsageError

if TYPE_CHECKING:
    from servefit.hardware.spec import GpuSpec
    from servefit.models.spec import ModelSpec


@dataclass
class Target:
    """What the user said about hardware and versions, on the CLI or in servefit's config."""

    gpu: str | None = None
    gpus: int | None = None
    gpu_memory: int | None = None
    engine_version: str | None = None
    model: str | None = None  # override the model reference
    model_config: str | None = None
    online: bool = False
    source: str = "--gpu"
    models: Any = None  # models/lock.ModelContext: the model lock and [tool.servefit.models]; found if None


@dataclass
class Evaluation:
    """One server planned end to end: its parsed config, the model and GPUs it was checked against (and where
    the GPU came from), and the engine's memory plan, which every command reads."""

    site: LaunchSite
    config: EngineConfig
    model: ModelSpec
    gpu: GpuSpec
    count: int
    gpu_source: str
    plan: MemoryPlan
    assumptions: list[str] = field(default_factory=list)


def site_from_argv(argv: list[str], env: dict[str, str] | None = None, file: str = "<command line>") -> LaunchSite:
    """A LaunchSite for a command typed on servefit's own command line (no spans)."""
    return LaunchSite(file=file, line=0, argv=[Token(a) for a in argv],
                      env={k: Token(v) for k, v in (env or {}).items()}, name="command line")


def engine_for(site: LaunchSite):  # -> Engine
    if site.engine:
        return engines.get(site.engine)
    hit = engines.detect([t.text for t in site.argv], site.image)
    if hit is None:
        shown = " ".join(t.text for t in site.argv[:3]) or "(empty)"
        raise UsageError(f"no serving engine recognised in {shown!r} (expected vllm serve, llama-server, "
                         "ollama, text-generation-launcher or python -m sglang.launch_server)")
    site.engine = hit[0]
    return engines.get(hit[0])


def resolve_hardware(site: LaunchSite, target: Target) -> tuple[GpuSpec, int, str]:
    """The GPU and count: the CLI's --gpu wins, then what the file says, then the config."""
    from servefit.hardware import catalog_assumption, resolve_target, unlisted, with_memory

    name, count, source = None, None, ""
    if target.gpu:
        name, source = target.gpu, target.source
    elif site.gpu is not None and site.gpu.name:
        name, source = site.gpu.name, site.gpu.source
    if name is None:
        raise UsageError("no target GPU: pass --gpu NAME (servefit gpus lists them) or set a default "
                         "in [tool.servefit]")
    try:
        gpu, inst_count = resolve_target(name)
    except UsageError:
        if not target.gpu_memory:
            raise
        gpu, inst_count = unlisted(name, target.gpu_memory), None  # --gpu-memory sizes an unlisted card
        source = f"{source}; {gpu.memory_source.removeprefix('--gpu-memory override; ')}"
    if gpu.source == "local":
        source = gpu.memory_source
    note = catalog_assumption(gpu, name)
    if note:
        source = f"{source}; {note}"
    count = target.gpus or (site.gpu.count if site.gpu is not None and site.gpu.count else None) or inst_count
    if target.gpu_memory and gpu.key != "unlisted":
        gpu = with_memory(gpu, target.gpu_memory)
    return gpu, count or 0, source


def evaluate(site: LaunchSite, target: Target, cfg: EngineConfig | None = None,
             hardware: tuple[GpuSpec, int, str] | None = None) -> Evaluation:
    """The plan for one site. The assembly (sources/assemble.py) passes the parse and the
    hardware it already resolved, so nothing is parsed or resolved twice."""
    engine = engine_for(site)
    if cfg is None:
        cfg = engine.parse(site, target.engine_version or site.engine_version)
    ref = target.model or cfg.model_ref
    if not ref and not target.model_config:
        from servefit.models.server_refs import no_model
        from servefit.sources.unset_vars import model_among_unknown_args

        raise UsageError(f"{engine.title}: {model_among_unknown_args(site) or no_model(engine, cfg)}")
    if target.models is None:  # the lock and model mapping that apply to this file
        from dataclasses import replace

        from servefit.models.lock import context_for

        start = site.file if os.path.exists(site.file) else os.getcwd()
        target = replace(target, models=context_for(start, online=target.online))
    model = resolve_site_model(engine, site, cfg, target)
    pinned_revision(cfg, model)
    gpu, count, source = hardware if hardware is not None else resolve_hardware(site, target)
    plan = engine.plan(cfg, model, gpu, count)
    if not count:  # no count given: as many GPUs as the server's parallelism uses (what the plan assumed)
        par = plan.parallel
        count = par.get("world") or par.get("tensor", 1) * par.get("pipeline", 1) * par.get("data", 1)
    return Evaluation(site=site, config=cfg, model=model, gpu=gpu, count=count,
                      gpu_source=source, plan=plan)


def resolve_site_model(engine: Any, site: LaunchSite, cfg: EngineConfig, target: Target) -> ModelSpec:
    """The server's model: the engine's own resolver (GGUF files, Ollama tags) or
    models.resolve_model; when the command names a path without a model (`--model-id /data`),
    what the same file says about that path (models/evidence.py), said in the assumptions."""
    from dataclasses import replace

    from servefit.models import resolve_model

    def once(t: Target) -> ModelSpec:
        custom = getattr(engine, "resolve_model", None)  # GGUF files, Ollama tags: the engine knows its refs
        if custom is not None and not t.model_config:
            return custom(cfg, t)  # type: ignore[no-any-return]
        return resolve_model(t.model or cfg.model_ref or "", online=t.online, config_path=t.model_config,
                             context=t.models)

    try:
        return once(target)
    except UsageError:
        if target.model or target.model_config or not cfg.model_ref:
            raise
        from servefit.models.evidence import candidates, is_unnamed_path

        path = next((str(r) for r in (cfg.model_ref, cfg.settings.get("model_path"), cfg.settings.get("model"))
                     if isinstance(r, str) and is_unnamed_path(r)), cfg.model_ref)  # llama.cpp: -m PATH
        found = candidates(site, site.engine or "", path)
        if not found:
            raise
        kept = list(cfg.assumptions)
        for ref, why in found:
            try:
                spec = once(replace(target, model=ref))
            except UsageError:
                cfg.assumptions[:] = kept
                continue
            spec.assumptions.insert(0, f"'{path}' names no model; sized as {ref}: {why} "
                                       "(pass --model or `# servefit: model=` to say otherwise)")
            if spec.resolved_from == "catalog":
                spec.resolved_from = "derivative"
            return spec
        raise


def pinned_revision(cfg: EngineConfig, model: ModelSpec) -> None:
    """`--revision SHA` (vLLM, SGLang, TGI load that commit of the Hub repository): the catalog, and a lock or
    Hub read without it, hold the repository's main branch, which may have other weights (a checkpoint
    re-quantized on main): said, as what was sized is not what the pinned revision holds."""
    rev = str(cfg.settings.get("revision") or "")
    if not rev or rev == "main" or "$" in rev or model.resolved_from not in ("catalog", "derivative", "hub", "lock"):
        return
    if model.resolved_from == "lock" and any(f"(revision {rev[:12]}" in a for a in model.assumptions):
        return
    held = {"lock": "the model lock holds it", "hub": "the Hub's main branch holds it"}.get(
        model.resolved_from, "servefit's catalog holds it (the repository as read, not a pinned commit)")
    note = (f"--revision {rev} is not what was sized: {model.name} is sized as {held}, which may differ from that "
            "commit in weights or layout")
    if note not in cfg.assumptions:
        cfg.assumptions.append(note)


def unresolved_to_assumptions(site: LaunchSite, cfg: EngineConfig, *holders: Any) -> set[str]:
    """A finding on a variable's text (`--tp $TP`: "invalid int value: '$TP'") is about a value
    servefit does not know, not a wrong one: it becomes an assumption (the engine's default is
    planned), so no command calls the server refused for it; lint says SF001 instead. Run on the
    parse before planning (sources/assemble.py), and on the plan's findings after (estimate).
    Returns the settings whose value is such a variable (the plan's findings about them judge a
    default servefit picked, not what the file says)."""
    from servefit.sources.unset_vars import shown_var, var_of, where_set

    if not site.unresolved_spans:
        return set()
    for holder in (cfg, *holders):
        kept = []
        for f in holder.findings:
            var = var_of(site, f.span, f.message) if f.span is not None else None
            if var is None or f.code == "SF001":
                kept.append(f)
                continue
            flag = re.match(r"argument (-[-\w]+)", f.message)
            what = flag.group(1) if flag else f"--{f.setting.replace('_', '-')}" if f.setting else "a setting"
            cfg.assumptions.append(f"{what} is {shown_var(var)}, which {where_set(site, var) or 'is not set here'}: "
                                   "planned with the engine's default (pass the value, or set the variable in the file)")
        holder.findings = kept
    from servefit.sources.detect import model_keys

    unknown = _unknown_settings(site, cfg.engine)
    model_flags = set(model_keys(cfg.engine).get("flags") or ()) if cfg.engine else set()
    for given, var in unknown.values():  # also where the parser itself let the variable pass
        if given in model_flags:  # no default model: --model or a directive names it, else it is not planned
            continue
        said = f"{given} is {shown_var(var)}, which {where_set(site, var) or 'is not set here'}"
        if not any(a.startswith(said) for a in cfg.assumptions):
            cfg.assumptions.append(f"{said}: planned with the engine's default (pass the value, or set the "
                                   "variable in the file)")
    return set(unknown)


def _unknown_settings(site: LaunchSite, engine: str) -> dict[str, tuple[str, str]]:
    """The options whose value (`--flag $X`, `--flag=$X`, an env twin) is an unset variable, by
    the engine's option table (none for an engine without one): name -> (flag, variable)."""
    from servefit.engines.options import load_table

    try:
        table = load_table(engine)
    except Exception:  # noqa: BLE001 - a plugin engine has no table
        return {}
    from servefit.sources.unset_vars import var_of

    spans = {(sp.file, sp.start): var for var, sp in site.unresolved_spans if sp is not None}
    out: dict[str, tuple[str, str]] = {}
    argv = site.argv
    for i, tok in enumerate(argv):
        sp = tok.span
        var = var_of(site, sp, text=tok.text)
        if var is not None and i and argv[i - 1].text.startswith("-") and not tok.text.startswith("-"):
            flag = argv[i - 1].text
        elif tok.text.startswith("-") and "=" in tok.text and sp is not None:
            flag, _, value = tok.text.partition("=")
            var = next((v for (f, start), v in spans.items() if f == sp.file and sp.start < start < sp.end),
                       var_of(site, None, text=value))
            if var is None or "$" not in value:
                continue
        else:
            continue
        opt = table.by_flag.get(flag)
        if opt is not None:
            out[opt.name] = (flag, var)
    for name, tok in site.env.items():
        opt = table.by_env.get(name)
        var = var_of(site, tok.span, text=tok.text)
        if opt is not None and var is not None:
            out.setdefault(opt.name, (name, var))
    return out


def hint(name: str | None, count: int | None, source: str) -> GpuHint:
    return GpuHint(name=name, count=count, source=source)
