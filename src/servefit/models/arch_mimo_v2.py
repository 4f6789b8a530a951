"""MiMo-V2-Flash (model_type mimo_v2_flash): attention shapes that differ by layer kind.

transformers 5.24.0 modeling_mimo_v2_flash.py MiMoV2FlashAttention (docstring checkpoint
XiaomiMiMo/MiMo-V2-Flash): sliding-window layers have twice the full layers' KV heads
(layout swa_num_key_value_heads; vLLM 0.33.0 mimo_v2.py MiMoV2FlashDecoderLayer reads the
config's swa_num_key_value_heads) and one sink logit per query head; q / k are head_dim wide,
v and the output projection v_head_dim (bias-free). The MoE layers (MiMoV2MoE) hold the router
with its e_score_correction_bias and the routed experts, no shared expert; the first layer is a
dense MLP. vLLM caches K of head_dim and V of v_head_dim per KV head (Attention head_size_v ->
AttentionSpec.page_size_bytes: kv_heads x (head_size + head_size_v)); SGLang sizes its full and
SWA pools the same way (model_executor/pool_configurator.py: num_kv_heads x (head_dim + v_head_dim)
and swa_num_kv_heads x (swa_head_dim + swa_v_head_dim)).
"""

from __future__ import annotations

from servefit.models.spec import ModelSpec

FAMILIES = frozenset({"mimo_v2_flash"})


def is_mimo_v2(s: ModelSpec) -> bool:
    return s.model_type in FAMILIES


def kv_shape(s: ModelSpec, kind: str) -> tuple[int, int, int]:
    """(KV heads, K width, V width) of a layer of this kind."""
    kv = int(s.layout.get("swa_num_key_value_heads") or s.num_key_value_heads) if kind == "sliding" \
        else s.num_key_value_heads
    return kv, s.head_dim, s.v_head_dim or s.head_dim


def layer_attention(s: ModelSpec, kind: str) -> int:
    h, heads = s.hidden_size, s.num_attention_heads
    kv, k, v = kv_shape(s, kind)
    sinks = heads if kind == "sliding" and s.layout.get("swa_attention_sinks") else 0
    return h * heads * k + h * kv * (k + v) + heads * v * h + sinks


def moe_params(s: ModelSpec) -> int:
    h = s.hidden_size
    return s.num_experts * (3 * h * s.moe_intermediate_size + h + 1)  # experts, router row, score bias


def count_text(s: ModelSpec) -> int:
    h = s.hidden_size
    n = s.vocab_size * h * (1 if s.tie_word_embeddings else 2) + h
    for i, kind in enumerate(s.kinds()):
        n += layer_attention(s, kind) + 2 * h
        n += moe_params(s) if s.is_moe and i >= s.first_k_dense_replace else 3 * h * s.intermediate_size
    return n
