"""vLLM production-stack's Helm chart and its operator's VLLMRuntime resource, as servers (the
llm-d-modelservice chart: llmd.py beside this module).

`servingEngineSpec.modelSpec[]` becomes the command the chart's deployment-vllm-multi.yaml
template renders (`vllm serve <modelURL> --host 0.0.0.0 --port 8000`, then `vllmConfig` keys as
flags, then `extraArgs`); `requestGPU` / `resources` for the count, `nodeSelectorTerms` /
`affinity` for the GPU; /dev/shm is mounted when `tensorParallelSize` is set. The VLLMRuntime CRD
maps the same way. A flag written for a values key has the span of that key.
"""

from __future__ import annotations

from yaml.nodes import Node

from servefit.core import Token
from servefit.sources.base import FileCtx, give_names
from servefit.sources.helm import arg_words, env_vars, flag, hint_of, true
from servefit.sources.hints import merge, to_int
from servefit.sources.launch import Launch
from servefit.sources.yamlpos import Y

PRODSTACK_FLAGS = [("maxModelLen", "--max-model-len"), ("dtype", "--dtype"),
                   ("tensorParallelSize", "--tensor-parallel-size"), ("maxNumSeqs", "--max-num-seqs"),
                   ("gpuMemoryUtilization", "--gpu_memory_utilization"), ("maxLoras", "--max_loras")]


def vllm_flags(y: Y, model: Node | None, vc: Node | None) -> list[Token]:
    """The flags production-stack's template writes for modelSpec / VLLMRuntime keys."""
    out: list[Token] = []
    if true(y, y.get(model, "enableLoRA")):
        out.append(Token("--enable-lora", y.tok(y.get(model, "enableLoRA")).span))  # type: ignore[union-attr]
    if true(y, y.get(model, "enableTool")):
        out.append(flag(y, model, "enableTool", "--enable-auto-tool-choice"))
    parser = y.tok(y.get(model, "toolCallParser"))
    if parser is not None and parser.text:
        out += [flag(y, model, "toolCallParser", "--tool-call-parser"), parser]
    if vc is None:
        return out
    cp = y.get(vc, "enableChunkedPrefill")
    if cp is not None:
        out.append(Token("--enable-chunked-prefill" if true(y, cp) else "--no-enable-chunked-prefill", y.span(cp)))
    pc = y.get(vc, "enablePrefixCaching")
    out.append(Token("--enable-prefix-caching" if true(y, pc) else "--no-enable-prefix-caching",
                     y.span(pc) if pc is not None else None))
    for scope in (model, vc):
        for key, name in PRODSTACK_FLAGS:
            t = y.tok(y.get(scope, key))
            if t is not None and scope is not None:
                out += [flag(y, scope, key, name), t]
    out += [w.token() for w in arg_words(y, y.get(vc, "extraArgs")) or []]
    return out


def prodstack_model(y: Y, ms: Node, ses: Node | None, fc: FileCtx, label: str) -> None:
    name = y.str(y.get(ms, "name")) or "model"
    repo, tag = y.tok(y.get(ms, "repository")), y.str(y.get(ms, "tag"))
    url = y.tok(y.get(ms, "modelURL"))
    if url is None:
        return
    vc = y.get(ms, "vllmConfig")
    argv = [Token("vllm"), Token("serve"), url, Token("--host"), Token("0.0.0.0"), Token("--port"), Token("8000")]
    argv += vllm_flags(y, ms, vc)
    env = env_vars(y, y.get(ms, "env"))
    image = f"{repo.text}:{tag}" if repo is not None and tag else (repo.text if repo else None)
    launch = Launch("vllm", argv, dict(env.values), y.line(ms), image=image,
                    shm=y.get(vc, "tensorParallelSize") is not None)
    if image and repo is not None:
        launch.facts["image_span"] = repo.span
    req = y.tok(y.get(ms, "requestGPU"))
    count = (to_int(req.text), req, "modelSpec.requestGPU") if req is not None else None
    hint = hint_of(y, ms, count=count) if count else hint_of(y, ms)
    before = len(fc.sites)
    fc.add([launch], f"{label}/modelSpec/{name}", hint, {"chart": "vllm-production-stack"})
    give_names(fc.sites[before:], [(name, "its production-stack modelSpec name")])


def vllm_runtime(y: Y, doc: Node, fc: FileCtx, label: str) -> None:
    spec = y.get(doc, "spec")
    model = y.get(spec, "model")
    url = y.tok(y.get(model, "modelURL"))
    if url is None:
        return
    vc = y.get(spec, "vllmConfig")
    argv = [Token("vllm"), Token("serve"), url] + vllm_flags(y, model, vc)
    env = env_vars(y, y.get(vc, "env"))
    img = y.str(y.get(spec, "deploymentConfig", "image", "name"))
    launch = Launch("vllm", argv, dict(env.values), y.line(y.get(model, "modelURL") or doc), image=img,
                    shm=y.get(vc, "tensorParallelSize") is not None)
    g = y.tok(y.get(spec, "deploymentConfig", "resources", "gpu"))
    hint = merge(None, to_int(g.text), "deploymentConfig.resources.gpu", g.span) if g is not None else None
    fc.add([launch], label, hint, {"k8s_kind": "VLLMRuntime"})


def scan_values(y: Y, root: Node, fc: FileCtx, label: str) -> bool:
    """production-stack values: one server per modelSpec (its router and cache server are not);
    llm-d-modelservice values (`modelArtifacts`): decode and prefill (engines/vllm/llmd.py)."""
    ses = y.get(root, "servingEngineSpec")
    if ses is None:
        from servefit.engines.vllm.llmd import scan_modelservice

        return scan_modelservice(y, root, fc, label)
    for ms in y.seq(y.get(ses, "modelSpec")):
        prodstack_model(y, ms, ses, fc, label)
    return True
