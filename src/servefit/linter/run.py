"""`lint_paths(paths, options) -> LintResult`: sources -> engine plugin -> rules, per server.

For each server found: the engine plugin parses it (a missing plugin is an SF109 note, the
server is still listed); when a GPU is known (the file's hint, then `--gpu`, then the config
default) it is evaluated through `pipeline.evaluate`, and the plugin's findings plus the
deployment rules (linter/checks.py) are collected. An unknown model or GPU, or any error in
one server, becomes a finding on that server; the run goes on. Findings that depend on the GPU
say which one was assumed and where that came from.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from servefit.config import Config
from servefit.core import EngineConfig, Finding, LaunchSite, Span, UsageError
from servefit.rules.catalog import finding
from servefit.suppressions import Suppression, scan_text

GPU_DEPENDENT = ("SF101", "SF111")


@dataclass
class LintOptions:
    gpu: str | None = None
    gpus: int | None = None
    gpu_memory: int | None = None
    engine_version: str | None = None
    default_gpu: str | None = None  # from servefit's config
    default_gpu_count: int | None = None
    online: bool = False
    evaluate: bool = True  # False: find and parse servers only (--list-sites)
    config: Config | None = None  # servefit's configuration: per-path targets, engine versions
    values: list[str] | None = None  # --values for Helm charts (None: the values files the repo pairs)
    render: bool = True  # render Helm charts when helm is on PATH
    stdin: tuple[str, str] | None = None  # (file name, text) linted for the path `-`


@dataclass
class SiteReport:
    site: LaunchSite
    config: EngineConfig | None = None
    gpu_name: str | None = None
    gpu_count: int | None = None
    gpu_source: str = ""
    plan: Any = None  # MemoryPlan when evaluated
    plugin: bool = False
    findings: list[Finding] = field(default_factory=list)
    evaluation: Any = None  # pipeline.Evaluation when evaluated

    @property
    def gpu_label(self) -> str:
        if not self.gpu_name:
            return ""
        count = f" ×{self.gpu_count}" if self.gpu_count else ""
        return f"{self.gpu_name}{count} from {self.gpu_source}"


@dataclass
class LintResult:
    findings: list[Finding]
    sites: list[SiteReport]
    files: int = 0
    suppressions: list[Suppression] = field(default_factory=list)


def lint_paths(paths: list[str], options: LintOptions | None = None) -> LintResult:
    from servefit.linter.secrets import check_file
    from servefit.sources import iter_files, scan_file

    options = options or LintOptions()
    findings: list[Finding] = []
    sites: list[LaunchSite] = []
    files = 0
    sups: list[Suppression] = []
    walked = []
    for path in iter_files(paths):
        files += 1
        if path == "-" and options.stdin is not None:  # `lint -`: the text read from standard input
            path, text = options.stdin
            result = scan_file(path, text)
            result.text = text
        else:
            walked.append(path)
            result = scan_file(path)
        findings.extend(result.findings)
        findings.extend(check_file(path, result.text, result.sites))
        sites.extend(result.sites)
        if result.text and "servefit:" in result.text:
            sups.extend(scan_text(path, result.text))
    sites, findings, notes = _rendered(walked, sites, findings, options)
    sites = _link_modelfiles(sites)
    reports: list[SiteReport] = []
    for site in sites:
        rep = lint_site(site, options)
        reports.append(rep)
        findings.extend(rep.findings)
    reports, findings = _drop_config_duplicates(reports, findings)
    for f in findings:
        note = notes.get((f.span.file, f.span.start, f.span.end)) if f.span is not None else None
        if note:
            f.message = f"{f.message} ({note})"
    return LintResult(_unique(findings), reports, files, sups)


def _rendered(walked: list[str], sites: list[LaunchSite], findings: list[Finding], options: LintOptions
              ) -> tuple[list[LaunchSite], list[Finding], dict[tuple[str, int, int], str]]:
    """Helm charts among the files, rendered (sources/render.py): their manifests' servers replace
    what was read from their values files, and one finding per chart replaces SF104 on each template.
    Kustomizations likewise: the built output's servers replace those of the files it reads."""
    from servefit.sources import render

    out = render.charts(walked, options.values, options.render)
    if not (out.charts or out.sites or out.findings or out.values_files):
        return sites, findings, {}
    import os

    rendered = sorted(out.charts)
    sites = [s for s in sites if os.path.normpath(s.file) not in out.values_files] + out.sites
    findings = [f for f in findings if not (f.code == "SF104" and f.span is not None
                                            and render.in_chart(f.span.file, rendered))] + out.findings
    return sites, findings, out.notes


def _unique(findings: list[Finding]) -> list[Finding]:
    """One finding per code, place and message (a value shared by two servers, e.g. a macro)."""
    seen: set[tuple[object, ...]] = set()
    out = []
    for f in findings:
        s = f.span
        key = (f.code, f.message, s.file, s.start, s.end, s.line, s.col) if s is not None else (f.code, f.message, f.site)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _link_modelfiles(sites: list[LaunchSite]) -> list[LaunchSite]:
    """An Ollama server and the Modelfile it serves become one server (engines/ollama_link)."""
    if not any(s.engine == "ollama" for s in sites):
        return sites
    try:
        from servefit.engines.ollama_link import link_modelfiles
    except ImportError:
        return sites
    try:
        return link_modelfiles(sites)
    except Exception:  # the Ollama side's problem must not stop the run
        return sites


def _drop_config_duplicates(reports: list[SiteReport], findings: list[Finding]
                            ) -> tuple[list[SiteReport], list[Finding]]:
    """A vLLM --config file listed on its own is dropped when a command in the run uses it."""
    used = set()
    for rep in reports:
        argv = [t.text for t in rep.site.argv]
        for i, w in enumerate(argv):
            ref = argv[i + 1] if w == "--config" and i + 1 < len(argv) else (w[9:] if w.startswith("--config=") else None)
            if ref:
                used.add(os.path.basename(ref))
    drop = {id(r.site) for r in reports if r.site.extra.get("config_only")
            and os.path.basename(r.site.file) in used}
    if not drop:
        return reports, findings
    names = {r.site.name + "\0" + r.site.file for r in reports if id(r.site) in drop}
    keep = [r for r in reports if id(r.site) not in drop]
    kept = [f for f in findings if not (f.span is not None and f.site + "\0" + f.span.file in names)]
    return keep, kept


def _gpu(site: LaunchSite, options: LintOptions) -> tuple[str | None, int | None, str]:
    """(GPU name, count, where they came from): the file's hint first, then --gpu / --gpus,
    then the config default. A count the file gives is kept even when the name comes from
    --gpu (a pod asking for 2 GPUs of whatever --gpu names)."""
    hint = site.gpu
    name, source = None, ""
    if hint is not None and hint.name:
        name, source = hint.name, hint.source
    elif options.gpu:
        name, source = options.gpu, "--gpu"
    elif options.config is not None and (t := options.config.target_for(site.file)) is not None and t.gpu:
        name, source = t.gpu, f"config target {', '.join(t.paths)}"
        if t.count and not (hint is not None and hint.count):
            return name, t.count, source
    elif options.default_gpu:
        name, source = options.default_gpu, "config default"
    file_count = hint.count if hint is not None and hint.count else None
    if file_count is not None:
        if hint is not None and not hint.name:
            what = hint.source.removeprefix("count from ")
            source = f"{source}; count from {what}" if source else f"count from {what}"
        return name, file_count, source
    if hint is not None and hint.name:
        return name, None, source  # the catalog / instance type says how many
    if options.gpus:
        return name, options.gpus, f"{source}; count from --gpus" if source and source != "--gpu" else source
    if source == "config default":
        return name, options.default_gpu_count, source
    return name, None, source


def _anchor(site: LaunchSite) -> Span:
    """Where a finding about the whole server points: its command's first word on the site's line."""
    line = max(site.line, 1)
    for t in site.argv:
        if t.span is not None and t.span.file == site.file and t.span.line == line:
            return t.span
    return Span(site.file, line, 1, line, 1)


def lint_site(site: LaunchSite, options: LintOptions) -> SiteReport:
    from servefit import engines
    from servefit.linter import exposure
    from servefit.linter.checks import check

    rep = SiteReport(site)
    out = rep.findings
    rep.gpu_name, rep.gpu_count, rep.gpu_source = _gpu(site, options)
    engine = None
    try:
        engine = engines.get(site.engine or "")
        rep.plugin = True
    except UsageError:
        out.append(finding("SF109", f"no servefit plugin for {site.engine or 'this engine'} is installed: "
                                    "this server is listed but its settings are not checked",
                           site=site.name, span=_anchor(site)))
    version = options.engine_version or site.engine_version or _config_version(site, options)
    if engine is not None:
        try:
            rep.config = engine.parse(site, version)
        except UsageError as exc:
            out.append(finding("SF112", str(exc), site=site.name, span=_anchor(site)))
        except Exception as exc:  # a plugin bug must not stop the run
            out.append(finding("SF112", f"{type(exc).__name__}: {exc}", site=site.name, span=_anchor(site)))
    if options.evaluate and rep.config is not None:
        _evaluate(rep, options, version)
    elif rep.config is not None:
        out.extend(rep.config.findings)
    taken = {(f.span.file, f.span.start) for f in out if f.span is not None and f.severity == "error"}
    for f in check(site, rep.config):
        if f.code == "SF101" and f.span is not None and (f.span.file, f.span.start) in taken:
            continue  # the engine plugin already reports the world size
        out.append(f)
    out.extend(exposure.check(site, rep.config, options.config.trusted_orgs if options.config else ()))
    _finish(rep)
    return rep


def _config_version(site: LaunchSite, options: LintOptions) -> str | None:
    cfg = options.config
    if cfg is None or not site.engine:
        return None
    t = cfg.target_for(site.file)
    if t is not None and site.engine in t.engine_versions:
        return t.engine_versions[site.engine]
    return cfg.engine_versions.get(site.engine)


def _evaluate(rep: SiteReport, options: LintOptions, version: str | None) -> None:
    from servefit.pipeline import Target, evaluate

    site, cfg, out = rep.site, rep.config, rep.findings
    assert cfg is not None
    ref = cfg.model_ref or ""
    if not rep.gpu_name:
        out.extend(cfg.findings)
        out.append(finding("SF110", "no GPU is known for this server, so its memory was not checked: pass "
                                    "--gpu NAME or add `# servefit: gpu=NAME` to the file",
                           site=site.name, span=_anchor(site)))
        return
    if not ref and site.engine == "ollama":
        out.extend(cfg.findings)  # `ollama serve` loads models on request: none is named here
        return
    if "$" in ref:
        out.extend(cfg.findings)  # the model is a variable: SF001 / SF107 say so
        return
    from servefit.hardware import resolve_target

    try:
        resolve_target(rep.gpu_name)
    except UsageError as exc:
        if not options.gpu_memory:  # with --gpu-memory an unlisted card is sized, not unknown
            out.extend(cfg.findings)
            out.append(finding("SF003", str(exc), site=site.name,
                               span=site.gpu.span if site.gpu is not None and site.gpu.name else _anchor(site)))
            return
    storage = site.extra.get("storage_model")  # KServe: storageUri is downloaded to /mnt/models
    model = storage if storage and ref.startswith(site.extra.get("storage_path", "\0")) else None
    from servefit.models.lock import context_for

    found = options.config if options.config is not None and options.config.path else None
    target = Target(gpu=rep.gpu_name, gpus=rep.gpu_count, gpu_memory=options.gpu_memory,
                    engine_version=version, online=options.online, source=rep.gpu_source, model=model,
                    models=context_for(site.file, online=options.online, config=found))
    try:
        ev = evaluate(site, target)
    except UsageError as exc:
        out.extend(cfg.findings)
        out.append(finding("SF002", str(exc), site=site.name, span=cfg.spans.get("model") or _anchor(site)))
        return
    except Exception as exc:
        out.extend(cfg.findings)
        out.append(finding("SF112", f"{type(exc).__name__}: {exc}", site=site.name, span=_anchor(site)))
        return
    rep.config, rep.plan, rep.evaluation = ev.config, ev.plan, ev
    rep.gpu_count = ev.count
    out.extend(ev.config.findings)
    out.extend(ev.plan.findings)
    plan = ev.plan
    if plan.outcome != "started" and not any(f.severity == "error" for f in ev.config.findings + plan.findings):
        m = plan.memory
        need = (m.weights + m.activation_peak + m.non_torch + m.cuda_graphs) / 2**30
        have = m.budget / 2**30 if m.budget else ev.gpu.memory_bytes / 2**30
        out.append(finding("SF111", f"{plan.engine} will not start ({plan.outcome.replace('_', ' ')}): "
                                    f"need {need:.2f} GiB before the KV cache, have {have:.2f} GiB",
                           site=site.name, span=cfg.spans.get("model") or _anchor(site)))


def _finish(rep: SiteReport) -> None:
    """Site names and anchors on every finding; the ones that depend on the GPU say which GPU
    was assumed and where that came from; a finding on an unresolved variable's text is left
    to SF001 (the value is not known, so it cannot be wrong)."""
    site = rep.site
    unresolved = {(s.file, s.start) for _, s in site.extra.get("unresolved_spans", []) if s is not None}
    kept = []
    for f in rep.findings:
        if f.span is not None and (f.span.file, f.span.start) in unresolved and f.code != "SF001":
            continue
        if not f.site:
            f.site = site.name
        if f.span is None:
            f.span = _anchor(site)
        planned = rep.plan is not None and not f.code.startswith(("SF", "SEC"))
        if rep.gpu_name and (planned or f.code in GPU_DEPENDENT) and "[GPU:" not in f.message:
            f.message = f"{f.message} [GPU: {rep.gpu_label}]"
        kept.append(f)
    rep.findings = kept
