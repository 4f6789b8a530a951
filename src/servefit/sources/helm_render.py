"""Rendering Helm charts with the user's own `helm`, so lint reads the manifests the cluster
gets rather than guessing from values files.

Each chart (helm_chart.py: which charts, which values sets) is rendered with `helm template`
(local, no repository access: a chart whose dependencies are not vendored renders without them
and says so; one a folder of the repository holds is copied in, as `helm dependency build`
does) once per values set. The rendered manifests are read like any k8s file, then every span
is mapped back (render_map.py): to the values line that set it where that is traceable, else to
the template line, with a note. Without helm, one SF104 per chart says its templates were not
rendered.
"""

from __future__ import annotations

import os
import re

from servefit.sources.helm_chart import absent_dependencies, find_charts, values_paths, values_sets
from servefit.sources.problems import not_rendered
from servefit.sources.render_scope import CHART_FILE
from servefit.sources.rendered import TIMEOUT_S, Rendered, adopt, at_top


def helm_path() -> str | None:
    import shutil
    return shutil.which("helm")


def render_charts(files: list[str], out: Rendered, given_values: list[str] | None = None,
                  enabled: bool = True) -> None:
    """Render every chart among `files` and read its manifests; without helm, say so once per chart."""
    found = find_charts(files)
    if not found:
        return
    from servefit.sources import render_map, scan_file

    helm = helm_path() if enabled else None
    for chart in found:
        out.charts.append(chart)
        anchor = at_top(os.path.join(chart, CHART_FILE))
        if helm is None:
            why = "rendering is off (--no-render)" if not enabled else "helm is not on PATH"
            out.findings.append(not_rendered(f"{why}: the templates of chart '{os.path.basename(os.path.abspath(chart))}' were not "
                         "rendered, so only its values files were read (install helm 3 to lint the manifests "
                         "the cluster gets)", span=anchor))
            continue
        absent, local = absent_dependencies(chart)
        missing = [d for d in absent if d not in local]
        if missing:
            out.findings.append(not_rendered(f"rendered without the dependencies {', '.join(missing)}: they are not in charts/ "
                         "(servefit does not download them; `helm dependency build` does)", span=anchor))
        for values in values_sets(chart, given_values):
            text, err = (render_without(chart, values, helm, missing, local) if absent else render(chart, values, helm))
            label = ", ".join(os.path.basename(v) for v in values) or "values.yaml"
            if text is None:
                out.findings.append(not_rendered(f"helm could not render this chart with {label}: {err}; "
                                                     "its templates were not read", span=anchor))
                continue
            out.values_files.update(os.path.normpath(v) for v in values_paths(chart, values))
            out.values_files.update(os.path.normpath(v) for vs in values_sets(chart, None) for v in vs)
            virtual = os.path.join(chart, f".rendered-{label}.yaml")
            result = scan_file(virtual, text)
            mapper = render_map.Mapper(chart, text, values_paths(chart, values), virtual)
            adopt(out, result, mapper, label if values else None,
                   f"helm template {os.path.basename(os.path.abspath(chart))} with {label}",
                   [v for v in values if os.path.isfile(v)] or values_paths(chart, []))


def render(chart: str, values: list[str], helm: str) -> tuple[str | None, str]:
    """(manifests, "") or (None, the first line of helm's complaint)."""
    import subprocess
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


def _vendor(chart: str, dst: str, depth: int = 0) -> None:
    """Copy a chart to `dst` with its own dependencies from folders of the repository, recursively
    (an umbrella chart's subchart that uses a library chart beside it), as `helm dependency build` does."""
    import shutil

    shutil.copytree(chart, dst, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    if depth < 4:
        for name, path in absent_dependencies(chart)[1].items():
            _vendor(path, os.path.join(dst, "charts", name), depth + 1)



def render_without(chart: str, values: list[str], helm: str, missing: list[str],
                   local: dict[str, str] | None = None) -> tuple[str | None, str]:
    """Render a copy of the chart whose Chart.yaml leaves out the dependencies that are not there:
    the chart's own templates still render (and the missing ones are said to be left out). The
    `local` ones (name -> folder) are copied into the copy's charts/, as `helm dependency build` does."""
    import shutil
    import tempfile

    import yaml

    with tempfile.TemporaryDirectory(prefix="servefit-chart-") as tmp:
        copy = os.path.join(tmp, os.path.basename(os.path.abspath(chart)))
        shutil.copytree(chart, copy, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        for name, path in (local or {}).items():
            _vendor(path, os.path.join(copy, "charts", name))
        from servefit.safe_io import load_yaml

        loaded = load_yaml(os.path.join(copy, "Chart.yaml")) or {}
        meta: dict = loaded if isinstance(loaded, dict) else {}
        meta["dependencies"] = [d for d in meta.get("dependencies") or []
                                if not (isinstance(d, dict) and d.get("name") in missing)]
        with open(os.path.join(copy, "Chart.yaml"), "w", encoding="utf-8") as fh:
            yaml.safe_dump(meta, fh, sort_keys=False)
        for lock in ("Chart.lock", "requirements.lock"):
            if os.path.exists(os.path.join(copy, lock)):
                os.remove(os.path.join(copy, lock))
        return render(copy, [os.path.abspath(v) for v in values], helm)
