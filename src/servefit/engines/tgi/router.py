"""What the router makes of the shard's warm-up: the KV capacity it infers ("Setting max batch total
tokens to N"), the limits the shard defaults, and the checks on them (backends/v3/src/lib.rs::connect_backend,
backends/v3/src/main.rs; router/src/main.rs before 2.3)."""

from __future__ import annotations

from servefit.core import EngineConfig, MemoryPlan
from servefit.engines.tgi import defaults as d
from servefit.engines.tgi import memory as mem
from servefit.engines.tgi.checks import (
    err,
    input_not_below_total,
    prefill_above_batch_total,
    prefill_below_input,
    total_above_batch_total,
)
from servefit.engines.tgi.detail import of as detail_of
from servefit.engines.tgi.resolved import Resolved
from servefit.models.spec import ModelSpec
from servefit.rules.registry import rule


def legacy_result(out: MemoryPlan, cfg: EngineConfig, r: Resolved, batch: mem.WarmupBatch) -> MemoryPlan:
    """< 0.9.4 router/src/main.rs: warm-up with max_batch_total_tokens, then "Connected" (no inferred total)."""
    bt = d.batch_total_setting(cfg.settings, r.e) or 0
    kv = batch.blocks * r.block * (out.kv_bytes_per_token or 0) if r.flash else 0
    out.memory.free_headroom += out.memory.kv_cache - kv
    out.memory.kv_cache = kv
    x = detail_of(out)
    x.max_input_tokens, x.max_total_tokens, x.max_batch_total_tokens, x.kv_cache_blocks = \
        r.max_input, r.max_total, bt, batch.blocks
    out.messages.append("Connected")
    return finish(out, r, r.max_total, r.max_input, bt)


@rule("TGI009", "TGI010", "TGI017", "TGI020")
def warmup_result(out: MemoryPlan, cfg: EngineConfig, model: ModelSpec, r: Resolved, tokens: int, blocks: int,
                   batch: mem.WarmupBatch) -> MemoryPlan:
    s, e = cfg.settings, r.e
    user_bt = s.get("max_batch_total_tokens")
    max_total, max_input = r.max_total, r.max_input
    if r.flash:
        out.messages.append(f"KV-cache blocks: {blocks}, size: {r.block}")
        if max_total is None:  # flash_causal_lm.py::warmup defaults
            if r.chunking and e.v < (3, 0, 0):
                # 2.4.x: max_total_tokens = num_blocks x BLOCK_SIZE, max_input_tokens =
                # min(num_blocks x BLOCK_SIZE - 1, tokenizer.model_max_length)
                max_total = tokens
                if max_input is None:
                    max_input = min([tokens - 1] + [x for x in (model.model_max_length,) if x])
            elif r.chunking:
                caps = [tokens] + [x for x in (model.model_max_length,) if x]
                if e.mpe_clamp and model.max_position_embeddings:
                    caps.append(model.max_position_embeddings)
                max_total = min(caps)
            else:
                max_total = batch.tokens
        batch_total = tokens
        if user_bt is not None:
            out.findings.append(err("TGI010", f"`--max-batch-total-tokens` is deprecated for Flash Attention "
                                     f"models. Inferred max batch total tokens: {tokens} (the {user_bt} you set "
                                     "is ignored)", cfg, "max_batch_total_tokens"))
    else:
        if max_total is None:
            max_total = min(4096, model.max_position_embeddings or 4096)
        batch_total = user_bt if user_bt is not None else max(16000, max_total, r.prefill)
        out.messages.append("Model does not support automatic max batch total tokens")
    if max_input is None:
        max_input = max_total - 1
    x = detail_of(out)
    out.detail = x
    x.max_input_tokens, x.max_total_tokens, x.max_batch_total_tokens, x.kv_cache_blocks = \
        max_input, max_total, batch_total, blocks
    if r.flash and max_total > batch_total:
        out.outcome = "oom_at_load"
        msg = (f"Not enough memory to handle `max_total_tokens={max_total}`" if e.router_v3 else
               f"`max_total_tokens` must be <= `max_batch_total_tokens`. Given: {max_total} and {batch_total}")
        out.messages.append(f"Error: {msg}")
        out.findings.append(err("TGI009", f"{msg}: one request of max_total_tokens ({max_total}) needs more KV cache "
                                 f"than warmup found room for ({batch_total} tokens)", cfg, "max_total_tokens"))
        return finish(out, r, max_total, max_input, batch_total)
    out.messages.append(f"Setting max batch total tokens to {batch_total}")
    shard_defaults = e.defaults in ("shard", "compute")  # >= 2.4.1 backends/v3/src/main.rs logs what the shard chose
    if s.get("max_input_tokens", s.get("max_input_length")) is None and shard_defaults:
        out.messages.append(f"Maximum input tokens defaulted to {max_input}")
    if s.get("max_total_tokens") is None and shard_defaults:
        out.messages.append(f"Maximum total tokens defaulted to {max_total}")
    # checks on what warm-up found: from 2.4.0 backends/v3/src/main.rs "Validate remaining args now that the
    # backend is known"; before, router/src/main.rs (backends/v3 in 2.3) checks the limits before warm-up (the
    # launcher's checks) and afterwards only max_total_tokens against the inferred total (TGI009 above)
    router = []
    post = not e.launcher_prefill_checks
    if max_input >= max_total:
        router.append((input_not_below_total, "`max_input_tokens` must be < `max_total_tokens`", "max_input_tokens"))
    if post and max_input > r.prefill and not r.chunking:
        router.append((prefill_below_input, f"`max_batch_prefill_tokens` must be >= `max_input_tokens`. Given: {r.prefill} "
                       f"and {max_input}", "max_batch_prefill_tokens"))
    if post and r.prefill > batch_total:
        router.append((prefill_above_batch_total, f"`max_batch_prefill_tokens` must be <= `max_batch_total_tokens`. Given: "
                       f"{r.prefill} and {batch_total}", "max_batch_prefill_tokens"))
    if post and max_total > batch_total:
        router.append((total_above_batch_total, f"`max_total_tokens` must be <= `max_batch_total_tokens`. Given: {max_total} and "
                       f"{batch_total}", "max_batch_total_tokens"))
    for make, msg, setting in router:
        out.findings.append(make(f"Argument validation error: {msg}", cfg, setting))
        out.messages.append(f"Error: ArgumentValidation({msg!r})")
    if router:
        out.outcome = "rejected_config"
    elif r.flash and batch_total < 2 * max_total:
        out.findings.append(err("TGI017", f"the KV cache holds {batch_total} tokens: room for "
                                 f"{batch_total / max_total:.2f} requests of max_total_tokens={max_total} at once; "
                                 "longer or concurrent requests queue", cfg, "max_total_tokens"))
    mpe = model.max_position_embeddings
    if s.get("max_total_tokens") and mpe and max_total > mpe and not s.get("rope_scaling"):
        out.findings.append(err("TGI020", f"max_total_tokens={max_total} is longer than the model's "
                                 f"max_position_embeddings ({mpe}); TGI accepts it but positions past {mpe} were "
                                 "never trained", cfg, "max_total_tokens"))
    return finish(out, r, max_total, max_input, batch_total)


def finish(out: MemoryPlan, r: Resolved, max_total: int | None, max_input: int | None,
            batch_total: int | None) -> MemoryPlan:
    out.max_model_len = max_total or r.max_total or 0
    if batch_total is not None and r.flash:
        out.kv_cache_tokens = batch_total
    if out.max_model_len and out.kv_cache_tokens:
        out.max_concurrency = out.kv_cache_tokens / out.max_model_len
    return out

