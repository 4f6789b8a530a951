"""SGLang's DeepSeek-V4 memory pools, as SGLang 0.5.23 sizes them (models/arch_deepseek_v4.py).

python/sglang/srt/model_executor/pool_configurator.py DSV4PoolConfigurator (CUDA, the default
"flashmla" backend, SGLANG_DSV4_KV_LAYOUT=v4, not the HIP unified pool): the pools are sized as
available_bytes = full_tokens x bytes_per_full_token + fixed_bytes, where
- the paged caches store KVLayout.V4 rows (sglang/kernels/ops/attention/dsv4/kv_layout.py: 576
  data + 8 scale bytes a token, a page padded to a multiple of 576 bytes;
  _get_paged_kv_bytes_per_token): page_size tokens a page in the SWA pool, page_size / ratio in
  the c4 / c128 pools;
- bytes per SWA token (_get_bytes_per_swa_token): one SWA row on every layer of the stage, plus the
  c4 compressor states (fp32, 2 x 2 x head_dim, and 2 x 2 x index_head_dim for the indexer) of a
  ring of 8 rows (16 with speculative decoding) per SWA page on each rate-4 layer;
- bytes per full token (_get_bytes_per_full_token): swa_full_tokens_ratio x that, plus per rate-4
  layer (c4 row + indexer row of index_head_dim fp8 + one fp32 scale per 128) / 4 and per rate-128
  layer a c128 row / 128 (_compressed_bytes_per_full_token), x (layers + 1) / layers when
  speculative decoding reserves the draft worker;
- fixed bytes (_get_c128_state_fixed_bytes): the c128 compressor states, a ring of 128 (256
  speculative) fp32 rows of 2 x head_dim per request slot (max_running_requests + 1), plus
  ring + 1 rows, rounded up to 128 rows, on every rate-128 layer.
calculate_pool_sizes: full = int((available - fixed) / bytes_per_full_token) floored to a page;
_compute_dsv4_sizes: swa = int(full x ratio) floored to a page (validate_swa_pool_size: more than
window + page_size), c4 = full // 4, c128 = full // 128, c4_state = swa // page x ring;
finalize_with_max_running_requests: c128_state = (max_running_requests + 1) x ring.
Server defaults for the model (arg_groups/model_overrides/deepseek_v4.py _deepseek_v4_overrides:
page_size 256, swa_full_tokens_ratio 0.1; arg_groups/deepseek_v4_hook.py apply_deepseek_v4_defaults:
max_running_requests 256, kv-cache dtype fp8_e4m3). The model's support arrived in SGLang 0.5.12.

Earlier releases (the wheels' DSV4PoolConfigurator, see `Release`):
- 0.5.12: every entry of config.json compress_ratios is a layer (the MTP layer's too); 0.5.13+ take
  the stage's decoder layers (compress_ratios[start_layer:end_layer]);
- 0.5.12 - 0.5.14: the c128 compressor states are priced per SWA token like the c4 ones (ring 128
  rows of 2 x head_dim fp32 per window of SWA tokens), no fixed bytes, c128_state = swa // window x ring;
- 0.5.12 - 0.5.20: rows of 584 bytes without page padding, and the c4 rings counted per
  sliding-window (128) SWA tokens, not per page;
- before 0.5.20 the 0.1 replaces --swa-full-tokens-ratio whenever it equals ServerArgs' 0.8 default,
  and no SWA pool is too small (validate_swa_pool_size arrived in 0.5.20).
"""

from __future__ import annotations

from dataclasses import dataclass

from servefit.models.arch_deepseek_v4 import compress_ratios
from servefit.models.spec import ModelSpec

FIRST = (0, 5, 12)  # sglang/srt/models/deepseek_v4.py first ships in the 0.5.12 wheel
FOLLOWS = "0.5.23"
V4_ROW, V4_ALIGN = 576 + 8, 576  # kv_layout.py KVLayout.V4 bytes_per_token, page_align
PAGE = 256  # _deepseek_v4_overrides: page_size = 256 (128 on NPU)
SWA_RATIO = 0.1  # _deepseek_v4_overrides / DSV4_DEFAULT_SWA_FULL_TOKENS_RATIO
MAX_RUNNING = 256  # apply_deepseek_v4_defaults


@dataclass(frozen=True)
class Release:
    """What changed in DSV4PoolConfigurator across SGLang releases (module docstring)."""

    v: tuple[int, int, int] = (0, 5, 23)

    @property
    def mtp_entry_is_a_layer(self) -> bool:
        return self.v < (0, 5, 13)

    @property
    def c128_fixed(self) -> bool:
        return self.v >= (0, 5, 15)

    @property
    def padded(self) -> bool:
        return self.v >= (0, 5, 21)

    @property
    def default_ratio_replaces_0_8(self) -> bool:
        return self.v < (0, 5, 20)

    @property
    def swa_floor(self) -> bool:  # validate_swa_pool_size
        return self.v >= (0, 5, 20)


def row_bytes(page: int, ratio: int = 0, padded: bool = True) -> float:
    """_get_paged_kv_bytes_per_token: KVLayout.V4.page_bytes(page // ratio) / (page // ratio);
    before 0.5.21 kv_bytes = qk_nope + 2 x qk_rope + 8 = 584, unpadded."""
    if not padded:
        return V4_ROW
    rows = page // ratio if ratio else page
    return -(-rows * V4_ROW // V4_ALIGN) * V4_ALIGN / rows


def ring_sizes(speculative: bool) -> tuple[int, int]:
    """deepseek_v4_memory_pool.py get_compress_state_ring_size: (c4 ring, c128 ring)."""
    return (16, 256) if speculative else (8, 128)


@dataclass
class Pools:
    """What DSV4PoolConfigurator logs ("DSV4 memory calculation" / "DSV4 pool sizes") per GPU."""

    swa_ratio: float
    bytes_per_swa_token: float
    bytes_per_full_token: float
    c128_state_fixed: int
    full: int
    swa: int
    c4: int
    c128: int
    c4_state: int
    c128_state: int
    max_running_requests: int


def stage_ratios(model: ModelSpec, pp: int, rel: Release = Release()) -> list[int]:
    """Compression rates of the first pipeline stage's layers (the MTP entry left out: the stage is
    range(start_layer, end_layer) of the decoder layers; 0.5.12 counts the whole list)."""
    if rel.mtp_entry_is_a_layer:
        return compress_ratios(model)
    ratios = compress_ratios(model)[:model.num_hidden_layers]
    per = -(-len(ratios) // max(pp, 1))
    return ratios[:per]


def _ring_unit(model: ModelSpec, page: int, rel: Release) -> int:
    """SWA tokens one compressor ring serves: a page (0.5.21+), the sliding window before."""
    return page if rel.padded else model.sliding_window


def per_token(model: ModelSpec, ratios: list[int], swa_ratio: float, speculative: bool,
              state_bytes: int = 4, page: int = PAGE, rel: Release = Release()) -> tuple[float, float]:
    """(bytes per SWA token, bytes per full token) of one stage (DSV4PoolConfigurator.__init__;
    _get_bytes_per_full_token before 0.5.21)."""
    attn_head_dim, ihd = model.head_dim, model.index_head_dim  # qk_nope + qk_rope = head_dim
    n4, n128 = ratios.count(4), ratios.count(128)
    ring4, ring128 = ring_sizes(speculative)
    unit = _ring_unit(model, page, rel)
    c4_states = 2 * 2 * attn_head_dim * state_bytes + 2 * 2 * ihd * state_bytes
    swa = row_bytes(page, 0, rel.padded) * len(ratios) + ring4 / unit * c4_states * n4
    if not rel.c128_fixed:  # c128_state_ratio x (2 x 1 x head_dim) fp32 per SWA token
        swa += ring128 / unit * 2 * attn_head_dim * state_bytes * n128
    indexer = ihd + ihd // 128 * 4  # get_dsv4_indexer_bytes_per_token (fp8, NVIDIA)
    full = swa_ratio * swa + n4 * (row_bytes(page, 4, rel.padded) + indexer) / 4 \
        + n128 * row_bytes(page, 128, rel.padded) / 128
    if speculative and ratios:  # (target + draft) / target, one draft layer
        infl = (len(ratios) + 1) / len(ratios)
        swa, full = swa * infl, full * infl
    return swa, full


def c128_state_bytes(model: ModelSpec, ratios: list[int], requests: int, speculative: bool,
                     state_bytes: int = 4, rel: Release = Release()) -> int:
    """_get_c128_state_fixed_bytes (not online compression; 0.5.15+)."""
    n128 = ratios.count(128)
    if not n128 or not rel.c128_fixed:
        return 0
    _, ring = ring_sizes(speculative)
    rows = -(-((requests + 1) * ring + ring + 1) // 128) * 128
    return rows * 2 * model.head_dim * state_bytes * n128


def size(model: ModelSpec, ratios: list[int], available: int, *, swa_ratio: float = SWA_RATIO,
         requests: int = MAX_RUNNING, speculative: bool = False, cap: int | None = None,
         state_bytes: int = 4, page: int = PAGE, rel: Release = Release()) -> Pools:
    """calculate_pool_sizes then, under --max-total-tokens, calculate_pool_sizes_from_max_tokens;
    `requests` is max_running_requests per attention-DP worker. max_running_requests is then
    min(requests, full // 2) (kv_cache_configurator.py resolve_max_num_reqs)."""
    swa_b, full_b = per_token(model, ratios, swa_ratio, speculative, state_bytes, page, rel)
    fixed = c128_state_bytes(model, ratios, requests, speculative, state_bytes, rel)
    full = int(max(available - fixed, 0) / full_b) // page * page if full_b else 0
    if cap is not None:
        full = min(full, int(cap)) // page * page
    swa = int(full * swa_ratio) // page * page
    ring4, ring128 = ring_sizes(speculative)
    unit = _ring_unit(model, page, rel)
    running = min(requests, full // 2)
    c128_state = ((running + 1) * ring128 if rel.c128_fixed else swa // unit * ring128) if ratios.count(128) else 0
    return Pools(swa_ratio=swa_ratio, bytes_per_swa_token=swa_b, bytes_per_full_token=full_b, c128_state_fixed=fixed,
                 full=full, swa=swa, c4=full // 4, c128=full // 128, c4_state=swa // unit * ring4 if ratios.count(4) else 0,
                 c128_state=c128_state, max_running_requests=running)


def swa_too_small(model: ModelSpec, swa: int, page: int = PAGE) -> bool:
    """validate_swa_pool_size: a pool at or below sliding_window + page_size admits no request."""
    return model.sliding_window + page >= swa
