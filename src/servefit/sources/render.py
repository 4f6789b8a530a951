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

A kustomization (kustomization.yaml) that no other one among the files uses as a resource is
built with `kustomize build` or `kubectl kustomize`; its output replaces the servers read from
the files it uses, and each value points at the one file line among them (its own patches
first, then its resources) that holds that text, else at the kustomization. One that pulls a
remote resource is not built (that would go to the network).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from servefit.core import Finding, LaunchSite
from servefit.sources.problems import not_rendered

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
    import shutil
    return shutil.which("helm")


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


def _vendor(chart: str, dst: str, depth: int = 0) -> None:
    """Copy a chart to `dst` with its own dependencies from folders of the repository, recursively
    (an umbrella chart's subchart that uses a library chart beside it), as `helm dependency build` does."""
    import shutil

    shutil.copytree(chart, dst, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    if depth < 4:
        for name, path in absent_dependencies(chart)[1].items():
            _vendor(path, os.path.join(dst, "charts", name), depth + 1)


def _dependencies(chart: str) -> list[dict]:
    import yaml

    from servefit.safe_io import load_yaml

    try:
        meta = load_yaml(os.path.join(chart, "Chart.yaml")) or {}
    except (OSError, ValueError, yaml.YAMLError):
        return []
    deps = meta.get("dependencies") if isinstance(meta, dict) else None
    return [d for d in deps or [] if isinstance(d, dict)]


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


CHART_FILE = "Chart.yaml"
KUSTOMIZATIONS = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|git@|github\.com/|gitlab\.com/|bitbucket\.org/)|\?ref=", re.I)


def kustomize_cmd() -> list[str] | None:
    import shutil
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    kubectl = shutil.which("kubectl")
    return [kubectl, "kustomize"] if kubectl else None


def _kustomization(d: str) -> str | None:
    return next((os.path.join(d, n) for n in KUSTOMIZATIONS if os.path.isfile(os.path.join(d, n))), None)


def _uses(kfile: str) -> tuple[list[str], list[str], bool]:
    """(its own patch files, the resources it uses (directories and files), pulls a remote one)."""
    import yaml

    d = os.path.dirname(kfile)
    from servefit.safe_io import load_yaml

    try:
        doc = load_yaml(kfile) or {}
    except (OSError, ValueError, yaml.YAMLError):
        return [], [], False
    if not isinstance(doc, dict):
        return [], [], False
    refs = [str(r) for key in ("resources", "bases", "components") for r in doc.get(key) or [] if isinstance(r, str)]
    remote = any(_REMOTE.search(r) for r in refs)
    patches = [str(p) for p in doc.get("patchesStrategicMerge") or [] if isinstance(p, str)]
    patches += [str(p["path"]) for key in ("patches", "patchesJson6902") for p in doc.get(key) or []
                if isinstance(p, dict) and isinstance(p.get("path"), str)]
    local = [os.path.normpath(os.path.join(d, r)) for r in refs if not _REMOTE.search(r)]
    return [os.path.normpath(os.path.join(d, p)) for p in patches], local, remote


def _tree(kfile: str, depth: int = 0) -> tuple[list[str], bool]:
    """Every file a kustomization reads, its own first; and whether any of them is remote."""
    own, refs, remote = _uses(kfile)
    files = [kfile, *own]
    for r in refs:
        if os.path.isdir(r):
            sub = _kustomization(r)
            if sub is not None and depth < 20:
                more, rem = _tree(sub, depth + 1)
                files += more
                remote = remote or rem
        elif os.path.isfile(r):
            files.append(r)
    return list(dict.fromkeys(files)), remote


def kustomizations(files: list[str], out: Rendered, enabled: bool = True) -> None:
    """Build each kustomization no other one uses; its output's servers replace its files'."""
    kfiles = [f for f in files if os.path.basename(f) in KUSTOMIZATIONS]
    if not kfiles:
        return
    from servefit.sources import render_map, scan_file

    used = {os.path.normpath(r) for k in kfiles for r in _uses(k)[1]}
    tops = [k for k in kfiles if os.path.normpath(os.path.dirname(k) or ".") not in used]
    cmd = kustomize_cmd() if enabled else None
    for k in tops:
        d = os.path.dirname(k) or "."
        tree, remote = _tree(k)
        anchor = _at(k)
        if cmd is None or remote:
            why = ("rendering is off (--no-render)" if not enabled else "it uses a remote resource (building it "
                   "would go to the network)" if remote else "neither kustomize nor kubectl is on PATH")
            if any(_mentions_engine(f) for f in tree):
                out.findings.append(not_rendered(f"this kustomization was not built: {why}; its files were "
                                                     "read as they are, without its patches", span=anchor))
            continue
        import subprocess

        try:
            proc = subprocess.run([*cmd, d], capture_output=True, text=True, timeout=TIMEOUT_S,
                                  stdin=subprocess.DEVNULL)
        except (subprocess.TimeoutExpired, OSError) as exc:
            out.findings.append(not_rendered(f"kustomize could not build this: {exc}", span=anchor))
            continue
        outside = _outside(k, tree, proc) if proc.returncode != 0 else []
        if outside:
            # a resource file outside the kustomization's folder: kustomize's load restrictor refuses it
            # (kustomize api/loader: "security; file ... is not in or below ..."); the files are the repository's
            # own, so the build goes on without the restriction, and the refusal is said
            proc = subprocess.run([*cmd, "--load-restrictor=LoadRestrictionsNone", d], capture_output=True, text=True,
                                  timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
            if proc.returncode == 0:
                out.findings.append(not_rendered(
                    f"kustomize refuses {', '.join(outside)}, a file outside this kustomization's folder, so `kubectl "
                    "apply -k` fails here; make it a folder with its own kustomization.yaml, or build with "
                    "--load-restrictor LoadRestrictionsNone (servefit built it that way to check its servers)",
                    span=_written_at(k, outside[0]) or anchor))
        if proc.returncode != 0:
            err = next((ln.strip() for ln in proc.stderr.splitlines() if ln.strip()), "no message")
            out.findings.append(not_rendered(f"kustomize could not build this: {err.removeprefix('Error: ')}",
                                        span=anchor))
            continue
        out.values_files.update(os.path.normpath(f) for f in tree)
        virtual = os.path.join(d, ".rendered-kustomize.yaml")
        result = scan_file(virtual, proc.stdout)
        sources = [f for f in tree if f.endswith((".yaml", ".yml")) and os.path.basename(f) not in KUSTOMIZATIONS]
        mapper = render_map.Mapper(d, proc.stdout, sources, virtual,
                                   fallback=(k, "built by kustomize; not traced to one line of its files"), scoped=True)
        label = os.path.relpath(d) if not os.path.isabs(d) else d
        _adopt(out, result, mapper, label, f"kustomize build {label}")


def _outside(kfile: str, tree: list[str], proc: Any) -> list[str]:
    """The resource files, as the kustomization names them, that the load restrictor refused (outside
    its folder, inside the repository); empty when the build failed for another reason."""
    from servefit.sources.base import _repo_of, _within

    if "is not in or below" not in proc.stderr:
        return []
    d = os.path.dirname(kfile) or "."
    root = _repo_of(d)
    if not all(_within(os.path.abspath(f), root) for f in tree):
        return []
    here = os.path.abspath(d)
    return [os.path.relpath(f, d) for f in _uses(kfile)[1]
            if os.path.isfile(f) and not os.path.abspath(f).startswith(here + os.sep)]


def _adopt(out: Rendered, result: Any, mapper: Any, label: str | None, how: str,
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


def _mentions_engine(path: str) -> bool:
    from servefit.safe_io import open_regular
    from servefit.sources import _mentions_engine as mentions

    try:
        with open_regular(path) as fh:
            return mentions(fh.read(1 << 20).decode("utf-8", errors="replace"))
    except OSError:
        return False


def charts(files: list[str], given_values: list[str] | None = None, enabled: bool = True) -> Rendered:
    """Render every chart among `files` and read its manifests; without helm, say so once per chart."""
    out = Rendered()
    kustomizations(files, out, enabled)
    found = find_charts(files)
    if not found:
        return out
    from servefit.sources import render_map, scan_file

    helm = helm_path() if enabled else None
    for chart in found:
        out.charts.append(chart)
        anchor = _anchor(chart)
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
            out.values_files.update(os.path.normpath(v) for v in _values_paths(chart, values))
            out.values_files.update(os.path.normpath(v) for vs in values_sets(chart, None) for v in vs)
            virtual = os.path.join(chart, f".rendered-{label}.yaml")
            result = scan_file(virtual, text)
            mapper = render_map.Mapper(chart, text, _values_paths(chart, values), virtual)
            _adopt(out, result, mapper, label if values else None,
                   f"helm template {os.path.basename(os.path.abspath(chart))} with {label}",
                   [v for v in values if os.path.isfile(v)] or _values_paths(chart, []))
    return out


def _values_paths(chart: str, values: list[str]) -> list[str]:
    """Highest precedence first: the last --values file, ..., the chart's values.yaml."""
    own = [os.path.normpath(os.path.join(chart, n)) for n in ("values.yaml", "values.yml")
           if os.path.isfile(os.path.join(chart, n))]
    return list(reversed(own + [v for v in values if os.path.isfile(v)]))


def _written_at(path: str, text: str):  # -> Span | None
    """Where text is first written in the file (a kustomization's resource entry)."""
    from servefit.safe_io import read_text
    from servefit.sources.text import LineIndex

    try:
        body = read_text(path, 1 << 20)
    except (OSError, ValueError):
        return None
    at = body.find(text)
    return LineIndex(body, path).span(at, at + len(text)) if at >= 0 else None


def _anchor(chart: str):  # -> Span
    return _at(os.path.join(chart, "Chart.yaml"))


def _at(path: str):  # -> Span
    from servefit.core import Span

    return Span(path, 1, 1, 1, 1, 0, 0)


def in_chart(path: str, chart_dirs: list[str]) -> bool:
    """Whether a linted file lies in one of these charts (its templates are handled by the render)."""
    p = os.path.abspath(path)  # a chart linted from its own folder is "."
    return any(p.startswith(os.path.abspath(c) + os.sep) for c in chart_dirs)
