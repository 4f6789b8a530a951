"""`lint_paths(paths, options) -> LintResult`: the shared assembly (sources/assemble.py:
walk, scan, link, de-duplicate, configuration per file, target, parse and plan once per
server), then the deployment rules (linter/checks.py, linter/exposure.py) and secrets per file.
An unknown model or GPU, or any error in one server, is a finding on that server; the run goes
on. Findings that depend on the GPU say which one was assumed and where that came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from servefit.config import Config, Configs
from servefit.core import Finding, LaunchSite, UsageError
from servefit.rules.registry import rule
from servefit.sources.server_build import Server, anchor
from servefit.sources.target import Flags
from servefit.suppressions import Suppression, scan_text

GPU_DEPENDENT = ("SF101", "SF111")


@dataclass
class LintOptions:
    """The lint command's target flags and configuration. `config` is one configuration for
    every file (tests, `--config PATH`); without it each file gets its nearest one."""

    gpu: str | None = None
    gpus: int | None = None
    gpu_memory: int | None = None
    engine_version: str | None = None
    model: str | None = None
    model_config: str | None = None
    online: bool = False
    evaluate: bool = True  # False: find and parse servers only (--list-sites)
    config: Config | None = None
    configs: Configs | None = None  # per-file configuration (the CLI's)
    values: list[str] | None = None  # --values for Helm charts (None: the values files the repo pairs)
    render: bool = True  # render Helm charts and kustomizations when helm / kustomize is on PATH
    stdin: tuple[str, str] | None = None  # (file name, text) linted for the path `-`

    def flags(self) -> Flags:
        return Flags(gpu=self.gpu, gpus=self.gpus, gpu_memory=self.gpu_memory,
                     engine_version=self.engine_version, model=self.model, model_config=self.model_config,
                     online=self.online)

    def resolver(self) -> Configs:
        if self.configs is not None:
            return self.configs
        return _Fixed(self.config) if self.config is not None else Configs()


class _Fixed(Configs):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.cfg = cfg

    def for_file(self, file: str) -> Config:
        return self.cfg


SiteReport = Server  # what lint reports per server is the assembled server plus its findings


@dataclass
class LintResult:
    """What one lint run produced: the findings, the servers, how many files were read, the suppressions, and
    each file's configuration."""

    findings: list[Finding]
    sites: list[Server]
    files: int = 0
    suppressions: list[Suppression] = field(default_factory=list)
    configs: Configs | None = None

    def config_for(self, file: str | None, default: Config) -> Config:
        if file is None or self.configs is None:
            return default
        try:
            return self.configs.for_file(file)
        except UsageError:
            return default


def lint_paths(paths: list[str], options: LintOptions | None = None) -> LintResult:
    from servefit.linter import together
    from servefit.linter.secrets import check_file
    from servefit.sources.assemble import assemble

    options = options or LintOptions()
    asm = assemble(paths, options.flags(), options.resolver(), plan=options.evaluate, stdin=options.stdin,
                   values=options.values, render=options.render)
    findings: list[Finding] = list(asm.findings)
    sups: list[Suppression] = []
    by_file: dict[str, list[LaunchSite]] = {}
    for srv in asm.servers:
        by_file.setdefault(srv.site.file, []).append(srv.site)
    for f in asm.files:
        findings.extend(check_file(f.path, f.text, by_file.get(f.path, [])))
        if f.text and "servefit:" in f.text:
            sups.extend(scan_text(f.path, f.text))
    for srv in asm.servers:
        check_server(srv)
        findings.extend(srv.findings)
    findings.extend(together.check(asm.servers))
    findings = _given_models(findings, asm.servers)
    findings.extend(_online_asked(asm.configs, options, findings))
    for found in findings:  # a finding on a rendered template line says the value was not traced further
        at = found.span
        note = asm.notes.get((at.file, at.start, at.end)) if at is not None else None
        if note and not found.message.endswith(f"({note})"):
            found.message = f"{found.message} ({note})"
    return LintResult(_unique(findings), asm.servers, len(asm.files), sups, asm.configs)


def _given_models(findings: list[Finding], servers: list[Server]) -> list[Finding]:
    """Without the SF001 on the variable a server's model is written as, where --model gives the model:
    the server is checked with it, so "not known, so it is not checked" would be untrue."""
    given = {(s.site.name, sp.file, sp.start) for s in servers if s.target.model is not None and s.config is not None
             for var, sp in s.site.unresolved_spans if sp is not None and var in (s.config.model_ref or "")}
    return [f for f in findings if not (f.code == "SF001" and f.span is not None
                                        and (f.site, f.span.file, f.span.start) in given)]


@rule("SF130")
def _online_asked(configs: Configs | None, options: LintOptions, findings: list[Finding]) -> list[Finding]:
    """SF130 where the repository's own configuration sets `online = true`: it may ask, never turn
    the network on (only the user does: config.user_online)."""
    from servefit.config import configs_asking_online
    from servefit.rules.catalog import finding
    from servefit.sources.text import LineIndex

    if options.online:
        return []
    unsized = sum(1 for f in findings if f.code == "SF002")
    out = []
    for cfg in configs_asking_online(configs):
        assert cfg.path is not None
        try:
            text = open(cfg.path, encoding="utf-8").read()
        except OSError:
            text = ""
        m = re.search(r"(?m)^[ \t]*(online)[ \t]*=", text)
        span = LineIndex(text, cfg.path).span(m.start(1), m.end(1)) if m else None
        more = (f"; {unsized} server(s) name a model servefit could not size offline" if unsized else "")
        out.append(finding("SF130", "this configuration sets online = true, but servefit reads the Hugging Face Hub "
                                    "only when you ask (--online, or online = true in ~/.config/servefit/config.toml)"
                                    f"{more}: run `servefit models lock` and commit servefit.lock to size them offline",
                           span=span))
    return out


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


def lint_site(site: LaunchSite, options: LintOptions) -> Server:
    """One site through the assembly and the rules (tests and fuzzers)."""
    from servefit.sources.server_build import build

    srv = build(site, options.flags(), options.resolver(), plan=options.evaluate)
    check_server(srv)
    return srv


def check_server(srv: Server) -> None:
    """The deployment rules over an assembled server, then the findings' finishing touches."""
    from servefit.linter import exposure
    from servefit.linter.checks import check

    out = srv.findings
    taken = {(f.span.file, f.span.start) for f in out if f.span is not None and f.severity == "error"}
    for f in check(srv.site, srv.config):
        if f.code == "SF101" and f.span is not None and (f.span.file, f.span.start) in taken:
            continue  # the engine plugin already reports the world size
        out.append(f)
    out.extend(exposure.check(srv.site, srv.config, srv.options.trusted_orgs))
    _finish(srv)


def _finish(rep: Server) -> None:
    """Site names and anchors on every finding; the ones that depend on the GPU say which GPU
    was assumed and where that came from; a finding on an unresolved variable's text is left
    to SF001 (the value is not known, so it cannot be wrong), except SF004: a model sized by the name its path
    ends in, where a variable holds only the folder (server_plan.variable_folder_model), says how it was sized."""
    site = rep.site
    from servefit.sources.unset_vars import var_of

    kept = []
    for f in rep.findings:
        if f.span is not None and f.code not in ("SF001", "SF004") and var_of(site, f.span, f.message) is not None:
            continue
        if not f.site:
            f.site = site.name
        if f.span is None:
            f.span = anchor(site)
        planned = rep.plan is not None and not f.code.startswith(("SF", "SEC"))
        if rep.gpu_name and (planned or f.code in GPU_DEPENDENT) and "[GPU:" not in f.message:
            f.message = f"{f.message} [GPU: {rep.gpu_label}]"
        kept.append(f)
    rep.findings = kept
