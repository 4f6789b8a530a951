"""Servers that run at once on one GPU (compose services reserving the same device_ids, a llama-swap group with
swap: false; core.Together) whose memory, as written, adds past the GPU: tune splits the GPU between them.

The rule:

- each server that sizes itself by a memory fraction (vLLM --gpu-memory-utilization, SGLang
  --mem-fraction-static, TGI --cuda-memory-fraction) needs what its plan holds less its KV cache (weights,
  activations, CUDA graphs, its CUDA context) plus the KV cache of --min-concurrency requests (1 without it) of
  its context (--min-context, else the context its command gives);
- servers without a fraction (llama.cpp, Ollama) size by their own settings: they keep what they hold;
- what is left of the GPU beside those is divided between the fraction servers in proportion to their needs:
  share = need + left x need / sum of needs;
- each fraction server gets the largest fraction (to the hundredth) whose plan holds no more than its share
  when it starts first on an idle GPU, and that still starts when it starts last, beside the others holding
  their shares (compose starts services without depends_on in no set order):
  - vLLM reads its fraction of the total and refuses to start when the memory free at start is below it
    (v1/worker/utils.py::request_memory: requested_memory = ceil(total x gpu_memory_utilization), ValueError
    "Free memory on device ... is less than desired GPU memory utilization"; 0.11 in gpu_worker.py::
    Worker.init_device): two vLLM servers on one GPU each need free >= util x total at start, so the second
    fails when the first holds its share unless util leaves the first's share and its own CUDA context free;
  - TGI caps its process at the fraction of the total (torch.cuda.set_per_process_memory_fraction), but sizes
    its KV cache from the device's free memory at warm-up (flash_causal_lm.py::warmup through utils/
    import_utils.py::get_cuda_free_memory, torch.cuda.mem_get_info's free - (1 - fraction) x total; 3.x passes
    cuda_memory_fraction x TGI_WIGGLE_ROOM, plus the warm-up batch's blocks; engines/tgi/memory.py::
    kv_blocks): what the others hold comes out of its KV cache, so started last it has less (said);
  - SGLang takes its fraction of the memory free when it starts (model_runner.py::profile_max_num_token: rest
    = available after loading - pre_model_load_memory x (1 - mem_fraction_static), pre_model_load_memory the
    free memory get_available_gpu_memory reads): started first it holds its share, started last its pool is
    smaller (the fraction of what the others leave); the plans of both orders are read.

No split when the needs add past the GPU (then tune says what each server has beside the others, as before).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from servefit.tune.objective import Needs

GIB = 2**30

# the setting each engine sizes itself by, as a fraction of the GPU's memory
# SGLang's fraction is of the memory free when it starts (model_runner.py::profile_max_num_token)


def adapter(engine: str | None) -> Any:
    """The engine's tune adapter (its memory fraction and what a shared GPU means for it), or None."""
    from servefit.engines import get

    try:
        return get(engine or "").tune_adapter()
    except Exception:  # noqa: BLE001 - no plugin for it: not a fraction server
        return None


def fraction_name(engine: str | None) -> str:
    """The setting that sizes the engine by a fraction of the GPU ("" for llama.cpp, Ollama)."""
    a = adapter(engine)
    return str(getattr(a, "fraction_name", "") or "") if a is not None else ""


@dataclass(frozen=True)
class Share:
    """One server's part of a GPU it shares: the bytes it may hold and the fraction that holds no more."""

    need: int
    share: int
    fraction: float
    others: int  # bytes the other servers hold beside it (their shares, or what they hold as written)
    note: str = ""  # what the engine checks at start that the fraction respects


def held(plan: Any) -> int:
    """Bytes a started plan holds on its GPU: all but the free headroom (as SF117 counts them)."""
    return int(plan.memory.total - plan.memory.free_headroom)


def need_of(srv: Any, needs: Needs) -> int:
    """What the server needs of the GPU: what it holds less its KV cache, plus the KV cache of
    --min-concurrency requests of its context."""
    p = srv.plan
    context = needs.min_context or int(p.max_model_len or 0)
    bpt = int(p.kv_bytes_per_token or 0)
    if not bpt and p.kv_cache_tokens:
        bpt = int(p.memory.kv_cache / p.kv_cache_tokens)
    need = held(p) - int(p.memory.kv_cache) + bpt * context * max(needs.min_concurrency, 1)
    if getattr(adapter(srv.site.engine), "fraction_of_free", False):
        # a fraction of the memory free at start: started last, beside others holding all but its share s, it
        # gets f x (s - ctx) of it, and started first f x (total - ctx) must stay within s: so s - ctx is at
        # least the geometric mean of (need - ctx) and (total - ctx)
        ctx = int(p.memory.non_torch)
        total = srv.evaluation.gpu.memory_bytes
        need = ctx + math.ceil(math.sqrt(max(need - ctx, 0) * max(total - ctx, 0)))
    return need


def tokens_needed(srv: Any, needs: Needs) -> int:
    """The KV tokens --min-concurrency requests of the server's context take."""
    return (needs.min_context or int(srv.plan.max_model_len or 0)) * max(needs.min_concurrency, 1)


def split(members: list[Any], needs: Needs) -> tuple[dict[str, Share], str]:
    """The shares of the servers of one Together set (sources.server_build.Server, all on the same GPU), by site
    name, and why there are none where the GPU cannot be split (""  when no member sizes by a fraction, some
    member is not sized or what they hold fits already)."""
    if len(members) < 2 or any(s.plan is None or s.plan.outcome != "started" or s.evaluation is None
                               for s in members):
        return {}, ""
    frac = [s for s in members if fraction_name(s.site.engine)]
    if not frac:
        return {}, ""
    total = members[0].evaluation.gpu.memory_bytes
    if not total or sum(held(s.plan) for s in members) <= total:
        return {}, ""
    fixed = sum(held(s.plan) for s in members if s not in frac)  # llama.cpp, Ollama: as they are
    needs_of = {s.site.name: need_of(s, needs) for s in frac}
    want = sum(needs_of.values())
    left = total - fixed - want
    if left < 0:
        parts = ", ".join(f"'{label(m)}' {n / GIB:.2f} GiB" for m, n in needs_of.items())
        rest = f" beside {fixed / GIB:.2f} GiB the others hold" if fixed else ""
        return {}, f"their needs ({parts}) add past the GPU's {total / GIB:.2f} GiB{rest}"
    out: dict[str, Share] = {}
    for s in frac:
        n = needs_of[s.site.name]
        share = n + left * n // want
        tokens = tokens_needed(s, needs)
        got = fraction_for(s, share, total - share, tokens)
        if got is None:
            how = adapter(s.site.engine).started_last
            return {}, (f"'{label(s.site.name)}' has no fraction that holds no more than its {share / GIB:.2f} GiB "
                        f"share and, started after the others, still starts with {tokens:,} tokens of KV cache{how}")
        f, last = got
        out[s.site.name] = Share(need=n, share=share, fraction=f, others=total - share,
                                 note=adapter(s.site.engine).split_note.format(tokens=last))
    return out, ""


def label(name: str) -> str:
    return name.split("/", 1)[-1]


def fraction_for(srv: Any, share: int, others: int, tokens: int) -> tuple[float, int] | None:
    """The largest fraction (to the hundredth) at which the server holds no more than `share` bytes started
    first, and still starts, with a KV cache of `tokens`, when the others hold `others` bytes as it starts:
    the engine's own plan decides; with the KV tokens it has started last."""
    from servefit.engines import get

    ev = srv.evaluation
    name = fraction_name(srv.site.engine)
    eng = get(ev.config.engine)
    beside = replace(ev.gpu, in_use_bytes=ev.gpu.in_use_bytes + others)
    for pct in range(99, 4, -1):
        f = pct / 100
        cfg = replace(ev.config, settings={**ev.config.settings, name: f}, explicit=set(ev.config.explicit) | {name},
                      findings=list(ev.config.findings), assumptions=list(ev.config.assumptions))
        first = eng.plan(cfg, ev.model, ev.gpu, ev.count)
        if first.outcome != "started" or held(first) > share:
            continue
        last = eng.plan(cfg, ev.model, beside, ev.count)
        if last.outcome == "started" and (not last.kv_cache_tokens or last.kv_cache_tokens >= tokens):
            return f, int(last.kv_cache_tokens)
    return None
