"""YAML with positions: PyYAML's composer (the C one when libyaml is there) gives nodes whose
marks carry the character index of every scalar, so spans are exact for plain, quoted and
block scalars alike. Only composing is done (no constructors, no tags run); aliases stay shared
nodes (never expanded), `<<` merges are applied on lookup, inputs nested deeply enough to
exhaust the C composer's stack are refused before parsing, and documents whose aliases would
expand past MAX_EXPANDED nodes (a "billion laughs" bomb) are refused after composing, measured
over the shared nodes without expanding them.
"""

from __future__ import annotations

import builtins
import re
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from servefit.core import Span, Token
from servefit.sources.text import Src, align

try:
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - libyaml missing
    _Loader = yaml.SafeLoader

MAX_DEPTH = 200
MAX_EXPANDED = 1_000_000  # nodes after alias expansion
_BRACKETS = re.compile(r"[\[\]{}]")
_DEEP_DASH = re.compile(r"(?:-[ \t]+){48}")
_DEEP_INDENT = re.compile(r"\n {1200}")
MERGE_TAG = "tag:yaml.org,2002:merge"
TEMPLATE = re.compile(r"\{\{-?\s*(?:\.|\$|include|if\b|else|end\b|range|with\b|template|toYaml|tpl|"
                      r"default|required|/\*|-)|\{%-?\s*(?:if|for|set|endif|endfor)\b"
                      r"|%\{~?\s*(?:if|for|else|endif|endfor)\b")  # the last: a Terraform templatefile's directives


class YamlProblem(Exception):
    def __init__(self, message: str, span: Span | None) -> None:
        super().__init__(message)
        self.span = span


def too_deep(text: str) -> bool:
    if text.count("[") + text.count("{") > MAX_DEPTH:
        depth = top = 0
        for m in _BRACKETS.finditer(text):
            depth += 1 if m.group() in "[{" else -1
            top = max(top, depth)
            if top > MAX_DEPTH:
                return True
    return bool(_DEEP_DASH.search(text) or _DEEP_INDENT.search(text))


def is_templated(text: str) -> bool:
    return ("{{" in text or "{%" in text or "%{" in text) and TEMPLATE.search(text) is not None


def compose_all(src: Src) -> list[Node]:
    """Every document's root node (None documents dropped); YamlProblem on bad input."""
    text = src.text
    if too_deep(text):
        raise YamlProblem(f"nested more than {MAX_DEPTH} levels deep; not parsed", src.span(0, 0))
    try:
        docs = [n for n in yaml.compose_all(text, Loader=_Loader) if n is not None]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        span = None
        if mark is not None:
            idx = min(mark.index, len(text))
            span = src.span(idx, min(idx + 1, len(text)))
        msg = " ".join(p for p in (exc.context, exc.problem) if p) or str(exc)
        raise YamlProblem(f"YAML error: {msg}", span) from None
    except (yaml.YAMLError, RecursionError, ValueError) as exc:
        raise YamlProblem(f"YAML error: {exc}", src.span(0, 0)) from None
    if "*" in text and "&" in text:
        size = expanded_size(docs)
        if size > MAX_EXPANDED:
            raise YamlProblem(f"YAML aliases expand to more than {MAX_EXPANDED:,} nodes (an alias bomb, "
                              f"'billion laughs'); not parsed", src.span(0, 0))
    return docs


def expanded_size(docs: list[Node]) -> int:
    """How many nodes the documents would hold with every alias expanded, computed over the
    shared nodes once each (a bomb is measured, never expanded); capped past MAX_EXPANDED. A
    recursive alias (`&a [*a]`, which the composer allows) counts once."""
    memo: dict[int, int] = {}
    visiting: set[int] = set()

    def kids(node: Node) -> list[Node]:
        if isinstance(node, SequenceNode):
            return list(node.value)
        if isinstance(node, MappingNode):
            return [x for kv in node.value for x in kv]
        return []

    total = 0
    for root in docs:
        stack = [root]
        while stack:
            node = stack[-1]
            key = id(node)
            if key in memo:
                stack.pop()
                continue
            children = kids(node)
            if key not in visiting:
                visiting.add(key)
                pending = [c for c in children if id(c) not in memo and id(c) not in visiting]
                if pending:
                    stack.extend(pending)
                    continue
            memo[key] = min(1 + sum(memo.get(id(c), 1) for c in children), MAX_EXPANDED + 1)
            visiting.discard(key)
            stack.pop()
        total += memo.get(id(root), 1)
        if total > MAX_EXPANDED:
            break
    return total


class Y:
    """Node helpers bound to the text the nodes were parsed from."""

    def __init__(self, src: Src) -> None:
        self.src = src
        self.text = src.text

    # ---- structure
    def items(self, node: Node | None, _depth: int = 0) -> list[tuple[str, Node, Node]]:
        """(key, key node, value node) of a mapping, `<<` merges applied (explicit keys win)."""
        if not isinstance(node, MappingNode) or _depth > 16:
            return []
        out: list[tuple[str, Node, Node]] = []
        seen: set[str] = set()
        merged: list[Node] = []
        for k, v in node.value:
            if k.tag == MERGE_TAG or (isinstance(k, ScalarNode) and k.value == "<<" and k.style is None):
                merged.extend(v.value if isinstance(v, SequenceNode) else [v])
                continue
            key = k.value if isinstance(k, ScalarNode) else ""
            if key not in seen:
                seen.add(key)
                out.append((key, k, v))
        for m in merged:
            for key, k, v in self.items(m, _depth + 1):
                if key not in seen:
                    seen.add(key)
                    out.append((key, k, v))
        return out

    def get(self, node: Node | None, *path: str) -> Node | None:
        for key in path:
            if not isinstance(node, MappingNode):
                return None
            found = None
            for k, _, v in self.items(node):
                if k == key:
                    found = v
                    break
            node = found
        return node

    def key_node(self, node: Node | None, key: str) -> Node | None:
        for k, kn, _ in self.items(node):
            if k == key:
                return kn
        return None

    @staticmethod
    def seq(node: Node | None) -> list[Node]:
        return list(node.value) if isinstance(node, SequenceNode) else []

    @staticmethod
    def str(node: Node | None) -> str | None:
        if isinstance(node, ScalarNode):
            return str(node.value)
        return None

    def map(self, node: Node | None) -> dict[builtins.str, Node]:
        return {k: v for k, _, v in self.items(node)}

    # ---- positions
    def _content(self, node: Node) -> tuple[int, int]:
        s, e = node.start_mark.index, node.end_mark.index
        style = getattr(node, "style", None)
        if style in ('"', "'"):
            return s + 1, max(s + 1, e - 1)
        if style in ("|", ">"):
            nl = self.text.find("\n", s, e)
            a = nl + 1 if nl >= 0 else e
            b = e
            while b > a and self.text[b - 1] in "\r\n":
                b -= 1
            return a, b
        return s, e

    def span(self, node: Node) -> Span:
        return self.src.span(node.start_mark.index, node.end_mark.index)

    def line(self, node: Node) -> int:
        return self.src.li.pos(self.src.off(node.start_mark.index))[0]

    def scalar_src(self, node: Node) -> Src:
        """The scalar's value as text whose characters map to the file."""
        value = str(node.value) if isinstance(node, ScalarNode) else ""
        a, b = self._content(node)
        src = self.src
        if self.text[a:b] == value:
            if src.offs is None:
                return Src(value, src.li, base=src.base + a)
            return Src(value, src.li, offs=[src.off(k) for k in range(a, b)] + [src.end_off(b)])
        local = align(value, self.text, a, b)
        return Src(value, src.li, offs=[src.off(k) for k in local[:-1]] + [src.end_off(local[-1])])

    def tok(self, node: Node | None) -> Token | None:
        """A scalar's value with the span of its characters (quotes excluded)."""
        if not isinstance(node, ScalarNode):
            return None
        a, b = self._content(node)
        return Token(str(node.value), self.src.span(a, b))
