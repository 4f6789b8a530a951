"""KV-cache bytes per token for one layer, by attention kind.

Full and sliding-window attention store K and V for every KV head: 2 x kv_heads x head_dim.
MLA stores one latent of kv_lora_rank + qk_rope_head_dim (vllm/model_executor/layers/attention/
mla_attention.py::MLAAttention.get_kv_cache_spec: head_size_v = 0, num_kv_heads = 1).
Recurrent layers (Mamba, GatedDeltaNet) keep a fixed state per sequence instead.
vLLM caches the latent only for the model types is_deepseek_mla lists (latent_cache below)."""

from __future__ import annotations

from servefit.models.arch_mimo_v2 import is_mimo_v2, kv_shape
from servefit.models.architecture import indexer_layers
from servefit.models.spec import ModelSpec

# Model types with MLA's low-rank projections that vLLM does not serve with an MLA cache: they are
# missing from vllm/transformers_utils/model_arch_config_convertor.py::is_deepseek_mla, so use_mla
# is False. MiniCPM3 (vllm model_executor/models/minicpm3.py MiniCPM3Attention) attends with a plain
# Attention over num_heads K/V heads of qk_nope + qk_rope (V zero-padded to that width).
MHA_CACHE_MLA_TYPES = frozenset({"minicpm3"})


def latent_cache(m: ModelSpec) -> bool:
    """Whether vLLM caches one MLA latent per token and layer (use_mla) rather than K and V per head."""
    return m.is_mla and m.model_type not in MHA_CACHE_MLA_TYPES


def kv_heads_per_rank(m: ModelSpec, tp: int) -> int:
    """vllm/config/model.py::ModelConfig.get_num_kv_heads: max(1, kv // tp); MLA keeps 1."""
    if latent_cache(m):
        return 1
    return max(1, m.num_key_value_heads // max(tp, 1))


def layer_bytes_per_token(m: ModelSpec, kv_dtype_bytes: float, tp: int = 1) -> float:
    """K+V bytes one attention layer stores per token on one TP rank."""
    if latent_cache(m):
        # DeepSeek-V3.2 / GLM-5: each layer's indexer also caches one fp8 key of index_head_dim
        # plus a 4-byte scale per 128 (vLLM deepseek_v2.py Indexer -> DeepseekV32IndexerCache).
        # GLM-5.2's IndexShare layers build no Indexer (vllm/models/deepseek_v32/attention.py), so
        # the indexer keys are spread over all layers: the per-layer average, exact in the layers' sum
        index: float = indexer_key_bytes(m)
        if index and indexer_layers(m) != m.num_hidden_layers:
            index = index * indexer_layers(m) / max(m.num_hidden_layers, 1)
        return (m.kv_lora_rank + m.qk_rope_head_dim) * kv_dtype_bytes + index
    if is_mimo_v2(m):  # the sliding layers' (larger) page: vLLM pages per kind, see kind_bytes_per_token
        return kind_bytes_per_token(m, "sliding", kv_dtype_bytes, tp)
    kv = 2 * kv_heads_per_rank(m, tp) * m.head_dim * kv_dtype_bytes
    if m.index_n_heads:  # MiniMax-M3: the indexer's key cache on its sparse layers, spread over all layers
        return kv + indexer_key_bytes(m) * indexer_layers(m) / max(m.num_hidden_layers, 1)
    return kv


def indexer_key_bytes(m: ModelSpec) -> int:
    """Bytes of one layer's indexer key per token. DeepSeek-V3.2 / GLM-5: fp8 index_head_dim plus a
    4-byte scale per 128 (vLLM deepseek_v2.py DeepseekV32IndexerCache, head_size index_head_dim +
    scales). MiniMax-M3: one bf16 key of index_head_dim, whatever --kv-cache-dtype says (vLLM
    models/minimax_m3/common/indexer.py MiniMaxM3IndexerCache, MLAAttentionSpec num_kv_heads 1, replicated
    on every TP rank; nvidia/model.py resolve_indexer_kv_dtype("bf16") unless --attention-config sets it)."""
    if not m.index_n_heads:
        return 0
    if not m.is_mla:
        return 2 * m.index_head_dim
    return m.index_head_dim + m.index_head_dim // 128 * 4


def kind_bytes_per_token(m: ModelSpec, kind: str, kv_dtype_bytes: float, tp: int = 1) -> float:
    """K+V bytes per token of one layer of this attention kind: Gemma 4's full-attention layers
    have their own head_dim and KV heads (vLLM gemma4.py Gemma4Attention; models/arch_gemma4.py), so
    have MiMo-V2-Flash's two kinds (vLLM mimo_v2.py MiMoV2Attention, head_size_v); every other layer
    is layer_bytes_per_token."""
    if is_mimo_v2(m):  # MiMo-V2-Flash: KV heads by kind, K head_dim and V v_head_dim wide (models/arch_mimo_v2.py)
        kv, k, v = kv_shape(m, kind)
        return max(1, kv // max(tp, 1)) * (k + v) * kv_dtype_bytes
    if kind != "full" or latent_cache(m) or not m.layout.get("global_head_dim"):
        return layer_bytes_per_token(m, kv_dtype_bytes, tp)
    from servefit.models.arch_gemma4 import attention_shape

    hd, kv = attention_shape(m, "full")
    return 2 * max(1, kv // max(tp, 1)) * hd * kv_dtype_bytes


def attention_layers(m: ModelSpec) -> int:
    return sum(1 for k in m.kinds() if k in ("full", "sliding", "chunked"))


def full_kv_bytes_per_token(m: ModelSpec, kv_dtype_bytes: float, tp: int = 1) -> int:
    """Per-token KV bytes if every attention layer kept every token (the textbook figure); the
    KV-shared layers of Gemma 3n / Gemma 4 E2B / E4B hold none."""
    shared = int(m.layout.get("num_kv_shared_layers") or 0)
    if m.layout.get("global_head_dim") or is_mimo_v2(m):  # Gemma 4, MiMo-V2-Flash: per-kind pages
        kinds = m.kinds()[:m.num_hidden_layers - shared]
        return int(sum(kind_bytes_per_token(m, k, kv_dtype_bytes, tp) for k in kinds
                       if k in ("full", "sliding", "chunked")))
    layers = sum(1 for k in m.kinds()[:m.num_hidden_layers - shared] if k in ("full", "sliding", "chunked"))
    if m.index_n_heads:  # K/V or latents on every layer, indexer keys where one runs
        per = (m.kv_lora_rank + m.qk_rope_head_dim if latent_cache(m) else 2 * kv_heads_per_rank(m, tp)
               * m.head_dim) * kv_dtype_bytes
        return int(layers * per + indexer_layers(m) * indexer_key_bytes(m))
    return int(layers * layer_bytes_per_token(m, kv_dtype_bytes, tp))
