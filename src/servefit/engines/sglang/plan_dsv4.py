"""The SGLang plan of a DeepSeek-V4 server once the memory is known (engines/sglang/dsv4.py sizes
the pools): the server settings that feed DSV4PoolConfigurator, what SGLang logs at start, and the
assumptions the plan rests on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.core import EngineConfig, MemoryPlan
from servefit.engines.sglang import dsv4
from servefit.engines.sglang.defaults import vtuple
from servefit.engines.sglang.detail import of as detail_of
from servefit.models.spec import ModelSpec

if TYPE_CHECKING:
    from servefit.engines.sglang.plan import Resolved

GiB = 2**30


def _on(v: object) -> bool:
    return str(v or "").strip().lower() in ("1", "true", "yes", "on")


def dsv4_pools(cfg: EngineConfig, model: ModelSpec, r: Resolved, available: int, cap: int | None = None) -> dsv4.Pools:
    """The server settings DSV4PoolConfigurator.__init__ reads: --swa-full-tokens-ratio (0.1 unless
    given), --max-running-requests per attention-DP worker (256 unless given), speculative decoding,
    SGLANG_DSV4_COMPRESS_STATE_DTYPE (float32, or bfloat16: 2 bytes a state)."""
    s = cfg.settings
    rel = release(r)
    given = "swa_full_tokens_ratio" in cfg.explicit and s.get("swa_full_tokens_ratio") is not None
    ratio = float(s["swa_full_tokens_ratio"]) if given else dsv4.SWA_RATIO  # not the 0.8 of other models
    if rel.default_ratio_replaces_0_8 and ratio == 0.8:  # `== ServerArgs.swa_full_tokens_ratio`
        ratio = dsv4.SWA_RATIO
    dp = r.dp if s.get("enable_dp_attention") else 1
    requests = max(1, int(s.get("max_running_requests") or dsv4.MAX_RUNNING) // max(dp, 1))
    state = 2 if str(cfg.env.get("SGLANG_DSV4_COMPRESS_STATE_DTYPE", "")).strip().lower() in ("bf16", "bfloat16") \
        else 4
    return dsv4.size(model, dsv4.stage_ratios(model, r.pp, rel), available, swa_ratio=ratio, requests=requests,
                     speculative=bool(s.get("speculative_algorithm")), cap=cap, state_bytes=state, page=r.page, rel=rel)


def release(r: Resolved) -> dsv4.Release:
    return dsv4.Release(min(r.e.v, vtuple(dsv4.FOLLOWS)))


def dsv4_pool(out: MemoryPlan, cfg: EngineConfig, r: Resolved, p: dsv4.Pools, available: int) -> MemoryPlan:
    """What the start-up log says (pool_configurator.py calculate_pool_sizes / _to_config,
    managers/scheduler.py) and the request limits (kv_cache_configurator.py resolve_max_num_reqs:
    max_running_requests = min(requested per worker, full // 2))."""
    from servefit.engines.sglang.checks import capacity

    s = cfg.settings
    rel = release(r)
    fixed = f", c128_state_fixed={p.c128_state_fixed / GiB:.2f} GB" if rel.c128_fixed else ""
    out.messages.append(f"DSV4 memory calculation: bytes_per_full_token={p.bytes_per_full_token:.2f}, "
                        f"available_bytes={available / GiB:.2f} GB, full_token={p.full}{fixed}")
    if rel.padded:  # _compute_dsv4_sizes logs it from 0.5.21; _deepseek_v4_overrides declares the 0.1, which
        # handle_cache_compatibility counts as set, hence "explicit"
        out.messages.append(f"DSV4 SWA sizing: mode=ratio (explicit), swa_tokens={p.swa}")  # then the ratio
    out.messages.append(f"DSV4 pool sizes: full={p.full}, swa={p.swa}, c4={p.c4}, c128={p.c128}, "
                        f"c4_state={p.c4_state}, c128_state={p.c128_state}")
    max_req_len = min(r.context_len - 1, p.full - 1)
    out.kv_cache_tokens = p.full
    out.kv_bytes_per_token = round(p.bytes_per_full_token)
    out.max_concurrency = p.full / r.context_len if r.context_len else 0.0
    x = out.detail = detail_of(out)
    x.max_total_num_tokens, x.max_running_requests, x.max_req_len = p.full, p.max_running_requests, max_req_len
    x.max_req_input_len, x.swa_max_total_num_tokens, x.page_size = max_req_len - 5, p.swa, r.page
    out.messages.append(f"max_total_num_tokens={p.full}, chunked_prefill_size={r.chunk}, max_prefill_tokens="
                        f"{int(s.get('max_prefill_tokens') or 16384)}, max_running_requests={p.max_running_requests}, "
                        f"context_len={r.context_len}")
    _assume(out, cfg, r)
    return capacity(out, cfg, r, p.full)


def _assume(out: MemoryPlan, cfg: EngineConfig, r: Resolved) -> None:
    s, a = cfg.settings, out.assumptions
    follows = r.e.version if r.e.v <= vtuple(dsv4.FOLLOWS) else f"{dsv4.FOLLOWS} (the newest release modelled)"
    a.append("DeepSeek-V4's pools (full, sliding-window, c4 / c128 compressed, indexer and compressor-state rings) "
             f"follow SGLang {follows}'s DSV4PoolConfigurator on NVIDIA GPUs (the default flashmla attention, "
             "V4 KV layout)")
    if s.get("page_size") is not None and int(s["page_size"]) != dsv4.PAGE:
        a.append(f"page_size={dsv4.PAGE}: SGLang sets it for DeepSeek-V4 whatever --page-size says")
    if _on(cfg.env.get("SGLANG_OPT_USE_ONLINE_COMPRESS")) or _on(cfg.env.get("SGLANG_DSV4_UNIFIED_KV_FP8")):
        a.append("SGLANG_OPT_USE_ONLINE_COMPRESS / unified KV pools are not modelled: the default compressor "
                 "state rings are counted")
