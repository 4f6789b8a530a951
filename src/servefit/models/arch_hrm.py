"""HRM-Text (model_type hrm_text): two weight-shared stacks (L and H) of num_layers_per_stack layers
run in cycles, and every run of a layer attends over its own KV cache.

Weights (transformers modeling_hrm_text.py; vLLM model_executor/models/hrm_text.py): per layer q, k,
v, o and a sigmoid output gate (gate_proj, hidden -> heads x head_dim), a gated MLP, parameter-free
RMSNorms; the model adds the frozen z_L_init state (hidden) and an untied lm_head.
KV: vLLM HrmTextAttention builds one Attention per (step, layer): the L stack runs H_cycles x
L_cycles steps and the H stack H_cycles, so num_layers_per_stack x H_cycles x (L_cycles + 1) layers
cache K and V (the inflated num_hidden_layers of HrmTextConfig.__post_init__, which SGLang's
model_runner counts too: sglang srt/models/hrm_text.py RadixAttention(layer_id=step x per_stack + layer)).
The catalog's num_hidden_layers is that cache count; layout carries the per-stack count and cycles."""

from __future__ import annotations

from typing import Any

from servefit.models.spec import ModelSpec


def kv_layers(per_stack: int, h_cycles: int, l_cycles: int) -> int:
    """Attention invocations that each hold a KV cache (vLLM hrm_text.py HrmTextAttention.attn_per_step)."""
    return per_stack * h_cycles * (l_cycles + 1)


def count_text(s: ModelSpec) -> int:
    h, q = s.hidden_size, s.num_attention_heads * s.head_dim
    kv = s.num_key_value_heads * s.head_dim
    attn = h * q + 2 * h * kv + q * h + h * q  # q, k, v, o, gate_proj (no biases: attention_bias false)
    mlp = 3 * h * s.intermediate_size
    layers = 2 * int(s.layout["num_layers_per_stack"])  # the L and the H stack
    embed = s.vocab_size * h * (1 if s.tie_word_embeddings else 2)
    return embed + layers * (attn + mlp) + h  # + z_L_init


def apply_config(c: dict[str, Any], spec: ModelSpec) -> None:
    """A config.json states the per-stack count as num_hidden_layers (legacy) or stores it in
    num_layers_per_stack beside the inflated total (HrmTextConfig.__post_init__)."""
    hc, lc = int(c.get("H_cycles") or 2), int(c.get("L_cycles") or 3)
    per_stack = int(c.get("num_layers_per_stack") or spec.num_hidden_layers)
    spec.layout.update({"num_layers_per_stack": per_stack, "H_cycles": hc, "L_cycles": lc})
    spec.num_hidden_layers = kv_layers(per_stack, hc, lc)
    spec.layer_types = []
