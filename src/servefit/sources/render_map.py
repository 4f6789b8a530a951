"""Mapping a span in rendered output (`helm template`, `kustomize build`) back to the file a user
edits.

A character that came from a template's literal text (render_match.py found the template line
that wrote its line) points there. One that came from an action reading a single `.Values.a.b`
points at that key's value in the highest-precedence values file that sets it
(render_values.py). Lines that no template line writes (`toYaml` blocks, a kustomize build)
point at the values file where their text is set exactly once. Anything else points at the
template action or line, and findings there carry a note saying the value was not traced to one
values line.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from servefit.core import GpuHint, LaunchSite, Span, Token
from servefit.sources.render_match import PLAIN, VALUES_REF, TemplateMatch
from servefit.sources.render_values import ValuesLookup
from servefit.sources.rendered import at_top
from servefit.sources.text import LineIndex


class Mapper:
    """Maps spans of one render (its text) back to the chart's templates and values files."""

    def __init__(self, chart: str, rendered: str, values: list[str], virtual: str,
                 fallback: tuple[str, str] | None = None, scoped: bool = False) -> None:
        # a kustomize build: `values` are its files, patches first; text is traced within the files that may
        # have written the rendered resource (its kind and name), the first that holds it, where it is written once
        self.scoped = scoped
        self.virtual = virtual
        self.fallback = fallback  # (file, note) for what no template or values file explains
        self.text = rendered
        self.li = LineIndex(rendered, "")
        self.values = ValuesLookup(values, rendered, scoped)
        self.match = TemplateMatch(chart, rendered, self.li, self.values)
        self.notes: dict[tuple[str, int, int], str] = {}

    def span(self, span: Span) -> Span:
        if span.start < 0 or span.end > len(self.text):
            return span
        section = self.match.section(span.start)
        tpl = self.match.template(section) if section else None
        line = self.li.line_of(span.start) - 1
        hit = self.match.matched.get(line)
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
                key = self.values.in_range(tpl_.li.text, tl.start + tl.parts[nxt][1], tl.parts[nxt][3],
                                           self.text[line_start + content + gs:line_start + content + ge], keys=True)
                if key is not None:
                    return key
            for g, (kind, _a, _b, action) in enumerate(tl.parts):
                if g != pick:
                    continue
                gs, ge = groups[g]
                if kind == "lit":
                    off = tl.start + tl.parts[g][1] + (rel - gs)
                    return tpl_.li.span(off, off + min(span.end - span.start, ge - rel))
                ref = VALUES_REF.findall(action)
                if PLAIN.match(action):
                    hit_v = self.values.by_path(ref[0].lstrip(".").split("."), self.match.chains.get(section or "", []))
                    if hit_v is not None:
                        return hit_v
                else:  # a range variable, a helper: the value is traced when one values line holds it
                    hit_v = self.values.in_range(tpl_.li.text, tl.start + tl.parts[g][1], action,
                                                 self.text[line_start + content + gs:line_start + content + ge]) \
                        or self.values.by_text(self.text[span.start:span.end])
                    if hit_v is not None:
                        return hit_v
                a, b = tl.start + tl.parts[g][1], tl.start + tl.parts[g][2]
                return self._note(tpl_.li.span(a, b),
                                  f"set by `{tpl_.li.text[a:b]}` in this template; not traced to one values line")
        value = self.text[span.start:span.end]
        unique = self.values.by_text(value, self.values.scope(span.start))
        if unique is not None:
            return unique
        if tpl is None:
            if self.fallback is None:
                return span
            path, note = self.fallback
            return self._note(at_top(path), note)
        near = self.match.near(line)
        at = tpl.li.span(near, near) if near is not None else tpl.li.span(0, 0)
        return self._note(at, "rendered from this template (toYaml or a computed value); not traced to one "
                              "values line")

    def site(self, site: LaunchSite) -> None:
        """Every span the site carries, mapped in place; the site's file and line become those of
        its command in the template."""
        line = min(max(site.line - 1, 0), len(self.li.starts) - 1)
        section = self.match.section(self.li.starts[line])
        tpl = self.match.template(section) if section else None
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
        at = self.span(s.skip(k))
        tpl = self.span(s)
        if self.scoped and tpl.file not in (self.virtual, self.fallback[0] if self.fallback else None) \
                and tpl.end - tpl.start == len(tok.text) and tpl.line == tpl.end_line:
            # a kustomize build copies the word as written: the value is where the word is, past its `=`
            return tpl.skip(k)
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
