"""The rules about how a server is deployed rather than how the engine plans memory:

- SF101 parallel-exceeds-gpus: tensor × pipeline parallel size (TGI `num_shard`, SGLang
  `tp_size × pp_size`) larger than the GPUs the file requests.
- SF102 shm-too-small: tensor/pipeline parallelism over NCCL with the container's default
  64 MiB /dev/shm (the wrapper sets `site.extra["shm"]`: True, False, or None when unknown).

Each takes the site, the engine's parsed settings (or None without a plugin) and returns
findings; the docs live in data/rules/sources.yaml.
"""

from __future__ import annotations

from typing import Any

from servefit.core import EngineConfig, Finding, LaunchSite, Span
from servefit.rules.catalog import finding

PARALLEL_KEYS = {
    "vllm": ("tensor_parallel_size", "pipeline_parallel_size"),
    "sglang": ("tp_size", "pp_size"),
    "tgi": ("num_shard", None),
}
# the flags read when the engine plugin is missing
RAW_FLAGS = {
    "vllm": ({"--tensor-parallel-size", "-tp", "--tensor_parallel_size"},
             {"--pipeline-parallel-size", "-pp", "--pipeline_parallel_size"}),
    "sglang": ({"--tp-size", "--tp", "--tensor-parallel-size"}, {"--pp-size", "--pipeline-parallel-size"}),
    "tgi": ({"--num-shard"}, set()),
}
NCCL_ENGINES = {"vllm", "sglang", "tgi"}


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
    eng = site.engine or ""
    keys = PARALLEL_KEYS.get(eng)
    if keys is None:
        return 1, 1, None
    if cfg is not None:
        t = _int(cfg.settings.get(keys[0])) or 1
        p = (_int(cfg.settings.get(keys[1])) or 1) if keys[1] else 1
        span = cfg.spans.get(keys[0]) or (cfg.spans.get(keys[1]) if keys[1] else None)
        if eng == "tgi" and keys[0] not in cfg.explicit:
            t = 1
        return t, p, span
    tflags, pflags = RAW_FLAGS[eng]
    tp, tspan = _raw(site, tflags)
    pp, pspan = _raw(site, pflags) if pflags else (None, None)
    if eng == "tgi" and tp is None and "NUM_SHARD" in site.env:
        tp, tspan = _int(site.env["NUM_SHARD"].text), site.env["NUM_SHARD"].span
    return tp or 1, pp or 1, tspan or pspan


def check(site: LaunchSite, cfg: EngineConfig | None) -> list[Finding]:
    out: list[Finding] = []
    tp, pp, span = parallel(site, cfg)
    world = tp * pp
    gpu = site.gpu
    if gpu is not None and gpu.count is not None and world > gpu.count:
        what = f"tensor parallel {tp}" + (f" × pipeline parallel {pp}" if pp > 1 else "")
        if site.engine == "tgi":
            what = f"num_shard {tp}"
        out.append(finding("SF101", f"{what} needs {world} GPUs, but the file requests {gpu.count} "
                                    f"({gpu.source}): the engine fails at start", span=span or gpu.span, site=site.name,
                           setting=PARALLEL_KEYS.get(site.engine or "", ("",))[0] or None))
    shm = site.extra.get("shm")
    if world > 1 and shm is False and site.engine in NCCL_ENGINES:
        size = f"limited by its {site.extra['shm_limit']}" if site.extra.get("shm_limit") else "only 64 MiB"
        out.append(finding("SF102", f"{world} GPU workers share tensors through /dev/shm, which is {size} "
                                    f"in this {_where(site)}: NCCL crashes or hangs at start. "
                                    f"{'Raise the sizeLimit (e.g. 16Gi).' if site.extra.get('shm_limit') else _fix(site)}",
                           span=span, site=site.name))
    return out


def _where(site: LaunchSite) -> str:
    if site.extra.get("k8s_kind") or site.extra.get("chart"):
        return "pod"
    return "container"


def _fix(site: LaunchSite) -> str:
    if site.extra.get("k8s_kind") or site.extra.get("chart"):
        return "Mount an emptyDir with medium: Memory at /dev/shm."
    if site.extra.get("service"):
        return "Set shm_size: 16gb or ipc: host."
    return "Pass --ipc=host or --shm-size 16g."


