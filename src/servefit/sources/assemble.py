"""One assembly for every command (lint, estimate, explain, tune, diagnose --repo, models):

    walk → scan each file → link across files (Modelfile ↔ compose / k8s / systemd; .env,
    EnvironmentFile and ConfigMaps are read by the wrappers while scanning) → de-duplicate →
    configuration per file (the nearest servefit.toml / [tool.servefit]) → target (sources/
    target.py: flag > directive > repo > config) → parse once → plan once.

So the commands can never disagree about which servers a file holds, which GPU, model and
engine version they target, or which configuration applies. A server that cannot be planned
keeps a one-line reason (`error`) and the finding that says what was not checked (the planning
itself: sources/server_plan.py).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from servefit.config import Config, Configs, searching_each_folder_once, user_online
from servefit.core import Finding, LaunchSite, UsageError
from servefit.sources.launch import RUNS_IMAGES
from servefit.sources.server_build import Server, build
from servefit.sources.target import Flags

if TYPE_CHECKING:
    pass

# the files rendering starts from (render_scope.CHART_FILE, kustomize.KUSTOMIZATIONS): without one
# among the linted files the renderer is not loaded
RENDER_ROOTS = frozenset(("Chart.yaml", "kustomization.yaml", "kustomization.yml", "Kustomization"))


@dataclass
class ScannedFile:
    """A file the assembly read: its text and kind for the per-file checks and suppression comments, and how
    many servers were found in it."""

    path: str
    text: str | None
    kind: str | None
    sites: int = 0  # servers found in it (their own file may be a drop-in or a side file)


@dataclass
class Assembly:
    """Every server the named paths hold, each planned once, with the findings about files, the files read and
    their configurations: what every command works from."""

    servers: list[Server]
    findings: list[Finding]  # about files (unreadable, malformed, unresolved variables)
    files: list[ScannedFile]
    configs: Configs
    notes: dict[tuple[str, int, int], str] = field(default_factory=dict)  # rendered spans not traced further

    def warn_ignored_directives(self) -> None:
        """estimate, explain and tune print no findings about files: a `# servefit:` directive they
        ignore (SF012) is still said, on standard error, since it changes what is checked."""
        from servefit.termsafe import one_line

        for f in self.findings:
            if f.code == "SF012" and f.span is not None:
                sys.stderr.write(one_line(f"servefit: {f.span.file}:{f.span.line}:{f.span.col}: {f.message} "
                                       f"[{f.code}]") + "\n")


def assemble(paths: list[str], flags: Flags | None = None, configs: Configs | None = None, *,
             plan: bool = True, stdin: tuple[str, str] | None = None, values: list[str] | None = None,
             render: bool = True) -> Assembly:
    """Every server in the given files and directories (see the module docstring). The path `-`
    is `stdin` (its file name, its text); Helm charts and kustomizations among the files are
    rendered (sources/render.py) unless `render` is False."""
    with searching_each_folder_once():  # one run: what a folder holds is looked at once
        return _assemble(paths, flags, configs, plan=plan, stdin=stdin, values=values, render=render)


def _assemble(paths: list[str], flags: Flags | None, configs: Configs | None, *, plan: bool,
              stdin: tuple[str, str] | None, values: list[str] | None, render: bool) -> Assembly:
    from servefit.sources import iter_files, scan_file
    from servefit.sources.render_scope import scope

    configs = configs or Configs()
    named = {os.path.abspath(p) for p in paths if os.path.isfile(p)}
    files: list[ScannedFile] = []
    findings: list[Finding] = []
    sites: list[LaunchSite] = []
    for path in iter_files(paths):
        if path == "-" and stdin is not None:  # `lint -`: the text read from standard input
            result = scan_file(stdin[0], stdin[1])
            result.text = stdin[1]
            path = stdin[0]
        elif os.path.abspath(path) not in named and excluded(configs.for_file(path), path):
            continue
        else:
            result = scan_file(path)
        files.append(ScannedFile(path, result.text, result.kind, len(result.sites)))
        findings.extend(result.findings)
        sites.extend(result.sites)
    walked = [f.path for f in files if not (stdin and f.path == stdin[0])]
    named_files = [p for p in paths if p != "-" and os.path.isfile(p)]
    if named_files and any(s.name.startswith("script:") for s in sites):
        sites, findings = _run_by_container_files(named_files, walked, sites, findings)
    roots, named_values = scope([p for p in paths if p != "-"], walked)
    sites, findings, notes = _rendered(walked + roots, sites, findings, values or named_values, render)
    asm = assemble_sites(sites, flags, configs, plan=plan, files=files, findings=findings)
    asm.notes = notes
    return asm


def _run_by_container_files(named: list[str], walked: list[str], sites: list[LaunchSite],
                       findings: list[Finding]) -> tuple[list[LaunchSite], list[Finding]]:
    """A named script that a Dockerfile or compose file beside it copies or mounts and runs: its
    server as that file starts it (image version, environment), the file's other servers and
    findings left out."""
    from servefit.sources import scan_file
    from servefit.sources.docker_scripts import runners_of

    mine = {os.path.abspath(p) for p in named}
    for df in runners_of(named, walked, sites):
        result = scan_file(df)
        sites += [s for s in result.sites if any(t.span is not None and os.path.abspath(t.span.file) in mine
                                                 for t in s.argv)]
        findings += [f for f in result.findings if f.span is not None and os.path.abspath(f.span.file) in mine
                     and f not in findings]
    return sites, findings


def assemble_named(paths: list[str], flags: Flags | None = None) -> Assembly:
    """The servers of the files and directories a command names (estimate, explain, tune), the
    way lint assembles them together (a Modelfile with its compose file, an override with its
    base); one clear error, with the reason the file's own finding gives, when a named file holds
    no server or none is found at all."""
    from servefit.sources.render_scope import chart_of

    asm = assemble(paths, flags)
    found = {os.path.abspath(f.path) for f in asm.files if f.sites}
    written = {os.path.abspath(t.span.file) for srv in asm.servers for t in srv.site.argv if t.span is not None}
    found |= {os.path.abspath(p) for p in paths if (chart := chart_of(p)) is not None
              and any(w.startswith(os.path.abspath(chart) + os.sep) for w in written)}  # a chart's file: its render
    built = {srv.site.workload.rendered for srv in asm.servers}  # a kustomization: its build (render.py::kustomizations)
    found |= {os.path.abspath(p) for p in paths if os.path.basename(p) in RENDER_ROOTS and
              {f"kustomize build {d}" for d in (os.path.dirname(p) or ".", os.path.relpath(os.path.dirname(p) or "."))} & built}
    for path in paths:
        if os.path.isfile(path) and os.path.abspath(path) not in found:
            why = next((f for f in asm.findings if f.span is not None
                        and os.path.abspath(f.span.file) == os.path.abspath(path)), None)
            raise UsageError(f"{path}: no serving engine found in this file"
                             + (f" ({why.message} [{why.code}])" if why is not None else ""))
    if not asm.servers:
        raise UsageError(f"{', '.join(paths)}: no serving engine found in the files there")
    return asm


def _rendered(walked: list[str], sites: list[LaunchSite], findings: list[Finding], values: list[str] | None,
              render: bool) -> tuple[list[LaunchSite], list[Finding], dict[tuple[str, int, int], str]]:
    """Helm charts among the files, rendered: their manifests' servers replace what was read from
    their values files, and one finding per chart replaces SF104 on each template. Kustomizations
    likewise: the built output's servers replace those of the files it reads."""
    if not any(os.path.basename(f) in RENDER_ROOTS for f in walked):
        return sites, findings, {}
    from servefit.sources import render as rendering

    out = rendering.charts(walked, values, render)
    if not (out.charts or out.sites or out.findings or out.values_files):
        return sites, findings, {}
    charts = sorted(out.charts)
    sites = [s for s in sites if os.path.normpath(s.file) not in out.values_files] + out.sites
    # an InferenceService whose runtime is in another file the build reads: the build found the server, so the
    # file read alone's SF114 is untrue; one the build still cannot place is said at the file's own line
    read = [f for f in findings if f.span is not None and os.path.normpath(f.span.file) in out.values_files]
    unplaced = {f.message for f in out.findings if f.code == "SF114"} & {f.message for f in read if f.code == "SF114"}
    findings = [f for f in findings if not (f.code in ("SF104", "SF116") and f.span is not None
                                            and rendering.in_chart(f.span.file, charts))
                and not (f.code == "SF116" and f.span is not None
                         and os.path.normpath(f.span.file) in out.values_files)
                and not (f.code == "SF114" and id(f) in {id(r) for r in read} and f.message not in unplaced)] + \
        [f for f in out.findings if not (f.code == "SF114" and f.message in unplaced)]
    if charts:
        from dataclasses import replace

        from servefit.sources.helm import NO_CHART, chart_here

        helm = render and rendering.helm_path() is not None
        given = {os.path.abspath(v) for v in values or []}
        findings = [replace(f, message=f.message.replace(NO_CHART, chart_here(
                        charts, f.span.file, helm, os.path.abspath(f.span.file) in given)))
                    if f.code == "SF116" and f.span is not None and NO_CHART in f.message else f for f in findings]
    return sites, findings, out.notes


def excluded(cfg: Config, path: str) -> bool:
    """Whether the configuration's `exclude` globs cover `path` (or a folder above it), relative
    to the configuration's directory. Files named on the command line are read regardless."""
    if not cfg.exclude:
        return False
    from servefit.config import _match

    rel = cfg.relative(path)
    parts = rel.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return any(_match(p, pat) or _match(p, pat.rstrip("/")) for pat in cfg.exclude for p in prefixes)


def assemble_sites(sites: list[LaunchSite], flags: Flags | None = None, configs: Configs | None = None, *,
                   plan: bool = True, files: list[ScannedFile] | None = None,
                   findings: list[Finding] | None = None) -> Assembly:
    """The stages after scanning, for sites already found (a command typed after `--`)."""
    flags = flags or Flags()
    configs = configs or Configs()
    findings = list(findings or [])
    linked = link(sites, {f.path for f in files or []})
    kept = {id(s) for s in linked}
    # a script's own server dropped for the container that runs it (drop_run_scripts): its SF001 went with it,
    # the container's reading says its own (`env LLM_NAME=llama3.1 /bin/sh /scripts/run-ollama.sh` sets it)
    gone = {(s.name, s.file) for s in sites if id(s) not in kept and s.name.startswith("script:")}
    # and a compose service read alone, shadowed by the overlay read on top of it (drop_shadowed), with the
    # unset variables of the script it runs: the layered service says its own
    shadowed = {s.name for s in sites if id(s) not in kept and s.workload.service} - {s.name for s in linked}
    findings = [f for f in findings if not (f.code == "SF001" and (f.site in shadowed or (
        f.span is not None and (f.site, f.span.file) in gone)))]
    sites, dropped = dedupe(linked)
    if dropped:
        findings = [f for f in findings if not (f.span is not None and (f.site, f.span.file) in dropped)]
    from servefit.models.lock import one_context_per_folder

    with searching_each_folder_once(), one_context_per_folder():  # a folder's lock and config, read once
        servers = [build(site, flags, configs, plan=plan) for site in sites]
    return Assembly(servers, findings, list(files or []), configs)


def link(sites: list[LaunchSite], scanned: set[str] | None = None) -> list[LaunchSite]:
    """Servers whose parts live in several files become one: a compose service read alone gives
    way to the same service read with an overlay on top; each engine plugin present joins its
    own (Ollama: a server and the Modelfile it serves, also when the Modelfile is given alone and
    the compose file or manifest that serves it sits beside it)."""
    from servefit import engines

    runners = list(sites)  # a script a compose service runs stays its, also when an overlay shadows that service
    if any(s.workload.compose_files or s.workload.compose_extends for s in sites):  # layered compose reads only
        from servefit.sources.compose_layers import drop_shadowed

        sites = drop_shadowed(sites)
    if any(s.workload.service or s.workload.runtime in RUNS_IMAGES for s in sites):
        from servefit.sources.compose_build import drop_built

        sites = drop_built(sites)
    if any(s.name.startswith("script:") for s in sites):
        from servefit.sources.docker_scripts import drop_run_scripts

        sites = drop_run_scripts(sites, runners)
    for name in dict.fromkeys(s.engine for s in sites if s.engine):
        try:
            eng = engines.get(name)
            sites = eng.link_sites(sites, scanned or set())
        except Exception:  # noqa: BLE001 - one engine's linking problem must not stop the run
            continue
    return sites


def dedupe(sites: list[LaunchSite]) -> tuple[list[LaunchSite], set[tuple[str, str]]]:
    """A vLLM --config file listed on its own is dropped when a command in the run uses it.
    Returns the sites kept and the (name, file) of those dropped."""
    used = set()
    for site in sites:
        argv = [t.text for t in site.argv]
        for i, w in enumerate(argv):
            ref = argv[i + 1] if w == "--config" and i + 1 < len(argv) else (w[9:] if w.startswith("--config=") else None)
            if ref:
                used.add(os.path.basename(ref))
    drop = [s for s in sites if s.config_only and os.path.basename(s.file) in used]
    if not drop:
        return sites, set()
    ids = {id(s) for s in drop}
    return [s for s in sites if id(s) not in ids], {(s.name, s.file) for s in drop}


def flags_from(args: Any) -> Flags:
    """The target flags of any command's parsed arguments (those it does not have are None)."""
    from servefit.units import engine_version, parse_size

    gpus = getattr(args, "gpus", None)
    if isinstance(gpus, str):
        try:
            gpus = int(gpus)
        except ValueError:
            raise UsageError(f"--gpus: not a count: {gpus!r}") from None
    if gpus is not None and gpus < 1:
        raise UsageError(f"--gpus must be at least 1 (got {gpus})")
    mem = getattr(args, "gpu_memory", None)
    return Flags(gpu=getattr(args, "gpu", None), gpus=gpus, gpu_memory=parse_size(mem) if mem else None,
                 engine_version=engine_version(getattr(args, "engine_version", None)),
                 model=getattr(args, "model", None),
                 model_config=getattr(args, "model_config", None), online=user_online(args))
