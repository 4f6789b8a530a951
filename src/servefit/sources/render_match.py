"""Which template line wrote each line of `helm template` output.

Helm marks each rendered document with `# Source: <chart>/templates/<file>`. Each rendered line
is matched to the template line that wrote it (the template line as a pattern, render_patterns.py:
its literal text exact, each `{{ }}` action any text); template lines are tried in order from the
last match, as Helm writes them. Kept apart from the values lookup (render_values.py) and the span
mapping that uses both (render_map.py).
"""

from __future__ import annotations

import os
import re

from yaml.nodes import ScalarNode

from servefit.sources.render_patterns import TemplateLine, TemplatePattern, line_patterns, pinned
from servefit.sources.render_values import ValuesLookup
from servefit.sources.text import LineIndex

_SOURCE = re.compile(r"^# Source: (.+)$", re.M)
VALUES_REF = re.compile(r"\.Values((?:\.[A-Za-z_][\w-]*)+)")
# an action that writes one values key as it is (quoted or not, with a default)
PLAIN = re.compile(r"^\s*\.Values(?:\.[A-Za-z_][\w-]*)+\s*(?:\|\s*(?:quote|squote|toString|trim|default\s+\S+)\s*)*$")

Match = tuple[TemplatePattern, TemplateLine, re.Match[str], int]  # template, its line, the match, indentation


class TemplateMatch:
    """The rendered text of one render, each of its lines matched to the template line that wrote it."""

    def __init__(self, chart: str, rendered: str, li: LineIndex, values: ValuesLookup) -> None:
        self.chart = chart
        self.text = rendered
        self.li = li
        self.values = values
        self.templates: dict[str, TemplatePattern | None] = {}
        self.chains: dict[str, list[tuple[str, str]]] = {}  # a subchart's Source -> (name, folder) from the umbrella
        self.matched: dict[int, Match | None] = {}  # rendered line (0-based) -> what wrote it
        self._sections = [(m.start(), m.group(1).strip()) for m in _SOURCE.finditer(rendered)]
        self._match_all()

    def section(self, off: int) -> str | None:
        """The `# Source:` path of the rendered document at off."""
        current = None
        for start, source in self._sections:
            if start > off:
                break
            current = source
        return current

    def template(self, source: str) -> TemplatePattern | None:
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

    def near(self, line: int) -> int | None:
        """The template offset just after the last matched line before `line` (a toYaml block
        is written by the action that follows it)."""
        for ln in range(line - 1, -1, -1):
            hit = self.matched.get(ln)
            if hit is not None:
                tpl, tl, _, _ = hit
                nxt = tl.index + 1
                starts = tpl.li.starts
                return starts[nxt] if nxt < len(starts) else tl.start
        return None

    def _match_all(self) -> None:
        bounds = [s for s, _ in self._sections] + [len(self.text)]
        for (start, source), end in zip(self._sections, bounds[1:], strict=False):
            tpl = self.template(source)
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
                    self.matched[ln] = (tpl, tl, m, content)

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
            node = self.values.node(VALUES_REF.findall(action)[0].lstrip(".").split(".")) \
                if kind == "act" and PLAIN.match(action) else None
            out.append(str(node[1].value) if node is not None and isinstance(node[1], ScalarNode) else None)
        return out

    def _consistent(self, tl: TemplateLine, m: re.Match[str]) -> bool:
        """An action reading one values key must have written that key's value."""
        for g, value in enumerate(self._known(tl)):
            if value is not None and m.group(g + 1).strip().strip("\"'") != value:
                return False
        return True

    def _source_path(self, parts: list[str]) -> str:
        """The file a `# Source:` path names: `<chart>/charts/<sub>/...` is a subchart, which a
        `repository: file://...` dependency keeps in a folder of the repository, not in charts/."""
        from servefit.sources.helm_chart import absent_dependencies

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
