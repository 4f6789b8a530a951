"""What a render (a helm chart, a kustomize build) adds to a lint run: its servers and findings,
with every span mapped back to the lines a user edits, and what it replaces.

Shared by helm_render.py and kustomize.py, so neither depends on the other.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from servefit.core import Finding, LaunchSite, Span

TIMEOUT_S = 60  # for `helm template` and `kustomize build` alike


@dataclass
class Rendered:
    """What rendering added to a lint run, and what it replaces."""

    sites: list[LaunchSite] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    charts: list[str] = field(default_factory=list)  # chart directories handled (rendered or reported)
    values_files: set[str] = field(default_factory=set)  # their sites come from the render now
    notes: dict[tuple[str, int, int], str] = field(default_factory=dict)  # span -> note for its findings


def at_top(path: str) -> Span:
    """The start of a file: where a finding about the whole chart or kustomization points."""
    return Span(path, 1, 1, 1, 1, 0, 0)


def adopt(out: Rendered, result: Any, mapper: Any, label: str | None, how: str,
          own: list[str] | None = None) -> None:
    """The servers and findings of rendered manifests, with spans mapped back to the lines a user
    edits (values files, patches) and each server named after what rendered it (`own`: the files
    that configure a helm render alone)."""
    for site in result.sites:
        mapper.site(site)
        if label:
            site.name = f"{site.name} ({label})"
        site.workload.rendered = how
        site.workload.render_own = list(own or [])
        out.sites.append(site)
    _source_directives(result.sites)
    for f in result.findings:
        if f.span is not None:
            f.span = mapper.span(f.span)
        out.findings.append(f)
    out.notes.update(mapper.notes)


def _source_directives(sites: list[Any]) -> None:
    """`# servefit:` directives written in the file a rendered server maps back to: kustomize
    drops comments, so a directive above an image-started Ollama server was lost in the build."""
    from servefit.safe_io import read_text
    from servefit.sources.hints import directives, for_line
    from servefit.sources.text import LineIndex

    by_file: dict[str, list[Any]] = {}
    for site in sites:
        if not site.directives and os.path.isfile(site.file):
            by_file.setdefault(site.file, []).append(site)
    for path, group in by_file.items():
        try:
            text = read_text(path, 8 << 20)
        except (OSError, UnicodeDecodeError):
            continue
        found = directives(text, LineIndex(text, path).span) if "servefit:" in text else []
        lines = sorted({s.line for s in group})
        for site in group if found else ():
            site.directives = for_line(found, site.line, lines)
