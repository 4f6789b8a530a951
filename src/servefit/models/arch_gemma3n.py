"""Gemma 3n (E2B, E4B): the language model's parameters, as vLLM 0.33 model_executor/models/
gemma3n.py builds it (transformers 5.24.0 modeling_gemma3n.py names the same tensors).

- embed_tokens (vocab x hidden, tied lm_head); per-layer embeddings: embed_tokens_per_layer
  (vocab_size_per_layer_input x layers x hidden_size_per_layer_input), per_layer_model_projection
  (hidden -> layers x that width) and per_layer_projection_norm; altup_projections and
  altup_unembed_projections ((altup_num_inputs - 1) x hidden^2 each); the final norm;
- per layer: q / o projections and q_norm; k / v projections and k_norm unless the layer reads an
  earlier layer's cache (the last num_kv_shared_layers: vLLM builds q_proj only there, "like HF";
  the checkpoints store their k / v anyway, see the catalog notes); the gated MLP; four norms;
  AltUp (correct_output_scale, correction_coefs n x n, prediction_coefs n x n^2, modality_router
  hidden x n, router_norm); LAuReL (linear_left / linear_right of laurel_rank, post_laurel_norm);
  per_layer_input_gate, per_layer_projection and post_per_layer_input_norm.
The MobileNetV5 vision tower and the USM audio conformer are counted as one recorded total
(models/vision_towers.py "gemma3n"). Standard library only: this is on the fast path.
"""

from __future__ import annotations

from servefit.models.spec import ModelSpec


def is_gemma3n(s: ModelSpec) -> bool:
    return s.model_type in ("gemma3n", "gemma3n_text")


def count_text(s: ModelSpec) -> int:
    lay = s.layout
    h, n, heads, hd, kv = s.hidden_size, s.num_hidden_layers, s.num_attention_heads, s.head_dim, s.num_key_value_heads
    ple = int(lay.get("hidden_size_per_layer_input", 256))
    alt = int(lay.get("altup_num_inputs", 4))
    rank = int(lay.get("laurel_rank", 64))
    first_shared = n - int(lay.get("num_kv_shared_layers") or 0)
    total = s.vocab_size * h + (0 if s.tie_word_embeddings else s.vocab_size * h)
    total += int(lay.get("vocab_size_per_layer_input") or s.vocab_size) * n * ple + h * n * ple + ple
    total += 2 * (alt - 1) * h * h + h
    for i in range(n):
        total += 2 * h * heads * hd + hd  # q_proj, o_proj, q_norm
        if i < first_shared:
            total += 2 * h * kv * hd + hd  # k_proj, v_proj, k_norm
        total += 3 * h * s.intermediate_size + 4 * h
        total += h + alt * alt + alt * alt * alt + h * alt + h  # AltUp
        total += 2 * h * rank + h  # LAuReL
        total += 2 * h * ple + h  # per-layer input gate / projection / norm
    return total
