"""A Helm template as one pattern per line (its literal text exact, each `{{ }}` action any
text), to find the template line that wrote each line of `helm template` output (render_match.py)."""

from __future__ import annotations

import dataclasses
import re

from servefit.sources.text import LineIndex

ACTION = re.compile(r"\{\{-?(.*?)-?\}\}")


@dataclasses.dataclass
class TemplateLine:
    """One template line as a pattern."""

    index: int  # 0-based line number in the template
    start: int  # offset of the line's first non-blank character in the template text
    regex: re.Pattern[str]
    parts: list[tuple[str, int, int, str]]  # ("lit" | "act", start, end in the stripped line, action text)
    text: str = ""  # the line as written, without its indentation


def pinned(tl: TemplateLine, known: list[str | None]) -> re.Pattern[str]:
    """The line's pattern with each action whose value is `known` (per part; None: any text)
    matching that value alone (quoted or not): two actions with no text between them
    (`--max-model-len {{ .Values.len }}{{ range .Values.args }}`) are split where the values say,
    not where the shortest match falls."""
    regex = ""
    for (kind, a, b, _), value in zip(tl.parts, known, strict=True):
        if kind == "lit":
            regex += "(" + re.escape(tl.text[a:b]) + ")"
        elif value is not None:
            regex += "([\"']?" + re.escape(value) + "[\"']?)"
        else:
            regex += "(.*?)"
    return re.compile(regex)


@dataclasses.dataclass
class TemplatePattern:
    """One Helm template file as a pattern per line, to map rendered lines back to it."""

    path: str
    li: LineIndex
    lines: list[TemplateLine]


def line_patterns(text: str) -> list[TemplateLine]:
    out: list[TemplateLine] = []
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
    for idx, a in enumerate(starts):
        b = starts[idx + 1] - 1 if idx + 1 < len(starts) else len(text)
        raw = text[a:b].rstrip("\r")
        stripped = raw.strip()
        if "{{" in stripped and not ACTION.sub("", stripped).strip():
            continue  # only actions: control flow, or a block such as toYaml that writes lines of its own
        if not stripped or stripped.startswith("#"):
            continue
        parts: list[tuple[str, int, int, str]] = []
        regex = ""
        pos = 0
        for m in ACTION.finditer(stripped):
            if m.start() > pos:
                parts.append(("lit", pos, m.start(), ""))
                regex += "(" + re.escape(stripped[pos:m.start()]) + ")"
            parts.append(("act", m.start(), m.end(), m.group(1)))
            regex += "(.*?)"
            pos = m.end()
        if pos < len(stripped):
            parts.append(("lit", pos, len(stripped), ""))
            regex += "(" + re.escape(stripped[pos:]) + ")"
        out.append(TemplateLine(idx, a + (len(raw) - len(raw.lstrip())), re.compile(regex), parts, stripped))
    return out


_OPEN = re.compile(r"^\s*(range|if|with|define|block)\b")
_END = re.compile(r"^\s*end\b")
_RANGE_VALUES = re.compile(r"^\s*range\s+(?:(\$\w+)\s*,\s*)?(?:(\$\w+)\s*:=\s*)?\.Values((?:\.[A-Za-z_][\w-]*)+)\s*$")


def enclosing_range(text: str, offset: int) -> tuple[list[str], str | None, str | None] | None:
    """The values list or map a template's text at `offset` is inside of: (its key path, the range's
    key variable, its value variable) of the innermost `range $k, $v := .Values.a.b`, or None."""
    stack: list[str] = []
    for m in ACTION.finditer(text, 0, offset):
        body = m.group(1)
        if _OPEN.match(body):
            stack.append(body)
        elif _END.match(body) and stack:
            stack.pop()
    for body in reversed(stack):
        r = _RANGE_VALUES.match(body)
        if r is not None:
            key, value = (r.group(1), r.group(2)) if r.group(1) else (None, r.group(2))
            return r.group(3).lstrip(".").split("."), key, value
        if body.lstrip().startswith("range"):
            return None
    return None
