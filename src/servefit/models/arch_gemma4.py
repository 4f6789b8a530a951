"""Gemma 4 (31B dense, 26B-A4B MoE): parameters and per-layer-kind attention shapes.

Gemma 4's full-attention layers differ from its sliding ones (transformers 5.24.0
configuration_gemma4.py Gemma4TextConfig.__post_init__: full layers take `global_head_dim` and,
with `attention_k_eq_v`, `num_global_key_value_heads`; vLLM 0.33 model_executor/models/gemma4.py
Gemma4Attention builds each layer with its own head_dim / KV heads). The catalog keeps the
sliding shape in head_dim / num_key_value_heads and the full-layer shape in `layout`
(global_head_dim, num_global_key_value_heads, attention_k_eq_v).

Layouts (modeling_gemma4.py; vLLM gemma4.py / gemma4_mm.py):
- text layer: q / k (/ v unless k_eq_v on a full layer) / o projections, q_norm and k_norm of
  head_dim each (v_norm has no weight), the gated MLP, 4 norms and a scalar `layer_scalar`; with
  `enable_moe_block` (26B-A4B) the experts run beside the dense MLP: gate_up + down per expert, a
  router proj (hidden x experts) with `scale` (hidden) and `per_expert_scale` (experts), 3 norms;
- vision tower (Gemma4VisionModel): input_proj 3 x patch^2 x h, a 2 x position_embedding_size x h
  position table, per layer q/k/v/o (h x h), q/k norms (head_dim), gated MLP, 4 norms;
  std_bias / std_scale (2h); embed_vision.embedding_projection h x text hidden.
E2B / E4B (per-layer embeddings, KV sharing, the audio tower) are not counted here.
Standard library only: this is on the fast path.
"""

from __future__ import annotations

from typing import Any

from servefit.models.spec import ModelSpec


def is_gemma4(s: ModelSpec) -> bool:
    return s.model_type in ("gemma4", "gemma4_text")


def attention_shape(s: ModelSpec, kind: str) -> tuple[int, int]:
    """(head_dim, KV heads) of a layer of this kind: a Gemma 4 full layer takes the global
    shape, every other layer the model's own."""
    lay = s.layout
    if kind == "full" and lay.get("global_head_dim"):
        kv = s.num_key_value_heads
        if lay.get("attention_k_eq_v") and lay.get("num_global_key_value_heads"):
            kv = int(lay["num_global_key_value_heads"])
        return int(lay["global_head_dim"]), kv
    return s.head_dim, s.num_key_value_heads


def count_text(s: ModelSpec) -> int:
    """Gemma4ForConditionalGeneration's language model (tied embeddings, final norm)."""
    h, heads = s.hidden_size, s.num_attention_heads
    total = s.vocab_size * h + h + (0 if s.tie_word_embeddings else s.vocab_size * h)
    k_eq_v = bool(s.layout.get("attention_k_eq_v"))
    mlp = 3 * h * s.intermediate_size
    moe = 0
    if s.num_experts:
        e = s.num_experts
        moe = e * 3 * h * s.moe_intermediate_size + h * e + h + e + 3 * h
    for kind in s.kinds():
        hd, kv = attention_shape(s, kind)
        no_v = k_eq_v and kind == "full"
        total += h * heads * hd + h * kv * hd * (1 if no_v else 2) + heads * hd * h + 2 * hd
        total += mlp + moe + 4 * h + 1
    return total


def count_vision(vision: dict[str, Any], text_hidden: int) -> int:
    """Gemma4VisionModel plus embed_vision's projection into the language model."""
    h = int(vision["hidden_size"])
    layers = int(vision.get("num_hidden_layers", 0))
    hd = int(vision.get("head_dim") or h // int(vision.get("num_attention_heads", 1)))
    patch = int(vision.get("patch_size", 16))
    positions = int(vision.get("position_embedding_size", 10240))
    inter = int(vision.get("intermediate_size", 4 * h))
    per_layer = 4 * h * h + 2 * hd + 3 * h * inter + 4 * h
    return 3 * patch * patch * h + 2 * positions * h + layers * per_layer + 2 * h + h * text_hidden
