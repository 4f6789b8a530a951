"""llm-d-modelservice Helm values (chart llm-d-incubation/llm-d-modelservice) as servers.

`decode` and `prefill` each run their `containers`; the chart writes each container's command
from the values as its templates/_helpers.tpl does (`llm-d-modelservice.command`):
- `modelCommand: vllmServe` (vllmServeModelCommand): `vllm serve MODEL --port P`, then
  `--tensor-parallel-size T`, `--data-parallel-size D`, `--data-parallel-size-local L` (each only
  above 1), `--served-model-name NAME`, then the container's `args`;
- `imageDefault` (imageDefaultModelCommand): the image's own entrypoint with `--model MODEL` and
  the same flags (llm-d's images run `python -m vllm.entrypoints.openai.api_server`: llm-d/llm-d
  docker/Dockerfile.cuda ENTRYPOINT); the inference simulator image is not an engine;
- `custom` (the default): the container's `command` and `args` as written.
MODEL comes from `modelArtifacts.uri` (argsByProtocol): `hf://ORG/NAME` -> ORG/NAME (the chart
renders `{{ .Values.modelArtifacts.name }}` in it), `pvc://CLAIM/PATH` -> MOUNTPATH/PATH,
`pvc+hf://CLAIM/CACHE/ORG/NAME` -> ORG/NAME; for `oci://` the chart fails. Parallelism as
tensorParallelism / dataParallelism / dataLocalParallelism; the GPU count as `resources` writes
it: the container's own limit on the accelerator's resource, else dataLocal x tensor. Replicas:
decode 1 and prefill 0 unless set (the chart's values.yaml); `create: false` deploys nothing.
A flag the chart writes for a values key has that key's span, its value the value's span.
"""

from __future__ import annotations

import re

from yaml.nodes import MappingNode, Node

from servefit.core import GpuHint, Token
from servefit.sources import detect, image_release
from servefit.sources.base import FileCtx, give_names
from servefit.sources.container import container
from servefit.sources.helm import flag, hint_of, image_not_read, true
from servefit.sources.hints import label_hint, merge, to_int
from servefit.sources.k8s import item_words
from servefit.sources.k8s_pod import container_env, memory_volumes, runtime_env, set_shm
from servefit.sources.launch import Launch
from servefit.sources.yamlpos import Y

SIMULATOR = "llm-d-inference-sim"
API_SERVER = ("python", "-m", "vllm.entrypoints.openai.api_server")
REPLICAS = {"decode": 1, "prefill": 0}  # the chart's values.yaml
RESOURCES = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu", "intel-gaudi": "habana.ai/gaudi",
             "intel-i915": "gpu.intel.com/i915", "intel-xe": "gpu.intel.com/xe", "google": "google.com/tpu"}
NAME_TEMPLATE = re.compile(r"""["']?\{\{-?\s*\.Values\.modelArtifacts\.name\s*-?\}\}["']?""")
CHART = "llm-d-modelservice"


def scan_modelservice(y: Y, root: Node, fc: FileCtx, label: str) -> bool:
    """The servers of an llm-d-modelservice values file; False when it is not one."""
    ma = y.get(root, "modelArtifacts")
    if not isinstance(ma, MappingNode):
        return False
    for role in ("decode", "prefill"):
        spec = y.get(root, role)
        create = y.get(spec, "create")
        if not isinstance(spec, MappingNode) or create is not None and not true(y, create):
            continue
        rep = y.tok(y.get(spec, "replicas"))
        if (to_int(rep.text) if rep is not None else REPLICAS[role]) == 0:
            continue  # nothing of this role runs
        for c in y.seq(y.get(spec, "containers")):
            _container(y, root, ma, spec, c, role, fc, f"{label}/{role}")
    return True


def artifact_model(y: Y, ma: Node) -> tuple[Token | None, str]:
    """(the model argument the chart writes for `modelArtifacts.uri`, why there is none)."""
    name = y.tok(y.get(ma, "name"))
    uri = y.tok(y.get(ma, "uri")) or Token("hf://{{ .Values.modelArtifacts.name }}")  # the chart's default
    text, span = uri.text.strip(), uri.span
    if NAME_TEMPLATE.search(text):
        if name is None:
            return None, "modelArtifacts.uri names modelArtifacts.name, which is not set here"
        text, span = NAME_TEMPLATE.sub(name.text, text), name.span
    if "{{" in text or "$" in text:
        return None, f"modelArtifacts.uri {uri.text!r} is a template servefit cannot fill"
    proto, _, rest = text.partition("://")
    rest = rest.strip("\"'")
    if proto == "hf" and rest:
        return Token(rest, span), ""
    if proto == "pvc" and "/" in rest:
        mount = y.str(y.get(ma, "mountPath")) or "/model-cache"
        return Token(f"{mount}/{rest.split('/', 1)[1]}", span), ""
    if proto == "pvc+hf" and rest.count("/") >= 2:
        return Token("/".join(rest.split("/")[-2:]), span), ""
    if proto == "oci":
        return None, "the chart writes no model argument for an oci:// model (helm fails: \"arguments for oci:// " \
            "not implemented\")"
    return None, f"modelArtifacts.uri {uri.text!r} is not hf://, pvc://, pvc+hf:// or oci://"


def _parallel(y: Y, par: Node | None) -> list[Token]:
    """The parallel flags the chart writes (each only above 1), spans on parallelism's keys."""
    def num(key: str) -> tuple[int, Token | None]:
        t = y.tok(y.get(par, key))
        n = to_int(t.text) if t is not None else None
        return (n or 0, t) if n else (0, None)

    (tp, tp_t), (dp, dp_t), (dpl, dpl_t), (w, _) = num("tensor"), num("data"), num("dataLocal"), num("workers")
    data = (dp, "data", dp_t) if dp else (dpl * w, "dataLocal", dpl_t) if dpl and w else (dpl, "dataLocal", dpl_t)
    local = (dpl, "dataLocal", dpl_t) if dpl else (dp // w, "data", dp_t) if dp and w else (dp, "data", dp_t)
    out: list[Token] = []
    for name, (n, key, tok) in (("--tensor-parallel-size", (tp, "tensor", tp_t)), ("--data-parallel-size", data),
                                ("--data-parallel-size-local", local)):
        if n > 1 and tok is not None:
            out += [flag(y, par, key, name), Token(str(n), tok.span)]
    return out


def _gpu_count(y: Y, root: Node, c: Node, par: Node | None, role: str) -> tuple[int | None, Token | None, str]:
    """The accelerator count `llm-d-modelservice.resources` writes: the container's own limit
    on the accelerator's resource, else dataLocalParallelism x tensorParallelism."""
    acc = y.str(y.get(root, "accelerator", "type")) or "nvidia"
    if acc == "cpu":
        return None, None, ""
    res = y.str(y.get(root, "accelerator", "resources", acc)) or RESOURCES.get(acc, "nvidia.com/gpu")
    own = y.tok(y.get(c, "resources", "limits", res))
    if own is not None:
        return to_int(own.text), own, f"resources.limits.{res}"
    toks = {k: y.tok(y.get(par, k)) for k in ("tensor", "data", "dataLocal", "workers")}
    n = {k: (to_int(t.text) or 0) if t is not None else 0 for k, t in toks.items()}
    dpl = n["dataLocal"] or (n["data"] // n["workers"] if n["data"] and n["workers"] else n["data"]) or 1
    return dpl * (n["tensor"] or 1), toks["tensor"], f"{role}.parallelism (dataLocal x tensor, as the chart requests)"


def _hint(y: Y, root: Node, spec: Node, c: Node, role: str) -> GpuHint | None:
    extra = y.get(spec, "extraConfig")
    count = _gpu_count(y, root, c, y.get(spec, "parallelism"), role)
    hint = hint_of(y, spec, extra, count=count)
    at = y.get(spec, "acceleratorTypes")
    values = y.seq(y.get(at, "labelValues"))
    first = y.tok(values[0]) if values else None
    named = label_hint(y.str(y.get(at, "labelKey")) or "", first, f"{role}.acceleratorTypes", len(values)) \
        if first is not None else None
    if named is not None and (hint is None or hint.name is None):
        n, tok, src = count
        return merge(named, n, src, tok.span if tok is not None else None)
    return hint


def _entrypoint(image: str) -> tuple[str, ...] | None:
    """What an image runs when the chart gives it only arguments (imageDefault)."""
    if detect.engine_of_image(image) == "vllm":
        ie = image_release.image_entrypoint(image)
        return tuple(ie[0]) if ie else None
    repo = detect.split_image(image)[0].lower()
    return API_SERVER if "/llm-d/llm-d" in repo or repo.startswith("llm-d/llm-d") else None


def _container(y: Y, root: Node, ma: Node, spec: Node, c: Node, role: str, fc: FileCtx, label: str) -> None:
    image = y.tok(y.get(c, "image"))
    if image is None or SIMULATOR in image.text:
        return  # the chart requires an image; the simulator serves no model on a GPU
    kind_node = y.get(c, "modelCommand")
    kind = y.str(kind_node) or "custom"
    env = container_env(y, c, {})
    args = item_words(y, y.get(c, "args"), env) or []
    ctx = fc.ctx()
    if kind == "custom":
        launches = container(image, item_words(y, y.get(c, "command"), env), args or None, ctx, env)
    elif kind in ("vllmServe", "imageDefault"):
        model, why = artifact_model(y, ma)
        entry = ("vllm", "serve") if kind == "vllmServe" else _entrypoint(image.text)
        if model is None or entry is None:
            why = why or (f"modelCommand imageDefault runs the image's own entrypoint, and servefit does not know "
                          f"what {image.text} runs")
            fc.findings.append(image_not_read(image, f"the command was not read: {why}", _what(role)))
            return
        argv = [Token(w) for w in entry] + ([flag(y, ma, "uri", "--model")] if kind == "imageDefault" else [])
        argv += [model, Token("--port"), Token(_port(y, root, role))] + _parallel(y, y.get(spec, "parallelism"))
        name = y.tok(y.get(ma, "name"))
        if name is not None:
            argv += [flag(y, ma, "name", "--served-model-name"), name]
        argv += [w.token() for w in args]
        launches = [Launch("vllm", argv, dict(env.values), y.line(kind_node or c), image=image.text,
                           unresolved=[u for w in args for u in w.unresolved])]
    else:
        fc.findings.append(image_not_read(image, f"modelCommand {kind!r} is not vllmServe, imageDefault or custom: "
                                          "the chart refuses to render it", _what(role)))
        return
    if not launches:
        return
    host_ipc = any(true(y, y.get(s, "hostIPC")) for s in (spec, y.get(spec, "extraConfig")))
    set_shm(y, c, launches, host_ipc, memory_volumes(y, spec, y.get(spec, "extraConfig")))
    cname = y.str(y.get(c, "name")) or "vllm"
    runtime, opaque = runtime_env(y, c, {})
    before = len(fc.sites)
    fc.add(launches, f"{label}/{cname}", _hint(y, root, spec, c, role),
           {"chart": CHART, "k8s_kind": "LeaderWorkerSet" if true(y, y.get(root, "multinode")) else "Deployment",
            "container": cname, "ports": [p for p in (to_int(y.str(y.get(p, "containerPort")))
                                                      for p in y.seq(y.get(c, "ports"))) if p],
            "runtime_env": runtime, "env_opaque": opaque}, ctx.ollama_models)
    give_names(fc.sites[before:], [(y.str(y.get(ma, "name")), "its llm-d modelArtifacts.name")])


def _port(y: Y, root: Node, role: str) -> str:
    """llm-d-modelservice.vllmPort: prefill (or no routing proxy) listens on routing.servicePort,
    decode behind the proxy on routing.proxy.targetPort."""
    proxy = y.get(root, "routing", "proxy", "enabled")
    if role == "prefill" or proxy is not None and not true(y, proxy):
        return y.str(y.get(root, "routing", "servicePort")) or "8000"
    return y.str(y.get(root, "routing", "proxy", "targetPort")) or "8200"


def _what(role: str) -> str:
    return f"as the {role} server of this {CHART} chart"
