"""Planning one assembled server (sources/assemble.py): the GPU its target names resolved in the
hardware catalog, its model, and the engine's plan through pipeline.evaluate; where it cannot be
planned, the one-line reason every command gives (`Server.error`) and the finding lint reports.
"""

from __future__ import annotations

from typing import Any

from servefit.core import UsageError
from servefit.rules.catalog import finding
from servefit.rules.registry import rule
from servefit.sources.hints import no_gpu_visible
from servefit.sources.off_gpu import message, off_gpu
from servefit.sources.server_build import Server, anchor, plugin_failed
from servefit.sources.target import Part
from servefit.sources.unset_vars import model_among_unknown_args


def storage_model(srv: Server) -> None:
    """KServe: the storageUri is downloaded to /mnt/models, which the command then names."""
    site, cfg = srv.site, srv.config
    storage, path = site.workload.storage_model, site.workload.storage_path
    ref = cfg.model_ref if cfg is not None else None
    if srv.target.model is None and storage and path and ref and ref.startswith(path):
        srv.target.model = Part(storage, "KServe storageUri", None)


# the values keys whose value a chart's templates pass to the engine as its model (`args: ["{{
# .Values.modelName }}", ...]`): helm.py value_names records them as "its values key KEY"
VALUES_MODEL_KEYS = ("modelName", "model_name")


def cpu_checks(srv: Server, engine: Any) -> list[Any]:
    """The start checks of an engine's CPU build that need only the model (vLLM's KV space), where the
    model is known; nothing where it is not (SF120 already says the memory is not checked)."""
    from servefit.pipeline import Target, resolve_site_model

    t, cfg = srv.target, srv.config
    assert cfg is not None
    if "$" in (srv.model_ref or ""):
        return []
    try:
        model = resolve_site_model(engine, srv.site, cfg, Target(
            gpu="", engine_version=cfg.version, online=t.online,
            model=str(t.model.value) if t.model is not None else None, model_config=t.model_config))
    except UsageError:
        return []
    return list(engine.cpu_checks(cfg, model))


def values_model(srv: Server) -> None:
    """A values file read without its chart's templates (helm is not on PATH, or --no-render) whose
    command has no model: the templates add it, from the values key named for it when that holds
    a model reference (ORG/NAME, a path)."""
    site, cfg, t = srv.site, srv.config, srv.target
    if t.model is not None or cfg is None or cfg.model_ref or site.workload.chart != "values":
        return
    for name, where in site.workload.names:
        key = where.removeprefix("its values key ")
        if key in VALUES_MODEL_KEYS and "/" in name and not any(c.isspace() or c in "${}" for c in name):
            t.model = Part(name, f"the values key {key} (the chart's templates pass it to the server; they "
                                 "were not rendered)", None)
            cfg.assumptions.append(f"model {name}: the values key {key}, which the chart's templates (not rendered) "
                                   "pass to the server, as its command names none")
            return


def variable_folder_model(srv: Server) -> None:
    """A model path whose folder is a variable not set here but whose name is written out
    (`-m ${HOME}/models/qwen2.5-7b-instruct-q4_k_m.gguf`, `--model $MODEL_DIR/Qwen2.5-7B-Instruct`): the
    name is what sizes the model, as for the same path written out (models/evidence.under_variable)."""
    from servefit.models.evidence import under_variable

    cfg, t = srv.config, srv.target
    ref = cfg.model_ref if cfg is not None else None
    if t.model is not None or cfg is None or not ref or "$" not in ref:
        return
    named = under_variable(ref)
    if named is None:
        return
    folder = ref[:len(ref) - len(named)] or ref
    t.model = Part(named, f"by its name; {folder} is not set here", None)
    cfg.assumptions.append(f"model {ref}: {folder} is not set here, so the model is sized by the name the path "
                           f"ends in, {named.rsplit('/', 1)[-1]}")


@rule("SF002", "SF003", "SF004", "SF110", "SF115", "SF120")
def plan_server(srv: Server, engine: Any) -> None:
    from servefit.hardware import catalog_assumption, resolve_target, unlisted, with_memory
    from servefit.pipeline import Target, evaluate

    site, cfg, t, out = srv.site, srv.config, srv.target, srv.findings
    assert cfg is not None
    if cfg.unplanned:  # the engine's own finding says why (SGLang's diffusion server: SGL014)
        srv.error = cfg.unplanned
        return
    off = off_gpu(site, cfg)
    if off is not None:  # a CPU build, a TPU image, --device cpu: not GPU memory
        text, warn = message(off, cfg, site, engine.title)
        srv.error = text
        out.append(finding("SF120", text, site=site.name, span=off.span or anchor(site),
                           severity="warning" if warn else None))
        if off.runs_on == "the CPU" and hasattr(engine, "cpu_checks"):  # what the CPU build refuses (vLLM's KV space)
            refused = cpu_checks(srv, engine)
            out.extend(refused)
            srv.error += "".join(f"; {f.message}" for f in refused)  # estimate and tune say it too
        return
    hidden = no_gpu_visible(site)
    if hidden:  # SF118 says so in lint; estimate and tune give this reason
        srv.error = hidden
        return
    ref = srv.model_ref or ""
    if t.gpu is None:
        srv.error = ("no target GPU: pass --gpu NAME (servefit gpus lists them) or set a default "
                     "in [tool.servefit]")
        out.append(finding("SF110", "no GPU is known for this server, so its memory was not checked: pass "
                                    "--gpu NAME or add `# servefit: gpu=NAME` to the file",
                           site=site.name, span=anchor(site)))
        return
    if not ref and not t.model_config and engine.models_on_request:
        # the server loads models on request (`ollama serve`): none is named here. Said once: by
        # the engine's own rule for it (Engine.unnamed_models_code: llama.cpp's LCPP015), else SF115
        from servefit.sources.base import CREATED_NAME
        from servefit.sources.image_release import official_image

        if site.image and official_image(site.image) is False:
            # someone's own build of the engine's image (ghcr.io/x/llama-server:qwen2.5-1.5b) may set the
            # model in its Dockerfile (ENV LLAMA_ARG_MODEL, CMD), which is not in this repository
            why = said = (f"the image {site.image} is not the {engine.title} project's own: the model it serves "
                          "(its ENV or CMD) is not known here")
            span, whose = site.image_span or anchor(site), "its"
        elif site.name.startswith("dockerfile") and len(site.argv) <= 1:
            # `ENTRYPOINT ["/llama-server"]` and no CMD: the image's users give its arguments at `docker run`
            why = said = (f"the Dockerfile's command is the bare {engine.title} server: the model and settings "
                          "are the arguments `docker run IMAGE ...` gives it, which are not in this file")
            span, whose = anchor(site), "its"
        elif site.inputs.file_refs and site.inputs.definition is None and \
                (made := next((n for n, where in site.workload.names if where == CREATED_NAME), None)):
            why = said = (f"`ollama create {made}` builds the model it serves from {', '.join(site.inputs.file_refs)}, "
                          "which is not in the repository")
            span, whose = anchor(site), "its"
        else:
            why = f"{engine.title} loads the models requests name, and this file names none"
            said = f"{engine.title} loads the models requests name, and none is named here"
            span, whose = anchor(site), "their"
        srv.error = f"{said}: add `# servefit: model=REF` above the server (or pass --model REF)"
        own = getattr(engine, "unnamed_models_code", "")
        if not any(own and f.code == own for f in cfg.findings):
            out.append(finding("SF115", f"{why}, so {whose} memory was not checked: add `# servefit: model=REF` above "
                                        "it for the model it serves", site=site.name, span=span))
        return
    from servefit.sources.shell import placeholder

    if placeholder(ref):
        srv.error = f"the model is a placeholder to fill in ({ref}): pass --model REF"
        return  # SF001 says so
    if "$" in ref:
        from servefit.sources.unset_vars import sample_sets

        srv.error = f"the model is a variable ({ref}){sample_sets(site, ref)}: its value is not known here (pass --model REF)"
        return  # SF001 / SF107 say so
    name = str(t.gpu.value)
    source = t.gpu_source
    sized = t.gpu_memory is not None and bool(t.gpu_memory.value)
    try:
        gpu, inst_count = resolve_target(name)
    except UsageError as exc:
        if not sized:
            srv.error = str(exc)
            span = t.gpu.span or anchor(site)
            out.append(finding("SF003", str(exc), site=site.name, span=span))
            return
        assert t.gpu_memory is not None
        gpu, inst_count = unlisted(name, int(t.gpu_memory.value)), None  # --gpu-memory sizes an unlisted card
        source = f"{source}; {gpu.memory_source.removeprefix('--gpu-memory override; ')}"
    if gpu.source == "local":  # --gpu local: NVML's device, its memory and what is in use
        source = gpu.memory_source
    note = catalog_assumption(gpu, name)
    if note:
        source = f"{source}; {note}"
    count = int(t.count.value) if t.count is not None else inst_count
    if sized and gpu.key != "unlisted" and t.gpu_memory is not None:
        gpu = with_memory(gpu, int(t.gpu_memory.value))
    target = Target(gpu=name, gpus=count or None, engine_version=cfg.version, online=t.online,
                    model=str(t.model.value) if t.model is not None else None, model_config=t.model_config,
                    source=source)
    try:
        srv.evaluation = evaluate(site, target, cfg=cfg, hardware=(gpu, count or 0, source))
        model = srv.evaluation.model
        if model.resolved_from == "derivative" and model.assumptions:  # sized from a base by name: say so
            out.append(finding("SF004", model.assumptions[0], site=site.name,
                               span=cfg.spans.get("model") or anchor(site)))
    except UsageError as exc:
        srv.error = str(exc)
        path = site.workload.storage_path
        # the model as written: llama.cpp's ref is a catalog name from the GGUF's (`/mnt/models/*.gguf` -> `*`)
        written = str(cfg.settings.get("model") or ref) if t.model is None else ref
        if path and written.startswith(path) and not site.workload.storage_model and t.model is None and \
                site.workload.kind == "InferenceService":  # KServe's built-in runtime (sources/kserve_hf.py)
            srv.error = (f"the model is the one KServe downloads to {path} from this InferenceService's storageUri, "
                         "which names no Hugging Face model (an hf:// one or --model_id would), so its memory was not "
                         "checked: pass --model ORG/NAME or add `# servefit: model=ORG/NAME` beside the server")
        elif path and written.startswith(path) and not site.workload.storage_model and t.model is None:
            srv.error = (f"the model is the one KServe downloads to {path} from the storageUri of an InferenceService "
                         "that uses this runtime, and no InferenceService in this file does, so its memory was not "
                         "checked: add `# servefit: model=ORG/NAME` beside the server, or put the InferenceService "
                         "in this file")
        elif not ref and t.model is None and (own := own_build_model(site, engine.title)):
            srv.error = own
        elif not ref and t.model is None and (among := model_among_unknown_args(site)):
            srv.error = among
        out.append(finding("SF002", srv.error, site=site.name, span=cfg.spans.get("model") or anchor(site)))
    except Exception as exc:  # noqa: BLE001 - a plugin bug must not stop the run
        srv.error = f"{type(exc).__name__}: {exc}"
        out.append(plugin_failed(srv.error, site=site.name, span=anchor(site)))


def own_build_model(site: Any, title: str) -> str:
    """Why a server names no model, where a values file is read without the chart templates that write its
    command, or where it is someone's build of an engine's image (`.../vllm-release-llama-guard:0.5.2`) run with
    no command from the file (it runs its own ENTRYPOINT / CMD, not the engine image's that servefit knows);
    "" otherwise."""
    from servefit.sources.image_release import official_image

    if site.workload.chart == "values":  # a values file read without its chart's templates, which write the command
        return (f"this values file's command for {title} names no model: its chart's templates may add one, and "
                "servefit read the values file without them, so its memory was not checked: render the chart (helm "
                "on PATH) or add `# servefit: model=REF` above the server")
    if site.workload.args_at_run:
        return (f"this Dockerfile's ENTRYPOINT starts {title} with no model and it has no CMD: the arguments come "
                "from what runs the image (`docker run IMAGE ...`, a compose or Kubernetes file), so its memory was "
                "not checked here: lint that file, or add `# servefit: model=REF` above the ENTRYPOINT")
    if not site.image or official_image(site.image) is not False or any(t.span is not None for t in site.argv):
        return ""
    return (f"the image {site.image} is not the {title} project's own, and this file gives it no command: the "
            "model it serves is set inside the image (its ENTRYPOINT, CMD or a script reading the environment), "
            "which is not in this repository, so its memory was not checked: add `# servefit: model=REF` above "
            "the server")


@rule("SF111")
def not_starting(srv: Server) -> None:
    ev = srv.evaluation
    assert ev is not None
    plan = ev.plan
    if plan.outcome != "started" and not any(f.severity == "error" for f in ev.config.findings + plan.findings):
        m = plan.memory
        need = (m.weights + m.activation_peak + m.non_torch + m.cuda_graphs) / 2**30
        have = m.budget / 2**30 if m.budget else ev.gpu.memory_bytes / 2**30
        srv.findings.append(finding("SF111", f"{plan.engine} will not start ({plan.outcome.replace('_', ' ')}): "
                                             f"need {need:.2f} GiB before the KV cache, have {have:.2f} GiB",
                                    site=srv.site.name, span=ev.config.spans.get("model") or anchor(srv.site)))
