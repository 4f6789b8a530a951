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

# the setting that sets the per-request context, per engine (data/concepts.yaml has the full map)
CONTEXT_SETTING = {"vllm": "max_model_len", "llamacpp": "ctx_size", "ollama": "num_ctx",
                   "tgi": "max_total_tokens", "sglang": "context_length"}
KV_DTYPE_SETTING = {"vllm": "kv_cache_dtype", "tgi": "kv_cache_dtype", "sglang": "kv_cache_dtype"}
# the limit on requests served at once, for the engines whose KV pool is counted in tokens
REQUEST_CAP = {"vllm": "max_num_seqs", "sglang": "max_running_requests", "tgi": "max_concurrent_requests"}
SLOT_ENGINES = ("llamacpp", "ollama")  # the users are slots the command sets
CONTEXTS = (2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576)
BATCHES = (1, 4, 8, 16, 32, 64, 128, 256)


@dataclass
class Row:
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


def cell_settings(ev: Evaluation, context: int, users: int) -> tuple[dict[str, Any], dict[str, str]]:
    """(settings, environment) that ask the engine for `users` requests of `context` tokens, in
    that engine's own terms."""
    eng, s = ev.config.engine, ev.config.settings
    if eng == "llamacpp":
        unified = "kv_unified" in ev.config.explicit and bool(s.get("kv_unified"))
        out: dict[str, Any] = {"ctx_size": context * (1 if unified else users), "parallel": users}
        if not unified:
            out["kv_unified"] = False  # an explicit -np turns llama.cpp's automatic unified cache off
        return out, {}
    if eng == "ollama":
        return {"num_ctx": context, "OLLAMA_NUM_PARALLEL": users}, {}
    if eng == "tgi":
        out = {"max_total_tokens": context}
        inp = s.get("max_input_tokens")
        if inp is None or int(inp) >= context:
            out["max_input_tokens"] = context - 1  # TGI: max_input_tokens < max_total_tokens
        prefill = s.get("max_batch_prefill_tokens")
        if prefill is not None and int(prefill) < out.get("max_input_tokens", int(inp or 0)):
            out["max_batch_prefill_tokens"] = out.get("max_input_tokens", int(inp or 0))
        return out, {}
    if eng == "vllm":
        return {"max_model_len": context}, {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
    return {CONTEXT_SETTING.get(eng, "max_model_len"): context}, {}


def _started(at: Evaluation, base: Evaluation | None = None) -> bool:
    """The server starts as configured: for the slot engines, with the layers on the GPU that the
    user's own config puts there (llama.cpp's --fit and Ollama move layers to the CPU instead of
    failing; that is a slower server, not the one asked for)."""
    p = at.plan
    if p.outcome != "started":
        return False
    x = p.extra
    if at.config.engine == "ollama":
        layers, on = x.get("layers_model"), x.get("layers_offloaded")
    elif at.config.engine == "llamacpp":
        layers, on = x.get("n_layers_total"), x.get("n_gpu_layers_offloaded")
        if base is not None and "n_gpu_layers" in base.config.explicit:  # a partial -ngl the user chose
            layers = min(int(layers or 0), int(base.plan.extra.get("n_gpu_layers_offloaded") or 0))
    else:
        return True
    return layers is None or on is None or int(on) >= int(layers)


def served(at: Evaluation, users: int, base: Evaluation | None = None) -> float:
    """Requests served at once by the replanned server."""
    p = at.plan
    if not _started(at, base):
        return 0.0
    if at.config.engine in SLOT_ENGINES:
        return float(users)
    n = float(p.max_concurrency)
    cap = REQUEST_CAP.get(at.config.engine)
    limit = at.config.settings.get(cap) if cap else None
    if limit is None and cap:
        limit = p.extra.get(cap)
    if limit:
        n = min(n, float(limit))
    return n


def cell(ev: Evaluation, context: int, users: int, **variant: Any) -> Row:
    """One sweep cell: the engine's plan for `users` requests of `context` tokens."""
    settings, env = cell_settings(ev, context, users)
    at = replan(ev, env, **{**variant, **settings})
    p = at.plan
    n = served(at, users, ev)
    kv = p.kv_bytes_per_token * context * users
    m = p.memory
    total = m.weights + m.activation_peak + m.non_torch + m.cuda_graphs + kv
    started = _started(at, ev)
    return Row(context=context, batch=users, kv_bytes=kv, total_bytes=total, util=total / (ev.gpu.memory_bytes or 1),
               users=n, ok=n >= users, outcome="started" if started else
               (p.outcome if p.outcome != "started" else "offloaded"))


def row(ev: Evaluation, context: int, batch: int, allow_long: bool = True) -> Row:
    return cell(ev, context, batch)


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
    """context x users, each cell planned by the engine (slot engines re-plan per cell: the
    slots change the allocation; token-pool engines share one plan per context)."""
    top = upto or max(limit(ev), 2048)
    out = []
    for c in CONTEXTS:
        if c > top:
            break
        if ev.config.engine in SLOT_ENGINES:
            out.append([cell(ev, c, b) for b in batches])
            continue
        base = cell(ev, c, 1)
        out.append([Row(c, b, base.kv_bytes * b, base.total_bytes + base.kv_bytes * (b - 1),
                        (base.total_bytes + base.kv_bytes * (b - 1)) / (ev.gpu.memory_bytes or 1), base.users,
                        base.users >= b, base.outcome) for b in batches])
    return out


def most_users(ev: Evaluation, context: int, batches: tuple[int, ...] = BATCHES, **variant: Any) -> int:
    """The most users of `context` tokens the engine serves with these settings."""
    if ev.config.engine not in SLOT_ENGINES:
        return int(cell(ev, context, 1, **variant).users + 1e-9)
    best = 0
    for b in sorted(set((1, 2) + tuple(batches))):
        if not cell(ev, context, b, **variant).ok:
            break
        best = b
    return best


def max_users(ev: Evaluation, variants: dict[str, dict[str, object]], upto: int | None = None) -> dict[str, list[tuple[int, int]]]:
    """For each variant (KV dtype, quantization ...): (context, whole users the engine serves)."""
    top = upto or max(limit(ev), 2048)
    out: dict[str, list[tuple[int, int]]] = {}
    for name, settings in variants.items():
        out[name] = [(c, most_users(ev, c, **settings)) for c in CONTEXTS if c <= top]
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
