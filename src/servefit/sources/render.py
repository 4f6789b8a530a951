"""Rendering what the repository renders before lint reads it: kustomizations are built
(kustomize.py) and Helm charts rendered (helm_chart.py finds them and their values sets,
helm_render.py runs helm), each with the user's own tool, and every span of the output is mapped
back to the file a user edits (render_map.py). This module is the entry point the lint run
(assemble.py) calls; the names below are what callers use.
"""

from __future__ import annotations

import os

from servefit.sources.helm_render import helm_path, render_charts
from servefit.sources.kustomize import KUSTOMIZATIONS, kustomizations
from servefit.sources.render_scope import CHART_FILE
from servefit.sources.rendered import Rendered

__all__ = ["CHART_FILE", "KUSTOMIZATIONS", "Rendered", "charts", "helm_path", "in_chart", "kustomizations"]


def charts(files: list[str], given_values: list[str] | None = None, enabled: bool = True) -> Rendered:
    """Build every kustomization and render every chart among `files`; without the tool, say so once each."""
    out = Rendered()
    kustomizations(files, out, enabled)
    render_charts(files, out, given_values, enabled)
    return out


def in_chart(path: str, chart_dirs: list[str]) -> bool:
    """Whether a linted file lies in one of these charts (its templates are handled by the render)."""
    p = os.path.abspath(path)  # a chart linted from its own folder is "."
    return any(p.startswith(os.path.abspath(c) + os.sep) for c in chart_dirs)
