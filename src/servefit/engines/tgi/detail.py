"""The figures a TGI plan adds to the common ones (MemoryPlan.detail): the launcher's resolved
settings and what warm-up finds (flash_causal_lm.py::warmup: "KV-cache blocks", the router's
"Setting max batch total tokens")."""

from __future__ import annotations

from dataclasses import dataclass

from servefit.core import EngineDetail, MemoryPlan


@dataclass
class TgiDetail(EngineDetail):
    """The settings TGI's launcher settles on and what its warm-up finds (KV blocks, max batch total tokens),
    as the plan predicts them."""

    max_batch_prefill_tokens: int = 0
    attention: str = ""  # flashinfer | flashdecoding | paged (globals.py ATTENTION)
    block_size: int = 0
    num_shard: int = 1
    cuda_memory_fraction: float = 1.0
    wiggle_room: float = 0.0  # TGI_WIGGLE_ROOM
    support_chunking: bool = False
    flash_attention: bool = False
    warmup_prefill_tokens: int = 0
    dtype: str = ""
    kv_cache_dtype: str = ""
    quantize: str | None = None
    max_input_tokens: int | None = None
    max_total_tokens: int | None = None
    max_batch_total_tokens: int | None = None
    kv_cache_blocks: int | None = None
    # what the warm-up prefill leaves cached when the shard reads free memory (the KV cache is sized without it)
    warmup_activation_bytes: int = 0


def of(plan: MemoryPlan) -> TgiDetail:
    return plan.detail if isinstance(plan.detail, TgiDetail) else TgiDetail()
