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
E2B / E4B add per-layer embeddings (PLE), KV sharing (the last num_kv_shared_layers layers
have q/o only and, with use_double_wide_mlp, twice the MLP width) and an audio tower
(Gemma4AudioModel, `layout.audio`). Their checkpoints also store k/v projections and k_norm
for the KV-shared layers, which no engine runs; those are left out of the count (see the
catalog notes). The clip-range scalars of Gemma4ClippableLinear are not counted.
Standard library only: this is on the fast path.
"""

from __future__ import annotations

from typing import Any

from servefit.models.spec import ModelSpec


def is_gemma4(s: ModelSpec) -> bool:
    """Gemma 4 and Gemma 4 "unified" (gemma-4-12B: the same decoder, encoder-free embedders)."""
    return s.model_type in ("gemma4", "gemma4_text", "gemma4_unified", "gemma4_unified_text")


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


def kv_shared(s: ModelSpec) -> int:
    """Layers at the end that read an earlier layer's KV cache (E2B / E4B num_kv_shared_layers):
    no k/v projections run there and vLLM / llama.cpp give them no cache of their own."""
    return int(s.layout.get("num_kv_shared_layers") or 0)


def layer_attention(s: ModelSpec, i: int, kind: str) -> int:
    """Projection weights of layer i: q / o always, k (/ v) unless the layer is KV-shared."""
    h, heads = s.hidden_size, s.num_attention_heads
    hd, kv = attention_shape(s, kind)
    n = h * heads * hd + heads * hd * h
    if i < s.num_hidden_layers - kv_shared(s):
        n += h * kv * hd * (1 if s.layout.get("attention_k_eq_v") and kind == "full" else 2)
    return n


def vllm_unloaded_params(s: ModelSpec) -> int:
    """Projection parameters vLLM allocates that the checkpoint count leaves out. gemma4.py
    Gemma4Attention (read in the 0.20.0 wheel) builds every layer's QKVParallelLinear with K and V slots
    of the layer's KV heads (a k_eq_v full layer loads its K weights into both), and the KV-shared
    layers keep their k/v projections and k_norm (the checkpoint stores them; nothing runs them).
    Gemma 4 only (model_type gemma4 / gemma4_text)."""
    if s.model_type not in ("gemma4", "gemma4_text"):
        return 0
    n, first_shared = 0, s.num_hidden_layers - kv_shared(s)
    for i, kind in enumerate(s.kinds()):
        hd, kv = attention_shape(s, kind)
        if i >= first_shared:
            n += 2 * s.hidden_size * kv * hd + hd
        elif kind == "full" and s.layout.get("attention_k_eq_v"):
            n += s.hidden_size * kv * hd
    return n


def layer_mlp_width(s: ModelSpec, i: int) -> int:
    shared = i >= s.num_hidden_layers - kv_shared(s)
    return s.intermediate_size * (2 if s.layout.get("use_double_wide_mlp") and shared else 1)


def count_text(s: ModelSpec) -> int:
    """Gemma4ForConditionalGeneration's language model (tied embeddings, final norm), the
    per-layer embeddings (PLE) of E2B / E4B and, with `layout.audio`, the audio tower."""
    h, heads = s.hidden_size, s.num_attention_heads
    lay = s.layout
    total = s.vocab_size * h + h + (0 if s.tie_word_embeddings else s.vocab_size * h)
    k_eq_v = bool(lay.get("attention_k_eq_v"))
    ple = int(lay.get("hidden_size_per_layer_input") or 0)
    n = s.num_hidden_layers
    if ple:  # embed_tokens_per_layer, per_layer_model_projection, per_layer_projection_norm
        total += int(lay.get("vocab_size_per_layer_input") or s.vocab_size) * n * ple + h * n * ple + ple
    moe = 0
    if s.num_experts:
        e = s.num_experts
        moe = e * 3 * h * s.moe_intermediate_size + h * e + h + e + 3 * h
    first_shared = n - kv_shared(s)
    for i, kind in enumerate(s.kinds()):
        hd, kv = attention_shape(s, kind)
        total += h * heads * hd + heads * hd * h + hd  # q_proj, o_proj, q_norm
        if i < first_shared:  # k_proj (+ v_proj unless k_eq_v on a full layer), k_norm
            total += h * kv * hd * (1 if k_eq_v and kind == "full" else 2) + hd
        inter = s.intermediate_size * (2 if lay.get("use_double_wide_mlp") and i >= first_shared else 1)
        total += 3 * h * inter + moe + 4 * h + 1
        if ple:  # per_layer_input_gate, per_layer_projection, post_per_layer_input_norm
            total += 2 * h * ple + h
    audio = lay.get("audio")
    if audio:
        total += count_audio(audio, h)
    # Gemma4Unified (modeling_gemma4_unified.py): raw audio frames go through a
    # Gemma4UnifiedMultimodalEmbedder only: a bias-free embedding_projection (frame x hidden) after
    # an RMSNorm without a weight (with_scale=False).
    total += int(lay.get("audio_embed_dim") or 0) * h
    return total


def count_audio(a: dict[str, Any], text_hidden: int) -> int:
    """Gemma4AudioModel (a USM conformer) plus embed_audio's projection: two 3x3 subsampling convs
    with LayerNorms and an input projection; per layer two macaron FFNs (4x, pre/post norms),
    chunked attention q/k/v/post + relative_k_proj + per_dim_scale, a light conv block (GLU
    linear_start, depthwise conv, linear_end, 2 norms) and 3 norms; output_proj with bias."""
    h = int(a["hidden_size"])
    layers = int(a["num_hidden_layers"])
    hd = h // int(a["num_attention_heads"])
    c0, c1 = (int(c) for c in a.get("subsampling_conv_channels", (128, 32)))
    k = int(a.get("conv_kernel_size", 5))
    out = int(a.get("output_proj_dims", h))
    sub = 9 * c0 + c0 + 9 * c0 * c1 + c1 + (c0 // 4) * c1 * h
    ffn = 2 * (8 * h * h + 2 * h)
    attn = 4 * h * h + h * h + hd
    conv = 2 * h * h + h * h + h * k + 2 * h
    return sub + layers * (ffn + attn + conv + 3 * h) + h * out + out + out * text_hidden


def count_vision(vision: dict[str, Any], text_hidden: int) -> int:
    """Gemma4VisionModel plus embed_vision's projection into the language model."""
    h = int(vision["hidden_size"])
    layers = int(vision.get("num_hidden_layers", 0))
    hd = int(vision.get("head_dim") or h // int(vision.get("num_attention_heads", 1)))
    patch = int(vision.get("patch_size", 16))
    positions = int(vision.get("position_embedding_size", 10240))
    inter = int(vision.get("intermediate_size", 4 * h))
    per_layer = 4 * h * h + 2 * hd + 3 * h * inter + 4 * h
    std = 2 * h if vision.get("standardize", True) else 0  # std_bias / std_scale buffers
    return 3 * patch * patch * h + 2 * positions * h + layers * per_layer + std + h * text_hidden


def count_unified_vision(vision: dict[str, Any], text_hidden: int) -> int:
    """Gemma4UnifiedVisionEmbedder (modeling_gemma4_unified.py), encoder-free: patch_ln1 over the
    merged patch ((patch x pooling_kernel)^2 x 3 pixels), patch_dense (+ bias) to mm_embed_dim,
    patch_ln2, a (mm_posemb_size, 2, mm_embed_dim) position table, pos_norm (LayerNorms: weight +
    bias), then the multimodal embedder's bias-free projection into the language model. The
    catalog keeps mm_embed_dim as the vision `hidden_size`."""
    merged = int(vision.get("patch_size", 16)) * int(vision.get("pooling_kernel_size", 3))
    pixels = merged * merged * 3
    mm = int(vision["hidden_size"])
    table = int(vision.get("mm_posemb_size", 1120)) * 2 * mm
    return 2 * pixels + pixels * mm + mm + 2 * mm + table + 2 * mm + mm * text_hidden
