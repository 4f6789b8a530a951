"""Compose files layered on a base, the way `docker compose -f base -f overlay` reads them: which
files make one deployment, node positions across them, and which servers a layered one replaces.

docker compose reads compose.yaml (or docker-compose.yml) and, by default, the override file
beside it (compose.override.yaml, docker-compose.override.yml). Other overlays
(docker-compose.gpu.yml, compose.prod.yaml) are named with -f on top of the base; servefit reads
each one found beside a base file on top of that base, for the services it names, and the base
alone is then not reported for those services (the layered one is the deployment). A file whose service runs
another engine than the base's is a stack of its own (`docker compose -f docker-compose.vllm.yml up`), read alone."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from yaml.nodes import MappingNode, Node, SequenceNode

from servefit.sources.yamlpos import Y

if TYPE_CHECKING:
    from servefit.core import LaunchSite, Span, Token
    from servefit.sources.text import LineIndex, Src

BASES = ("compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml")
OVERRIDES = ("compose.override.yaml", "compose.override.yml", "docker-compose.override.yaml",
             "docker-compose.override.yml")
OVERLAY = re.compile(r"(?:docker-)?compose\.[\w.-]+\.ya?ml")  # compose.gpu.yaml, docker-compose.prod.yml


def overlay_base(path: str) -> str | None:
    """The base file an overlay beside it is layered on, or None (not an overlay, no base)."""
    name = os.path.basename(path)
    if name in BASES or not OVERLAY.fullmatch(name):
        return None
    d = os.path.dirname(path)
    return next((p for b in BASES if os.path.isfile(p := os.path.join(d, b))), None)


def standard_override(base: str) -> str | None:
    d = os.path.dirname(base)
    return next((p for o in OVERRIDES if os.path.isfile(p := os.path.join(d, o))), None)


Layer = tuple[str, Y, Node]  # (file, its node helpers, its root mapping)


def layers(path: str, y: Y, root: Node) -> list[Layer]:
    """The files one deployment reads, base first: [base, this overlay], [this base, its standard
    override], or [this file]. A layer that cannot be read is left out (its own scan says why)."""
    base = overlay_base(path)
    if base is not None:
        below = _read(base)
        return ([below] if below is not None else []) + [(path, y, root)]
    if os.path.basename(path) in BASES and (over := standard_override(path)) is not None:
        above = _read(over)
        return [(path, y, root)] + ([above] if above is not None else [])
    return [(path, y, root)]


def alternative(stack: list[Layer], sname: str) -> bool:
    """The overlay's service runs another engine than the base's (`docker-compose.vllm.yml` beside an SGLang
    `docker-compose.yml`, each started alone with `docker compose -f FILE up`): layered, the base's entrypoint would
    run the overlay's image and command, which no one deploys, so the overlay is read on its own."""
    if len(stack) != 2:
        return False
    engines = [_engine(yy, yy.get(rr, "services", sname)) for _, yy, rr in stack]
    return None not in engines and engines[0] != engines[1]


def _engine(y: Y, svc: Node | None) -> str | None:
    """The engine a service names by its image, else by its entrypoint (`python3 -m sglang.launch_server`)."""
    from servefit.sources import detect

    if not isinstance(svc, MappingNode):
        return None
    image = y.str(y.get(svc, "image")) or ""
    eng = detect.engine_of_image(re.sub(r"\$\{[^}]*:-([^}]*)\}", r"\1", image)) if image else None
    entry = y.get(svc, "entrypoint")
    words = [y.str(n) or "" for n in y.seq(entry)] if isinstance(entry, SequenceNode) else (y.str(entry) or "").split()
    hit = detect.recognise(words)
    return eng or (hit[0] if hit else None)


def _read(path: str) -> Layer | None:
    from servefit.sources.base import FileCtx, read_text
    from servefit.sources.yamlpos import YamlProblem, compose_all

    text = read_text(path)
    if text is None:
        return None
    src = FileCtx.of(path, text).src
    try:
        docs = compose_all(src)
    except YamlProblem:
        return None
    y = Y(src)
    root = next((d for d in docs if isinstance(y.get(d, "services"), MappingNode)), None)
    return (path, y, root) if root is not None else None


class LayeredY(Y):
    """Node helpers over several files' trees: each position is taken from the file the node
    was parsed from."""

    def __init__(self, y: Y, stack: list[Layer]) -> None:
        super().__init__(y.src)
        self.owner: dict[int, Y] = {}
        self.files: dict[str, Y] = {}
        self.roots: dict[str, Node] = {}
        for path, yy, root in stack:
            self.files[path] = yy
            self.roots[path] = root
            if yy is not y:
                for node in _walk(root):
                    self.owner[id(node)] = yy

    def _y(self, node: Node | None) -> Y:
        return self.owner.get(id(node), self) if node is not None else self

    def _base(self, node: Node) -> bool:
        return id(node) not in self.owner

    def span(self, node: Node) -> Span:
        return Y.span(self, node) if self._base(node) else self._y(node).span(node)

    def line(self, node: Node) -> int:
        return Y.line(self, node) if self._base(node) else self._y(node).line(node)

    def scalar_src(self, node: Node) -> Src:
        return Y.scalar_src(self, node) if self._base(node) else self._y(node).scalar_src(node)

    def tok(self, node: Node | None) -> Token | None:
        return Y.tok(self, node) if node is None or self._base(node) else self._y(node).tok(node)

    def file_of(self, node: Node | None) -> str | None:
        if node is None:
            return None
        return self._y(node).src.li.file if not self._base(node) else self.src.li.file

    def index_of(self, path: str) -> LineIndex | None:
        yy = self.files.get(path)
        return yy.src.li if yy is not None else None

    def add(self, layer: Layer) -> None:
        """Another file's tree read with these (a service `extends` one there)."""
        path, yy, root = layer
        if path in self.files:
            return
        self.files[path] = yy
        self.roots[path] = root
        for node in _walk(root):
            self.owner[id(node)] = yy


def extended(y: LayeredY, svc: Node, depth: int = 0) -> list[Node]:
    """The services `svc` extends, outermost first (`extends: NAME` or `{service: NAME, file: PATH}`,
    PATH relative to the file that says it), as docker compose merges them under the service. A
    base that cannot be read is left out (that file's own scan says why)."""
    ext = y.get(svc, "extends")
    if ext is None or depth > 8:
        return []
    name = y.str(ext) if not isinstance(ext, MappingNode) else y.str(y.get(ext, "service"))
    rel = y.str(y.get(ext, "file")) if isinstance(ext, MappingNode) else None
    here = y.file_of(svc) or y.src.li.file
    if not name:
        return []
    path = os.path.normpath(os.path.join(os.path.dirname(here), rel)) if rel else here
    if path not in y.roots:
        layer = _read(path)
        if layer is None:
            return []
        y.add(layer)
    root = y.roots[path]
    base = y.files[path].get(root, "services", name)
    if not isinstance(base, MappingNode) or base is svc:
        return []
    return extended(y, base, depth + 1) + [base]


def _walk(root: Node) -> list[Node]:
    """Every node of a tree once (aliases share nodes)."""
    out: list[Node] = []
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node)
        if isinstance(node, SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, MappingNode):
            for k, v in node.value:
                stack.extend((k, v))
    return out


def drop_shadowed(sites: list[LaunchSite]) -> list[LaunchSite]:
    """A compose service read alone (or with fewer layers) is not reported beside the same
    service read with an overlay on top: the layered one is the deployment. Two reads of the
    same layers (a base with its standard override, and that override) are one server."""
    def key(s: LaunchSite) -> tuple[str, str] | None:
        files = s.workload.compose_files or [s.file]
        svc = s.workload.service
        return (os.path.abspath(files[0]), str(svc)) if svc else None

    layered: dict[tuple[str, str], list[frozenset[str]]] = {}
    for s in sites:
        k = key(s)
        if k is not None:
            layered.setdefault(k, []).append(frozenset(map(os.path.abspath, s.workload.compose_files or [s.file])))
    # a service another file's service extends (`extends: {file: base.yaml, ...}`) is its template there,
    # unless it writes a command of its own that each service extending it replaces: then that file runs a
    # server of its own (compose.vllm.yml on GPUs; compose.vllm.cpu.yml extends it with another command)
    extended_elsewhere: dict[tuple[str, str], list[LaunchSite]] = {}
    for s in sites:
        for f, n in s.workload.compose_extends:
            if os.path.abspath(f) != os.path.abspath(s.file):
                extended_elsewhere.setdefault((os.path.abspath(f), n), []).append(s)
    out, seen = [], set()
    for s in sites:
        k = key(s)
        if k in extended_elsewhere and not s.workload.compose_files and not _own_server(s, extended_elsewhere[k]):
            continue
        if k is None or len(layered.get(k, ())) < 2:
            out.append(s)
            continue
        mine = frozenset(map(os.path.abspath, s.workload.compose_files or [s.file]))
        words = tuple(t.text for t in s.argv)  # the same layers read twice; another command is another server
        if any(mine < other for other in layered[k]) or (k, mine, s.name, words) in seen:
            continue
        seen.add((k, mine, s.name, words))
        out.append(s)
    return out


def _own_server(base: LaunchSite, users: list[LaunchSite]) -> bool:
    """The extended service writes words of its command in its own file, and every service extending
    it writes words of its own elsewhere (another command), or runs another image (llama.cpp's `server`
    build extending its `server-cuda` service): each runs a different server."""
    if base.image and all(u.image and u.image != base.image for u in users):
        return True
    f = os.path.abspath(base.file)

    def spans(site: LaunchSite) -> set[str]:
        return {os.path.abspath(t.span.file) for t in site.argv if t.span is not None}

    return f in spans(base) and all(spans(u) - {f} for u in users)
