"""Kimi-K3's text model (model_type kimi_k3, text_config kimi_linear): KDA layers with a full-rank
output gate, MLA layers with an output gate, a latent MoE and attention residuals.

Counted module by module as SGLang 0.5.23 srt/models/kimi_k3.py builds them (vLLM 0.33.0
vllm/models/kimi_k3/nvidia builds the same shapes):
- KimiK3DeltaAttention (use_full_rank_gate): q / k / v / g projections of heads x head_dim each
  (fused_qkvg_proj), b_proj (hidden -> heads), f_a_proj (hidden -> head_dim), f_b_proj (head_dim ->
  heads x head_dim), dt_bias, the q / k / v short convolutions (qkv_conv1d, no bias), A_log (one per
  head: the checkpoint stores 128 values for 96 heads and the loader narrows them), o_norm over
  head_dim, o_proj;
- KimiK3MLAAttention: DeepseekV2AttentionMLA's projections (q_a / q_a_layernorm / q_b, kv_a_proj_with_mqa,
  kv_a_layernorm, kv_b, o_proj) plus g_proj (hidden -> heads x v_head_dim) with mla_use_output_gate;
- KimiK3MoE: the router (MoEGate: experts x hidden and e_score_correction_bias), shared experts of
  num_shared_experts x moe_intermediate_size in the hidden width, routed experts working in
  routed_expert_hidden_size (layout moe_latent_size) between routed_expert_down_proj and
  routed_expert_up_proj, routed_expert_norm with latent_moe_use_norm;
- KimiK3DecoderLayer: input / post-attention RMSNorms and, with attn_res_block_size, the attention
  residual scorers (self_attention_res_norm / _proj, mlp_res_norm / _proj: a norm and a hidden -> 1
  projection each); the model adds output_attn_res_norm / _proj beside the final norm.
"""

from __future__ import annotations

from servefit.models.spec import ModelSpec


def is_kimi_k3(s: ModelSpec) -> bool:
    return s.model_type == "kimi_k3"


def kda_params(s: ModelSpec) -> int:
    """One KDA layer with the full-rank gate (kimi_k3.py KimiK3DeltaAttention)."""
    m, h = s.mamba, s.hidden_size
    heads, hd = int(m.get("num_value_heads", 0)), int(m.get("value_head_dim", 0))
    p, kernel = heads * hd, int(m.get("conv_kernel", 4))
    return 4 * h * p + h * heads + h * hd + hd * p + p + 3 * p * kernel + heads + hd + p * h


def mla_params(s: ModelSpec) -> int:
    """One MLA layer (DeepseekV2AttentionMLA) plus the output gate g_proj."""
    h, heads = s.hidden_size, s.num_attention_heads
    qk = s.qk_nope_head_dim + s.qk_rope_head_dim
    q = h * s.q_lora_rank + s.q_lora_rank + s.q_lora_rank * heads * qk if s.q_lora_rank else h * heads * qk
    kv = h * (s.kv_lora_rank + s.qk_rope_head_dim) + s.kv_lora_rank + s.kv_lora_rank * heads * (
        s.qk_nope_head_dim + s.v_head_dim)
    gate = h * heads * s.v_head_dim if s.layout.get("mla_output_gate") else 0
    return q + kv + heads * s.v_head_dim * h + gate


def routed_experts(s: ModelSpec) -> int:
    """The routed experts of one MoE layer: gate / up / down between the latent and the expert width."""
    width = int(s.layout.get("moe_latent_size") or s.hidden_size)
    return s.num_experts * 3 * width * s.moe_intermediate_size


def moe_rest(s: ModelSpec) -> int:
    """One MoE layer beside its routed experts: router and score bias, shared experts, the latent
    down / up projections and their norm."""
    h, latent = s.hidden_size, int(s.layout.get("moe_latent_size") or 0)
    n = s.num_experts * h + s.num_experts + 3 * h * s.num_shared_experts * s.moe_intermediate_size
    if latent:
        n += 2 * h * latent + (latent if s.layout.get("latent_moe_norm") else 0)
    return n


def layer_attention(s: ModelSpec, kind: str) -> int:
    return kda_params(s) if kind in ("linear", "mamba") else mla_params(s)


def attn_res_params(s: ModelSpec) -> int:
    """Per decoder layer: two attention-residual scorers (RMSNorm + hidden -> 1 projection each)."""
    return 4 * s.hidden_size if s.layout.get("attn_res_block_size") else 0


def count_text(s: ModelSpec) -> int:
    h = s.hidden_size
    n = s.vocab_size * h * (1 if s.tie_word_embeddings else 2) + h  # embed_tokens, lm_head, norm
    if s.layout.get("attn_res_block_size"):
        n += 2 * h  # output_attn_res_norm / _proj
    for i, kind in enumerate(s.kinds()):
        n += layer_attention(s, kind) + 2 * h + attn_res_params(s)
        if s.is_moe and i >= s.first_k_dense_replace:
            n += routed_experts(s) + moe_rest(s)
        else:
            n += 3 * h * s.intermediate_size
    return n
