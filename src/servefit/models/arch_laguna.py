"""Laguna (poolside): a Qwen3-MoE-like decoder whose layers have their own query-head counts, with a
softplus output gate on the attention (vLLM model_executor/models/laguna.py LagunaAttention /
LagunaDecoderLayer; transformers 5.24.0 models/laguna/modeling_laguna.py).

Layer i: q_proj to num_attention_heads_per_layer[i] heads, k/v to num_key_value_heads (the same for
every layer, so the KV cache is the usual one), o_proj, q_norm / k_norm over head_dim, and g_proj
(hidden -> heads for `gating` true or "per-head", heads x head_dim for "per-element"); the MLP is
dense where mlp_layer_types says "dense" (the first layer by default), otherwise routed experts
with a sigmoid router and its e_score_correction_bias plus one shared expert. Full and
sliding-window layers follow layer_types (`layer_pattern` / `layer_types` in the catalog)."""

from __future__ import annotations

from typing import Any

from servefit.models.spec import ModelSpec


def layer_heads(s: ModelSpec) -> list[int]:
    """Query heads of every layer (config.json num_attention_heads_per_layer, else one count)."""
    per = s.layout.get("num_attention_heads_per_layer")
    return [int(x) for x in per] if per else [s.num_attention_heads] * s.num_hidden_layers


def gate_width(s: ModelSpec, heads: int) -> int:
    """g_proj's output width: one gate per head, or one per head channel ("per-element")."""
    gating = s.layout.get("gating", True)
    if gating is False:
        return 0
    return heads if gating in (True, "per-head") else heads * s.head_dim


def layer_attention(s: ModelSpec, heads: int) -> int:
    """q/k/v/o, q_norm / k_norm and g_proj of one layer with this many query heads (no biases)."""
    h, hd, kv = s.hidden_size, s.head_dim, s.num_key_value_heads
    return 2 * h * heads * hd + 2 * h * kv * hd + 2 * hd + h * gate_width(s, heads)


def count_text(s: ModelSpec) -> int:
    from servefit.models.architecture import _mlp_params, _moe_params, is_moe_layer, traits

    t = traits(s.model_type)
    h = s.hidden_size
    total = s.vocab_size * h * (1 if s.tie_word_embeddings else 2) + h
    dense, moe = _mlp_params(h, s.intermediate_size, t), _moe_params(s, t)
    for i, heads in enumerate(layer_heads(s)):
        total += layer_attention(s, heads) + (moe if is_moe_layer(s, i) else dense) + 2 * h
    return total


def apply_config(c: dict[str, Any], spec: ModelSpec) -> None:
    """Laguna's config.json keys: per-layer heads and the gate into `layout` (config_json reads the
    leading dense layers of mlp_layer_types as first_k_dense_replace)."""
    from servefit.budget import BadValue, count

    per = c.get("num_attention_heads_per_layer")
    if isinstance(per, list):
        if len(per) != spec.num_hidden_layers:
            raise BadValue(f"num_attention_heads_per_layer has {len(per)} entries for "
                           f"{spec.num_hidden_layers} layers")
        for i, x in enumerate(per):
            count(x, f"num_attention_heads_per_layer[{i}]", "small", minimum=1)
        spec.layout["num_attention_heads_per_layer"] = [int(x) for x in per]
    gating = c.get("gating", True)
    spec.layout["gating"] = gating if gating in (True, False, "per-head", "per-element") else True
