"""Zyphra ZAYA1 (model_type zaya): CCA attention and a top-1 MoE with a router MLP.

Layout (transformers 5.24.0 models/zaya/modeling_zaya.py, docstring checkpoint Zyphra/ZAYA1-8B; the
same modules SGLang 0.5.23 srt/models/zaya.py loads, where each decoder layer of the transformers
model is an attention layer and an MoE layer of its own):
- ZayaCCAProjection (Compressed Convolutional Attention): q_proj (hidden -> heads x head_dim),
  k_proj (hidden -> KV heads x head_dim), v_proj_current / v_proj_delayed (hidden -> half the KV
  width each), a depthwise Conv1d (kernel cca_time0) and a grouped Conv1d (kernel cca_time1, one
  group per query and KV head) over the (heads + KV heads) x head_dim q/k channels, both with bias;
- ZayaQKNorm: one learned temperature per KV head; o_proj (heads x head_dim -> hidden), bias-free;
- ZayaRouter: down_proj (hidden -> router_hidden_size, bias), router_states_scale on every layer but
  the first (EDA), ZayaRouterMLP (RMSNorm, fc1 / fc2 with bias, out_proj -> experts + 1, the +1 the
  compute-free skip expert) and the persistent balancing_biases buffer (experts + 1, stored in the
  checkpoint: the Hub total counts it);
- ZayaExperts: experts x SwiGLU of moe_intermediate_size, one expert per token;
- two RMSNorms and two ZayaResidualScaling (4 x hidden each) per layer; the model's input
  scale / bias (2 x hidden), final norm, tied embeddings.
Standard library only: this is on the fast path.
"""

from __future__ import annotations

from typing import Any

from servefit.models.spec import ModelSpec

FAMILIES = frozenset({"zaya"})


def is_zaya(s: ModelSpec) -> bool:
    return s.model_type in FAMILIES


def _kernels(s: ModelSpec) -> tuple[int, int]:
    return int(s.layout.get("cca_time0") or 2), int(s.layout.get("cca_time1") or 2)


def conv_channels(s: ModelSpec) -> int:
    """The q/k channels CCA convolves: (heads + KV heads) x head_dim."""
    return (s.num_attention_heads + s.num_key_value_heads) * s.head_dim


def layer_attention(s: ModelSpec) -> int:
    h, heads, kv, hd = s.hidden_size, s.num_attention_heads, s.num_key_value_heads, s.head_dim
    c, (k0, k1) = conv_channels(s), _kernels(s)
    proj = h * heads * hd + h * kv * hd + 2 * h * (kv * hd // 2)
    convs = (c * k0 + c) + (c * (c // (heads + kv)) * k1 + c)
    return proj + convs + kv + heads * hd * h


def layer_router(s: ModelSpec, i: int) -> int:
    """Router of layer i with its stored balancing biases (experts + the skip expert)."""
    h, r, classes = s.hidden_size, int(s.layout.get("router_hidden_size") or 256), s.num_experts + 1
    return h * r + r + (r if i else 0) + r + 2 * (r * r + r) + r * classes + classes


def count_text(s: ModelSpec) -> int:
    h = s.hidden_size
    total = s.vocab_size * h * (1 if s.tie_word_embeddings else 2) + h + 2 * h
    experts = s.num_experts * 3 * h * (s.moe_intermediate_size or s.intermediate_size)
    for i in range(s.num_hidden_layers):
        total += layer_attention(s) + layer_router(s, i) + experts + 2 * h + 8 * h
    return total


def read_config(c: dict[str, Any], spec: ModelSpec) -> None:
    """config.json in either spelling: transformers' ZayaConfig (num_hidden_layers decoder layers) or
    the Zyphra original SGLang configs/zaya.py reads (zaya_layers: "a" for an attention layer, an
    integer for an MoE layer; cca_num_q_heads / num_query_groups / zaya_mlp_expansion lists)."""
    lay = spec.layout
    layers = c.get("zaya_layers")
    if isinstance(layers, list) and layers:
        spec.num_hidden_layers = sum(1 for x in layers if x == "a")
    elif "ffn_hidden_size" in c and "moe_intermediate_size" not in c:  # Zyphra spelling without the list:
        spec.num_hidden_layers = int(c.get("num_hidden_layers") or 80) // 2  # even layers attend
    for key, name in (("cca_num_q_heads", "num_attention_heads"), ("num_query_groups_list", "num_key_value_heads")):
        given = c.get(key)
        if isinstance(given, list) and any(given):
            setattr(spec, name, int(next(v for v in given if v)))
    if c.get("ffn_hidden_size") and not c.get("moe_intermediate_size"):  # swiglu: gate and up in one
        spec.moe_intermediate_size = int(c["ffn_hidden_size"]) // 2
    exp = c.get("zaya_mlp_expansion", c.get("router_hidden_size"))
    if isinstance(exp, list):
        exp = next((v for v in exp if v), 256)
    lay["router_hidden_size"] = int(exp or 256)
    lay["cca_time0"], lay["cca_time1"] = int(c.get("cca_time0") or 2), int(c.get("cca_time1") or 2)
    spec.num_experts_per_tok = 1


def cca_state_bytes(s: ModelSpec, tp: int, conv_bytes: int = 2) -> int:
    """One request's CCA state over every attention layer, as SGLang 0.5.23 configs/zaya.py
    ZayaConfig.mamba2_cache_params shapes it and configs/mamba_utils.py Mamba2CacheParams.
    mamba_cache_per_req prices it: conv (channels / TP, cca_time0 - 1 + cca_time1 - 1) for the q/k
    conv padding plus (hidden, 1) for the previous hidden state, in the conv dtype (bf16 unless
    SGLANG_MAMBA_CONV_DTYPE says otherwise); the temporal state (1, 1, 0) holds nothing."""
    k0, k1 = _kernels(s)
    per_layer = conv_channels(s) // max(tp, 1) * ((k0 - 1) + (k1 - 1)) + s.hidden_size
    return per_layer * conv_bytes * s.num_hidden_layers
