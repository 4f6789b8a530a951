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
from typing import Any

from servefit.engines.vllm.era import Era
from servefit.engines.vllm.mamba_cache import (
    all_mode_block,
    all_mode_blocks,
    hybrid_prefix_caching,
    mamba_cache_mode,
    mamba_chunk_size,
)
from servefit.memory.dtypes import dtype_bytes
from servefit.memory.kv import latent_cache, layer_bytes_per_token
from servefit.models.arch_mimo_v2 import is_mimo_v2
from servefit.models.spec import ModelSpec

KDA_CONV_SPEC_FROM = (0, 27, 1)  # mamba_utils.py kda_state_shape: speculative tokens lengthen the conv window
KDA_SSM_DTYPE_FROM = (0, 30, 0)  # kda_state_dtype takes mamba_ssm_cache_dtype (float32 / bfloat16)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Group:
    """Layers vLLM's KV-cache manager pages together: their attention kind and window, which set how many
    blocks a request holds."""

    kind: str  # full | sliding | chunked | mamba (recurrent state: Mamba2 / GatedDeltaNet) | mamba_all
    # sliding window or attention chunk size (0 for full); mamba: state blocks per request; mamba_all (the
    # "all" Mamba cache mode, a state block per block of context): the speculative blocks on top
    window: int
    layers: int  # layers in this group (padding included)
    block_size: int = 0  # tokens per block when unified pages differ from the layout's (0: the layout's)


@dataclass
class KvLayout:
    """vLLM's KV-cache groups and page sizes, from which follow the blocks a request needs and the longest
    context that fits."""

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
            elif g.kind == "mamba":
                total += g.window
            elif g.kind == "mamba_all":  # MambaSpec.max_memory_usage_bytes, mamba_cache_mode "all"
                total += cdiv(max_model_len, bs) + g.window
            else:
                total += cdiv(max_model_len, bs)
        return total

    def needed_bytes(self, max_model_len: int, in_flight: int) -> int:
        return self.bytes_per_block * self.blocks_per_request(max_model_len, in_flight)

    def largest_fitting_len(self, available: int, upper: int, in_flight: int, shards: int = 1) -> int:
        """estimate_max_model_len: binary search for the largest length whose request fits; with
        context parallelism a rank holds cdiv(length, shards) of it (max_memory_usage_bytes, see capacity)."""
        lo, hi = 0, upper
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.needed_bytes(cdiv(mid, max(shards, 1)), in_flight) <= available:
                lo = mid
            else:
                hi = mid - 1
        return lo


def layer_kinds(model: ModelSpec, hybrid_manager: bool, disable_sliding_window: bool,
                state_blocks: int | None = None, all_mode: bool = False) -> list[tuple[str, int]]:
    """(kind, window) for every layer with a KV-cache spec. Recurrent layers are left out unless
    `state_blocks` (see mamba_state_blocks) says how many blocks their state takes per request; in the
    "all" Mamba cache mode (`all_mode`) they are ("mamba_all", the speculative blocks, `state_blocks`)."""
    state = "mamba_all" if all_mode else "mamba"
    out = []
    kinds = model.kinds()
    shared = int(model.layout.get("num_kv_shared_layers") or 0)
    if shared:  # Gemma 4 E2B / E4B: the last layers read earlier caches (gemma4.py kv_sharing_target_layer_name)
        kinds = kinds[:len(kinds) - shared]
    # Zamba2's hybrid layers hold the shared block's attention cache and their own Mamba2 state
    # (vLLM zamba2.py Zamba2HybridLayer: an Attention per hybrid layer beside MambaMixer2)
    both = model.model_type == "zamba2"
    for kind in kinds:
        if (kind in ("mamba", "linear") or (both and kind == "full")) and state_blocks is not None and hybrid_manager:
            out.append((state, state_blocks))
            if kind != "full":
                continue
        if kind in ("mamba", "linear", "none"):
            continue
        if kind == "sliding" and not disable_sliding_window and model.sliding_window:
            out.append(("sliding", model.sliding_window) if hybrid_manager else ("full", 0))
        elif kind == "chunked" and model.attention_chunk_size:
            out.append(("chunked", model.attention_chunk_size) if hybrid_manager else ("full", 0))
        else:
            out.append(("full", 0))
    return out


def mamba_page_bytes(model: ModelSpec, tp: int, conv_bytes: float, ssm_bytes: float, num_spec: int) -> int:
    """One recurrent layer's state on one TP rank (MambaSpec.page_size_bytes before padding), from
    vllm/model_executor/layers/mamba/mamba_utils.py MambaStateShapeCalculator
    (gated_delta_net_state_shape, mamba2_state_shape; v0.24; kda_state_shape, v0.33). 0 when the
    catalog lacks the shape."""
    m = model.mamba or {}
    kernel = int(m.get("conv_kernel") or 4)
    if m.get("kind") == "gated_deltanet":
        kh, vh = int(m["num_key_heads"]), int(m["num_value_heads"])
        kd, vd = int(m["key_head_dim"]), int(m["value_head_dim"])
        conv = (2 * kh * kd + vh * vd) // tp * (kernel - 1 + num_spec)
        return int(conv * conv_bytes + vh // tp * vd * kd * ssm_bytes)
    if m.get("kind") == "kda":  # kda_state_shape: conv (q + k + v widths, kernel - 1), recurrent heads x hd x hd
        heads, hd = int(m["num_value_heads"]), int(m["value_head_dim"])
        kh, kd = int(m.get("num_key_heads") or heads), int(m.get("key_head_dim") or hd)
        conv = (heads * hd + 2 * kh * kd) // tp * (kernel - 1 + num_spec)
        return int(conv * conv_bytes + heads // tp * hd * hd * ssm_bytes)
    if m.get("kind") == "mamba1":  # mamba1_state_shape: conv (d_inner, kernel - 1), ssm (d_inner, state)
        d = int(m["d_inner"]) // tp
        return int(d * (kernel - 1) * conv_bytes + d * int(m["state_size"]) * ssm_bytes)
    if m.get("kind") == "mamba2":
        heads, hd, groups, state = int(m["num_heads"]), int(m["head_dim"]), int(m["n_groups"]), int(m["state_size"])
        groups += 0 if groups % tp == 0 else tp - groups  # extra_groups_for_head_shards
        conv = (heads * hd + 2 * groups * state) // tp * (kernel - 1 + num_spec)
        return int(conv * conv_bytes + heads // tp * hd * state * ssm_bytes)
    return 0


def aligned_block_size(block_size: int, mamba_page: int, attn_bytes_1_token: float, alignment: int = 16) -> int:
    """The attention block size a hybrid Mamba model runs with: raised to the smallest multiple of
    16 whose attention page holds one Mamba state (vllm/platforms/interface.py
    Platform._align_hybrid_block_size, v0.21+; models/config.py HybridAttentionMambaModelConfig
    in v0.11-0.18; the kernel alignment is 16 for the CUDA backends; an MLA model's is 128 in v0.33
    (_align_hybrid_block_size: "TRTLLM/FlashInfer MLA decode kernels"), earlier releases not read).
    The Mamba page is then padded to the attention page."""
    if mamba_page <= 0 or attn_bytes_1_token <= 0:
        return block_size
    need = alignment * cdiv(mamba_page, int(alignment * attn_bytes_1_token))
    return max(block_size, need)


def hybrid_alignment(model: ModelSpec, version: tuple[int, ...], env: dict[str, str] | None = None) -> int:
    """The multiple a hybrid model's attention block is raised in. 16 for GQA caches; for an MLA cache
    (Kimi-Linear, Kimi-K3) 64, or 128 under VLLM_ATTENTION_BACKEND=CUTLASS_MLA, from 0.11.1 to 0.19
    (models/config.py HybridAttentionMambaModelConfig.verify_and_update_config: "MLA ... requires larger
    alignment"); from 0.20 the backend's smallest kernel block (Triton MLA, the Ampere / Ada backend:
    MultipleOf(16)); 128 from 0.27.1 (platforms/interface.py _align_hybrid_block_size: "TRTLLM/FlashInfer
    MLA decode kernels"). 0.27.0 was not read."""
    if not latent_cache(model) or version < (0, 11, 1):
        return 16
    if version >= (0, 27, 1):
        return 128
    if version < (0, 20, 0):
        return 128 if (env or {}).get("VLLM_ATTENTION_BACKEND") == "CUTLASS_MLA" else 64
    return 16


def mamba_state_blocks(version: tuple[int, ...], prefix_caching: bool, num_spec: int) -> int:
    """Blocks one request's recurrent state holds (MambaSpec.max_memory_usage_bytes): one before
    v0.15; from v0.15 `1 + num_speculative_blocks` ("none", prefix caching off) or `2 + ...`
    ("align", prefix caching on for models without Mamba prefix-caching support, which is every
    GatedDeltaNet model). The "all" mode's blocks follow the context (all_mode_blocks, Group "mamba_all").
    Whether prefix caching is on, and the mode, are mamba_cache.py's to say."""
    if version < (0, 15, 0):
        return 1
    return (2 if prefix_caching else 1) + num_spec


def speculative(settings: dict[str, Any]) -> tuple[str, int]:
    """(method, num_speculative_tokens) of --speculative-config ("", 0 without one)."""
    sc = settings.get("speculative_config")
    if not isinstance(sc, dict):
        return "", 0
    method = str(sc.get("method") or "")
    return ("mtp" if method.endswith("mtp") else method), int(sc.get("num_speculative_tokens") or 0)


def hybrid_state(settings: dict[str, Any], model: ModelSpec, dtype: str, tp: int, version: tuple[int, ...],
                 block_size: int, kv_dtype_bytes: float,
                 env: dict[str, str] | None = None) -> tuple[int | None, int, int, int]:
    """(state blocks per request, attention block size, one layer's state page, the "all" mode's state block
    size) of a recurrent model (Mamba1 / Mamba2 / GatedDeltaNet, hybrid or not); None blocks when the model
    has no recurrent layers or its state shape is unknown. The ssm state is fp32 where the model's vLLM
    config class says so: Qwen3.5 (its config's mamba_ssm_dtype,
    models/config.py::Qwen3_5ForConditionalGenerationConfig) and Nemotron-H
    (NemotronHForCausalLMConfig.DEFAULT_MAMBA_SSM_CACHE_DTYPE). An attention-free model (Mamba,
    Falcon-Mamba, Mamba2) runs without prefix caching (config/model.py
    is_prefix_caching_supported: "Attention free models do not support prefix caching").
    The last figure is 0 outside the "all" Mamba cache mode (mamba_cache.py); in it the state blocks are
    the speculative ones on top of a block per block of context (see all_mode_blocks)."""
    kinds = model.kinds()
    if not any(k in ("mamba", "linear") for k in kinds):
        return None, block_size, 0, 0
    _, n_spec = speculative(settings)
    conv_dtype = settings.get("mamba_cache_dtype") or "auto"
    conv_b = dtype_bytes(dtype if conv_dtype == "auto" else conv_dtype)
    ssm_dtype = settings.get("mamba_ssm_cache_dtype") or "auto"
    kda = (model.mamba or {}).get("kind") == "kda"
    if kda and version < KDA_SSM_DTYPE_FROM:  # kda_state_dtype: the recurrent state is float32, whatever is set
        ssm_dtype = "float32"
    if ssm_dtype == "auto":  # KDA: mamba_utils.py MambaStateDtypeCalculator.kda_state_dtype ("auto" -> float32)
        fp32 = model.model_type.startswith(("qwen3_5", "nemotron_h")) or kda
        ssm_dtype = "float32" if fp32 else conv_dtype
    ssm_b = dtype_bytes(dtype if ssm_dtype == "auto" else ssm_dtype)
    # kda_state_shape: the conv window is kernel - 1 long up to 0.26, kernel - 1 + num_spec from 0.27.1
    page = mamba_page_bytes(model, tp, conv_b, ssm_b, 0 if kda and version < KDA_CONV_SPEC_FROM else n_spec)
    if not page:
        return None, block_size, 0, 0
    attention = any(k in ("full", "sliding", "chunked") for k in kinds)
    if not attention:  # no attention page to align to: the state is its own page
        return mamba_state_blocks(version, False, n_spec), block_size, page, 0
    alignment = hybrid_alignment(model, version, env)
    attn_1 = layer_bytes_per_token(model, kv_dtype_bytes, tp)
    # prefix caching and the Mamba cache mode by release (mamba_cache.py); the "all" mode of a model whose
    # chunk size the catalog lacks is planned as "align" and the plan says so (mamba_cache.all_mode_note)
    mode = mamba_cache_mode(settings, model, version, hybrid_prefix_caching(settings, version))
    base = int(settings.get("mamba_block_size") or 0) or mamba_chunk_size(model)
    if mode == "all" and base:
        state_block = all_mode_block(base, page, attn_1, block_size, alignment, version)
        return all_mode_blocks(version, n_spec), max(block_size, state_block), page, state_block
    block = aligned_block_size(block_size, page, attn_1, alignment)
    return mamba_state_blocks(version, mode != "none", n_spec), block, page, 0


def layout(model: ModelSpec, layers: list[tuple[str, int]], kv_dtype_bytes: float, tp: int,
           block_size: int, era: Era, state_page: int = 0, state_block: int = 0) -> KvLayout:
    """Group layers as the hybrid KV-cache manager does and size one block
    (kv_cache_utils.py::_get_kv_cache_groups_uniform_page_size). Recurrent ("mamba") layers share
    the pool with the attention layers at the attention page size; without attention layers
    (pure Mamba) a block is one layer's state (`state_page`, MambaSpec.page_size_bytes). In the "all"
    mode a state block covers `state_block` tokens (MambaSpec.block_size = mamba_block_size), which
    hybrid_state makes the attention block but for a larger --block-size up to 0.19."""
    page = int(block_size * layer_bytes_per_token(model, kv_dtype_bytes, tp))
    if state_page and layers and all(kind == "mamba" for kind, _ in layers):
        page = state_page
    buckets: dict[tuple[str, int], int] = {}
    for spec in layers:
        buckets[spec] = buckets.get(spec, 0) + 1
    if (model.layout.get("global_head_dim") or is_mimo_v2(model)) and len(buckets) > 1:
        return _unified_layout(model, buckets, kv_dtype_bytes, tp, block_size, era)
    if len(buckets) <= 1:
        (kind, window), n = next(iter(buckets.items())) if buckets else (("full", 0), 0)
        return KvLayout([Group(kind, window, n)], page, block_size, page * n)
    group_size = _group_size(buckets, era)
    groups: list[Group] = []
    padding = 0
    for (kind, window), n in buckets.items():
        k = cdiv(n, group_size)
        padding += k * group_size - n
        bs = state_block if kind == "mamba_all" and state_block != block_size else 0
        groups.extend(Group(kind, window, group_size, bs) for _ in range(k))
    return KvLayout(groups, page, block_size, page * group_size, padding)


def _group_size(buckets: dict[tuple[str, int], int], era: Era) -> int:
    """Layers per KV-cache group: the smallest kind's count; the largest when the kinds are close
    (max < min x 1.25 from 0.12, x 1.5 from 0.18: kv_cache_utils.py
    _get_kv_cache_groups_uniform_page_size)."""
    sizes = list(buckets.values())
    if max(sizes) < era.group_merge_ratio * min(sizes):
        return max(sizes)
    return min(sizes)


def _unified_layout(model: ModelSpec, buckets: dict[tuple[str, int], int], kv_dtype_bytes: float, tp: int,
                    block_size: int, era: Era) -> KvLayout:
    """Layer kinds whose pages differ (Gemma 4: sliding 2 x 16 KV x 256, full 2 x 4 KV x 512):
    kv_cache_planning.py unify_kv_cache_spec_page_size gives a smaller page a proportionally
    larger block (or pads it when it does not divide the largest), then
    _get_kv_cache_groups_uniform_page_size groups the layers as for one page size."""
    from servefit.memory.kv import kind_bytes_per_token

    pages = {spec: int(block_size * kind_bytes_per_token(model, spec[0], kv_dtype_bytes, tp)) for spec in buckets}
    top = max(pages.values())
    group_size = _group_size(buckets, era)
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
    """("GPU KV cache size" tokens, "Maximum concurrency") as vLLM logs them
    (kv_cache_utils.py::_report_kv_cache_config and get_max_concurrency_for_kv_cache_config):
    from 0.20.1 int(concurrency x max_model_len); before, num_blocks // len(kv_cache_groups) x the
    smallest group block size (x dcp), which counts one group's share of the blocks only. With
    decode context parallelism a request keeps cdiv(max_model_len, dcp) tokens of each full-attention
    layer on a rank (kv_cache_interface.py::FullAttentionSpec.max_memory_usage_bytes, MLAAttentionSpec
    inherits it; read in the 0.11.0, 0.22.0 and 0.33.0 wheels), so the concurrency divides the blocks
    by that request's share, and the logged tokens (concurrency x the full max_model_len) count every
    rank's share; sliding-window layers do not run with DCP (SlidingWindowSpec asserts dcp == 1)."""
    per_req = lay.blocks_per_request(cdiv(max_model_len, max(dcp, 1)), in_flight)
    conc = num_blocks / per_req if per_req else 0.0
    if era.tokens_from_concurrency:
        return int(conc * max_model_len), conc
    tokens = num_blocks // len(lay.groups) * min(g.block_size or lay.block_size for g in lay.groups) * dcp
    return tokens, conc


def override_check(settings: dict[str, Any], v1: bool, version: tuple[int, ...], bytes_per_block: int,
                   avail: int) -> int:
    """The memory the max-model-len check sees. --num-gpu-blocks-override replaces the block count
    vLLM allocates and logs (V0 engine/llm_engine.py::_initialize_kv_caches; V1
    kv_cache_utils.py::may_override_num_blocks; the plan takes it as the blocks). The check then sees
    the override's bytes in V0 (worker.py::raise_if_cache_size_invalid takes the blocks) and from 0.21
    (kv_cache_utils.py::get_kv_cache_configs turns the override into the available memory, read in
    the 0.21.0 - 0.33.0 wheels), the profiled memory in V1 before 0.21 (_check_enough_kv_cache_memory
    runs first, read in 0.11.0 and 0.20.0)."""
    override = settings.get("num_gpu_blocks_override")
    if override and (not v1 or version >= (0, 21, 0)):
        return int(override) * bytes_per_block
    return avail


def attention_free(model: ModelSpec) -> bool:
    """No layer keeps KV cache or recurrent state: v1/engine/core.py::_initialize_kv_caches
    ("Attention free models don't need memory for kv cache") skips profiling and KV sizing."""
    return all(k == "none" for k in model.kinds())


# DeepSeek-V3.2's fp8_ds_mla row: 512 fp8 NoPE bytes, 4 fp32 scales (16 bytes) and 64 bf16 RoPE values (128
# bytes) per token (kv_cache_interface.py::MLAAttentionSpec.page_size_bytes / real_page_size_bytes:
# block_size x 656, read in the 0.11.0 - 0.33.0 wheels), where a plain fp8 latent is 512 + 64 bytes
DS_MLA_ROW = 656
DS_MLA_CONFIG = ((0, 11, 0), (0, 12, 0), (0, 18, 0))  # auto or fp8 / fp8 only / from here the backend decides
SM120_SPARSE_FROM = (0, 24, 0)  # platforms/cuda.py: FLASHINFER_MLA_SPARSE_SM120 (not in 0.22; 0.23 not read)


def fp8_ds_mla(model: ModelSpec, kv_dtype: str, cc: int, version: tuple[int, ...], settings: dict[str, Any],
               env: dict[str, str] | None = None) -> bool:
    """Whether vLLM stores a sparse-MLA model's latent (an MLA cache with an indexer: DeepSeek-V3.2,
    GLM-5; V4 has its own layout, kv_dsv4.py) in fp8_ds_mla rows of DS_MLA_ROW bytes. 0.11:
    models/config.py::DeepseekV32ForCausalLM.verify_and_update_config turns "auto" and any fp8
    --kv-cache-dtype into fp8_ds_mla for that architecture; 0.12 - 0.17 only fp8 (read in the 0.12.0,
    0.14.0 and 0.17.0 wheels). From 0.18 (read in 0.18.0, 0.20.0 - 0.22.0, 0.24.0, 0.33.0) the attention
    layer does it for any sparse-MLA model by backend (model_executor/layers/attention/mla_attention.py:
    FLASHMLA_SPARSE with a quantized cache; from 0.24 _canonicalize_sparse_mla_kv_cache_dtype, which also
    turns "auto" / fp8 into it for FLASHINFER_MLA_SPARSE_SM120), and platforms/cuda.py picks the backend:
    on compute 10.x FLASHINFER_MLA_SPARSE (plain fp8 rows) first for a quantized cache from 0.20, in
    0.18 - 0.19 where at most 16 query heads run per rank; on 12.x the SM120 FlashInfer backend (0.24 on);
    elsewhere (Hopper) FLASHMLA_SPARSE, the only sparse backend that takes fp8 (0.33's
    FLASH_ATTN_MLA_SPARSE and FLASHINFER_MLA_SPARSE_SM90 come first but FlashAttention's takes no fp8
    cache). --attention-backend / VLLM_ATTENTION_BACKEND decide where set."""
    if not (latent_cache(model) and model.index_n_heads) or model.model_type == "deepseek_v4":
        return False
    if version < DS_MLA_CONFIG[0]:
        return False
    fp8 = kv_dtype.lower().startswith("fp8")
    if version < DS_MLA_CONFIG[2]:
        v32 = model.architecture == "DeepseekV32ForCausalLM"
        return v32 and (fp8 or (kv_dtype == "auto" and version < DS_MLA_CONFIG[1]))
    forced = str(settings.get("attention_backend") or (env or {}).get("VLLM_ATTENTION_BACKEND") or "").upper()
    if forced:
        return (forced == "FLASHMLA_SPARSE" and fp8) or (forced == "FLASHINFER_MLA_SPARSE_SM120"
                                                          and (fp8 or kv_dtype == "auto"))
    if cc // 10 == 12:
        return version >= SM120_SPARSE_FROM and (fp8 or kv_dtype == "auto")
    if not fp8:
        return False
    if cc // 10 == 10:
        heads = model.num_attention_heads // max(int(settings.get("tensor_parallel_size") or 1), 1)
        return version < (0, 20, 0) and heads > 16
    return True
