"""vLLM's KV-cache plan: page sizes per layer kind, the groups of the hybrid KV-cache manager,
blocks per request, and the capacity vLLM logs.

Follows vllm/v1/kv_cache_interface.py (AttentionSpec.page_size_bytes, FullAttentionSpec /
SlidingWindowSpec / ChunkedLocalAttentionSpec / MLAAttentionSpec .max_memory_usage_bytes),
vllm/v1/core/kv_cache_planning.py (_get_kv_cache_groups_uniform_page_size,
_check_enough_kv_cache_memory, estimate_max_model_len) and vllm/v1/core/kv_cache_utils.py
(get_max_concurrency_for_kv_cache_config, update_kv_cache_capacity; v0.11:
get_kv_cache_config_from_groups).
"""

from __future__ import annotations

from dataclasses import dataclass

from servefit.engines.vllm.era import Era
from servefit.memory.kv import layer_bytes_per_token
from servefit.models.spec import ModelSpec


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Group:
    kind: str  # full | sliding | chunked
    window: int  # sliding window or attention chunk size (0 for full)
    layers: int  # layers in this group (padding included)
    block_size: int = 0  # tokens per block when unified pages differ from the layout's (0: the layout's)


@dataclass
class KvLayout:
    groups: list[Group]
    page_bytes: int  # one layer's page (block_size tokens)
    block_size: int
    bytes_per_block: int  # one block id across a group's layers
    padding_layers: int = 0

    def blocks_per_request(self, max_model_len: int, in_flight: int) -> int:
        """Σ over groups of the blocks one request at max_model_len holds
        (SlidingWindowSpec.max_admission_blocks_per_request: window - 1 + in-flight tokens, + 1)."""
        total = 0
        for g in self.groups:
            bs = g.block_size or self.block_size
            if g.kind == "sliding":
                total += cdiv(min(g.window - 1 + in_flight, max_model_len), bs) + 1
            elif g.kind == "chunked":
                total += cdiv(min(g.window + in_flight, max_model_len), bs)
            else:
                total += cdiv(max_model_len, bs)
        return total

    def needed_bytes(self, max_model_len: int, in_flight: int) -> int:
        return self.bytes_per_block * self.blocks_per_request(max_model_len, in_flight)

    def largest_fitting_len(self, available: int, upper: int, in_flight: int) -> int:
        """estimate_max_model_len: binary search for the largest length whose request fits."""
        lo, hi = 0, upper
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.needed_bytes(mid, in_flight) <= available:
                lo = mid
            else:
                hi = mid - 1
        return lo


def layer_kinds(model: ModelSpec, hybrid_manager: bool, disable_sliding_window: bool) -> list[tuple[str, int]]:
    """(kind, window) for every attention layer on the model; recurrent layers are left out
    (their state is a separate, fixed-size spec)."""
    out = []
    kinds = model.kinds()
    shared = int(model.layout.get("num_kv_shared_layers") or 0)
    if shared:  # Gemma 4 E2B / E4B: the last layers read earlier caches (gemma4.py kv_sharing_target_layer_name)
        kinds = kinds[:len(kinds) - shared]
    for kind in kinds:
        if kind in ("mamba", "linear", "none"):
            continue
        if kind == "sliding" and not disable_sliding_window and model.sliding_window:
            out.append(("sliding", model.sliding_window) if hybrid_manager else ("full", 0))
        elif kind == "chunked" and model.attention_chunk_size:
            out.append(("chunked", model.attention_chunk_size) if hybrid_manager else ("full", 0))
        else:
            out.append(("full", 0))
    return out


def layout(model: ModelSpec, layers: list[tuple[str, int]], kv_dtype_bytes: float, tp: int,
           block_size: int, era: Era) -> KvLayout:
    """Group layers as the hybrid KV-cache manager does and size one block."""
    page = int(block_size * layer_bytes_per_token(model, kv_dtype_bytes, tp))
    buckets: dict[tuple[str, int], int] = {}
    for spec in layers:
        buckets[spec] = buckets.get(spec, 0) + 1
    if model.layout.get("global_head_dim") and len(buckets) > 1:
        return _unified_layout(model, buckets, kv_dtype_bytes, tp, block_size, era)
    if len(buckets) <= 1:
        (kind, window), n = next(iter(buckets.items())) if buckets else (("full", 0), 0)
        return KvLayout([Group(kind, window, n)], page, block_size, page * n)
    sizes = list(buckets.values())
    group_size = min(sizes)
    if era.tokens_from_concurrency and max(sizes) < 1.5 * min(sizes):  # >= 0.21
        group_size = max(sizes)
    groups: list[Group] = []
    padding = 0
    for (kind, window), n in buckets.items():
        k = cdiv(n, group_size)
        padding += k * group_size - n
        groups.extend(Group(kind, window, group_size) for _ in range(k))
    return KvLayout(groups, page, block_size, page * group_size, padding)


def _unified_layout(model: ModelSpec, buckets: dict[tuple[str, int], int], kv_dtype_bytes: float, tp: int,
                    block_size: int, era: Era) -> KvLayout:
    """Layer kinds whose pages differ (Gemma 4: sliding 2 x 16 KV x 256, full 2 x 4 KV x 512):
    kv_cache_planning.py unify_kv_cache_spec_page_size gives a smaller page a proportionally
    larger block (or pads it when it does not divide the largest), then
    _get_kv_cache_groups_uniform_page_size groups the layers as for one page size."""
    from servefit.memory.kv import kind_bytes_per_token

    pages = {spec: int(block_size * kind_bytes_per_token(model, spec[0], kv_dtype_bytes, tp)) for spec in buckets}
    top = max(pages.values())
    sizes = list(buckets.values())
    group_size = min(sizes)
    if era.tokens_from_concurrency and max(sizes) < 1.5 * min(sizes):  # >= 0.21
        group_size = max(sizes)
    groups: list[Group] = []
    padding = 0
    for (kind, window), n in buckets.items():
        bs = block_size * top // pages[(kind, window)] if pages[(kind, window)] and top % pages[(kind, window)] == 0 \
            else block_size
        k = cdiv(n, group_size)
        padding += k * group_size - n
        groups.extend(Group(kind, window, group_size, bs) for _ in range(k))
    return KvLayout(groups, top, block_size, top * group_size, padding)


def capacity(lay: KvLayout, num_blocks: int, max_model_len: int, in_flight: int, era: Era,
             dcp: int = 1) -> tuple[int, float]:
    """("GPU KV cache size" tokens, "Maximum concurrency") as vLLM logs them."""
    per_req = lay.blocks_per_request(max_model_len, in_flight)
    conc = num_blocks / per_req if per_req else 0.0
    if era.tokens_from_concurrency:
        return int(conc * max_model_len), conc
    tokens = num_blocks // len(lay.groups) * lay.block_size * dcp
    return tokens, conc
