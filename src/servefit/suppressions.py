"""Suppressions in each file type's own comment form, and the findings about them.

    vllm serve ... --gpu-memory-utilization 0.97   # servefit: ignore[VLLM017] shared node, measured
    # servefit: ignore[VLLM019] batch jobs only          (the line above the finding)
    # servefit: file-ignore[SF001] values come from CI
    metadata: {annotations: {servefit.io/ignore-VLLM003: "reviewed: long-context pod"}}   (k8s object)

A reason is required unless the configuration says `require-reason = false`. A suppression that
silences nothing is itself a finding (SF010), like ruff's unused-noqa.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from servefit.core import Finding, Span
from servefit.rules.catalog import finding
from servefit.rules.registry import rule

DIRECTIVE = re.compile(r"(?:#|;|//)\s*servefit:\s*(ignore|file-ignore)\[([A-Za-z0-9_,\s-]+)\]\s*(.*?)\s*$")
ANNOTATION = "servefit.io/ignore-"


@dataclass
class Suppression:
    """One `servefit: ignore[...]` comment, file-ignore or k8s annotation: the codes it silences, its reason
    and what it covers; the codes it did silence are recorded, so an unused one is reported (SF010)."""

    file: str
    line: int
    col: int
    kind: str  # ignore | file-ignore | annotation
    codes: list[str]
    reason: str
    applies_to: set[int] = field(default_factory=set)  # lines it covers ("ignore")
    site: str = ""  # for annotations: the object's server identity
    files: frozenset[str] = frozenset()  # for annotations: the files that server's findings are in
    used: set[str] = field(default_factory=set)

    def covers(self, f: Finding) -> list[str]:
        hit = [c for c in self.codes if f.code.startswith(c)]
        if not hit:
            return []
        if self.kind == "file-ignore":
            return hit if f.span is not None and f.span.file == self.file else []
        if self.kind == "annotation":  # server names repeat across files: the file must match too
            in_files = f.span is None or f.span.file in (self.files or {self.file})
            return hit if f.site and f.site == self.site and in_files else []
        return hit if f.span is not None and f.span.file == self.file and f.span.line in self.applies_to else []


def scan_text(file: str, text: str) -> list[Suppression]:
    """Directives in one file's comments. A directive on a line of its own covers the next line;
    a trailing one covers its own line."""
    out: list[Suppression] = []
    if "servefit:" not in text:
        return out
    lines = text.splitlines()
    for i, line in enumerate(lines, start=1):
        m = DIRECTIVE.search(line)
        if not m:
            continue
        kind, codes, reason = m.group(1), m.group(2), m.group(3)
        own_line = line[: m.start()].strip() == ""
        covers = {i + 1} if own_line else {i}
        out.append(Suppression(file=file, line=i, col=m.start() + 1, kind=kind,
                               codes=[c.strip().upper() for c in codes.split(",") if c.strip()],
                               reason=reason.lstrip("-—: ").strip(), applies_to=covers))
    return out


def from_annotations(file: str, site: str, annotations: dict[str, str], line: int,
                     files: frozenset[str] = frozenset()) -> list[Suppression]:
    out = []
    for key, reason in annotations.items():
        if key.startswith(ANNOTATION):
            out.append(Suppression(file=file, line=line, col=1, kind="annotation",
                                   codes=[key[len(ANNOTATION):].upper()], reason=str(reason or "").strip(), site=site,
                                   files=files | {file}))
    return out


@rule("SF010", "SF011")
def apply(findings: list[Finding], sups: list[Suppression], require_reason: bool = True) -> tuple[list[Finding], list[Finding]]:
    """(findings that remain, findings about the suppressions themselves)."""
    active = []
    meta: list[Finding] = []
    for s in sups:
        span = Span(s.file, s.line, s.col, s.line, s.col + 1)
        if require_reason and not s.reason:
            meta.append(finding("SF011", f"suppression of {', '.join(s.codes)} gives no reason; it is not applied "
                                         "(write the reason after the directive)", span=span))
            continue
        active.append(s)
    kept = []
    for f in findings:
        hit = False
        for s in active:
            codes = s.covers(f)
            if codes:
                s.used.update(codes)
                hit = True
        if not hit:
            kept.append(f)
    for s in active:
        unused = [c for c in s.codes if c not in s.used]
        if unused:
            meta.append(finding("SF010", f"unused suppression: no {', '.join(unused)} finding "
                                         f"{'in this file' if s.kind == 'file-ignore' else 'here'}",
                                span=Span(s.file, s.line, s.col, s.line, s.col + 1)))
    return kept, meta
