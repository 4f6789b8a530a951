"""Kubernetes manifests, multi-document: Deployment, StatefulSet, DaemonSet, ReplicaSet, Job,
CronJob, Pod, PodTemplate, Argo Rollout, Knative Service, LeaderWorkerSet, KServe
ServingRuntime / InferenceService and KubeAI Model (k8s_serving.py), vLLM production-stack VLLMRuntime, Flux
HelmRelease (its `values:`), List, llama-swap configs embedded in a ConfigMap, and the pod templates
any other resource nests in its spec (RoleBasedGroup roles, KubeRay groups).

A container is a server when its command (after `command` + `args`, the image's entrypoint,
`sh -c` unwrapping and `$(VAR)` expansion from the same container's env) starts an engine;
init containers and helpers are not. Env values come from `value`, ConfigMaps in the same
file (`configMapKeyRef`, `envFrom`); Secrets and fieldRefs are not read. Hardware: node
selectors and required (then preferred) node affinity for GPU labels, `nvidia.com/gpu`
limits/requests for the count, and /dev/shm from an emptyDir of medium Memory or hostIPC.
"""

from __future__ import annotations

import re

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from servefit.core import GpuHint, LaunchSite, Token
from servefit.sources import detect
from servefit.sources.base import FileCtx, give_names
from servefit.sources.container import container
from servefit.sources.hints import GPU_RESOURCES, NameHint, best_label, label_hint, merge, to_int
from servefit.sources.k8s_pod import container_env, memory_volumes, runtime_env, set_shm
from servefit.sources.k8s_scripts import ConfigMaps, mounted_files, run_script, script_of
from servefit.sources.launch import Launch, from_words
from servefit.sources.ports import Exposure, port_list
from servefit.sources.ports import add as add_exposure
from servefit.sources.problems import literal_variable
from servefit.sources.shell import Vars, Word, expand_word, split_words
from servefit.sources.yamlpos import Y

LITERAL_VAR = re.compile(r"(?<!\$)\$\{?([A-Za-z_][A-Za-z0-9_]*)")  # `${X}` / `$X`, not `$(X)` nor `$$X`

POD_PATHS: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template", "spec"), "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"), "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"), "Rollout": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "Pod": ("spec",), "PodTemplate": ("template", "spec"),
    "ServingRuntime": ("spec",), "ClusterServingRuntime": ("spec",),
}
# runtime kinds of two operators: KServe's keep `spec.containers`; OME's (ome.io) keep a `runner`
# container in `spec.engineConfig` / `decoderConfig` / `routerConfig`, read as custom resources
RUNTIMES = ("ServingRuntime", "ClusterServingRuntime")


def scan(y: Y, docs: list[Node], fc: FileCtx) -> None:
    cms = ConfigMaps()
    for doc in docs:
        if y.str(y.get(doc, "kind")) == "ConfigMap":
            name = y.str(y.get(doc, "metadata", "name")) or ""
            data = {k: t for k, _, v in y.items(y.get(doc, "data")) if (t := y.tok(v)) is not None}
            cms[name] = data
            cms.srcs.update({(name, k): y.scalar_src(v) for k, _, v in y.items(y.get(doc, "data")) if k in data})
    # a ServingRuntime an InferenceService of this file uses is read with that service
    used = {y.str(y.get(d, "spec", "predictor", "model", "runtime")) for d in docs
            if y.str(y.get(d, "kind")) == "InferenceService"}
    first = len(fc.sites)
    for doc in docs:
        runtime = y.str(y.get(doc, "kind")) in ("ServingRuntime", "ClusterServingRuntime")
        if runtime and y.str(y.get(doc, "metadata", "name")) in used:
            continue
        before = len(fc.sites)
        scan_doc(y, doc, fc, cms, docs)
        if runtime and (y.str(y.get(doc, "apiVersion")) or "").startswith("serving.kserve.io"):
            for site in fc.sites[before:]:  # KServe mounts an InferenceService's model here (storageUri)
                site.workload.storage_path = site.workload.storage_path or "/mnt/models"
    services(y, docs, fc.sites[first:])


def services(y: Y, docs: list[Node], sites: list[LaunchSite]) -> None:
    """A Service of type LoadBalancer or NodePort in the same file whose selector matches a pod's
    labels publishes that pod's servers outside the cluster."""
    for d in docs:
        typ = y.tok(y.get(d, "spec", "type"))
        if y.str(y.get(d, "kind")) != "Service" or typ is None or typ.text not in ("LoadBalancer", "NodePort"):
            continue
        selector = {k: y.str(v) for k, _, v in y.items(y.get(d, "spec", "selector"))}
        if not selector:
            continue
        ns = y.str(y.get(d, "metadata", "namespace"))
        targets = []
        for p in y.seq(y.get(d, "spec", "ports")):
            t = y.str(y.get(p, "targetPort")) or y.str(y.get(p, "port")) or ""
            targets.append(to_int(t))
        ports = tuple(t for t in targets if t) if all(targets) else ()
        how = f"Service/{y.str(y.get(d, 'metadata', 'name')) or 'unnamed'} of type {typ.text}"
        for site in sites:
            labels = site.workload.pod_labels
            if site.workload.namespace == ns and all(labels.get(k) == v for k, v in selector.items()):
                add_exposure(site, Exposure(how, typ.span, ports))


def scan_doc(y: Y, doc: Node, fc: FileCtx, cms: ConfigMaps, docs: list[Node], depth: int = 0) -> None:
    before = len(fc.sites)
    _scan_doc(y, doc, fc, cms, docs, depth)
    kind = y.str(y.get(doc, "kind")) or ""
    path = POD_PATHS.get(kind, ("spec", "template", "spec"))
    labels = {k: y.str(v) for k, _, v in y.items(y.get(doc, *path[:-1], "metadata", "labels"))}
    ns = y.str(y.get(doc, "metadata", "namespace"))
    knative = kind == "Service" and "knative" in (y.str(y.get(doc, "apiVersion")) or "")
    local = (y.str(y.get(doc, "metadata", "labels", "networking.knative.dev/visibility")) or "") == "cluster-local"
    # Cloud Run's service YAML (run.googleapis.com/ keys): only callers with IAM permission reach it, a grant
    # to allUsers is not in the file
    cloud_run = knative and "run.googleapis.com/" in y.text[doc.start_mark.index:doc.end_mark.index]
    for site in fc.sites[before:]:
        give_names([site], object_names(y, doc, kind, labels) + [(site.workload.container, "its container name")])
        if not site.workload.pod_labels:
            site.workload.pod_labels = labels
        if site.workload.namespace is None:
            site.workload.namespace = ns
        if cloud_run:
            site.workload.runtime = "Cloud Run"
        elif knative and not local:
            add_exposure(site, Exposure(f"Knative Service/{y.str(y.get(doc, 'metadata', 'name'))} (public by default)",
                                        y.span(y.key_node(doc, "kind") or doc)))
    notes: dict[str, str] = {}
    line = 0
    for path in (("metadata", "annotations"), ("spec", "template", "metadata", "annotations")):
        node = y.get(doc, *path)
        for k, knode, v in y.items(node):
            notes[k] = y.str(v) or ""
            if k.startswith("servefit.io/") and not line:
                line = knode.start_mark.line + 1
    if notes:
        for site in fc.sites[before:]:
            site.workload.annotations = notes
            site.workload.annotation_line = line or site.line


def _scan_doc(y: Y, doc: Node, fc: FileCtx, cms: ConfigMaps, docs: list[Node], depth: int = 0) -> None:
    kind = y.str(y.get(doc, "kind")) or ""
    api = y.str(y.get(doc, "apiVersion")) or ""
    name = y.str(y.get(doc, "metadata", "name")) or "unnamed"
    label = f"{kind}/{name}"
    if kind == "List" and depth < 3:
        for item in y.seq(y.get(doc, "items")):
            _scan_doc(y, item, fc, cms, docs, depth + 1)
    elif kind == "HelmRelease":
        from servefit.sources import helm  # Flux objects (and llama-swap ConfigMaps) are rare

        chart = y.str(y.get(doc, "spec", "chart", "spec", "chart"))
        helm.scan_values(y, y.get(doc, "spec", "values"), fc, label, chart)
    elif kind == "ConfigMap":
        for key, _, v in y.items(y.get(doc, "data")):
            text = y.str(v) or ""
            if "models:" in text and "cmd:" in text:
                from servefit.sources import llamaswap

                llamaswap.scan_embedded(y.scalar_src(v), fc, f"{label}/{key}")
    elif kind == "LeaderWorkerSet" or (kind == "Service" and api.startswith("inference.llmaz.io/")):
        # llmaz's Service runs its `workloadTemplate` as a LeaderWorkerSet (llmaz api/inference/v1alpha1
        # service_types.go: WorkloadTemplate is lws' LeaderWorkerTemplate)
        lwt = y.get(doc, "spec", "leaderWorkerTemplate") or y.get(doc, "spec", "workloadTemplate")
        size = to_int(y.str(y.get(lwt, "size"))) or 1
        worker = y.get(lwt, "workerTemplate", "spec")
        leader = y.get(lwt, "leaderTemplate", "spec") or worker
        pod_sites(y, leader, fc, cms, f"{label}/leader", kind, group_gpus(y, worker, size, "LeaderWorkerSet"))
        if y.get(lwt, "leaderTemplate") is not None:  # a worker runs in the same group: its GPUs are the group's
            lead = sum(gpu_count(y, c)[0] or 0 for c in y.seq(y.get(leader, "containers")))
            each = sum(gpu_count(y, c)[0] or 0 for c in y.seq(y.get(worker, "containers")))
            others = (lead + each * (size - 2), f"+ the leader pod × {lead}"
                      + (f" and {size - 2} other worker pod(s) × {each}" if size > 2 else "")
                      + f" (LeaderWorkerSet size {size})") if size > 1 else None
            pod_sites(y, worker, fc, cms, f"{label}/worker", kind, others)
    elif kind == "InferenceService":
        from servefit.sources.k8s_serving import inference_service

        inference_service(y, doc, fc, cms, docs, label)
    elif kind == "LLMInferenceService":
        from servefit.sources.k8s_serving import llm_inference_service

        llm_inference_service(y, doc, fc, cms, label)
    elif kind == "Model" and "kubeai" in api:
        from servefit.sources.k8s_serving import kubeai_model

        kubeai_model(y, doc, fc, label)
    elif (kind in POD_PATHS or (kind == "Service" and "knative" in api)) and (
            kind not in RUNTIMES or y.get(doc, "spec", "containers") is not None):
        pod_sites(y, y.get(doc, *POD_PATHS.get(kind, ("spec", "template", "spec"))), fc, cms, label, kind)
    elif kind in ("Workspace", "InferenceSet", "MultiRoleInference") and api.startswith("kaito.sh/") and \
            y.get(doc, "inference", "template") is None and y.get(doc, "spec", "template", "inference", "template") is None:
        from servefit.sources.k8s_custom import kaito_preset

        kaito_preset(y, doc, fc, kind)
    elif kind == "Playground" and api.startswith("inference.llmaz.io/"):
        from servefit.sources.k8s_custom import llmaz_playground

        llmaz_playground(y, doc, fc)
    elif (owner := _resource_owner(kind)) is not None:
        from servefit import engines

        engines.get(owner).scan_resource(y, doc, fc, label)
    elif kind:
        pod = y.get(doc, "spec", "template", "spec")
        if y.get(pod, "containers") is not None:
            pod_sites(y, pod, fc, cms, label, kind)
        else:  # a custom resource (RoleBasedGroup, RayService, ...): every pod template in its spec
            from servefit.sources import k8s_custom as kc

            before, ray, heads = len(fc.sites), kc.ray_started(y, doc), kc.ray_head_gpus(y, doc)
            for where, found, size in kc.custom_pods(y, y.get(doc, "spec")):
                group = heads.get(id(found)) or group_gpus(y, found, size, "leader-worker")
                pod_sites(y, found, fc, cms, f"{label}{where}", kind, group, ray)
            if len(fc.sites) == before:
                said = len(fc.findings)
                kc.unread_engine_images(y, doc, fc, kind, ray)
                if kind == "RayService" and len(fc.findings) == said:
                    kc.ray_serve_apps(y, doc, fc)


def group_gpus(y: Y, pod: Node | None, size: int, what: str) -> tuple[int, str] | None:
    """The GPUs the other size - 1 pods of a multi-pod instance add to the leader's, with the reason."""
    if size <= 1:
        return None
    gpus = sum(gpu_count(y, c)[0] or 0 for c in y.seq(y.get(pod, "containers")))
    return gpus * (size - 1), f"+ {size - 1} worker pod(s) × {gpus} ({what} size {size})"


# label keys that name an application rather than a model (their values are tried after the
# object's own name); a key with "model" in it (`model`, `ai.gke.io/model`, `llm-d.ai/model`) first
_APP_LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app", "name")


def object_names(y: Y, doc: Node, kind: str, pod_labels: dict[str, str | None]) -> list[tuple[str | None, str]]:
    """The names a manifest gives its servers: labels that name a model, the object's own name
    (a Deployment, an InferenceService, a KubeAI Model, a LeaderWorkerSet), application labels."""
    labels = {k: y.str(v) for k, _, v in y.items(y.get(doc, "metadata", "labels"))}
    labels.update({k: v for k, v in pod_labels.items() if k not in labels})
    out: list[tuple[str | None, str]] = [(v, f"its label {k}") for k, v in labels.items() if "model" in k.lower()]
    name = y.str(y.get(doc, "metadata", "name"))
    out.append((name, f"the {kind or 'object'}'s name"))
    out += [(labels[k], f"its label {k}") for k in _APP_LABELS if labels.get(k)]
    return out


def name_hints(y: Y, pod: Node | None) -> list[NameHint]:
    out: list[NameHint] = []
    for k, _, v in y.items(y.get(pod, "nodeSelector")):
        t = y.tok(v)
        h = label_hint(k, t, "nodeSelector") if t is not None else None
        if h:
            out.append(h)
    na = y.get(pod, "affinity", "nodeAffinity")
    terms: list[tuple[Node | None, str, int]] = [(t, "node affinity", 0) for t in y.seq(y.get(na, "requiredDuringSchedulingIgnoredDuringExecution",
                                                             "nodeSelectorTerms"))]
    terms += [(y.get(p, "preference"), "preferred node affinity", 20)
              for p in y.seq(y.get(na, "preferredDuringSchedulingIgnoredDuringExecution"))]
    for term, where, bump in terms:
        for expr in y.seq(y.get(term, "matchExpressions")):
            if (y.str(y.get(expr, "operator")) or "In") != "In":
                continue
            vals = y.seq(y.get(expr, "values"))
            t = y.tok(vals[0]) if vals else None
            h = label_hint(y.str(y.get(expr, "key")) or "", t, where, len(vals)) if t is not None else None
            if h:
                h.priority += bump
                out.append(h)
    return out


def gpu_count(y: Y, c: Node | None) -> tuple[int | None, Token | None, str]:
    res = y.get(c, "resources")
    for part in ("limits", "requests"):
        for key in GPU_RESOURCES:
            node = y.get(res, part, key)
            t = y.tok(node)
            if t is not None:
                return to_int(t.text), t, f"{key} {part[:-1]}"
        for key, _, v in y.items(y.get(res, part)):
            if key.startswith("nvidia.com/mig-"):
                t = y.tok(v)
                return (to_int(t.text) if t else None), t, f"{key} {part[:-1]}"
    return None, None, ""


def item_words(y: Y, node: Node | None, env: Vars) -> list[Word] | None:
    """k8s `command` / `args`: a list (each item one word, `$(VAR)` expanded); a string is
    split like a shell would (Helm values sometimes hold one)."""
    if isinstance(node, SequenceNode):
        words = [expand_word(y.scalar_src(i), None, k8s=env) for i in node.value if isinstance(i, ScalarNode)]
        return words or None
    if isinstance(node, ScalarNode) and str(node.value).strip():
        return split_words(y.scalar_src(node), None, k8s=env)
    return None


def _literal_variables(launches: list[Launch], items: list[Word], fc: FileCtx, known: set[str], opaque: bool) -> None:
    """SF107: a `${VAR}` / `$VAR` in a command or args item reaches the engine as text, because
    Kubernetes expands `$(VAR)` there and nothing else (a `sh -c` payload is the shell's). Only where the
    container's env sets VAR (`known`, or an `envFrom` of names not known here) does `$(VAR)` mend it; a
    name the container does not set is filled in before the file is applied (envsubst, a deploy script:
    `image: ${IMAGE_NAME}` beside it), so it is a value not known here (SF001), not a typo to rewrite."""
    written = {(t.span.file, t.span.start): w.text for w in items if LITERAL_VAR.search(w.text)
               for t in [w.token()] if t.span is not None}
    if not written:
        return
    for launch in launches:
        shell = {(sp.file, sp.start) for _, sp in launch.unresolved if sp is not None}
        for tok in launch.argv:
            key = (tok.span.file, tok.span.start) if tok.span is not None else None
            if key in written and key not in shell and LITERAL_VAR.search(tok.text):
                name = LITERAL_VAR.search(tok.text).group(1)  # type: ignore[union-attr]
                if name not in known and not opaque:
                    launch.unresolved.append((name, tok.span))
                    continue
                fc.findings.append(literal_variable(
                    f"Kubernetes passes {tok.text!r} to the engine literally: it expands $(VAR) in command "
                    f"and args, not ${{VAR}}; write $({name})", span=tok.span))


def pod_sites(y: Y, pod: Node | None, fc: FileCtx, cms: ConfigMaps, label: str, kind: str,
              group: tuple[int, str] | None = None, skip: frozenset[int] = frozenset()) -> None:
    if not isinstance(pod, MappingNode):
        return
    host_ipc = (y.str(y.get(pod, "hostIPC")) or "").lower() == "true"
    mem_vols = memory_volumes(y, pod)
    names = name_hints(y, pod)
    host_net = y.tok(y.get(pod, "hostNetwork"))
    for c in (c for c in y.seq(y.get(pod, "containers")) if id(c) not in skip):  # skip: KubeRay's `ray start`
        before = len(fc.sites)
        one_container(y, c, fc, cms, label, kind, names, host_ipc, mem_vols, group, pod=pod)
        for site in fc.sites[before:]:
            if host_net is not None and host_net.text.lower() == "true":
                add_exposure(site, Exposure("hostNetwork: true (the pod listens on the node's interfaces)",
                                            host_net.span, host_network=True))
            for p in y.seq(y.get(c, "ports")):
                hp = y.tok(y.get(p, "hostPort"))
                if hp is not None and (y.str(y.get(p, "hostIP")) or "") not in ("127.0.0.1", "::1"):
                    add_exposure(site, Exposure(f"hostPort {hp.text} (published on the node)", hp.span,
                                                port_list(y.str(y.get(p, "containerPort")) or "")))


def one_container(y: Y, c: Node, fc: FileCtx, cms: ConfigMaps, label: str, kind: str, names: list[NameHint],
                  host_ipc: bool, mem_vols: dict[str | None, str | None], group: tuple[int, str] | None = None,
                  args_prefix: list[Node] | None = None, more: Node | None = None,
                  pod: Node | None = None) -> list[Launch]:
    """One container (with `more`, a KServe predictor model merged over its runtime's container)."""
    env = container_env(y, c, cms, y.seq(y.get(more, "env")) if more is not None else None)
    image = y.tok(y.get(c, "image"))
    cmd = item_words(y, y.get(c, "command"), env)
    args = item_words(y, y.get(c, "args"), env)
    if more is not None:
        args = (args or []) + (item_words(y, y.get(more, "args"), env) or []) or None
    ctx = fc.ctx()
    script = script_of(cmd, mounted_files(y, pod, c), cms) if pod is not None else None
    if script is None:
        launches = container(image, cmd, args, ctx, env)
    else:
        launches = run_script(image, script, (cmd or []) + (args or []), y.str(y.get(c, "name")), ctx, env)
    if not launches:
        return []
    runtime, opaque = runtime_env(y, c, cms)
    _literal_variables(launches, (cmd or []) + (args or []), fc, set(env.values) | set(runtime), opaque)
    # a postStart hook that pulls models (otwld's ollama-helm: `ollama pull MODEL` once the server
    # answers) names what the Ollama server loads; the hook itself is no server
    hook = item_words(y, y.get(c, "lifecycle", "postStart", "exec", "command"), env)
    if hook:
        from_words(hook, ctx, env)
    count, count_tok, count_src = gpu_count(y, more if more is not None and y.get(more, "resources") else c)
    if group is not None and count is not None:
        count += group[0]
        count_src += f" {group[1]}"
    hint: GpuHint | None = merge(best_label(names), count, count_src, count_tok.span if count_tok else None)
    if group is not None and count is not None and count - group[0] <= 1:
        for launch in launches:  # one GPU per pod: the ranks meet over the network, not /dev/shm
            launch.shm = True if launch.shm is None else launch.shm
    set_shm(y, c, launches, host_ipc, mem_vols)
    cname = y.str(y.get(c, "name")) or "container"
    ports = [to_int(y.str(y.get(p, "containerPort"))) for p in y.seq(y.get(c, "ports"))]
    fc.add(launches, f"{label}/{cname}", hint,
           {"k8s_kind": kind, "container": cname, "ports": [p for p in ports if p], "runtime_env": runtime,
            "env_opaque": opaque, "no_gpu_request": kind in _OWN_PODS and count is None and group is None and not (hint and hint.name)
            and not _devices(y, pod, more if more is not None else c) and env.get("NVIDIA_VISIBLE_DEVICES") is None},
           ctx.ollama_models)
    return launches


# kinds whose pod template is the pod that runs, resources as written (an operator's kind may give its
# pods GPUs from fields of its own: Dynamo's service `resources.limits.gpu`, KServe's predictor)
_OWN_PODS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "Rollout", "ReplicationController",
                       "CronJob", "Pod", "LeaderWorkerSet"})


def _devices(y: Y, pod: Node | None, c: Node) -> bool:
    """Whether the pod or container asks for a device some other way than a GPU count: a runtimeClassName
    (the NVIDIA runtime), an extended resource (`google.com/tpu`, `aws.amazon.com/neuron`), a resource claim."""
    res = y.get(c, "resources")
    return y.get(pod, "runtimeClassName") is not None or y.get(pod, "resourceClaims") is not None or \
        y.get(res, "claims") is not None or any("/" in k for part in ("limits", "requests") for k, _, _ in y.items(y.get(res, part)))


def _resource_owner(kind: str) -> str | None:
    """The engine whose operator defines this resource kind (its recognition data: `resource_kinds`)."""
    return next((name for name, kinds in detect.owners("resource_kinds") if kind in kinds), None)
