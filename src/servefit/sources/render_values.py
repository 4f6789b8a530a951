"""Where a rendered value is set in the files a user edits: the values files of a helm render
(highest precedence first) or the patches and resources of a kustomize build (patches first).

Kept apart from the template matching (render_match.py) and the span mapping (render_map.py):
this module knows the YAML of the user's files, not the rendered output.
"""

from __future__ import annotations

import re

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from servefit.core import Span
from servefit.sources.helm_chart import own_values
from servefit.sources.render_patterns import enclosing_range

_DOC_START = re.compile(r"^---[ \t]*$", re.M)
_KIND = re.compile(r"^kind:[ \t]*(\S+)", re.M)
_NAME = re.compile(r"^metadata:[ \t]*\n(?:[ \t]+.*\n)*?[ \t]+name:[ \t]*[\"']?([^\s\"']+)", re.M)


class ValuesFile:
    """One values file: its nodes by key path and its scalars by text."""

    def __init__(self, path: str) -> None:
        from servefit.sources.base import FileCtx
        from servefit.sources.yamlpos import Y, YamlProblem, compose_all

        self.root: Node | None = None
        self.scalars: dict[str, list[Node]] = {}
        self.resources: list[tuple[str, str]] = []
        try:
            from servefit.safe_io import read_text

            fc = FileCtx.of(path, read_text(path, 8 << 20))
            docs = compose_all(fc.src)
        except (OSError, YamlProblem):
            return
        self.y = Y(fc.src)
        self.root = docs[0] if docs else None
        # (kind, metadata.name) of each document: a kustomize build's resources (ValuesLookup.scope)
        self.resources = [(self.y.str(self.y.get(d, "kind")) or "", self.y.str(self.y.get(d, "metadata", "name")) or "")
                          for d in docs if isinstance(d, MappingNode)]
        stack: list[Node] = list(docs)
        while stack:
            node = stack.pop()
            if isinstance(node, MappingNode):
                stack.extend(v for _, v in node.value)
            elif isinstance(node, SequenceNode):
                stack.extend(node.value)
            elif isinstance(node, ScalarNode):
                self.scalars.setdefault(str(node.value), []).append(node)

    def get(self, path: list[str]) -> Node | None:
        if self.root is None:
            return None
        return self.y.get(self.root, *path)

    def span(self, node: Node) -> Span:
        tok = self.y.tok(node)
        return tok.span if tok is not None and tok.span is not None else self.y.span(node)


class ValuesLookup:
    """The files of one render, asked where a key path, a range item or a text is set."""

    def __init__(self, paths: list[str], rendered: str, scoped: bool) -> None:
        self.files = [ValuesFile(p) for p in paths]
        self._own: dict[str, list[ValuesFile]] = {}  # a subchart folder's own values files
        self._docs = _resources(rendered) if scoped else []

    def node(self, path: list[str]) -> tuple[ValuesFile, Node] | None:
        for v in self.files:
            node = v.get(path)
            if node is not None:
                return v, node
        return None

    def by_path(self, path: list[str], chain: list[tuple[str, str]]) -> Span | None:
        """The values line a `.Values.a.b` sets: a subchart's template (`chain`: its (name, folder)
        from the umbrella) reads the umbrella's values under the subchart's name (`vllm.a.b`), else
        the subchart's own values.yaml."""
        names = [n for n, _ in chain]
        hit = self.node(names + path)
        for k, (_, folder) in enumerate(chain):
            if hit is not None:
                break
            own = self._own.get(folder)
            if own is None:
                own = self._own[folder] = [ValuesFile(p) for p in own_values(folder)]
            hit = next(((v, n) for v in own if (n := v.get(names[k + 1:] + path)) is not None), None)
        if hit is None:
            return None
        v, node = hit
        return v.span(node)

    def in_range(self, template: str, at: int, action: str, rendered: str, keys: bool = False) -> Span | None:
        """`{{ $key }}` / `{{ $value }}` of a `range $key, $value := .Values.a.b` over a map of flags
        (rockofox/helm-llama-cpp's `llama.args`): the key or the value it wrote, in that map."""
        found = enclosing_range(template, at)
        if found is None:
            return None
        path, key_var, value_var = found
        word = action.strip().split("|")[0].strip()
        hit = self.node(path)
        if hit is None or word not in (key_var, value_var) or (keys and word != key_var):
            return None
        v, node = hit
        text = rendered.strip().strip("\"'")
        if isinstance(node, MappingNode):
            pairs = [(k, x) for k, x in node.value if isinstance(k, ScalarNode)]
            if word == key_var:
                hits = [k for k, _ in pairs if str(k.value) == text]
            else:
                hits = [x for _, x in pairs if isinstance(x, ScalarNode) and str(x.value) == text]
        elif isinstance(node, SequenceNode) and word == value_var:
            hits = [x for x in node.value if isinstance(x, ScalarNode) and str(x.value) == text]
        else:
            return None
        return v.span(hits[0]) if len(hits) == 1 else None

    def scope(self, off: int) -> list[ValuesFile] | None:
        """A kustomize build: the files that may have written the rendered resource at off: those that
        define it (its kind, and its name or one kustomize prefixed / suffixed) and the patches that name
        no resource (a JSON patch); None where no file defines it, or no build."""
        doc = next(((kind, name) for start, kind, name in reversed(self._docs) if start <= off), None)
        if doc is None:
            return None
        kind, name = doc
        if not any(k == kind and n and n in name for v in self.files for k, n in v.resources):
            return None
        return [v for v in self.files if not v.resources or any(k == kind and n and n in name for k, n in v.resources)]

    def by_text(self, text: str, among: list[ValuesFile] | None = None) -> Span | None:
        """The one scalar in the highest-precedence values file that holds `text` exactly (a kustomize
        build: of the files that may have written the resource, `among`)."""
        text = text.strip()
        if len(text) > 1 and text[0] == text[-1] and text[0] in "\"'":
            text = text[1:-1]
        if not text.strip():
            return None
        for v in among or self.files:  # a kustomization's files come patches first (kustomize.kustomization_tree)
            nodes = v.scalars.get(text, [])
            if len(nodes) == 1:
                return v.span(nodes[0])
            if nodes:
                return None
        return None


def _resources(rendered: str) -> list[tuple[int, str, str]]:
    """(offset, kind, name) of each document of `kustomize build` output (plain block YAML, `---` between)."""
    starts = [0] + [m.end() for m in _DOC_START.finditer(rendered)]
    out = []
    for k, a in enumerate(starts):
        b = starts[k + 1] if k + 1 < len(starts) else len(rendered)
        chunk = rendered[a:b]
        kind, name = _KIND.search(chunk), _NAME.search(chunk)
        if kind and name:
            out.append((a, kind.group(1), name.group(1)))
    return out
