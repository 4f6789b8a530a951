"""Mapping a span in `helm template` output back to the file a user edits.

Helm marks each rendered document with `# Source: <chart>/templates/<file>`. Each rendered line
is matched to the template line that wrote it (the template line as a pattern: its literal text
exact, each `{{ }}` action any text; template lines are tried in order from the last match, as
Helm writes them). A character that came from the template's literal text points there. One
that came from an action reading a single `.Values.a.b` points at that key's value in the
highest-precedence values file that sets it. Lines that no template line writes (`toYaml`
blocks) point at the values file where their text is set exactly once. Anything else points at
the template action or line, and findings there carry a note saying the value was not traced
to one values line.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from servefit.core import GpuHint, LaunchSite, Span, Token
from servefit.sources.render_patterns import (
    TemplateLine,
    TemplatePattern,
    enclosing_range,
    line_patterns,
    pinned,
)
from servefit.sources.text import LineIndex

_SOURCE = re.compile(r"^# Source: (.+)$", re.M)
_VALUES_REF = re.compile(r"\.Values((?:\.[A-Za-z_][\w-]*)+)")
# an action that writes one values key as it is (quoted or not, with a default)
_PLAIN = re.compile(r"^\s*\.Values(?:\.[A-Za-z_][\w-]*)+\s*(?:\|\s*(?:quote|squote|toString|trim|default\s+\S+)\s*)*$")


class Mapper:
    """Maps spans of one render (its text) back to the chart's templates and values files."""

    def __init__(self, chart: str, rendered: str, values: list[str], virtual: str,
                 fallback: tuple[str, str] | None = None, scoped: bool = False) -> None:
        self.chart = chart
        # a kustomize build: `values` are its files, patches first; text is traced within the files that may
        # have written the rendered resource (its kind and name), the first that holds it, where it is written once
        self.scoped = scoped
        self.virtual = virtual
        self.fallback = fallback  # (file, note) for what no template or values file explains
        self.text = rendered
        self.li = LineIndex(rendered, "")
        self.values = [_Values(v) for v in values]
        self.templates: dict[str, TemplatePattern | None] = {}
        self.chains: dict[str, list[tuple[str, str]]] = {}  # a subchart's Source -> (name, folder) from the umbrella
        self._own: dict[str, list[_Values]] = {}  # a subchart folder's own values files
        self.notes: dict[tuple[str, int, int], str] = {}
        self._matched: dict[int, tuple[TemplatePattern, TemplateLine, re.Match[str], int] | None] = {}
        self._sections = [(m.start(), m.group(1).strip()) for m in _SOURCE.finditer(rendered)]
        self._docs = _resources(rendered) if scoped else []
        self._match_all()

    # ------------------------------------------------------------------ public
    def span(self, span: Span) -> Span:
        if span.start < 0 or span.end > len(self.text):
            return span
        section = self._section(span.start)
        tpl = self._template(section) if section else None
        line = self.li.line_of(span.start) - 1
        hit = self._matched.get(line)
        line_start = self.li.starts[line]
        if hit is not None:
            tpl_, tl, m, content = hit
            rel = span.start - (line_start + content)
            groups = [m.span(g + 1) for g in range(len(tl.parts))]
            pick = next((g for g, (gs, ge) in enumerate(groups) if gs <= rel < ge),
                        next((g for g, (gs, ge) in reversed(list(enumerate(groups))) if gs <= rel <= ge), None))
            nxt = pick + 1 if pick is not None and pick + 1 < len(tl.parts) else None
            if pick is not None and nxt is not None and tl.parts[pick][0] == "lit" and tl.parts[nxt][0] == "act" \
                    and span.end >= line_start + content + groups[nxt][1]:
                # a flag written `--{{ $key }}` in a range over a values map: the map's key
                gs, ge = groups[nxt]
                key = self._in_range(tpl_.li.text, tl.start + tl.parts[nxt][1], tl.parts[nxt][3],
                                     self.text[line_start + content + gs:line_start + content + ge], section, keys=True)
                if key is not None:
                    return key
            for g, (kind, _a, _b, action) in enumerate(tl.parts):
                if g != pick:
                    continue
                gs, ge = groups[g]
                if kind == "lit":
                    off = tl.start + tl.parts[g][1] + (rel - gs)
                    return tpl_.li.span(off, off + min(span.end - span.start, ge - rel))
                ref = _VALUES_REF.findall(action)
                if _PLAIN.match(action):
                    hit_v = self._by_path(ref[0].lstrip(".").split("."), section)
                    if hit_v is not None:
                        return hit_v
                else:  # a range variable, a helper: the value is traced when one values line holds it
                    hit_v = self._in_range(tpl_.li.text, tl.start + tl.parts[g][1], action,
                                           self.text[line_start + content + gs:line_start + content + ge], section) \
                        or self._by_text(self.text[span.start:span.end])
                    if hit_v is not None:
                        return hit_v
                a, b = tl.start + tl.parts[g][1], tl.start + tl.parts[g][2]
                return self._note(tpl_.li.span(a, b),
                                  f"set by `{tpl_.li.text[a:b]}` in this template; not traced to one values line")
        value = self.text[span.start:span.end]
        unique = self._by_text(value, self._scope(span.start))
        if unique is not None:
            return unique
        if tpl is None:
            if self.fallback is None:
                return span
            path, note = self.fallback
            return self._note(Span(path, 1, 1, 1, 1, 0, 0), note)
        near = self._near(line)
        at = tpl.li.span(near, near) if near is not None else tpl.li.span(0, 0)
        return self._note(at, "rendered from this template (toYaml or a computed value); not traced to one "
                              "values line")

    def site(self, site: LaunchSite) -> None:
        """Every span the site carries, mapped in place; the site's file and line become those of
        its command in the template."""
        line = min(max(site.line - 1, 0), len(self.li.starts) - 1)
        section = self._section(self.li.starts[line])
        tpl = self._template(section) if section else None
        for f in dataclasses.fields(site):
            setattr(site, f.name, self._walk(getattr(site, f.name)))
        spans = [t.span for t in site.argv if t.span is not None]
        img = site.image_span
        if not spans and img is not None and img.file != self.virtual and \
                (self.fallback is None or img.file != self.fallback[0]):
            spans = [img]  # a server its image starts (ollama/ollama): where the image is written
        # the template's line, else the first word traced to a file of the user's (a kustomize build: words that
        # several resources share, `vllm`, map to none, so the kustomization is the last resort)
        fallback = self.fallback[0] if self.fallback is not None else None
        first = next((s for s in spans if tpl is not None and s.file == tpl.path), None) or \
            next((s for s in spans if s.file not in (fallback, self.virtual)), spans[0] if spans else None)
        if first is not None:
            site.file, site.line = first.file, first.line
        elif tpl is not None:
            site.file, site.line = tpl.path, 1
        elif self.fallback is not None:
            site.file, site.line = self.fallback[0], 1

    # ------------------------------------------------------------------ matching
    def _match_all(self) -> None:
        bounds = [s for s, _ in self._sections] + [len(self.text)]
        for (start, source), end in zip(self._sections, bounds[1:], strict=False):
            tpl = self._template(source)
            if tpl is None:
                continue
            cursor = 0
            first = self.li.line_of(start)  # the line after "# Source:"
            last = self.li.line_of(max(end - 1, start))
            for ln in range(first, last):
                a = self.li.starts[ln]
                b = self.li.starts[ln + 1] - 1 if ln + 1 < len(self.li.starts) else len(self.text)
                raw = self.text[a:b].rstrip("\r")
                stripped = raw.strip()
                if not stripped or stripped == "---" or stripped.startswith("#"):
                    continue
                content = len(raw) - len(raw.lstrip())
                found = self._find(tpl, stripped, cursor)
                if found is not None:
                    tl, m = found
                    cursor = tpl.lines.index(tl) + 1  # a position in the pattern list, not a line number
                    self._matched[ln] = (tpl, tl, m, content)

    def _find(self, tpl: TemplatePattern, text: str, cursor: int) -> tuple[TemplateLine, re.Match[str]] | None:
        """The template line that wrote `text`: a line of plain text equal to it first (an action
        such as `- {{ $x | quote }}` matches any list item), then a line with actions; from the
        cursor on, then from the top (a range loop writes its lines again)."""
        for order in (tpl.lines[cursor:], tpl.lines[:cursor]):
            for literal in (True, False):
                for tl in order:
                    if literal != all(kind == "lit" for kind, *_ in tl.parts):
                        continue
                    m = tl.regex.fullmatch(text)
                    if m is not None and not self._consistent(tl, m):
                        m = pinned(tl, self._known(tl)).fullmatch(text)
                    if m is not None and self._consistent(tl, m):
                        return tl, m
        return None

    def _known(self, tl: TemplateLine) -> list[str | None]:
        """Per part of the line, the value its action writes where one values key says it."""
        out: list[str | None] = []
        for kind, _a, _b, action in tl.parts:
            node = self._node(_VALUES_REF.findall(action)[0].lstrip(".").split(".")) \
                if kind == "act" and _PLAIN.match(action) else None
            out.append(str(node[1].value) if node is not None and isinstance(node[1], ScalarNode) else None)
        return out

    def _consistent(self, tl: TemplateLine, m: re.Match[str]) -> bool:
        """An action reading one values key must have written that key's value."""
        for g, value in enumerate(self._known(tl)):
            if value is not None and m.group(g + 1).strip().strip("\"'") != value:
                return False
        return True

    def _template(self, source: str) -> TemplatePattern | None:
        if source in self.templates:
            return self.templates[source]
        path = self._source_path(source.split("/"))
        tpl = None
        if path and os.path.isfile(path):
            from servefit.safe_io import read_text

            try:
                text = read_text(path, 8 << 20)
            except OSError:
                self.templates[source] = None
                return None
            tpl = TemplatePattern(path, LineIndex(text, path), line_patterns(text))
        self.templates[source] = tpl
        return tpl

    def _source_path(self, parts: list[str]) -> str:
        """The file a `# Source:` path names: `<chart>/charts/<sub>/...` is a subchart, which a
        `repository: file://...` dependency keeps in a folder of the repository, not in charts/."""
        from servefit.sources.render import absent_dependencies

        chart = self.chart
        rest = parts[1:]
        chain: list[tuple[str, str]] = []
        for _ in range(4):  # umbrella -> subchart -> its own subchart
            if len(rest) < 3 or rest[0] != "charts" or os.path.isdir(os.path.join(chart, "charts", rest[1])):
                break
            folder = absent_dependencies(chart)[1].get(rest[1])
            if folder is None:
                break
            chain.append((rest[1], folder))
            chart, rest = folder, rest[2:]
        self.chains["/".join(parts)] = chain
        return os.path.normpath(os.path.join(chart, *rest)) if rest else ""  # chart ".": templates/x, not ./templates/x

    def _section(self, off: int) -> str | None:
        current = None
        for start, source in self._sections:
            if start > off:
                break
            current = source
        return current

    def _near(self, line: int) -> int | None:
        """The template offset just after the last matched line before `line` (a toYaml block
        is written by the action that follows it)."""
        for ln in range(line - 1, -1, -1):
            hit = self._matched.get(ln)
            if hit is not None:
                tpl, tl, _, _ = hit
                nxt = tl.index + 1
                starts = tpl.li.starts
                return starts[nxt] if nxt < len(starts) else tl.start
        return None

    # ------------------------------------------------------------------ values
    def _node(self, path: list[str]) -> tuple[_Values, Node] | None:
        for v in self.values:
            node = v.get(path)
            if node is not None:
                return v, node
        return None

    def _by_path(self, path: list[str], section: str | None = None) -> Span | None:
        """The values line a `.Values.a.b` sets: a subchart's template reads the umbrella's values
        under the subchart's name (`vllm.a.b`), else the subchart's own values.yaml."""
        chain = self.chains.get(section or "", [])
        names = [n for n, _ in chain]
        hit = self._node(names + path)
        for k, (_, folder) in enumerate(chain):
            if hit is not None:
                break
            own = self._own.get(folder)
            if own is None:
                own = self._own[folder] = [_Values(p) for p in _own_values(folder)]
            hit = next(((v, n) for v in own if (n := v.get(names[k + 1:] + path)) is not None), None)
        if hit is None:
            return None
        v, node = hit
        return v.span(node)

    def _in_range(self, template: str, at: int, action: str, rendered: str, section: str | None,
                  keys: bool = False) -> Span | None:
        """`{{ $key }}` / `{{ $value }}` of a `range $key, $value := .Values.a.b` over a map of flags
        (rockofox/helm-llama-cpp's `llama.args`): the key or the value it wrote, in that map."""
        found = enclosing_range(template, at)
        if found is None:
            return None
        path, key_var, value_var = found
        word = action.strip().split("|")[0].strip()
        hit = self._node(path)
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

    def _scope(self, off: int) -> list[_Values] | None:
        """A kustomize build: the files that may have written the rendered resource at off: those that
        define it (its kind, and its name or one kustomize prefixed / suffixed) and the patches that name
        no resource (a JSON patch); None where no file defines it, or no build."""
        doc = next(((kind, name) for start, kind, name in reversed(self._docs) if start <= off), None)
        if doc is None:
            return None
        kind, name = doc
        if not any(k == kind and n and n in name for v in self.values for k, n in v.resources):
            return None
        return [v for v in self.values if not v.resources or any(k == kind and n and n in name for k, n in v.resources)]

    def _by_text(self, text: str, among: list[_Values] | None = None) -> Span | None:
        """The one scalar in the highest-precedence values file that holds `text` exactly (a kustomize
        build: of the files that may have written the resource, `among`)."""
        text = text.strip()
        if len(text) > 1 and text[0] == text[-1] and text[0] in "\"'":
            text = text[1:-1]
        if not text.strip():
            return None
        for v in among or self.values:  # a kustomization's files come patches first (render._tree)
            nodes = v.scalars.get(text, [])
            if len(nodes) == 1:
                return v.span(nodes[0])
            if nodes:
                return None
        return None

    def _note(self, span: Span, note: str) -> Span:
        self.notes[(span.file, span.start, span.end)] = note
        return span

    def _value_span(self, tok: Token) -> Span | None:
        """Where the value of a `--flag={{ .Values.x }}` word is written: the values line, when the
        value (not the flag) came from one; the word itself maps to the template's literal."""
        s = tok.span
        k = tok.text.find("=") + 1
        if s is None or s.file != self.virtual or not tok.text.startswith("-") or k <= 1 or k >= len(tok.text) \
                or s.line != s.end_line or s.end - s.start != len(tok.text):
            return tok.value_span
        at = self.span(Span(s.file, s.line, s.col + k, s.end_line, s.end_col, s.start + k, s.end))
        tpl = self.span(s)
        if self.scoped and tpl.file not in (self.virtual, self.fallback[0] if self.fallback else None) \
                and tpl.end - tpl.start == len(tok.text) and tpl.line == tpl.end_line:
            # a kustomize build copies the word as written: the value is where the word is, past its `=`
            return Span(tpl.file, tpl.line, tpl.col + k, tpl.end_line, tpl.end_col, tpl.start + k, tpl.end)
        return at if at.file not in (tpl.file, self.virtual) else tok.value_span

    def _walk(self, obj: Any) -> Any:
        if isinstance(obj, Span):
            return self.span(obj) if obj.file == self.virtual else obj
        if isinstance(obj, Token):
            if obj.span is None:
                return obj
            return Token(obj.text, self._walk(obj.span), self._value_span(obj))
        if isinstance(obj, GpuHint):
            return dataclasses.replace(obj, span=self._walk(obj.span)) if obj.span is not None else obj
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):  # Workload, Exposure, ...
            import copy

            new = copy.copy(obj)
            for f in dataclasses.fields(obj):
                object.__setattr__(new, f.name, self._walk(getattr(obj, f.name)))
            return new
        if isinstance(obj, list):
            return [self._walk(x) for x in obj]
        if isinstance(obj, tuple):
            return tuple(self._walk(x) for x in obj)
        if isinstance(obj, dict):
            return {k: self._walk(x) for k, x in obj.items()}
        return obj


_DOC_START = re.compile(r"^---[ \t]*$", re.M)
_KIND = re.compile(r"^kind:[ \t]*(\S+)", re.M)
_NAME = re.compile(r"^metadata:[ \t]*\n(?:[ \t]+.*\n)*?[ \t]+name:[ \t]*[\"']?([^\s\"']+)", re.M)


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


def _own_values(folder: str) -> list[str]:
    return [os.path.normpath(os.path.join(folder, n)) for n in ("values.yaml", "values.yml")
            if os.path.isfile(os.path.join(folder, n))]


class _Values:
    """One values file: its nodes by key path and its scalars by text."""

    def __init__(self, path: str) -> None:
        from servefit.sources.base import FileCtx
        from servefit.sources.yamlpos import Y, YamlProblem, compose_all

        self.path = path
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
        # (kind, metadata.name) of each document: a kustomize build's resources (Mapper._scope)
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
