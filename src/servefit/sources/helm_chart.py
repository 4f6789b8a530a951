"""The Helm charts among the linted files, and what each is rendered with: its values sets and
its dependencies (vendored in charts/, or a folder of the repository). No helm is run here
(helm_render.py runs it); the template matching (render_match.py) follows the same dependencies.

Values sets, one render each:
- `--values FILE` given: that list, in order, as Helm takes it (later files win);
- otherwise each values file the repository pairs with the chart (values-prod.yaml,
  values.prod.yaml, prod-values.yaml, prod.values.yaml in the chart directory, or
  values*.yaml / <chart>-values*.yaml beside it), one render each over the chart's values.yaml;
- otherwise the chart's own values.yaml.
"""

from __future__ import annotations

import os
import re

from servefit.sources.render_scope import CHART_FILE

_PAIRED = re.compile(r"^(?:values[-._].+|.+[-._]values(?:[-._].+)?)\.ya?ml$", re.I)


def find_charts(files: list[str]) -> list[str]:
    """Chart directories (Chart.yaml with a templates/ directory or dependencies, not a library
    chart) among the linted files; a subchart (under another chart's charts/, or a folder another
    chart takes as `repository: file://...`) is rendered with its parent, not alone."""
    dirs = sorted({os.path.dirname(f) or "." for f in files if os.path.basename(f) == CHART_FILE})
    dirs = [d for d in dirs if (os.path.isdir(os.path.join(d, "templates")) or _dependencies(d)) and not _library(d)]
    taken = {os.path.normpath(sub) for p in dirs for sub in absent_dependencies(p)[1].values()}
    return [d for d in dirs if not any(d.startswith(os.path.join(p, "charts") + os.sep) for p in dirs)
            and os.path.normpath(d) not in taken]


def _library(chart: str) -> bool:
    """A library chart (`type: library`) renders nothing on its own: helm refuses to template it;
    the charts that use it render its helpers."""
    try:
        with open(os.path.join(chart, CHART_FILE), encoding="utf-8", errors="replace") as fh:
            return re.search(r"^type:\s*['\"]?library\b", fh.read(1 << 16), re.M) is not None
    except OSError:
        return False


def values_sets(chart: str, given: list[str] | None) -> list[list[str]]:
    """The values files of each render (the chart's values.yaml is implied, as in Helm)."""
    if given:
        return [list(given)]
    name = os.path.basename(os.path.abspath(chart))
    paired = [os.path.normpath(os.path.join(chart, f)) for f in sorted(os.listdir(chart)) if _PAIRED.match(f)]
    parent = os.path.dirname(os.path.abspath(chart))
    beside = [os.path.join(os.path.dirname(chart) or ".", f) for f in sorted(os.listdir(parent))
              if re.match(rf"^(?:values|{re.escape(name)}[-._]values)([-._].+)?\.ya?ml$", f, re.I)
              and os.path.isfile(os.path.join(parent, f))]
    if beside and sum(os.path.isfile(os.path.join(parent, d, "Chart.yaml")) for d in os.listdir(parent)
                      if os.path.isdir(os.path.join(parent, d))) > 1:
        beside = []  # several charts share the directory: which one a file belongs to is not clear
    return [[f] for f in paired + beside] or [[]]



def absent_dependencies(chart: str) -> tuple[list[str], dict[str, str]]:
    """(the dependencies Chart.yaml names that are not vendored in charts/, of which those it takes
    from a folder of the same repository, `repository: file://../common` -> that folder): helm
    template refuses the chart without them; servefit never downloads, but copies a folder's chart
    as `helm dependency build` would."""
    deps = _dependencies(chart)
    sub = os.path.join(chart, "charts")
    have = set(os.listdir(sub)) if os.path.isdir(sub) else set()
    absent = [str(d["name"]) for d in deps if d.get("name") and str(d["name"]) not in have
              and not any(h.startswith(f"{d['name']}-") and h.endswith(".tgz") for h in have)]
    local = {}
    for d in deps:
        repo = str(d.get("repository") or "")
        if d.get("name") in absent and repo.startswith("file://"):
            path = os.path.normpath(os.path.join(chart, repo.removeprefix("file://")))
            if os.path.isfile(os.path.join(path, CHART_FILE)):
                local[str(d["name"])] = path
    return absent, local



def _dependencies(chart: str) -> list[dict]:
    import yaml

    from servefit.safe_io import load_yaml

    try:
        meta = load_yaml(os.path.join(chart, "Chart.yaml")) or {}
    except (OSError, ValueError, yaml.YAMLError):
        return []
    deps = meta.get("dependencies") if isinstance(meta, dict) else None
    return [d for d in deps or [] if isinstance(d, dict)]




def own_values(chart: str) -> list[str]:
    """The chart's own values.yaml (or .yml)."""
    return [os.path.normpath(os.path.join(chart, n)) for n in ("values.yaml", "values.yml")
            if os.path.isfile(os.path.join(chart, n))]


def values_paths(chart: str, values: list[str]) -> list[str]:
    """Highest precedence first: the last --values file, ..., the chart's values.yaml."""
    return list(reversed(own_values(chart) + [v for v in values if os.path.isfile(v)]))
