"""The target a server is checked against (GPU, GPU count, GPU memory, model, engine version)
and where each part came from. One precedence for every command:

    command-line flag  >  in-file directive (`# servefit: gpu=… model=…`)
                       >  what the repo says (nodeSelector, instance type, device counts, image tag)
                       >  the configuration (a `targets` entry matching the file, then the default)

Each part is resolved on its own, so `--gpu H100` on a pod that asks for two GPUs checks two
H100s. A count from the configuration is not applied where the repo names an instance type
(the instance type says how many GPUs it has).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from servefit.config import Config
from servefit.core import LaunchSite, Span, UsageError


@dataclass(frozen=True)
class Part:
    """One resolved value and where it came from (a flag, a directive, the repo, the config)."""

    value: Any
    source: str
    span: Span | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source,
                "location": self.span.as_dict() if self.span is not None else None}


@dataclass
class Flags:
    """What the command line says about the target (every part optional)."""

    gpu: str | None = None
    gpus: int | None = None
    gpu_memory: int | None = None
    engine_version: str | None = None
    model: str | None = None
    model_config: str | None = None
    online: bool = False


@dataclass
class ServerTarget:
    """The GPU, count, GPU memory, model and engine version one server is checked against, each with where it
    came from, so findings can say what was assumed and why."""

    gpu: Part | None = None
    count: Part | None = None
    gpu_memory: Part | None = None
    model: Part | None = None  # None: the model the server's own command names
    engine_version: Part | None = None
    model_config: str | None = None
    online: bool = False

    @property
    def gpu_source(self) -> str:
        """How findings name where the GPU came from: `NAME-SOURCE; count from COUNT-SOURCE`."""
        if self.gpu is None:
            return ""
        src = self.gpu.source
        if self.count is not None and self.count.source not in (src, f"count from {src}") \
                and self.count.source not in src:
            src = f"{src}; {self.count.source}"
        return src

    def as_dict(self) -> dict[str, Any]:
        return {k: (getattr(self, k).as_dict() if getattr(self, k) is not None else None)
                for k in ("gpu", "count", "gpu_memory", "model", "engine_version")}


def _directive(site: LaunchSite, key: str) -> Part | None:
    d = site.directives.get(key)
    if d is None or not d.value:
        return None
    return Part(d.value, f"servefit directive (line {d.line})", d.span)


def _count_of(text: str | None, what: str) -> int | None:
    if text is None:
        return None
    try:
        n = int(str(text).strip())
    except ValueError:
        raise UsageError(f"{what}: not a GPU count: {text!r}") from None
    if n < 1:
        raise UsageError(f"{what}: a GPU count must be at least 1 (got {n})")
    return n


def _repo_count_source(source: str) -> str:
    """The `count from …` part of a file hint's source."""
    for part in source.split("; "):
        if part.startswith("count from "):
            return part
    return source


def _config_source(cfg: Config, what: str) -> str:
    return f"config target {what}" if what else "config default"


def resolve(site: LaunchSite, flags: Flags, cfg: Config | None) -> ServerTarget:
    """The target of one server, each part with its source (see the module docstring)."""
    from servefit.units import parse_size

    t = ServerTarget(model_config=flags.model_config, online=flags.online)  # never the repo's own config
    hint = site.gpu
    ct = cfg.target_for(site.file) if cfg is not None else None
    ct_name = ", ".join(ct.paths) if ct is not None else ""

    # GPU name
    from_repo_name = False
    if flags.gpu:
        t.gpu = Part(flags.gpu, "--gpu")
    elif (d := _directive(site, "gpu")) is not None:
        t.gpu = d
    elif hint is not None and hint.name:
        t.gpu = Part(hint.name, hint.source, hint.span)
        from_repo_name = True
    elif ct is not None and ct.gpu:
        t.gpu = Part(ct.gpu, _config_source(cfg, ct_name))  # type: ignore[arg-type]
    elif cfg is not None and cfg.gpu:
        t.gpu = Part(cfg.gpu, "config default")

    # GPU count
    if flags.gpus is not None:
        t.count = Part(_count_of(str(flags.gpus), "--gpus"), "count from --gpus")
    elif (d := _directive(site, "count")) is not None:
        t.count = Part(_count_of(d.value, f"{site.file}:{d.span.line if d.span else ''} count"),
                       f"count from {d.source}", d.span)
    elif hint is not None and hint.count:
        t.count = Part(hint.count, _repo_count_source(hint.source) if hint.name
                       else "count from " + hint.source.removeprefix("count from "), None if hint.name else hint.span)
        if hint.name and from_repo_name:
            t.count = Part(hint.count, t.gpu.source if t.gpu else hint.source)
    elif not from_repo_name and ct is not None and ct.count and ct.gpu and t.gpu is not None \
            and t.gpu.value == ct.gpu:
        t.count = Part(ct.count, f"count from config target {ct_name}")
    elif not from_repo_name and cfg is not None and cfg.gpus and t.gpu is not None and t.gpu.source == "config default":
        t.count = Part(cfg.gpus, "config default")

    # GPU memory (a modded card, MIG slice)
    if flags.gpu_memory:
        t.gpu_memory = Part(flags.gpu_memory, "--gpu-memory")
    elif (d := _directive(site, "gpu-memory")) is not None:
        size = parse_size(d.value)
        t.gpu_memory = Part(size, d.source, d.span) if size else None
    elif ct is not None and ct.gpu_memory:
        t.gpu_memory = Part(parse_size(ct.gpu_memory), f"config target {ct_name}")
    elif cfg is not None and cfg.gpu_memory:
        t.gpu_memory = Part(parse_size(cfg.gpu_memory), "config default")

    # model (None: the server's own command names it)
    if flags.model:
        t.model = Part(flags.model, "--model")
    elif (d := _directive(site, "model")) is not None:
        t.model = d

    # engine version
    eng = site.engine or ""
    if flags.engine_version:
        t.engine_version = Part(flags.engine_version, "--engine-version")
    elif (d := _directive(site, "engine-version")) is not None:
        t.engine_version = d
    elif site.engine_version:
        t.engine_version = Part(site.engine_version, site.workload.version_source
                                or (f"image tag ({site.image})" if site.image else "the file"))
    elif ct is not None and eng in ct.engine_versions:
        t.engine_version = Part(ct.engine_versions[eng], f"config target {ct_name}")
    elif cfg is not None and eng in cfg.engine_versions:
        t.engine_version = Part(cfg.engine_versions[eng], "config engine-versions")
    return t
