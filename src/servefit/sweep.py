"""Sweeps over context length and concurrency that find the OOM boundary, computed
by re-planning with the engine's own model, so every row is what the engine would do.

Each row books the KV cache the usual formula gives (2 x layers x kv_heads x head_dim x bytes,
GQA and the layer kinds respected) for `batch` users at `context` tokens, on top of the engine's
non-KV memory, and marks whether the engine's KV pool holds that many requests.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from servefit.pipeline import Evaluation

# the setting that sets the per-request context, per engine (data/concepts.yaml has the full map)
CONTEXT_SETTING = {"vllm": "max_model_len", "llamacpp": "ctx_size", "ollama": "num_ctx",
                   "tgi": "max_total_tokens", "sglang": "context_length"}
KV_DTYPE_SETTING = {"vllm": "kv_cache_dtype", "tgi": "kv_cache_dtype", "sglang": "kv_cache_dtype"}
CONTEXTS = (2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576)
BATCHES = (1, 4, 8, 16, 32, 64, 128, 256)


@dataclass
class Row:
    context: int
    batch: int
    kv_bytes: int  # KV cache the batch needs
    total_bytes: int  # non-KV memory + that KV
    util: float  # total / the GPU's memory
    users: float  # requests of `context` tokens the engine's KV pool holds
    ok: bool
    outcome: str


def replan(ev: Evaluation, env: dict[str, str] | None = None, **settings: object) -> Evaluation:
    """The same server with some settings (and environment variables) changed, planned again
    by its engine."""
    from servefit import engines

    cfg = copy.copy(ev.config)
    cfg.env = dict(ev.config.env, **(env or {}))
    cfg.settings = dict(ev.config.settings)
    cfg.settings.update(settings)
    cfg.explicit = set(ev.config.explicit) | set(settings)
    cfg.findings = []
    plan = engines.get(cfg.engine).plan(cfg, ev.model, ev.gpu, ev.count)
    return Evaluation(site=ev.site, config=cfg, model=ev.model, gpu=ev.gpu, count=ev.count, gpu_source=ev.gpu_source,
                      plan=plan)


def _non_kv(ev: Evaluation) -> int:
    m = ev.plan.memory
    return m.weights + m.activation_peak + m.non_torch + m.cuda_graphs


def row(ev: Evaluation, context: int, batch: int, allow_long: bool = True) -> Row:
    key = CONTEXT_SETTING.get(ev.config.engine, "max_model_len")
    env = {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"} if allow_long and ev.config.engine == "vllm" else None
    at = replan(ev, env, **{key: context})
    p = at.plan
    kv = p.kv_bytes_per_token * context * batch
    total = _non_kv(at) + kv
    users = p.max_concurrency if p.outcome == "started" else 0.0
    return Row(context=context, batch=batch, kv_bytes=kv, total_bytes=total, util=total / ev.gpu.memory_bytes,
               users=users, ok=p.outcome == "started" and users >= batch, outcome=p.outcome)


def limit(ev: Evaluation) -> int:
    """The longest context worth sweeping: the model's own limit."""
    from servefit.engines.vllm.checks import derived_max_len
    from servefit.engines.vllm.era import era

    return derived_max_len(ev.model, era(ev.plan.engine_version if ev.plan.engine == "vllm" else None), False)


def context_sweep(ev: Evaluation, batch: int = 8, upto: int | None = None) -> list[Row]:
    top = upto or max(limit(ev), 2048)
    return [row(ev, c, batch) for c in CONTEXTS if c <= top]


def batch_sweep(ev: Evaluation, context: int = 2048, batches: tuple[int, ...] = BATCHES) -> list[Row]:
    return [row(ev, context, b) for b in batches]


def grid(ev: Evaluation, upto: int | None = None, batches: tuple[int, ...] = BATCHES) -> list[list[Row]]:
    """context x batch feasibility (one re-plan per context; the batch only changes the booking)."""
    top = upto or max(limit(ev), 2048)
    out = []
    for c in CONTEXTS:
        if c > top:
            break
        base = row(ev, c, 1)
        out.append([Row(c, b, base.kv_bytes * b, base.total_bytes + base.kv_bytes * (b - 1),
                        (base.total_bytes + base.kv_bytes * (b - 1)) / ev.gpu.memory_bytes, base.users,
                        base.outcome == "started" and base.users >= b, base.outcome) for b in batches])
    return out


def max_users(ev: Evaluation, variants: dict[str, dict[str, object]], upto: int | None = None) -> dict[str, list[tuple[int, int]]]:
    """For each variant (KV dtype, quantization ...): (context, whole users the KV pool holds)."""
    top = upto or max(limit(ev), 2048)
    out: dict[str, list[tuple[int, int]]] = {}
    for name, settings in variants.items():
        base = replan(ev, None, **settings) if settings else ev
        out[name] = [(r.context, int(r.users)) for r in (row(base, c, 1) for c in CONTEXTS if c <= top)]
    return out


def variants(ev: Evaluation) -> dict[str, dict[str, object]]:
    """KV dtypes and quantizations the engine allows on this GPU."""
    eng = ev.config.engine
    out: dict[str, dict[str, object]] = {"as configured": {}}
    if eng in KV_DTYPE_SETTING:
        if ev.gpu.vendor != "nvidia" or ev.gpu.compute_capability >= 80:
            out["kv fp8"] = {KV_DTYPE_SETTING[eng]: "fp8"}
    if eng == "vllm" and not ev.model.quantization and ev.gpu.compute_capability >= 75:
        out["weights fp8 (online)"] = {"quantization": "fp8"}
        if "kv fp8" in out:
            out["weights fp8 + kv fp8"] = {"quantization": "fp8", "kv_cache_dtype": "fp8"}
    if eng == "llamacpp":
        out["kv q8_0"] = {"cache_type_k": "q8_0", "cache_type_v": "q8_0", "flash_attn": "on"}
        out["kv q4_0"] = {"cache_type_k": "q4_0", "cache_type_v": "q4_0", "flash_attn": "on"}
    return out


@dataclass
class PagingRow:
    block_size: int
    blocks_per_request: int
    users: float  # requests of `context` tokens the pool holds at this block size
    waste_bytes: int  # expected KV lost to partly filled last blocks across `batch` requests


def paging(ev: Evaluation, context: int, batch: int, sizes: tuple[int, ...] = (16, 256)) -> list[PagingRow]:
    """A request's last block is on average half empty, so the expected
    waste per request is (block_size - 1) / 2 tokens of KV; at long context the pool holds few
    requests and that waste is a larger share of what is left for new ones."""
    out = []
    for bs in sizes:
        at = replan(ev, {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}, block_size=bs,
                    **{CONTEXT_SETTING.get(ev.config.engine, "max_model_len"): context})
        per_token = at.plan.kv_bytes_per_token
        out.append(PagingRow(block_size=bs, blocks_per_request=-(-context // bs),
                             users=at.plan.max_concurrency if at.plan.outcome == "started" else 0.0,
                             waste_bytes=int(batch * (bs - 1) / 2 * per_token)))
    return out
