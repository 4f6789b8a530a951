"""Helm values of the charts users run, and CRDs shaped like them.

- vLLM production-stack: `servingEngineSpec.modelSpec[]` becomes the command its
  deployment-vllm-multi.yaml template renders (`vllm serve <modelURL> --host 0.0.0.0 --port
  8000`, then `vllmConfig` keys as flags, then `extraArgs`); `requestGPU` / `resources` for the
  count, `nodeSelectorTerms` / `affinity` for the GPU; /dev/shm is mounted when
  `tensorParallelSize` is set. The operator's `VLLMRuntime` CRD maps the same way.
- otwld ollama-helm: `ollama.gpu.{enabled,number}`, `ollama.models.{pull,run}`, `extraEnv`.
- Any other chart: a mapping whose `image` is an engine image or whose `command`/`args`/
  `extraArgs` start an engine, with `env`/`extraEnv` beside it (list or map).
Flux HelmRelease `spec.values` is read the same way. Commented-out items are YAML comments and
never settings. A flag servefit writes for a values key has the span of that key; its value
has the span of the value.
"""

from __future__ import annotations

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from servefit.core import GpuHint, Token
from servefit.sources import detect
from servefit.sources.base import FileCtx
from servefit.sources.hints import NameHint, best_label, label_hint, merge, to_int
from servefit.sources.launch import Launch, container
from servefit.sources.shell import Vars, Word, expand_word, split_words
from servefit.sources.yamlpos import Y

PRODSTACK_FLAGS = [("maxModelLen", "--max-model-len"), ("dtype", "--dtype"),
                   ("tensorParallelSize", "--tensor-parallel-size"), ("maxNumSeqs", "--max-num-seqs"),
                   ("gpuMemoryUtilization", "--gpu_memory_utilization"), ("maxLoras", "--max_loras")]
HANDLED = {"servingEngineSpec", "routerSpec", "cacheserverSpec", "loraController", "ollama"}


def _true(y: Y, node: Node | None) -> bool:
    return (y.str(node) or "").lower() in ("true", "yes", "on", "1")


def _flag(y: Y, parent: Node | None, key: str, text: str) -> Token:
    kn = y.key_node(parent, key)
    return Token(text, y.span(kn) if kn is not None else None)


def env_vars(y: Y, *nodes: Node | None) -> Vars:
    """env given as a k8s-style list (name/value) or a plain map."""
    env = Vars()
    for node in nodes:
        if isinstance(node, SequenceNode):
            for e in node.value:
                n, val = y.str(y.get(e, "name")), y.tok(y.get(e, "value"))
                if n and val is not None:
                    env.set(n, val)
        elif isinstance(node, MappingNode):
            for k, _, v in y.items(node):
                t = y.tok(v)
                if t is not None:
                    env.set(k, t)
    env.exported = set(env.values)
    return env


def arg_words(y: Y, node: Node | None, env: Vars | None = None) -> list[Word] | None:
    """`args` / `extraArgs`: list items (an item holding `--flag value` is split), or a string."""
    if isinstance(node, SequenceNode):
        out: list[Word] = []
        for item in node.value:
            if not isinstance(item, ScalarNode):
                continue
            text = str(item.value)
            if text.startswith("-") and " " in text.strip() and "=" not in text.split(" ", 1)[0]:
                out.extend(split_words(y.scalar_src(item), None, k8s=env))
            else:
                out.append(expand_word(y.scalar_src(item), None, k8s=env))
        return out or None
    if isinstance(node, ScalarNode) and str(node.value).strip():
        return split_words(y.scalar_src(node), None, k8s=env)
    return None


def hint_of(y: Y, *scopes: Node | None, count: tuple[int | None, Token | None, str] | None = None) -> GpuHint | None:
    names: list[NameHint] = []
    for scope in scopes:
        for k, _, v in y.items(y.get(scope, "nodeSelector")):
            t = y.tok(v)
            if t is not None and (h := label_hint(k, t, "nodeSelector")):
                names.append(h)
        terms = y.seq(y.get(scope, "nodeSelectorTerms")) or y.seq(y.get(
            scope, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"))
        for term in terms:
            for expr in y.seq(y.get(term, "matchExpressions")):
                vals = y.seq(y.get(expr, "values"))
                t = y.tok(vals[0]) if vals else None
                if t is not None and (h := label_hint(y.str(y.get(expr, "key")) or "", t, "node affinity", len(vals))):
                    names.append(h)
    if count is None:
        count = (None, None, "")
        for scope in scopes:
            for part in ("limits", "requests"):
                t = y.tok(y.get(scope, "resources", part, "nvidia.com/gpu"))
                if t is not None:
                    count = (to_int(t.text), t, f"resources.{part}.nvidia.com/gpu")
                    break
            if count[1] is not None:
                break
    n, tok, src = count
    return merge(best_label(names), n, src, tok.span if tok is not None else None)


def vllm_flags(y: Y, model: Node | None, vc: Node | None) -> list[Token]:
    """The flags production-stack's template writes for modelSpec / VLLMRuntime keys."""
    out: list[Token] = []
    if _true(y, y.get(model, "enableLoRA")):
        out.append(Token("--enable-lora", y.tok(y.get(model, "enableLoRA")).span))  # type: ignore[union-attr]
    if _true(y, y.get(model, "enableTool")):
        out.append(_flag(y, model, "enableTool", "--enable-auto-tool-choice"))
    parser = y.tok(y.get(model, "toolCallParser"))
    if parser is not None and parser.text:
        out += [_flag(y, model, "toolCallParser", "--tool-call-parser"), parser]
    if vc is None:
        return out
    cp = y.get(vc, "enableChunkedPrefill")
    if cp is not None:
        out.append(Token("--enable-chunked-prefill" if _true(y, cp) else "--no-enable-chunked-prefill", y.span(cp)))
    pc = y.get(vc, "enablePrefixCaching")
    out.append(Token("--enable-prefix-caching" if _true(y, pc) else "--no-enable-prefix-caching",
                     y.span(pc) if pc is not None else None))
    for scope in (model, vc):
        for key, flag in PRODSTACK_FLAGS:
            t = y.tok(y.get(scope, key))
            if t is not None and scope is not None:
                out += [_flag(y, scope, key, flag), t]
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
        launch.extra["image_span"] = repo.span
    req = y.tok(y.get(ms, "requestGPU"))
    count = (to_int(req.text), req, "modelSpec.requestGPU") if req is not None else None
    hint = hint_of(y, ms, count=count) if count else hint_of(y, ms)
    fc.add([launch], f"{label}/modelSpec/{name}", hint, {"chart": "vllm-production-stack"})


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


def ollama_chart(y: Y, root: Node, fc: FileCtx, label: str) -> None:
    o = y.get(root, "ollama")
    repo = y.tok(y.get(root, "image", "repository"))
    tag = y.str(y.get(root, "image", "tag"))
    image = (repo.text if repo else "ollama/ollama") + (f":{tag}" if tag else "")
    env = env_vars(y, y.get(root, "extraEnv"))
    args = arg_words(y, y.get(root, "extraArgs"))
    argv = [Token("/bin/ollama")] + ([w.token() for w in args] if args else [Token("serve")])
    launch = Launch("ollama", argv, dict(env.values), y.line(o) if o is not None else 1, image=image)
    models = [m for key in ("pull", "run") for n in y.seq(y.get(o, "models", key)) if (m := y.tok(n))]
    gpu = y.get(o, "gpu")
    hint = None
    if _true(y, y.get(gpu, "enabled")):
        num = y.tok(y.get(gpu, "number"))
        hint = hint_of(y, root, count=(to_int(num.text) if num else 1, num, "ollama.gpu.number"))
    fc.add([launch], f"{label}/ollama", hint, {"chart": "ollama-helm"}, models)


def _image_text(y: Y, node: Node | None) -> Token | None:
    if isinstance(node, ScalarNode):
        return y.tok(node)
    repo = y.tok(y.get(node, "repository")) or y.tok(y.get(node, "name"))
    if repo is None:
        return None
    reg = y.str(y.get(node, "registry"))
    tag = y.str(y.get(node, "tag"))
    text = (f"{reg}/" if reg else "") + repo.text + (f":{tag}" if tag else "")
    return Token(text, repo.span)


def generic(y: Y, root: Node, fc: FileCtx, label: str) -> None:
    """Any mapping (up to 4 levels down) that runs an engine by image or by command."""
    queue: list[tuple[Node, str, int]] = [(root, "", 0)]
    seen: set[int] = set()
    while queue:
        node, path, depth = queue.pop(0)
        if id(node) in seen or not isinstance(node, MappingNode):
            continue
        seen.add(id(node))
        if _generic_one(y, node, root, fc, f"{label}/{path}" if path else label):
            continue
        if depth < 4:
            for k, _, v in y.items(node):
                if k not in HANDLED and isinstance(v, MappingNode):
                    queue.append((v, f"{path}.{k}" if path else k, depth + 1))


def _generic_one(y: Y, m: Node, root: Node, fc: FileCtx, label: str) -> bool:
    image = _image_text(y, y.get(m, "image"))
    eng = detect.engine_of_image(image.text if image else None)
    env = env_vars(y, y.get(m, "env"), y.get(m, "extraEnv"), y.get(m, "envVars"), y.get(m, "extraEnvVars"))
    cmd = arg_words(y, y.get(m, "command"), env)
    args = (arg_words(y, y.get(m, "args"), env) or []) + (arg_words(y, y.get(m, "extraArgs"), env) or [])
    texts = [w.text for w in (cmd or []) + args]
    if eng is None and detect.find_engine(texts) is None:
        return False
    if cmd is None and not args and eng in ("vllm", "llamacpp", "sglang"):
        return False  # an image alone (a router, a cache server) is not a configured server
    ctx = fc.ctx()
    launches = container(image, cmd, args or None, ctx, env)
    if not launches:
        return False
    fc.add(launches, label, hint_of(y, m, root), {"chart": "values"}, ctx.ollama_models)
    return True


def scan_values(y: Y, root: Node | None, fc: FileCtx, label: str = "helm", chart: str | None = None) -> None:
    if not isinstance(root, MappingNode):
        return
    ses = y.get(root, "servingEngineSpec")
    for ms in y.seq(y.get(ses, "modelSpec")):
        prodstack_model(y, ms, ses, fc, label)
    o = y.get(root, "ollama")
    if isinstance(o, MappingNode) and (y.get(o, "gpu") is not None or y.get(o, "models") is not None):
        ollama_chart(y, root, fc, label)
    elif ses is None:
        generic(y, root, fc, label)
