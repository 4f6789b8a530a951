"""One server, assembled: the configuration that applies to its file, its target (sources/target.py),
the engine's parse of it (once) and its memory plan (once, sources/server_plan.py), with the findings
that say what could not be checked. sources/assemble.py builds every server of a run through here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from servefit.config import Config, Configs
from servefit.core import EngineConfig, Finding, LaunchSite, MemoryPlan, Span, UsageError
from servefit.rules.catalog import finding
from servefit.rules.registry import rule
from servefit.sources.target import Flags, ServerTarget, resolve

if TYPE_CHECKING:
    from servefit.pipeline import Evaluation


@dataclass
class Server:
    """One server, assembled: where it is, the configuration and target that apply to it, the
    engine's parse of it and (when a GPU and a model are known) its memory plan."""

    site: LaunchSite
    options: Config  # servefit's configuration for the server's file
    target: ServerTarget
    config: EngineConfig | None = None  # the engine's parse
    evaluation: Evaluation | None = None
    plugin: bool = False
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None  # why it was not planned, said the way estimate / tune say it

    @property
    def plan(self) -> MemoryPlan | None:
        return self.evaluation.plan if self.evaluation is not None else None

    @property
    def gpu_name(self) -> str | None:
        return str(self.target.gpu.value) if self.target.gpu is not None else None

    @property
    def gpu_count(self) -> int | None:
        if self.evaluation is not None:
            return self.evaluation.count
        return int(self.target.count.value) if self.target.count is not None else None

    @property
    def gpu_source(self) -> str:
        return self.evaluation.gpu_source if self.evaluation is not None else self.target.gpu_source

    @property
    def gpu_label(self) -> str:
        if not self.gpu_name:
            return ""
        count = f" ×{self.gpu_count}" if self.gpu_count else ""
        return f"{self.gpu_name}{count} from {self.gpu_source}"

    @property
    def model_ref(self) -> str | None:
        """The model as servefit resolves it: the target's override, else the server's own."""
        if self.target.model is not None:
            return str(self.target.model.value)
        return self.config.model_ref if self.config is not None else None



def anchor(site: LaunchSite) -> Span:
    """Where a finding about the whole server points: its command's first word on the site's line."""
    line = max(site.line, 1)
    for t in site.argv:
        if t.span is not None and t.span.file == site.file and t.span.line == line:
            return t.span
    return Span(site.file, line, 1, line, 1)


def build(site: LaunchSite, flags: Flags, configs: Configs, *, plan: bool = True) -> Server:
    """Configuration, target, parse (once) and plan (once) for one server; the checks run
    with the rule options of the server's file."""
    from servefit.rules.registry import options

    opts = configs.for_file(site.file)
    with options(opts.rules):
        return _build(site, flags, opts, plan)


@rule("SF109")
def _build(site: LaunchSite, flags: Flags, opts: Config, plan: bool) -> Server:
    from servefit.pipeline import engine_for, unresolved_to_assumptions
    from servefit.sources import image_release
    from servefit.sources.server_plan import (
        not_starting,
        plan_server,
        storage_model,
        values_model,
        variable_folder_model,
    )

    try:
        target = resolve(site, flags, opts)
    except UsageError as exc:
        target = ServerTarget(model_config=flags.model_config, online=flags.online)
        srv = Server(site, opts, target, error=str(exc))
        srv.findings.append(plugin_failed(str(exc), site=site.name, span=anchor(site)))
        return srv
    srv = Server(site, opts, target)
    out = srv.findings
    try:
        engine = engine_for(site)
        srv.plugin = True
    except UsageError as exc:
        srv.error = str(exc) if site.engine is None else f"no servefit plugin for {site.engine} is installed"
        out.append(finding("SF109", f"no servefit plugin for {site.engine or 'this engine'} is installed: "
                                    "this server is listed but its settings are not checked",
                           site=site.name, span=anchor(site)))
        return srv
    fork = image_release.fork_of(site.image) if site.image else None
    if fork is not None:  # another project's server under the engine's name: its options are not the engine's
        srv.error = (f"{site.image} runs {fork}, a fork of {engine.title} with its own options and memory planning "
                     "that servefit does not model")
        out.append(finding("SF109", f"{srv.error}: this server is listed but its settings are not checked",
                           site=site.name, span=anchor(site)))
        return srv
    version = str(target.engine_version.value) if target.engine_version is not None else None
    try:
        srv.config = engine.parse(site, version)
    except Exception as exc:  # noqa: BLE001 - a plugin bug or bad input: a finding, the run goes on
        msg = str(exc) if isinstance(exc, UsageError) else f"{type(exc).__name__}: {exc}"
        srv.error = msg
        out.append(plugin_failed(msg, site=site.name, span=anchor(site)))
        return srv
    srv.config.assumptions.extend(n for n in site.workload.notes if n not in srv.config.assumptions)
    unknown = unresolved_to_assumptions(site, srv.config)  # `--tp $TP` unset: the default is planned, not a refusal
    storage_model(srv)
    values_model(srv)
    variable_folder_model(srv)
    if plan and not site.workload.refused:
        plan_server(srv, engine)
    out.extend(srv.config.findings)
    if site.workload.refused:  # the command as meant is parsed (its own errors said); lint says SF106 where it is written
        srv.error = site.workload.refused
        return srv
    if srv.evaluation is not None:
        p = srv.evaluation.plan  # a finding about a setting given as an unset variable judges a default (SF001 says so)
        p.findings = [f for f in p.findings if f.setting not in unknown or f.code.startswith("SF")]
        out.extend(p.findings)
        not_starting(srv)
    return srv


@rule("SF112")
def plugin_failed(message: str, **where: Any) -> Finding:
    """The engine plugin raised on this server: a finding, and the run goes on."""
    return finding("SF112", message, **where)
