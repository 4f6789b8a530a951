"""The chart a named file belongs to: `servefit lint values.yaml` (a pre-commit hook passes the
files it changed) or `servefit estimate templates/deployment.yaml` is about the chart that file
is part of, so the chart is rendered as when its directory is linted; a named values file is the
values set it is rendered with."""

from __future__ import annotations

import os

CHART_FILE = "Chart.yaml"


def chart_of(path: str) -> str | None:
    """The chart directory holding `path` (Chart.yaml with templates/ in its folder or up to two
    folders above: `templates/`, `templates/sub/`), or None."""
    d = os.path.dirname(os.path.abspath(path))
    for _ in range(3):
        if os.path.isfile(os.path.join(d, CHART_FILE)) and os.path.isdir(os.path.join(d, "templates")):
            rel = os.path.relpath(d, os.path.dirname(os.path.abspath(path)))
            return os.path.normpath(os.path.join(os.path.dirname(path), rel))
        d = os.path.dirname(d)
    return None


def scope(named: list[str], walked: list[str]) -> tuple[list[str], list[str] | None]:
    """(the Chart.yaml of each chart a named file belongs to that the walk did not reach, the
    named values files to render with): values files count only when every named path is a file
    (a directory's charts render with their own values sets)."""
    files = [p for p in named if os.path.isfile(p)]
    have = {os.path.normpath(w) for w in walked}
    roots: list[str] = []
    values: list[str] = []
    for p in files:
        chart = chart_of(p)
        if chart is None:
            continue
        root = os.path.join(chart, CHART_FILE)
        if os.path.normpath(root) not in have and root not in roots:
            roots.append(root)
        in_templates = os.path.normpath(p).startswith(os.path.normpath(os.path.join(chart, "templates")) + os.sep)
        if not in_templates and os.path.basename(p) != CHART_FILE and p.endswith((".yaml", ".yml")):
            values.append(p)
    return roots, (values if values and len(files) == len(named) else None)
