"""KServe's built-in Hugging Face runtime: an InferenceService with `modelFormat.name: huggingface`
(or the older `predictor.huggingface`) and no ServingRuntime in its file runs the
ClusterServingRuntime kserve-huggingfaceserver (kserve/kserve config/runtimes/
kserve-huggingfaceserver.yaml: image kserve/huggingfaceserver:<KServe release>, `python -m
huggingfaceserver --model_name={{.Name}}` plus the predictor's args). Its server
(python/huggingfaceserver/huggingfaceserver/__main__.py) runs vLLM when the backend is `auto`
(the default, for a model vLLM supports) or `vllm`: `load_model` sets `args.model = args.model_id
or args.model_dir` (model_dir: /mnt/models, where KServe downloads storageUri) and hands the
parsed arguments to vLLM's AsyncEngineArgs (vllm/utils.py maybe_add_vllm_cli_parser adds vLLM's
own parser). It is read as that vLLM server, the runtime and its vLLM version said as assumed;
`--backend=huggingface` (plain transformers) is said as not checked."""

from __future__ import annotations

from typing import Any

from yaml.nodes import Node

from servefit.core import Token
from servefit.sources.base import FileCtx
from servefit.sources.hints import best_label, merge, to_int
from servefit.sources.k8s import gpu_count, item_words, name_hints
from servefit.sources.launch import Launch
from servefit.sources.shell import Vars
from servefit.sources.yamlpos import Y

MOUNT = "/mnt/models"  # huggingfaceserver's --model_dir default, where KServe's storage initializer puts storageUri


def table() -> dict[str, Any]:
    from servefit import data

    return data.load("kserve_runtimes.yaml")  # type: ignore[no-any-return]


def built_in(runtime: str | None, fmt: str | None) -> bool:
    """Whether KServe runs this predictor with its built-in Hugging Face runtime: the runtime is
    named as it, or none is named and the model format is `huggingface` (the runtime KServe's
    auto-selection picks: supportedModelFormats huggingface, autoSelect true)."""
    name = table()["runtime"]
    if runtime:
        return runtime == name
    return (fmt or "").lower() == "huggingface"


def _own(flag: str) -> str | None:
    """The huggingfaceserver / KServe argument a word names (`--model_id=x` -> model_id), else None."""
    if not flag.startswith("--"):
        return None
    name = flag[2:].split("=", 1)[0]  # as declared: `--model-id` is no argument of huggingfaceserver
    return name if name in table()["own_args"] else None


def _takes_value(name: str) -> bool:
    # the store_true ones of __main__.py and model_server.py take no value
    return name not in ("disable_lower_case", "disable_special_tokens", "return_token_type_ids",
                        "return_offsets_mapping", "return_probabilities", "return_raw_logits", "enable_grpc",
                        "enable_docs_url", "enable_latency_logging", "predictor_use_ssl",
                        "enable_predictor_health_check")


def split_args(args: list[Token]) -> tuple[dict[str, Token], list[Token]]:
    """(huggingfaceserver's own arguments -> their value token, the rest: vLLM's). `--max_length N`
    becomes vLLM's max_model_len (__main__.py: dest="max_model_len")."""
    own: dict[str, Token] = {}
    rest: list[Token] = []
    i = 0
    while i < len(args):
        tok = args[i]
        name = _own(tok.text)
        if name is None:
            rest.append(tok)
            i += 1
            continue
        value = Token("", tok.span)
        if "=" in tok.text:
            value = tok.after(tok.text.index("=") + 1)
        elif _takes_value(name) and i + 1 < len(args):
            i += 1
            value = args[i]
        if name == "max_length":
            rest += [Token("--max-model-len", tok.span), value]
        own[name] = value
        i += 1
    return own, rest


def vllm_version(release: str | None) -> tuple[str, str]:
    """(the vLLM version, what it comes from) for a KServe release written as `v0.15.2` / `0.15`:
    the newest release of the table when none is written or it is not in the table (said)."""
    from servefit.engines.options import _vkey

    versions: dict[str, str] = table()["vllm_versions"]
    newest = max(versions, key=_vkey)
    rel = (release or "").strip().lstrip("v")
    hit = versions.get(rel) or next((versions[k] for k in sorted(versions, key=_vkey, reverse=True)
                                     if k.startswith(rel + ".")), None) if rel else None
    if hit:
        return hit, f"KServe {release}'s huggingfaceserver image (its uv.lock / poetry.lock pins vLLM {hit})"
    said = f"runtimeVersion {release} is not a KServe release servefit knows, so" if rel else "no runtimeVersion is given:"
    return versions[newest], (f"{said} KServe {newest}'s huggingfaceserver image is assumed "
                              f"(vLLM {versions[newest]})")


def multinode_args(y: Y, worker: Node) -> list[Token]:
    """The parallel flags the multi-node runtime's command adds from the predictor's workerSpec
    (--tensor-parallel-size=${TENSOR_PARALLEL_SIZE} --pipeline-parallel-size=${PIPELINE_PARALLEL_SIZE},
    1 where unset), and the Ray backend vLLM picks for ranks beyond one node (config/parallel.py::
    ParallelConfig.__post_init__: more ranks than local GPUs, Ray installed). They are the deployment's
    shape (KServe gives each pod tensorParallelSize GPUs), written by the runtime, not in the file's
    command: no place for tune to write."""
    out: list[Token] = []
    for key, name in (("tensorParallelSize", "--tensor-parallel-size"), ("pipelineParallelSize",
                                                                         "--pipeline-parallel-size")):
        tok = y.tok(y.get(worker, key))
        out += [Token(name), Token(tok.text if tok is not None else "1")]
    return out + [Token("--distributed-executor-backend"), Token("ray")]


def read(y: Y, doc: Node, pred: Node | None, model: Node | None, fc: FileCtx, label: str) -> None:
    """The predictor `model` (or `huggingface`) node run by the built-in runtime: one vLLM site, or
    the one finding that the transformers backend is not checked."""
    from servefit.sources.problems import unread_server

    name = y.str(y.get(doc, "metadata", "name")) or "this InferenceService"
    words = item_words(y, y.get(model, "args"), Vars()) or []
    own, rest = split_args([w.token() for w in words])
    backend = (own.get("backend") or Token("")).text.strip().lower()
    if backend == "huggingface":
        at = own["backend"]
        fc.findings.append(unread_server(
            f"InferenceService {name}: KServe's huggingfaceserver runs this model with --backend=huggingface "
            "(plain transformers, not vLLM), whose memory and settings servefit does not model, so this server "
            "was not checked", span=at.span))
        return
    uri = y.str(y.get(model, "storageUri")) or ""
    model_tok = own.get("model_id") or own.get("model_dir") or Token(MOUNT)
    release = y.tok(y.get(model, "runtimeVersion"))
    version, source = vllm_version(release.text if release else None)
    image = f"{table()['image']}:{release.text if release else 'v' + version}"
    argv = [Token(w) for w in table()["serve"]] + [model_tok] + rest
    line = y.line(y.get(model, "args") or model or doc)
    runtime = table()["runtime"]
    notes: list[str] = []
    worker = y.get(pred, "workerSpec") if pred is not None else None
    if worker is not None:
        runtime = table()["multinode_runtime"]
        argv += multinode_args(y, worker)
        notes.append("a workerSpec runs the multi-node runtime: vLLM's pipeline stages on as many pods (the head and "
                     "its workers), each with tensorParallelSize GPUs, over the Ray cluster the pods start (vLLM's "
                     "Ray backend: its ranks span the nodes)")
    notes[:0] = [f"KServe runs it with its built-in ClusterServingRuntime {runtime} (not in this file), read as the "
                 f"vLLM server huggingfaceserver starts (--backend {backend or 'auto'}); vLLM version: {source}"]
    notes += [
        # __main__.py: `args, _ = parser.parse_known_args()` (v0.13 to v0.19)
        "huggingfaceserver drops an argument neither it nor vLLM knows without an error (parse_known_args): "
        "the server starts without that setting"]
    facts: dict[str, Any] = {"k8s_kind": "InferenceService", "container": "kserve-container", "runtime": runtime,
                             "engine_version": version, "version_source": source, "notes": notes,
                             "image_span": release.span if release else None}
    launch = Launch(table()["engine"], argv, {}, line, image=image if release else None, facts=facts)  # type: ignore[arg-type]
    count, count_tok, count_src = gpu_count(y, model)
    if worker is not None:  # KServe's reconciler sets the GPUs of the head's and each worker's pod to
        # tensorParallelSize, over what the file's resources say (reconcilers/deployment/deployment_reconciler.go::
        # addGPUResourceToDeployment)
        count_tok = y.tok(y.get(worker, "tensorParallelSize"))
        count = to_int(count_tok.text if count_tok is not None else None) or 1
        count_src = "workerSpec.tensorParallelSize (KServe gives each pod that many GPUs)"
    hint = merge(best_label(name_hints(y, pred)), count, count_src, count_tok.span if count_tok else None)
    first = len(fc.sites)
    fc.add([launch], f"{label}/kserve-container", hint)
    if "model_id" not in own and "model_dir" not in own:
        for site in fc.sites[first:]:  # KServe downloads storageUri to /mnt/models; only hf:// names the model
            site.workload.storage_model = uri[5:] if uri.startswith("hf://") else None
            site.workload.storage_path = MOUNT
