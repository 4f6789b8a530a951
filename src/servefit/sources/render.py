"""Rendering Helm charts with the user's own `helm`, so lint reads the manifests the cluster
gets rather than guessing from values files.

A chart is a directory with Chart.yaml and templates/ among the linted files. It is rendered
with `helm template` (local, no repository access: a chart whose dependencies are not vendored
fails to render and says so) once per values set:
- `--values FILE` given: that list, in order, as Helm takes it (later files win);
- otherwise each values file the repository pairs with the chart (values-prod.yaml,
  values.prod.yaml, prod-values.yaml, prod.values.yaml in the chart directory, or
  values*.yaml / <chart>-values*.yaml beside it), one render each over the chart's values.yaml;
- otherwise the chart's own values.yaml.
The rendered manifests are read like any k8s file, then every span is mapped back
(sources/render_map.py): to the values line that set it where that is traceable, else to the
template line, with a note. Without helm, one SF104 per chart says its templates were not
rendered.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

from servefit.core import Finding, LaunchSite
from servefit.rules.catalog import finding

TIMEOUT_S = 60
_PAIRED = re.compile(r"^(?:values[-._].+|.+[-._]values(?:[-._].+)?)\.ya?ml$", re.I)


@dataclass
class Rendered:
    """What rendering added to a lint run, and what it replaces."""

    sites: list[LaunchSite] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    charts: list[str] = field(default_factory=list)  # chart directories handled (rendered or reported)
    values_files: set[str] = field(default_factory=set)  # their sites come from the render now
    notes: dict[tuple[str, int, int], str] = field(default_factory=dict)  # span -> note for its findings


def helm_path() -> str | None:
    return shutil.which("helm")


def find_charts(files: list[str]) -> list[str]:
    """Chart directories (Chart.yaml with a templates/ directory) among the linted files;
    a subchart under another chart's charts/ is rendered with its parent, not alone."""
    dirs = sorted({os.path.dirname(f) or "." for f in files if os.path.basename(f) == "Chart.yaml"})
    dirs = [d for d in dirs if os.path.isdir(os.path.join(d, "templates"))]
    return [d for d in dirs if not any(d.startswith(os.path.join(p, "charts") + os.sep) for p in dirs)]


def values_sets(chart: str, given: list[str] | None) -> list[list[str]]:
    """The values files of each render (the chart's values.yaml is implied, as in Helm)."""
    if given:
        return [list(given)]
    name = os.path.basename(os.path.abspath(chart))
    paired = [os.path.join(chart, f) for f in sorted(os.listdir(chart)) if _PAIRED.match(f)]
    parent = os.path.dirname(os.path.abspath(chart))
    beside = [os.path.join(os.path.dirname(chart) or ".", f) for f in sorted(os.listdir(parent))
              if re.match(rf"^(?:values|{re.escape(name)}[-._]values)([-._].+)?\.ya?ml$", f, re.I)
              and os.path.isfile(os.path.join(parent, f))]
    if beside and sum(os.path.isfile(os.path.join(parent, d, "Chart.yaml")) for d in os.listdir(parent)
                      if os.path.isdir(os.path.join(parent, d))) > 1:
        beside = []  # several charts share the directory: which one a file belongs to is not clear
    return [[f] for f in paired + beside] or [[]]


def render(chart: str, values: list[str], helm: str) -> tuple[str | None, str]:
    """(manifests, "") or (None, the first line of helm's complaint)."""
    name = re.sub(r"[^a-z0-9-]+", "-", os.path.basename(os.path.abspath(chart)).lower()).strip("-") or "release"
    cmd = [helm, "template", name[:53], chart]
    for v in values:
        cmd += ["--values", v]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S,
                              env={**os.environ, "HELM_NO_PLUGINS": "1"}, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, f"helm template did not finish in {TIMEOUT_S} s"
    except OSError as exc:
        return None, f"helm could not run: {exc}"
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        err = next((ln for ln in lines if ln.lower().startswith("error")), lines[0] if lines else "no message")
        return None, err.removeprefix("Error: ")
    return proc.stdout, ""


def charts(files: list[str], given_values: list[str] | None = None, enabled: bool = True) -> Rendered:
    """Render every chart among `files` and read its manifests; without helm, say so once per chart."""
    from servefit.sources import render_map, scan_file

    out = Rendered()
    found = find_charts(files)
    if not found:
        return out
    helm = helm_path() if enabled else None
    for chart in found:
        out.charts.append(chart)
        anchor = _anchor(chart)
        if helm is None:
            why = "rendering is off (--no-render)" if not enabled else "helm is not on PATH"
            out.findings.append(finding(
                "SF104", f"{why}: the templates of chart '{os.path.basename(os.path.abspath(chart))}' were not "
                         "rendered, so only its values files were read (install helm 3 to lint the manifests "
                         "the cluster gets)", span=anchor))
            continue
        for values in values_sets(chart, given_values):
            text, err = render(chart, values, helm)
            label = ", ".join(os.path.basename(v) for v in values) or "values.yaml"
            if text is None:
                out.findings.append(finding("SF104", f"helm could not render this chart with {label}: {err}; "
                                                     "its templates were not read", span=anchor))
                continue
            out.values_files.update(os.path.normpath(v) for v in _values_paths(chart, values))
            virtual = os.path.join(chart, f".rendered-{label}.yaml")
            result = scan_file(virtual, text)
            mapper = render_map.Mapper(chart, text, _values_paths(chart, values), virtual)
            for site in result.sites:
                mapper.site(site)
                if values:
                    site.name = f"{site.name} ({label})"
                site.extra["rendered"] = f"helm template {os.path.basename(os.path.abspath(chart))} with {label}"
                out.sites.append(site)
            for f in result.findings:
                if f.span is not None:
                    f.span = mapper.span(f.span)
                out.findings.append(f)
            out.notes.update(mapper.notes)
    return out


def _values_paths(chart: str, values: list[str]) -> list[str]:
    """Highest precedence first: the last --values file, ..., the chart's values.yaml."""
    own = [os.path.join(chart, n) for n in ("values.yaml", "values.yml") if os.path.isfile(os.path.join(chart, n))]
    return list(reversed(own + [v for v in values if os.path.isfile(v)]))


def _anchor(chart: str):  # -> Span
    from servefit.core import Span

    return Span(os.path.join(chart, "Chart.yaml"), 1, 1, 1, 1, 0, 0)


def in_chart(path: str, chart_dirs: list[str]) -> bool:
    """Whether a linted file lies in one of these charts (its templates are handled by the render)."""
    p = os.path.normpath(path)
    return any(p.startswith(os.path.normpath(c) + os.sep) for c in chart_dirs)
