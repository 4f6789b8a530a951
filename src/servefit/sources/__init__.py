"""Sources: find the servers inside deployment files and hand each on as a `LaunchSite`
(engine argv + environment with spans, image, engine version, hardware hints).

`scan_file(path)` picks the wrapper by file name and content. Cheap checks come first: a file
whose name no wrapper reads is not opened, and a file that mentions no engine (the engines'
`markers` in data/engines/*.yaml) is not parsed. Wrappers, one
module each: k8s (+ KServe, LWS, KubeAI, VLLMRuntime, HelmRelease, ConfigMap-embedded
llama-swap), helm (values files), compose, dockerfile, script, makefile (recipes), workflow
(GitHub Actions `run:` steps), systemd, supervisor (supervisord programs), winbatch and powershell (Windows .bat/.cmd and .ps1
scripts), skypilot, dstack, llamaswap, and modelfile (written with the Ollama plugin, used when present); an engine's own config files
(vLLM's `--config` YAML), charts and operator resources are read by its plugin.

Spans: see shell.py for how a value that came through a variable is located.
"""

from __future__ import annotations

import importlib
import os
import re
from dataclasses import dataclass, field
from typing import Any

from servefit.core import Finding, LaunchSite, Span
from servefit.rules.catalog import finding
from servefit.rules.registry import rule
from servefit.sources.compose_build import builds_here, runs_built_image
from servefit.sources.problems import not_read, unreadable
from servefit.sources.script_calls import calls_engine_script
from servefit.sources.templated import template_script, templated_yaml
from servefit.sources.unset_vars import unresolved_findings
from servefit.sources.walk import iter_files

__all__ = ["ScanResult", "scan_file", "iter_files", "file_kind"]

MAX_BYTES = 2 << 20
YAML_EXT = (".yaml", ".yml")
SUPERVISOR_EXT = (".conf", ".ini")  # supervisord program files: read when a line starts `[program:`
HEAD_BYTES = 64 << 10  # how much of a .conf / .ini is searched for `[program:` (after [supervisord], [unix_http_server]...)
_PROGRAM = re.compile(r"^[ \t]*\[program:", re.M)


@dataclass
class ScanResult:
    """What one file holds: the servers found in it, findings about the file, the kind of file, and its text
    (suppression comments are read from it)."""

    sites: list[LaunchSite] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    kind: str | None = None
    text: str | None = None  # the file as read (suppression comments are read from it)


def file_kind(path: str, head: str | None = None) -> str | None:
    """The wrapper family a file belongs to by its name (and first line for scripts)."""
    base = os.path.basename(path)
    low = base.lower()
    # Dockerfile, Dockerfile.rocm, Dockerfile_intel, Dockerfile-cuda, cuda.Dockerfile (and Containerfile's)
    if low in ("dockerfile", "containerfile") or low.startswith(tuple(f"{n}{sep}" for n in ("dockerfile", "containerfile")
                                                                     for sep in "._-")) or \
            low.endswith((".dockerfile", ".containerfile")):
        return "dockerfile"
    if "modelfile" in low and not low.endswith((".yaml", ".yml", ".json", ".py", ".md", ".txt", ".sh")):
        return "modelfile"
    if low.endswith(YAML_EXT):
        return "yaml"
    if low.endswith((".sh", ".bash", ".zsh", ".sbatch", ".slurm")) or base == "<command line>":
        # Slurm batch scripts are shell scripts; so is a launch command given to servefit itself
        return "script"
    if low.endswith(".tf"):
        return "terraform"
    if low.endswith(".py"):
        return "python"
    if low.endswith((".ps1", ".bat", ".cmd")):
        return "windows"
    if base in ("Makefile", "makefile", "GNUmakefile") or low.endswith(".mk"):
        return "make"
    if low.endswith(".service") or (low.endswith(".conf") and os.path.dirname(path).endswith(".service.d")):
        return "systemd"
    if "." not in base and head is not None and head.startswith("#!") and "sh" in head.split("\n", 1)[0]:
        return "script"
    if low.endswith(SUPERVISOR_EXT) and head is not None and _PROGRAM.search(head):
        return "supervisor"
    return None


def _read(path: str, result: ScanResult) -> str | None:
    """The file's text, or None with an SF108 finding saying why it was skipped (too large, not a
    regular file, a broken symlink, unreadable, binary, or not UTF-8 with the encoding named).
    A non-UTF-8 file that mentions no engine is skipped silently, like any file we do not parse."""
    from servefit.core import Span
    from servefit.sources.read import read_text

    text, problem = read_text(path, MAX_BYTES)
    if problem is None:
        return text
    if problem.latin1 is not None and not _mentions_engine(problem.latin1):
        return None
    at = Span(path, problem.line, problem.col, problem.line, problem.col, problem.offset, problem.offset)
    result.findings.append(not_read(problem.message, span=at))
    return None


def _head(path: str, size: int = 128) -> str | None:
    from servefit.safe_io import open_regular

    try:
        if not os.path.isfile(path):
            return None
        with open_regular(path) as fh:
            return fh.read(size).decode("utf-8", errors="replace")
    except OSError:
        return None


def scan_file(path: str, text: str | None = None) -> ScanResult:
    """Every server in one file, and the file's own problems (never raises on bad input)."""
    result = ScanResult()
    size = HEAD_BYTES if path.lower().endswith(SUPERVISOR_EXT) else 128
    kind = file_kind(path, text[:size] if text is not None else None)
    if kind is None and text is None and ("." not in os.path.basename(path) or path.lower().endswith(SUPERVISOR_EXT)):
        kind = file_kind(path, _head(path, size))
    if kind is None:
        return result
    result.kind = kind
    if kind == "modelfile":
        return _modelfile(path, text, result)
    if text is None:
        text = _read(path, result)
        if text is None:
            return result
    result.text = text
    if not _mentions_engine(text) and not _compose_overlay(path) and not _INFERENCE_SERVICE.search(text) \
            and not builds_here(path, text) and not (kind == "script" and (runs_built_image(path, text)
                                                                          or calls_engine_script(path, text))):
        return result
    from servefit.budget import Exhausted, file_budget
    from servefit.sources.base import FileCtx

    fc = FileCtx.of(path, text)
    try:
        with file_budget():
            _dispatch(kind, fc, result)
            fc.finish()
            if kind != "yaml" and not fc.sites:
                template_script(fc, kind)
    except RecursionError:
        fc.findings.append(not_read("nested too deeply; skipped", span=fc.li.span(0, 0)))
    except (Exhausted, MemoryError) as exc:
        fc.sites.clear()
        msg = str(exc) if isinstance(exc, Exhausted) else "ran out of memory reading it; the file was not read"
        fc.findings.append(not_read(msg, span=fc.li.span(0, 0)))
    from servefit.budget import SERVERS_PER_FILE

    if len(fc.sites) > SERVERS_PER_FILE:  # each server is evaluated: a bound keeps a 2 MiB file from taking minutes
        fc.findings.append(not_read(f"more than {SERVERS_PER_FILE:,} servers in one file (the bound servefit "
                                            f"checks per file): only the first {SERVERS_PER_FILE:,} are checked",
                                   span=fc.li.span(0, 0)))
        del fc.sites[SERVERS_PER_FILE:]
    result.sites.extend(fc.sites)
    result.findings.extend(fc.findings)
    result.findings.extend(unresolved_findings(fc.sites))
    _directives(path, result)
    return result


@rule("SF012")
def invalid_directive(message: str, span: Span) -> Finding:
    """A `# servefit:` directive with a key or value servefit cannot use: said, never silently ignored."""
    return finding("SF012", message, span=span)


def _directives(path: str, result: ScanResult) -> None:
    """Each server gets the `# servefit: gpu=… model=…` directives that apply to it."""
    if not result.sites or not result.text or "servefit:" not in result.text:
        return
    from servefit.sources.hints import directives, for_line
    from servefit.sources.text import LineIndex

    problems: list[tuple[str, Span]] = []
    found = directives(result.text, LineIndex(result.text, path).span, problems)
    result.findings.extend(invalid_directive(msg, span=at) for msg, at in problems)
    if found:
        lines = sorted({site.line for site in result.sites if site.file == path})
        for site in result.sites:
            if site.file == path:
                site.directives = for_line(found, site.line, lines)
        taken = {id(v) for site in result.sites for v in site.directives.values()}
        for d in found:
            v = d.get("model")
            if v is None or v.span is None or id(v) in taken:
                continue
            below = [site.directives["model"] for site in result.sites if site.file == path
                     and site.line >= v.line and "model" in site.directives]
            why = (f"a nearer one (line {below[0].line}) names the model of the server below it" if below else
                   "a model directive names the model of the server that starts on its line or the first one "
                   "below it; move it above the server's first line")
            result.findings.append(invalid_directive(f"model={v.value} applies to no server, so it is ignored: {why}",
                                                     span=v.span))


# a KServe InferenceService names its runtime, not its engine: read it to say when the runtime is missing
# resources that run an engine the file need not name: KServe's InferenceService, KAITO's preset Workspace
_INFERENCE_SERVICE = re.compile(r"(?m)^\s*kind:\s*InferenceService\b|^\s*apiVersion:\s*kaito\.sh/")


def _compose_overlay(path: str) -> bool:
    """An overlay (docker-compose.gpu.yml) need not name the engine: its base does."""
    if not os.path.basename(path).startswith(("compose.", "docker-compose.")):
        return False
    from servefit.sources.compose_layers import overlay_base

    return overlay_base(path) is not None


def _mentions_engine(text: str) -> bool:
    """Whether the file mentions an engine (the engines' `markers`, data/engines/*.yaml), or one
    another package registers."""
    from servefit.engines import plugins
    from servefit.sources.detect import markers

    return bool(markers().search(text)) or any(m in text for eng in plugins() for m in eng.markers)


def _dispatch(kind: str, fc: Any, result: ScanResult) -> None:
    if kind == "windows":
        if fc.path.lower().endswith(".ps1"):
            from servefit.sources import powershell

            powershell.scan(fc)
        else:
            from servefit.sources import winbatch

            winbatch.scan(fc)
    elif kind == "dockerfile":
        from servefit.sources import dockerfile

        dockerfile.scan(fc)
    elif kind == "script":
        from servefit.sources import script

        script.scan(fc)
    elif kind == "systemd":
        from servefit.sources import systemd

        systemd.scan(fc)
    elif kind == "terraform":
        from servefit.sources import terraform

        terraform.scan(fc)
    elif kind == "python":
        from servefit.sources import python_app

        python_app.scan(fc)
    elif kind == "make":
        from servefit.sources import makefile

        makefile.scan(fc)
    elif kind == "supervisor":
        from servefit.sources import supervisor

        supervisor.scan(fc)
    else:
        _yaml(fc, result)


def _yaml(fc: Any, result: ScanResult) -> None:
    from yaml.nodes import MappingNode

    from servefit.sources import detect, k8s
    from servefit.sources.yamlpos import Y, YamlProblem, compose_all, is_templated

    templated = is_templated(fc.text)
    in_templates = "/templates/" in "/" + fc.path.replace(os.sep, "/")
    if templated and in_templates:
        templated_yaml(fc)
        return
    try:
        docs = compose_all(fc.src)
    except YamlProblem as exc:
        if templated:
            templated_yaml(fc)
        else:
            fc.findings.append(unreadable(str(exc), span=exc.span or fc.li.span(0, 0)))
        return
    y = Y(fc.src)
    k8s_docs = [d for d in docs if y.get(d, "apiVersion") is not None and y.get(d, "kind") is not None]
    if k8s_docs:
        k8s.scan(y, k8s_docs, fc)
    for d in docs:
        if d in k8s_docs or not isinstance(d, MappingNode):
            continue
        keys = set(y.map(d))
        from servefit.sources import workflow

        before = len(fc.sites)
        if "jobs" in keys and workflow.is_workflow(y, d):
            workflow.scan(y, d, fc)
            if len(fc.sites) > before:
                continue  # a workflow whose steps start no server is read as before (a job's container image)
        if "steps" in keys and "jobs" not in keys:
            from servefit.sources import cloudbuild

            if cloudbuild.is_cloudbuild(y, d):
                cloudbuild.scan(y, d, fc)
                continue
        if "services" in keys and isinstance(y.get(d, "services"), MappingNode):
            from servefit.sources import compose

            compose.scan(y, d, fc)
        elif "models" in keys and any(y.get(m, "cmd") is not None for _, _, m in y.items(y.get(d, "models"))):
            from servefit.sources import llamaswap

            llamaswap.scan(y, d, fc)
        elif "type" in keys and keys & {"commands", "replicas"} and _dstack(y, d, fc):
            continue
        elif "run" in keys and keys & {"resources", "envs", "setup", "num_nodes", "service", "file_mounts"}:
            from servefit.sources import skypilot

            skypilot.scan(y, d, fc)
        elif "applications" in keys and _ray_serve_config(y, d, fc):
            continue
        elif not _engine_config(y, d, fc, detect.owners("config_files")):
            from servefit.sources import helm

            helm.scan_values(y, d, fc)


def _dstack(y: Any, doc: Any, fc: Any) -> bool:
    from servefit.sources import dstack

    if not dstack.is_dstack(y, doc):
        return False
    dstack.scan(y, doc, fc)
    return True


def _ray_serve_config(y: Any, doc: Any, fc: Any) -> bool:
    from servefit.sources.k8s_custom import ray_serve_config

    return ray_serve_config(y, doc, fc)


def _engine_config(y: Any, doc: Any, fc: Any, owners: list[tuple[str, Any]]) -> bool:
    """A YAML document that is an engine's own config file (vLLM's `--config` YAML), read by its plugin."""
    from servefit import engines

    return any(engines.get(name).scan_config(y, doc, fc) for name, _ in owners)


def _modelfile(path: str, text: str | None, result: ScanResult) -> ScanResult:
    """The Modelfile wrapper lives with the Ollama plugin (sources/modelfile.py)."""
    try:
        mod = importlib.import_module("servefit.sources.modelfile")
    except ImportError:
        return result
    if text is None:
        text = _read(path, result)
        if text is None:
            return result
    result.text = text
    detect = getattr(mod, "detect", None)
    if detect is not None and not detect(path, text):
        return result
    out = mod.scan(path, text)
    sites, findings = out if isinstance(out, tuple) else (out, [])
    result.sites.extend(sites)
    result.findings.extend(findings)
    _directives(path, result)
    return result
