"""Kubernetes resources servefit has no layout for (an operator's own kinds: sgl-project/rbg's
RoleBasedGroup, KubeRay's RayService, OME's ServingRuntime, ...): the pod templates they nest (OME
keeps one container as `runner`), and the engine images they name where no pod template was found."""

from __future__ import annotations

import re

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from servefit.core import Span
from servefit.sources import detect
from servefit.sources.base import FileCtx
from servefit.sources.hints import to_int
from servefit.sources.yamlpos import Y


def custom_pods(y: Y, spec: Node | None) -> list[tuple[str, Node, int]]:
    """The pod specs of a resource servefit has no layout for: each mapping whose `containers` is a
    list of containers with an image, wherever the resource nests it (sgl-project/rbg's
    `roles[].standalonePattern.template.spec`, KubeRay's `headGroupSpec.template.spec`), with the
    names on the way (a list item's `name` or KubeRay's `groupName`) for the label and the pods per
    instance where a leader-worker group sets `size` (RBG's v1alpha2 `leaderWorkerPattern`, v1alpha1
    `leaderWorkerSet`: one leader and size - 1 workers run the same template). RBG's `roleTemplates`
    are templates, not pods: a role's `templateRef` is the named template with its `patch` laid over
    it (rbg's role template resolution: the patch is a strategic merge, containers matched by name)."""
    templates = {y.str(y.get(t, "name")): y.get(t, "template", "spec") for t in y.seq(y.get(spec, "roleTemplates"))}
    return _pods(y, spec, templates)


def _pods(y: Y, node: Node | None, templates: dict[str | None, Node | None], where: str = "", size: int = 1,
          depth: int = 0) -> list[tuple[str, Node, int]]:
    if node is None or depth > 8:
        return []
    if isinstance(node, MappingNode):
        ref = y.get(node, "templateRef")
        if ref is not None and templates.get(y.str(y.get(ref, "name"))) is not None:
            node = _merge(y, templates[y.str(y.get(ref, "name"))], y.get(ref, "patch", "spec")) or node
        box = y.seq(y.get(node, "containers"))
        if box and any(y.get(c, "image") is not None for c in box):
            return [(where, node, size)]
        runner = y.get(node, "runner")
        if isinstance(runner, MappingNode) and y.get(runner, "image") is not None:
            return [(where, _with_container(node, runner), size)]
        services = y.get(node, "services")  # DynamoGraphDeployment: the services by name
        if isinstance(services, MappingNode):
            return [hit for key, _, v in y.items(services) if not dynamo_frontend(y, v)
                    for hit in _pods(y, v, templates, f"{where}/{key}", size, depth + 1)]
        extra = y.get(node, "extraPodSpec")  # NVIDIA Dynamo's DynamoGraphDeployment service: its pod's main container
        main = y.get(extra, "mainContainer") if isinstance(extra, MappingNode) else None
        if isinstance(main, MappingNode) and y.get(main, "image") is not None and extra is not None:
            return [(where, _with_container(extra, main), size)]
        group = y.get(node, "leaderWorkerPattern") or y.get(node, "leaderWorkerSet")
        size = to_int(y.str(y.get(group, "size"))) or size
        if isinstance(y.get(node, "leader"), MappingNode) and isinstance(y.get(node, "worker"), MappingNode):
            # OME's multi-node engine: the leader runs the server, `worker.size` pods join it
            # (ome.io ServingRuntime engineConfig.leader / worker, a LeaderWorkerSet underneath)
            workers = to_int(y.str(y.get(node, "worker", "size"))) or 1
            return _pods(y, y.get(node, "leader"), templates, f"{where}/leader", size * (workers + 1), depth + 1)
        return [hit for key, _, v in y.items(node) if key != "roleTemplates"
                for hit in _pods(y, v, templates, f"{where}/{key[:-6]}" if key.endswith("Config") and
                                 y.get(v, "runner") is not None else where, size, depth + 1)]
    if isinstance(node, SequenceNode):
        out: list[tuple[str, Node, int]] = []
        for item in y.seq(node):
            named = (y.str(y.get(item, "name")) or y.str(y.get(item, "groupName"))) if isinstance(item, MappingNode) else None
            out.extend(_pods(y, item, templates, f"{where}/{named}" if named else where, size, depth + 1))
        return out
    return []


def dynamo_frontend(y: Y, service: Node | None) -> bool:
    """A DynamoGraphDeployment service the operator starts as Dynamo's frontend: `componentType: frontend`
    (`main` before) whose main container writes no command gets `python3 -m dynamo.frontend` (dynamo
    deploy/cloud/operator/internal/dynamo/component_frontend.go FrontendDefaults.GetBaseContainer), an HTTP
    router, not an engine, whatever engine the runtime image carries."""
    if (y.str(y.get(service, "componentType")) or "").lower() not in ("frontend", "main"):
        return False
    main = y.get(service, "extraPodSpec", "mainContainer")
    return y.get(main, "command") is None and y.get(main, "args") is None


def _with_container(pod: Node, runner: Node) -> MappingNode:
    """An OME component (`engineConfig`, a leader) as a pod spec: its `runner` is its one container."""
    key = ScalarNode("tag:yaml.org,2002:str", "containers", runner.start_mark, runner.start_mark)
    box = SequenceNode("tag:yaml.org,2002:seq", [runner], runner.start_mark, runner.end_mark)
    return MappingNode(pod.tag, [*pod.value, (key, box)], pod.start_mark, pod.end_mark)


_BY_NAME = ("containers", "initContainers", "volumes", "env", "volumeMounts")  # lists a strategic merge matches by name


def _merge(y: Y, base: Node | None, patch: Node | None) -> Node | None:
    """`patch` laid over `base` the way a strategic merge patch does: mappings merge key by key, the
    lists of named items above merge item by item, anything else the patch writes replaces the base."""
    if patch is None or base is None:
        return patch if base is None else base
    if isinstance(base, MappingNode) and isinstance(patch, MappingNode):
        pairs = []
        ours = {y.str(k): (k, v) for k, v in patch.value}
        for k, v in base.value:
            key = y.str(k)
            if key in ours:
                pk, pv = ours.pop(key)
                merged = _merge_list(y, v, pv) if key in _BY_NAME else _merge(y, v, pv)
                pairs.append((pk, merged))
            else:
                pairs.append((k, v))
        pairs.extend(ours.values())
        return MappingNode(patch.tag, pairs, patch.start_mark, patch.end_mark)
    return patch


def _merge_list(y: Y, base: Node, patch: Node) -> Node:
    if not (isinstance(base, SequenceNode) and isinstance(patch, SequenceNode)):
        return patch
    named = {y.str(y.get(item, "name")): item for item in y.seq(patch)}
    items = [_merge(y, item, named.pop(y.str(y.get(item, "name")))) if y.str(y.get(item, "name")) in named else item
             for item in y.seq(base)]
    items += [item for item in y.seq(patch) if y.str(y.get(item, "name")) in named]
    return SequenceNode(patch.tag, [i for i in items if i is not None], patch.start_mark, patch.end_mark)


def ray_started(y: Y, doc: Node) -> frozenset[int]:
    """The Ray containers (the first of each head or worker group's pod) that give KubeRay no command: KubeRay
    makes theirs `ulimit -n 65536; ray start ...` (Ray's user guide "Specify container commands for Ray
    head/worker Pods"), so no server runs there, unless the resource sets `ray.io/overwrite-container-cmd:
    "true"`, where the image's own command runs."""
    out: set[int] = set()
    stack: list[tuple[Node, int]] = [(doc, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, SequenceNode) and depth < 12:
            stack.extend((item, depth + 1) for item in y.seq(node))
        if not isinstance(node, MappingNode) or depth >= 12:
            continue
        if (y.str(y.get(node, "annotations", "ray.io/overwrite-container-cmd")) or "").lower() == "true":
            return frozenset()
        groups = [y.get(node, "headGroupSpec"), *y.seq(y.get(node, "workerGroupSpecs"))]
        for g in groups:
            box = y.seq(y.get(g, "template", "spec", "containers"))
            if box and y.get(box[0], "command") is None and y.get(box[0], "args") is None:
                out.add(id(box[0]))
        stack.extend((v, depth + 1) for _, _, v in y.items(node))
    return frozenset(out)


def ray_head_gpus(y: Y, doc: Node) -> dict[int, tuple[int, str]]:
    """The GPUs a Ray cluster's worker pods add to its head pod's (by the head's pod spec): a server on
    the head with the Ray backend (vLLM's, where the head's own GPUs are fewer than its world size:
    vllm/config.py ParallelConfig.__post_init__) places its ranks on the worker pods too. A worker group
    runs `replicas` pods (at least `minReplicas`; KubeRay's default is 0), each of `numOfHosts` hosts
    (default 1): ray-operator/apis/ray/v1/raycluster_types.go WorkerGroupSpec and
    controllers/ray/utils/util.go GetWorkerGroupDesiredReplicas. KubeRay's RayCluster, RayService and
    RayJob and AIBrix's RayClusterFleet (`spec.template.spec`) all nest the same cluster spec."""
    from servefit.sources.k8s import gpu_count

    out: dict[int, tuple[int, str]] = {}
    stack: list[tuple[Node, int]] = [(doc, 0)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, MappingNode) or depth >= 12:
            continue
        head = y.get(node, "headGroupSpec", "template", "spec")
        if head is not None:
            gpus, parts = 0, []
            for g in y.seq(y.get(node, "workerGroupSpecs")):
                each = sum(gpu_count(y, c)[0] or 0 for c in y.seq(y.get(g, "template", "spec", "containers")))
                replicas = max(to_int(y.str(y.get(g, "replicas"))) or 0, to_int(y.str(y.get(g, "minReplicas"))) or 0)
                pods = replicas * (to_int(y.str(y.get(g, "numOfHosts"))) or 1)
                if each and pods:
                    gpus += each * pods
                    parts.append(f"{pods} pod(s) × {each} of Ray worker group {y.str(y.get(g, 'groupName')) or '?'}")
            if gpus:
                out[id(head)] = (gpus, "+ " + " + ".join(parts) + " (the server's Ray ranks run there too)")
            continue
        stack.extend((v, depth + 1) for _, _, v in y.items(node))
    return out


def unread_engine_images(y: Y, doc: Node, fc: FileCtx, kind: str, ray: frozenset[int] = frozenset()) -> None:
    """SF116 on each engine image a resource runs where no server was read from it: a container with
    no command (what its image runs there is not known) or one whose command is a wrapper named after
    the engine (NVIDIA Dynamo's `python3 -m dynamo.sglang`), found in the pods above or where an
    operator keeps its container (DynamoGraphDeployment's `extraPodSpec.mainContainer`). A container
    that runs another program from the engine's image (a Mooncake store) is not a server."""
    from servefit.sources.helm import image_not_read

    boxes = [c for _, pod, _ in custom_pods(y, y.get(doc, "spec")) for c in y.seq(y.get(pod, "containers"))]
    stack: list[tuple[Node, int]] = [(doc, 0)]
    while stack:  # containers outside pod templates
        node, depth = stack.pop()
        if isinstance(node, MappingNode) and depth < 12 and y.get(node, "containers") is None:
            if y.get(node, "image") is not None:
                boxes.append(node)
            stack.extend((v, depth + 1) for k, _, v in reversed(y.items(node)) if k != "roleTemplates")
        elif isinstance(node, SequenceNode) and depth < 12:
            stack.extend((item, depth + 1) for item in reversed(y.seq(node)))
    for box in boxes:
        image = y.tok(y.get(box, "image")) if isinstance(y.get(box, "image"), ScalarNode) else None
        eng = detect.engine_of_image(image.text if image else None)
        if image is None or eng is None:
            continue
        words = [w for part in ("command", "args") for w in _texts(y, y.get(box, part))]
        if words and not detect.markers().search(" ".join(words[:4])):
            continue
        if id(box) in ray:
            fc.findings.append(image_not_read(image, why=(
                "KubeRay starts Ray in this container (`ray start`), so a server it runs comes from a Ray Serve "
                "application or a job servefit does not read, and its settings were not checked")))
            continue
        said = " ".join(words[:4])
        how = f"`{said[:60]}{'…' if len(said) > 60 else ''}`" if words else "its image's own command"
        fc.findings.append(image_not_read(image, why=(
            f"servefit does not read what this {kind} starts with it ({how}), so this server's settings were not "
            "checked: lint a Deployment or Pod with the engine's own command line")))


def _texts(y: Y, node: Node | None) -> list[str]:
    if isinstance(node, SequenceNode):
        return [y.str(item) or "" for item in y.seq(node)]
    return (y.str(node) or "").split()


def ray_serve_apps(y: Y, doc: Node, fc: FileCtx) -> None:
    """SF116 on a RayService whose Ray Serve applications run an engine (serveConfigV2 names it: an
    import path, a pip requirement, a deployment): their Python code builds the engine's arguments
    (KubeRay's vLLM sample reads MODEL_ID and TENSOR_PARALLELISM there), which servefit does not read."""
    node = y.get(doc, "spec", "serveConfigV2")
    name = y.str(y.get(doc, "metadata", "name")) or "this RayService"
    at = y.key_node(y.get(doc, "spec"), "serveConfigV2") or node
    _serve_apps(y.str(node) or "", f"RayService {name}", y.span(at) if at is not None else None, fc)


def ray_serve_config(y: Y, doc: Node, fc: FileCtx) -> bool:
    """A Ray Serve config file (`serve deploy` / `serve run config.yaml`: `applications:` with an `import_path`
    each) whose applications run an engine: SF116, as for a RayService's serveConfigV2."""
    apps = y.get(doc, "applications")
    if not isinstance(apps, SequenceNode) or not any(y.get(a, "import_path") is not None for a in y.seq(apps)):
        return False
    at = y.key_node(doc, "applications")
    _serve_apps(y.text[apps.start_mark.index:apps.end_mark.index], "this Ray Serve config",
                y.span(at) if at is not None else None, fc)
    return True


def _serve_apps(text: str, who: str, span: Span | None, fc: FileCtx) -> None:
    from servefit.engines import get
    from servefit.sources.problems import unread_server

    found = [(name, t) for name, t in detect.owners("markers")
             if re.search("|".join(t), text, re.I)]
    if not found:
        return
    title = get(found[0][0]).title
    path = re.search(r"import_path:\s*['\"]?([^\s'\"]+)", text)
    app = f" (import_path {path.group(1)})" if path else ""
    fc.findings.append(unread_server(
        f"{who} runs {title} in a Ray Serve application{app}, whose Python code sets the engine's "
        "arguments: servefit does not read Ray Serve applications, so this server's settings were not checked",
        span=span))


def kaito_preset(y: Y, doc: Node, fc: FileCtx, kind: str) -> None:
    """SF116 on a KAITO Workspace / InferenceSet / MultiRoleInference (prefill and decode roles) that serves a preset: KAITO's controller writes the pod, its
    image and command from the preset (vLLM, unless the `kaito.sh/runtime: transformers` annotation or a cluster
    without KAITO's vLLM feature gate picks Hugging Face transformers: kaito api/v1alpha1/labels.go
    GetWorkspaceRuntimeName), with the vLLM arguments of the ConfigMap `inference.config` names. servefit does not
    read KAITO's presets, so the server is said, not silently skipped (a `template` pod is read as any pod)."""
    from servefit.sources.problems import unread_server

    spec = y.get(doc, "spec", "template") if kind == "InferenceSet" else doc
    inference = y.get(spec, "inference")
    preset = y.get(inference, "preset", "name") if kind != "MultiRoleInference" else y.get(doc, "spec", "model", "name")
    if preset is None:
        return
    runtime = (y.str(y.get(doc, "metadata", "annotations", "kaito.sh/runtime")) or "").lower()
    engine = "Hugging Face transformers" if runtime == "transformers" else "vLLM"
    config = y.str(y.get(inference, "config"))
    where = f", with the vLLM arguments of ConfigMap {config}" if config and engine == "vLLM" else ""
    name = y.str(y.get(doc, "metadata", "name")) or "unnamed"
    fc.findings.append(unread_server(
        f"KAITO {kind} {name} serves preset {y.str(preset)} with {engine}, in a pod KAITO's controller writes from the "
        f"preset{where}: servefit does not read KAITO presets, so this server's settings were not checked",
        span=y.span(preset)))


# llmaz's BackendRuntimes are named as servefit names engines (engines.title), plus one servefit does not model
_LLMAZ_OTHER_BACKENDS = {"tensorrt-llm": "TensorRT-LLM"}


def llmaz_playground(y: Y, doc: Node, fc: FileCtx) -> None:
    """SF116 on an llmaz Playground: llmaz's controller writes the pod from the BackendRuntime it names
    (`backendRuntimeConfig.backendName`, vLLM by default: llmaz api/inference/v1alpha1/playground_types.go),
    its command and arguments from that runtime's recommended configs, which are not in the file: the server is
    said, not silently skipped. The model is the OpenModel the claim names (its `modelID` where this file holds it)."""
    from servefit.engines import title
    from servefit.sources.problems import unread_server

    spec = y.get(doc, "spec")
    named = (y.str(y.get(spec, "backendRuntimeConfig", "backendName")) or "").lower()
    shown = title(named) or _LLMAZ_OTHER_BACKENDS.get(named, named) if named else "vLLM"  # llmaz's default
    runtime = f"BackendRuntime {named}" if named else "llmaz's default BackendRuntime"
    claims = y.seq(y.get(spec, "modelClaims", "models"))
    claim = y.get(spec, "modelClaim", "modelName") or (y.get(claims[0], "name") if claims else None)
    model = y.str(claim)
    name = y.str(y.get(doc, "metadata", "name")) or "unnamed"
    at = claim if claim is not None else y.get(doc, "kind")
    fc.findings.append(unread_server(
        f"llmaz Playground {name} serves model {model or '?'} with {shown} ({runtime}), in a pod llmaz's controller "
        "writes from that BackendRuntime's command and recommended arguments, which are not in this file: servefit does not read BackendRuntimes, so this server's settings "
        "were not checked", span=y.span(at) if at is not None else None))
