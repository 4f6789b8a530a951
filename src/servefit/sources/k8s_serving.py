"""Serving resources whose engine is not a container of their own: a KServe InferenceService
(its predictor's containers, a ServingRuntime in the same file, or a runtime defined elsewhere,
which is said, never skipped), a KServe LLMInferenceService (its containers, or the command its
LLMInferenceServiceConfig gives them, which is said) and a KubeAI Model (`spec.engine`, `spec.url`,
`spec.args`)."""

from __future__ import annotations

from yaml.nodes import Node

from servefit.core import GpuHint, Token
from servefit.sources import detect, kserve_hf
from servefit.sources.base import FileCtx, give_names
from servefit.sources.hints import to_int
from servefit.sources.k8s import ConfigMaps, name_hints, one_container, pod_sites
from servefit.sources.launch import Facts, Launch
from servefit.sources.shell import Vars, expand_word
from servefit.sources.yamlpos import Y


def inference_service(y: Y, doc: Node, fc: FileCtx, cms: ConfigMaps, docs: list[Node], label: str) -> None:
    pred = y.get(doc, "spec", "predictor")
    if y.get(pred, "containers") is not None:
        pod_sites(y, pred, fc, cms, label, "InferenceService")
        return
    model = y.get(pred, "model")
    if model is None:
        hf = y.get(pred, "huggingface")  # the older predictor.<format> form: the built-in runtime
        if hf is not None:
            kserve_hf.read(y, doc, pred, hf, fc, label)
        return
    runtime = y.str(y.get(model, "runtime"))
    for d in docs:
        if y.str(y.get(d, "kind")) in ("ServingRuntime", "ClusterServingRuntime") and \
                y.str(y.get(d, "metadata", "name")) == runtime:
            rt = y.get(d, "spec")
            conts = y.seq(y.get(rt, "containers"))
            if conts:
                names = name_hints(y, pred) or name_hints(y, rt)
                first = len(fc.sites)
                one_container(y, conts[0], fc, cms, label, "InferenceService", names, False, {}, more=model)
                uri = y.str(y.get(model, "storageUri")) or ""
                if uri.startswith("hf://"):
                    for site in fc.sites[first:]:  # KServe downloads storageUri to /mnt/models
                        site.workload.storage_model = uri[5:]
                        site.workload.storage_path = "/mnt/models"
                elif uri.startswith("oci://"):  # a modelcar: KServe mounts the image's /models at /mnt/models
                    repo, tag = detect.split_image(uri[6:])
                    give_names(fc.sites[first:], [(tag, "the tag of its KServe storageUri (an OCI modelcar)"),
                                                  (repo.rsplit("/", 1)[-1], "its KServe storageUri's image")])
            return
    if y.get(model, "image") is not None:
        one_container(y, model, fc, cms, label, "InferenceService", name_hints(y, pred), False, {})
        return
    fmt = y.get(model, "modelFormat", "name")
    if kserve_hf.built_in(runtime, y.str(fmt)):
        kserve_hf.read(y, doc, pred, model, fc, label)
        return
    _runtime_not_found(y, doc, y.get(model, "runtime") or fmt or y.key_node(pred, "model"), runtime,
                       y.str(fmt), fc)


LLM_FORMATS = {"huggingface", "hf", "llm"}  # KServe model formats of language models (or an engine's name)


def _runtime_not_found(y: Y, doc: Node, at: Node | None, runtime: str | None, fmt: str | None,
                       fc: FileCtx) -> None:
    """The runtime (engine, image, command) is defined elsewhere: say so, never skip silently
    (for a language model: a Hugging Face format or storage, or a runtime named after an engine)."""
    from servefit.sources.detect import markers
    from servefit.sources.problems import runtime_not_found

    pred = y.get(doc, "spec", "predictor")
    uri = y.str(y.get(pred, "model", "storageUri")) or y.str(y.get(pred, "huggingface", "storageUri")) or ""
    if (fmt or "").lower() not in LLM_FORMATS and not uri.startswith("hf://") and \
            not markers().search(f"{runtime or ''} {fmt or ''}"):
        return  # an sklearn or xgboost model: not a server servefit checks
    name = y.str(y.get(doc, "metadata", "name")) or "this InferenceService"
    beside = _runtime_beside(fc.path, runtime) if runtime else None
    if beside:
        fc.findings.append(runtime_not_found(
            f"InferenceService {name}: runtime {runtime!r} is in {beside}, not in this file, and servefit reads an "
            "InferenceService with its runtime only when they are read together, so it did not check this server; "
            f"put both in one file (another `---` document), or list both in a kustomization.yaml and lint its folder",
            span=y.span(at) if at is not None else None))
        return
    if runtime:
        what = f"runtime {runtime!r} is not in this file (a ServingRuntime or ClusterServingRuntime defined elsewhere)"
    else:
        what = (f"no runtime is named: KServe picks one of the cluster's runtimes for model format {fmt!r}"
                if fmt else "no runtime is named")
    fc.findings.append(runtime_not_found(
        f"InferenceService {name}: {what}, so servefit does not know which server runs the model and did not "
        "check it; put the ServingRuntime in this file (another `---` document) or give the predictor its own "
        "containers", span=y.span(at) if at is not None else None))


def _runtime_beside(path: str, runtime: str) -> str | None:
    """The name of a YAML file in the same folder that defines the ServingRuntime `runtime`, if one does."""
    import os
    import re

    from servefit.sources.base import MAX_SIDE_FILE

    folder = os.path.dirname(path) or "."
    kind = re.compile(r"(?m)^kind:[ \t]*['\"]?(?:Cluster)?ServingRuntime['\"]?[ \t]*$")
    named = re.compile(rf"(?m)^[ \t]+name:[ \t]*['\"]?{re.escape(runtime)}['\"]?[ \t]*(?:#.*)?$")
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return None
    for f in names:
        other = os.path.join(folder, f)
        if not f.lower().endswith((".yaml", ".yml")) or os.path.abspath(other) == os.path.abspath(path):
            continue
        try:
            if not os.path.isfile(other) or os.path.getsize(other) > MAX_SIDE_FILE:
                continue
            with open(other, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError:
            continue
        if any(kind.search(d) and named.search(d) for d in re.split(r"(?m)^---[ \t]*$", text)):
            return f
    return None


def kubeai_model(y: Y, doc: Node, fc: FileCtx, label: str) -> None:
    """A KubeAI Model: `spec.engine` names the engine (its recognition data: `kubeai`), `spec.url`
    the model, `spec.args` the engine's arguments when the model is an argument."""
    spec = y.get(doc, "spec")
    url = y.tok(y.get(spec, "url"))
    named = (y.str(y.get(spec, "engine")) or "").lower()
    found = next(((name, k) for name, k in detect.owners("kubeai") if k["engine"] == named), None)
    if url is None or found is None:
        return
    engine, how = found
    scheme, sep, ref = url.text.partition("://")
    model = url.after(len(scheme) + len(sep) if sep else 0)
    env = Vars({k: t for k, _, v in y.items(y.get(spec, "env")) if (t := y.tok(v)) is not None})
    args = [expand_word(y.scalar_src(a), None) for a in y.seq(y.get(spec, "args"))]
    argv = [Token(w) for w in how["command"]]
    pulled = how["model"] == "pull"
    if not pulled:
        argv += [model] + [w.token() for w in args]
    launch = Launch(engine, argv, dict(env.values), y.line(y.get(spec, "url") or doc))
    hint = None
    prof = y.tok(y.get(spec, "resourceProfile"))
    if prof is not None and ":" in prof.text and "gpu" in prof.text:
        pname, _, cnt = prof.text.partition(":")
        for pre in ("nvidia-gpu-", "amd-gpu-", "gpu-"):
            if pname.startswith(pre):
                pname = pname[len(pre):]
        hint = GpuHint(pname, to_int(cnt) or 1, "KubeAI resourceProfile", prof.span)
    facts: Facts = {"k8s_kind": "Model"}
    # KubeAI's chart's `cpu` and `google-tpu-*` profiles ask for no GPU: vLLM runs there as its CPU or TPU build
    # (charts/kubeai/values.yaml resourceProfiles.*.imageName, modelServers.VLLM.images.cpu / google-tpu)
    for pre, runs_on, asks in (("cpu:", "the CPU", "CPUs only"), ("google-tpu-", "a TPU", "a Google TPU")):
        if prof is not None and prof.text.startswith(pre):
            facts["profile_off_gpu"] = (runs_on, f"KubeAI resourceProfile {prof.text} asks for {asks}", prof.span)
    fc.add([launch], label, hint, facts, [model] if pulled else None)



# where an LLMInferenceService keeps pod specs (v1alpha2: the decode pods, their multi-node workers,
# and the prefill pods of a disaggregated service)
_LLMISVC_PODS = (("template",), ("worker",), ("prefill", "template"), ("prefill", "worker"))


def llm_inference_service(y: Y, doc: Node, fc: FileCtx, cms: ConfigMaps, label: str) -> None:
    """KServe's LLMInferenceService: its pods are merged over an LLMInferenceServiceConfig's,
    container by name (`main`). A container with its own command is read as written; the main
    container otherwise runs the config's image and command (KServe's default config-llm-template:
    `vllm serve /mnt/models` for `spec.model.uri`), which are not in this file: that is said (SF116),
    never read as an image's bare entrypoint without a model, nor skipped."""
    from servefit.sources.problems import unread_server

    name = y.str(y.get(doc, "metadata", "name")) or "this LLMInferenceService"
    uri = y.str(y.get(doc, "spec", "model", "uri"))
    spec = y.get(doc, "spec")
    said = False
    for path in _LLMISVC_PODS:
        pod = y.get(spec, *path)
        for c in y.seq(y.get(pod, "containers")):
            image = y.tok(y.get(c, "image"))
            main = y.str(y.get(c, "name")) == "main"
            if y.get(c, "command") is not None or not (main or (image and detect.engine_of_image(image.text))):
                continue
            said = True
            shown = f"{image.text} runs the model" if image else "its main container runs the model"
            fc.findings.append(unread_server(_not_in_file(name, uri, shown), span=(image or y.tok(y.get(c, "name")) or
                                                                                  Token("", None)).span))
        kept = _with_commands(y, pod)
        if kept is not None:
            said = True
            pod_sites(y, kept, fc, cms, f"{label}/{'/'.join(path)}", "LLMInferenceService")
    if not said:
        at = y.get(spec, "model", "uri") or y.get(doc, "kind")
        fc.findings.append(unread_server(_not_in_file(name, uri, "KServe runs the model"),
                                         span=y.span(at) if at is not None else None))


def _not_in_file(name: str, uri: str | None, shown: str) -> str:
    model = f" (spec.model.uri {uri})" if uri else ""
    return (f"LLMInferenceService {name}: {shown}{model} with the image and command of its LLMInferenceServiceConfig "
            "(KServe's default: `vllm serve /mnt/models`), which are not in this file, so this server's settings were "
            "not checked: lint the config with it, or write the container's image and command in the file")


def _with_commands(y: Y, pod: Node | None) -> Node | None:
    """The pod with only its containers that write their own command (None when none does)."""
    from yaml.nodes import MappingNode, SequenceNode

    box = y.get(pod, "containers")
    kept = [c for c in y.seq(box) if y.get(c, "command") is not None]
    if not kept or not isinstance(pod, MappingNode) or box is None:
        return None
    seq = SequenceNode(box.tag, kept, box.start_mark, box.end_mark)
    return MappingNode(pod.tag, [(k, seq if y.str(k) == "containers" else v) for k, v in pod.value],
                       pod.start_mark, pod.end_mark)
