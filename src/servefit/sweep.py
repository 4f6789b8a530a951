"""Sweeps over context length and concurrency that find the OOM boundary. Every cell is the
engine's own plan for that context and that many users, written in that engine's terms, the way
`servefit estimate` plans the same command (so explain, estimate and tune cannot disagree):

- vLLM: `--max-model-len C`; the users are the requests of C tokens the KV pool holds
  (capped by --max-num-seqs).
- llama.cpp: `-c C x N -np N` (the context is split over the slots unless --kv-unified);
  a cell is OK when the server starts with N slots of C tokens and its layers on the GPU.
- Ollama: `num_ctx C` with OLLAMA_NUM_PARALLEL=N (Ollama allocates num_ctx x N); OK when it
  starts with every layer on the GPU.
- TGI: `--max-total-tokens C` (--max-input-tokens below it); SGLang: `--context-length C`.
  Both count tokens: the users are the KV pool's tokens / C (capped by the request limit).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from servefit.pipeline import Evaluation


def _table(engine: str) -> dict[str, Any]:
    """The engine's `sweep` data: its context setting, KV dtype setting and variants
    (data/engines/<name>.yaml for the built-ins; schemas/engine_sweep.schema.json)."""
    from servefit import engines

    return engines.section(engine, "sweep")


def context_setting(engine: str) -> str | None:
    """The setting that sets the per-request context (vLLM's max_model_len, llama.cpp's -c ...)."""
    return _table(engine).get("context")

CONTEXTS = (2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576)
BATCHES = (1, 4, 8, 16, 32, 64, 128, 256)


@dataclass
class Row:
    """One cell of the context x concurrency sweep: the memory the engine's plan needs at that context and
    batch, the users it serves, and whether it starts."""

    context: int
    batch: int
    kv_bytes: int  # KV cache the batch needs
    total_bytes: int  # non-KV memory + that KV
    util: float  # total / the GPU's memory
    users: float  # requests of `context` tokens the engine serves at once with these settings
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


def _adapter(ev: Evaluation) -> Any:
    from servefit.core import UsageError
    from servefit.tune.space import adapter_for

    try:
        return adapter_for(ev.config.engine)
    except UsageError:  # a plugin engine without tune knobs: its context setting, a token pool
        from servefit.tune.adapters import GenericAdapter

        ad = GenericAdapter()
        ad.context_name = context_setting(ev.config.engine) or "max_model_len"
        return ad


def cell_settings(ev: Evaluation, context: int, users: int) -> tuple[dict[str, Any], dict[str, str]]:
    """(settings, environment) that ask the engine for `users` requests of `context` tokens, in
    that engine's own terms (the engine's tune adapter, engines/<name>/tune.py, says how)."""
    return _adapter(ev).cell_settings(ev, context, users)  # type: ignore[no-any-return]


def _started(at: Evaluation) -> bool:
    """The server starts as configured, with its layers on the GPU (llama.cpp's --fit and Ollama
    move layers to the CPU instead of failing: a slower server, not the one asked for); the
    same test tune applies."""
    from servefit.tune.objective import Needs

    return bool(_adapter(at).started(at.plan, Needs()))


def served(at: Evaluation, users: int) -> float:
    """Requests served at once by the replanned server."""
    ad = _adapter(at)
    if not _started(at):
        return 0.0
    if ad.slot_users:
        return float(users)
    n = float(at.plan.max_concurrency)
    cap = ad.request_cap
    limit = (at.config.settings.get(cap) or at.plan.detail.resolved(cap)) if cap else None
    if limit:
        n = min(n, float(limit))
    return n


def cell(ev: Evaluation, context: int, users: int, **variant: Any) -> Row:
    """One sweep cell: the engine's plan for `users` requests of `context` tokens."""
    settings, env = cell_settings(ev, context, users)
    at = replan(ev, env, **{**variant, **settings})
    p = at.plan
    n = served(at, users)
    m = p.memory
    # llama.cpp and Ollama allocate the cache the command asks for (a sliding-window layer only its window,
    # llama.cpp's llama_kv_cache_iswa): that allocation; an engine that fills a pool with it (vLLM, SGLang, TGI):
    # what these requests need of it
    kv = m.kv_cache if _adapter(at).slot_users else p.kv_bytes_per_token * context * users
    total = m.weights + m.activation_peak + m.non_torch + m.cuda_graphs + kv
    started = _started(at)
    return Row(context=context, batch=users, kv_bytes=kv, total_bytes=total, util=total / (ev.gpu.memory_bytes or 1),
               users=n, ok=n >= users, outcome="started" if started else
               (p.outcome if p.outcome != "started" else _adapter(at).shortfall(p)))


def row(ev: Evaluation, context: int, batch: int, allow_long: bool = True) -> Row:
    return cell(ev, context, batch)


def limit(ev: Evaluation) -> int:
    """The longest context worth sweeping: the model's own limit, as the engine derives it."""
    from servefit import engines

    return int(engines.get(ev.plan.engine).context_limit(ev.model, ev.plan.engine_version))


def context_sweep(ev: Evaluation, batch: int = 8, upto: int | None = None) -> list[Row]:
    top = upto or max(limit(ev), 2048)
    return [row(ev, c, batch) for c in CONTEXTS if c <= top]


def batch_sweep(ev: Evaluation, context: int = 2048, batches: tuple[int, ...] = BATCHES) -> list[Row]:
    return [row(ev, context, b) for b in batches]


def grid(ev: Evaluation, upto: int | None = None, batches: tuple[int, ...] = BATCHES) -> list[list[Row]]:
    """context x users, each cell planned by the engine (slot engines re-plan per cell: the
    slots change the allocation; token-pool engines share one plan per context)."""
    top = upto or max(limit(ev), 2048)
    out = []
    for c in CONTEXTS:
        if c > top:
            break
        if _adapter(ev).slot_users:
            out.append([cell(ev, c, b) for b in batches])
            continue
        base = cell(ev, c, 1)
        out.append([Row(c, b, base.kv_bytes * b, base.total_bytes + base.kv_bytes * (b - 1),
                        (base.total_bytes + base.kv_bytes * (b - 1)) / (ev.gpu.memory_bytes or 1), base.users,
                        base.users >= b, base.outcome) for b in batches])
    return out


def most_users(ev: Evaluation, context: int, variant: dict[str, Any] | None = None,
               batches: tuple[int, ...] = BATCHES) -> int:
    """The most users of `context` tokens the engine serves with these settings."""
    if not _adapter(ev).slot_users:
        return int(cell(ev, context, 1, **(variant or {})).users + 1e-9)
    best = 0
    for b in sorted(set((1, 2) + tuple(batches))):
        if not cell(ev, context, b, **(variant or {})).ok:
            break
        best = b
    return best


def max_users(ev: Evaluation, variants: dict[str, dict[str, object]], upto: int | None = None) -> dict[str, list[tuple[int, int]]]:
    """For each variant (KV dtype, quantization ...): (context, whole users the engine serves)."""
    top = upto or max(limit(ev), 2048)
    out: dict[str, list[tuple[int, int]]] = {}
    for name, settings in variants.items():
        out[name] = [(c, most_users(ev, c, dict(settings))) for c in CONTEXTS if c <= top]
    return out


def none_served(ev: Evaluation, users: dict[str, list[tuple[int, int]]]) -> str:
    """Why the config as written serves no user at any context (the outcome of its shortest cell: layers
    left on the CPU, a model too large), or "" when it serves some."""
    mine = users.get("as configured") or []
    if not mine or any(n for _, n in mine):
        return ""
    return cell(ev, mine[0][0], 1).outcome


def _allowed(ev: Evaluation, needs: str | list[str] | None) -> bool:
    """kv_fp8: an FP8 KV cache (any GPU but an NVIDIA one before Ampere); unquantized_cc75: online FP8
    weights (an unquantized model on compute capability 7.5+)."""
    for need in [needs] if isinstance(needs, str) else needs or []:
        if need == "kv_fp8" and not (ev.gpu.vendor != "nvidia" or ev.gpu.compute_capability >= 80):
            return False
        if need == "unquantized_cc75" and (ev.model.quantization or ev.gpu.compute_capability < 75):
            return False
    return True


def variants(ev: Evaluation) -> dict[str, dict[str, object]]:
    """KV dtypes and quantizations the engine allows on this GPU (the engine's `sweep.variants`)."""
    from servefit.engines.base import version_tuple

    out: dict[str, dict[str, object]] = {"as configured": {}}
    for v in _table(ev.config.engine).get("variants") or ():
        since = v.get("since")
        if since and ev.plan.engine_version and version_tuple(ev.plan.engine_version, "") < version_tuple(str(since), ""):
            continue  # a release without the variant's settings
        if _allowed(ev, v.get("needs")):
            out[str(v["name"])] = dict(v["settings"])
    return out


@dataclass
class PagingRow:
    """What one KV block size costs at a context: blocks per request, the requests the pool holds, and the KV
    lost to partly filled last blocks."""

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
                    **{context_setting(ev.config.engine) or "max_model_len": context})
        per_token = at.plan.kv_bytes_per_token
        out.append(PagingRow(block_size=bs, blocks_per_request=-(-context // bs),
                             users=at.plan.max_concurrency if at.plan.outcome == "started" else 0.0,
                             waste_bytes=int(batch * (bs - 1) / 2 * per_token)))
    return out
