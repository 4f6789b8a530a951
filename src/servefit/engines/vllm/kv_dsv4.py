"""vLLM's KV-cache plan for DeepSeek-V4 (models/arch_deepseek_v4.py), as vLLM 0.33.0 builds it.

Each decoder layer registers several caches of its own page size (all fp8_ds_mla, the only KV
dtype the NVIDIA FlashMLA path takes: models/deepseek_v4/attention.py _resolve_dsv4_kv_cache_dtype):
- the sliding window, every layer: v1/attention/backends/mla/sparse_swa.py
  DeepseekV4SWACache.get_kv_cache_spec, a SlidingWindowMLASpec of window `sliding_window`,
  block 64, 584 bytes a token (448 NoPE + 128 RoPE + 8 scale), page padded to 576;
- the compressed cache, rate-4 and rate-128 layers: attention.py DeepseekV4Attention
  .get_kv_cache_spec, an MLAAttentionSpec of cache_config.block_size (256, the only kernel block
  size of models/deepseek_v4/sparse_mla.py) holding block / rate states of 584 bytes;
- the indexer's key cache, rate-4 layers: attention.py DeepseekV4IndexerCache, an MLAAttentionSpec
  of index_head_dim fp8 + one fp32 scale per 128 (132 bytes) a state, rate 4;
- the compressor states, rate-4 (main and indexer) and rate-128 layers: models/deepseek_v4/
  compressor.py CompressorStateCache, a SlidingWindowMLASpec of fp32 rows of 2 x coff x head_dim
  (coff 2 at rate 4, 1 at 128), window coff x rate, block 4 (rate 4) or 8 (rate 128).
Pages: kv_cache_interface.py AttentionSpec.page_size_bytes (states = block // tokens_per_state)
and _apply_alignment_padding (round up to 576). The layers are packed block-outermost
(v1/core/kv_cache_planning.py _get_packed_kv_cache_groups): same-type specs are bucketed, a
bucket whose page sizes come in equal numbers repeats as a pattern, the pattern count is
_approximate_gcd's, and every block id is strided by the widest group's bytes
(_get_kv_cache_bytes_per_block). A request holds, per group, cdiv(len, block) blocks of a full
group and cdiv(min(window - 1 + in-flight, len), block) + 1 of a window group
(SlidingWindowSpec.max_admission_blocks_per_request).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from servefit.engines.vllm.kvcache import Group, KvLayout, cdiv
from servefit.models.arch_deepseek_v4 import compress_ratios
from servefit.models.spec import ModelSpec

PACKED_BYTES = 584  # attention.py: 448B NoPE + 128B RoPE + 8B fp8 scale per token
ALIGN = 576  # alignment=576 for fp8_ds_mla pages
SWA_BLOCK = 64  # sparse_swa.py DeepseekV4SWACache(block_size=64)
STATE_BLOCK = {4: 4, 128: 8}  # compressor.py CompressorStateCache.block_size
BLOCK = 256  # models/deepseek_v4/sparse_mla.py get_supported_kernel_block_sizes: [256]

Spec = tuple[str, int, int, int]  # (kind, window, block size, page bytes)


def _page(block: int, tokens_per_state: int, content: int) -> int:
    raw = block // tokens_per_state * content
    return -(-raw // ALIGN) * ALIGN


def layer_specs(model: ModelSpec, mtp_layers: int = 0, block: int = BLOCK) -> list[Spec]:
    """Every cache spec the model registers, in layer order; `mtp_layers` MTP drafter layers add
    a sliding-window cache each (nvidia/mtp.py: an MTP layer is past compress_ratios, rate 1)."""
    hd, ihd = model.head_dim, model.index_head_dim
    index_bytes = ihd + ihd // 128 * 4  # attention.py DeepseekV4Indexer: fp8 key + fp32 scale per 128
    out: list[Spec] = []
    ratios = compress_ratios(model)[:model.num_hidden_layers] + [0] * mtp_layers
    for r in ratios:
        out.append(("sliding", model.sliding_window, SWA_BLOCK, _page(SWA_BLOCK, 1, PACKED_BYTES)))
        if r <= 1:
            continue
        out.append(("full", 0, block, _page(block, r, PACKED_BYTES)))
        coff = 2 if r == 4 else 1
        out.append(("sliding", coff * r, STATE_BLOCK[r], _page(STATE_BLOCK[r], 1, 2 * coff * hd * 4)))
        if r == 4 and model.index_n_heads:
            out.append(("full", 0, block, _page(block, r, index_bytes)))
            out.append(("sliding", coff * r, STATE_BLOCK[r], _page(STATE_BLOCK[r], 1, 2 * coff * ihd * 4)))
    return out


def _approximate_gcd(values: list[int], lower: int) -> int:
    """kv_cache_planning.py _approximate_gcd: the chunk in [lower, max] with the least upward
    padding, the larger on a tie."""
    best, best_pad = lower, None
    for d in range(max(1, lower), max(values) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad <= best_pad:
            best, best_pad = d, pad
    return best


def layout(model: ModelSpec, mtp_layers: int = 0, block: int = BLOCK) -> KvLayout:
    """The groups vLLM packs the caches into and the bytes of one block id
    (_get_packed_kv_cache_groups, _get_kv_cache_bytes_per_block)."""
    buckets: dict[tuple[str, int, int], list[int]] = {}
    for kind, window, bs, page in layer_specs(model, mtp_layers, block):
        # UniformTypeKVCacheSpecs.is_uniform_type: one block size; MLA specs are full attention,
        # sliding-window specs group by window
        buckets.setdefault((kind, window if kind == "sliding" else 0, bs), []).append(page)
    counts = {key: Counter(pages) for key, pages in buckets.items()}
    balanced = {key: len(set(c.values())) == 1 for key, c in counts.items()}
    floor = max((max(c.values()) for key, c in counts.items() if balanced[key] and len(c) > 1), default=0)
    repeats = _approximate_gcd([max(c.values()) for key, c in counts.items() if balanced[key]], floor) \
        if floor else None

    def n_groups(key: tuple[str, int, int]) -> int:
        return cdiv(max(counts[key].values()), repeats) if balanced[key] and repeats else 1

    def state(key: tuple[str, int, int]) -> bool:  # no Mamba / circular-buffer specs here
        return repeats is None and key[0] == "sliding"

    def widest(key: tuple[str, int, int], n: int) -> int:
        return sum(cdiv(k, n) * page for page, k in counts[key].items())

    anchor = max(widest(key, len(buckets[key]) if state(key) else n_groups(key)) for key in buckets)
    groups: list[Group] = []
    widths: list[int] = []
    for key, pages in buckets.items():
        n = n_groups(key)
        if state(key):
            n = max(n, cdiv(len(pages), max(anchor // pages[0], 1)))
        kind, window, bs = key
        if n == 1:
            groups.append(Group(kind, window, len(pages), bs))
            widths.append(sum(pages))
            continue
        for i in range(n):  # pattern repeats i::n (a single page size: every n-th layer)
            share = [p for j, p in enumerate(_repeats(pages)) if j % n == i]
            groups.append(Group(kind, window, sum(len(r) for r in share), bs))
            widths.append(sum(sum(r) for r in share))
    per_block = max(widths)
    return KvLayout(groups, per_block, block, per_block)


def _repeats(pages: list[int]) -> list[tuple[int, ...]]:
    """A bucket's layers as pattern repeats: zip of the layers of each page size, in order."""
    by_page: dict[int, list[int]] = {}
    for p in pages:
        by_page.setdefault(p, []).append(p)
    return list(zip(*by_page.values(), strict=True))


def bytes_per_token(model: ModelSpec, block: int = BLOCK) -> int:
    """KV bytes one more token of context takes: the compressed and indexer caches' pages over
    their block (the packed stride a full-attention block id takes, when that group is the widest),
    rounded; the sliding-window caches and compressor states do not grow with the context."""
    grow = sum(page for kind, _, _, page in layer_specs(model, 0, block) if kind == "full")
    return round(grow / block)


def stage(model: ModelSpec, start: int, n: int) -> ModelSpec:
    """The layers [start, start + n) of a pipeline stage as a model of their own."""
    if start == 0 and n >= model.num_hidden_layers:
        return model
    ratios = compress_ratios(model)[start:start + n]
    return replace(model, num_hidden_layers=n, layout={**model.layout, "compress_ratios": ratios})
