"""The rules about how a server is deployed rather than how the engine plans memory:

- SF101 parallel-exceeds-gpus: tensor × pipeline parallel size (TGI `num_shard`, SGLang
  `tp_size × pp_size`) larger than the GPUs the file requests.
- SF102 shm-too-small: tensor/pipeline parallelism over NCCL with the container's default
  64 MiB /dev/shm (the wrapper sets `site.workload.shm`: True, False, or None when unknown).
- SF118 cuda-visible-devices-invalid: an entry CUDA does not read as a GPU (`all`) hides it and
  every later one.

Each takes the site, the engine's parsed settings (or None without a plugin) and returns
findings; the docs live in data/rules/sources.yaml.
"""

from __future__ import annotations

from typing import Any

from servefit.core import EngineConfig, Finding, LaunchSite, Span
from servefit.rules.catalog import finding
from servefit.rules.registry import rule
from servefit.sources.hints import unread_visible_device


def _parallel_data(engine: str | None) -> dict[str, Any]:
    """The `parallel` key of data/engines/<name>.yaml: the settings and flags of tensor and
    pipeline parallelism, and whether the engine's workers talk over NCCL."""
    from servefit import data

    if not engine:
        return {}
    try:
        return dict(data.load(f"engines/{engine}.yaml").get("parallel") or {})
    except (OSError, ValueError):
        return {}


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _raw(site: LaunchSite, flags: set[str]) -> tuple[int | None, Span | None]:
    argv = site.argv
    for i, tok in enumerate(argv):
        key, eq, val = tok.text.partition("=")
        if key in flags:
            if eq:
                return _int(val), tok.span
            if i + 1 < len(argv):
                return _int(argv[i + 1].text), argv[i + 1].span
    return None, None


def parallel(site: LaunchSite, cfg: EngineConfig | None) -> tuple[int, int, Span | None]:
    """(tensor, pipeline, span of the tensor value) as the engine will use them."""
    d = _parallel_data(site.engine)
    tkey, pkey = d.get("tensor"), d.get("pipeline")
    if not tkey:
        return 1, 1, None
    if cfg is not None:
        t = _int(cfg.settings.get(tkey)) or 1
        p = (_int(cfg.settings.get(pkey)) or 1) if pkey else 1
        span = cfg.spans.get(tkey) or (cfg.spans.get(pkey) if pkey else None)
        if d.get("explicit_only") and tkey not in cfg.explicit:
            t = 1
        return t, p, span
    tp, tspan = _raw(site, set(d.get("tensor_flags") or ()))
    pp, pspan = _raw(site, set(d.get("pipeline_flags") or ())) if d.get("pipeline_flags") else (None, None)
    env = d.get("tensor_env")
    if tp is None and env and env in site.env:
        tp, tspan = _int(site.env[env].text), site.env[env].span
    return tp or 1, pp or 1, tspan or pspan


@rule("SF101", "SF102")
def check(site: LaunchSite, cfg: EngineConfig | None) -> list[Finding]:
    out: list[Finding] = visible_devices(site)
    tp, pp, span = parallel(site, cfg)
    world = tp * pp
    gpu = site.gpu
    if gpu is not None and gpu.count is not None and world > gpu.count and not _over_hosts(site, cfg, world, gpu.count):
        d = _parallel_data(site.engine)
        what = f"tensor parallel {tp}" + (f" × pipeline parallel {pp}" if pp > 1 else "")
        if d.get("label"):
            what = f"{d['label']} {tp}"
        out.append(finding("SF101", f"{what} needs {world} GPUs, but the file requests {gpu.count} "
                                    f"({gpu.source}): the engine fails at start", span=span or gpu.span, site=site.name,
                           setting=d.get("tensor") or None))
    shm = site.workload.shm
    if gpu is not None and gpu.count is not None and _over_hosts(site, cfg, world, gpu.count):
        world = min(world, gpu.count)  # the ranks on this host (Ray, --nnodes); the others reach it over the network
    if world > 1 and shm is False and _parallel_data(site.engine).get("nccl"):
        size = f"limited by its {site.workload.shm_limit}" if site.workload.shm_limit else "only 64 MiB"
        out.append(finding("SF102", f"{world} GPU workers share tensors through /dev/shm, which is {size} "
                                    f"in this {_where(site)}: NCCL crashes or hangs at start. "
                                    f"{'Raise the sizeLimit (e.g. 16Gi).' if site.workload.shm_limit else _fix(site)}",
                           span=span, site=site.name))
    return out


@rule("SF118")
def visible_devices(site: LaunchSite) -> list[Finding]:
    """SF118. CUDA reads CUDA_VISIBLE_DEVICES up to its first entry that is no GPU
    (sources/hints.py::unread_visible_device). An empty value or a negative index hides the GPUs
    on purpose and is left alone. When no GPU stays visible the assembly does not plan the
    server's GPU memory (sources/server_plan.py::plan_server), so estimate and tune say so too."""
    tok = site.env.get("CUDA_VISIBLE_DEVICES")
    hit = unread_visible_device(tok.text) if tok is not None else None
    if tok is None or hit is None:
        return []
    entries, bad = hit
    seen = ", ".join(entries[:bad])
    left = f"only {seen} stays visible" if seen else "the server sees no GPU"
    return [finding("SF118", f"CUDA_VISIBLE_DEVICES={tok.text}: CUDA reads no GPU from {entries[bad]!r} and stops there, so "
                             f"{left}{'' if seen else ' (vLLM, SGLang and TGI fail at start; Ollama and llama.cpp run on the CPU)'}"
                             f"{'; all is a value of NVIDIA_VISIBLE_DEVICES' if entries[bad].lower() == 'all' else ''}",
                    span=tok.span, site=site.name, setting="CUDA_VISIBLE_DEVICES")]


def _over_hosts(site: LaunchSite, cfg: EngineConfig | None, world: int, count: int) -> bool:
    """The ranks are placed over several hosts (`--nnodes 2`: world / 2 per host; vLLM's Ray backend:
    the Ray cluster's nodes), so the GPUs the file gives one host need not hold them all."""
    if cfg is None:
        return False
    d = _parallel_data(site.engine)
    if any(str(cfg.settings.get(k)) == v for k, v in (d.get("spread") or {}).items()):
        return True
    nodes = _int(cfg.settings.get(d["nodes"])) if d.get("nodes") else None
    return bool(nodes and nodes > 1 and -(-world // nodes) <= count)


def _where(site: LaunchSite) -> str:
    if site.workload.kind or site.workload.chart:
        return "pod"
    return "container"


def _fix(site: LaunchSite) -> str:
    if site.workload.kind or site.workload.chart:
        return "Mount an emptyDir with medium: Memory at /dev/shm."
    if site.workload.service:
        return "Set shm_size: 16gb or ipc: host."
    return "Pass --ipc=host or --shm-size 16g."


