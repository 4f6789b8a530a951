"""Kubernetes resources servefit has no layout for (an operator's own kinds: sgl-project/rbg's
RoleBasedGroup, KubeRay's RayService, ...): the pod templates they nest, and the engine images
they name where no pod template was found."""

from __future__ import annotations

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from servefit.sources import detect
from servefit.sources.base import FileCtx
from servefit.sources.hints import to_int
from servefit.sources.yamlpos import Y


def custom_pods(y: Y, node: Node | None, where: str = "", size: int = 1,
                depth: int = 0) -> list[tuple[str, Node, int]]:
    """The pod specs of a resource servefit has no layout for: each mapping whose `containers` is a
    list of containers with an image, wherever the resource nests it (sgl-project/rbg's
    `roles[].standalonePattern.template.spec`, KubeRay's `headGroupSpec.template.spec`), with the
    names on the way (a list item's `name` or KubeRay's `groupName`) for the label and the pods per instance where a
    leader-worker group sets `size` (RBG's v1alpha2 `leaderWorkerPattern`, v1alpha1
    `leaderWorkerSet`: one leader and size - 1 workers run the same template). Bounded in depth."""
    if node is None or depth > 8:
        return []
    if isinstance(node, MappingNode):
        box = y.seq(y.get(node, "containers"))
        if box and any(y.get(c, "image") is not None for c in box):
            return [(where, node, size)]
        group = y.get(node, "leaderWorkerPattern") or y.get(node, "leaderWorkerSet")
        size = to_int(y.str(y.get(group, "size"))) or size
        return [hit for _, _, v in y.items(node) for hit in custom_pods(y, v, where, size, depth + 1)]
    if isinstance(node, SequenceNode):
        out: list[tuple[str, Node, int]] = []
        for item in y.seq(node):
            named = (y.str(y.get(item, "name")) or y.str(y.get(item, "groupName"))) if isinstance(item, MappingNode) else None
            out.extend(custom_pods(y, item, f"{where}/{named}" if named else where, size, depth + 1))
        return out
    return []


def unread_engine_images(y: Y, doc: Node, fc: FileCtx, kind: str) -> None:
    """SF116 on each engine image a resource names where no server was read from it: its command
    lives where servefit does not look (an operator's own container field), so nothing was checked."""
    from servefit.sources.helm import image_not_read

    stack: list[tuple[Node, int]] = [(doc, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, MappingNode) and depth < 12:
            image = y.tok(y.get(node, "image")) if isinstance(y.get(node, "image"), ScalarNode) else None
            if image is not None and detect.engine_of_image(image.text) is not None:
                fc.findings.append(image_not_read(image, why=(
                    f"it sits in a {kind} resource where servefit finds no pod template with its command, so this "
                    "server's settings were not checked: lint the manifests the operator creates "
                    "(`kubectl get pods -o yaml`) or a Deployment with the same container")))
            stack.extend((v, depth + 1) for _, _, v in reversed(y.items(node)))
        elif isinstance(node, SequenceNode) and depth < 12:
            stack.extend((item, depth + 1) for item in reversed(y.seq(node)))
