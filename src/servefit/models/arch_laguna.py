"""Laguna (poolside) and Step-3.5 (StepFun): MoE decoders whose layers have their own query-head
counts, with a per-head output gate on the attention (vLLM model_executor/models/laguna.py
LagunaAttention / LagunaDecoderLayer, transformers 5.24.0 models/laguna/modeling_laguna.py; vLLM
step3p5.py Step3p5Attention with use_head_wise_attn_gate, _get_num_attention_heads, _is_moe_layer).

Layer i: q_proj to num_attention_heads_per_layer[i] heads, k/v to num_key_value_heads (the same for
every layer, so the KV cache is the usual one), o_proj, q_norm / k_norm over head_dim, and g_proj
(hidden -> heads for `gating` true or "per-head", heads x head_dim for "per-element"); the MLP is
dense where mlp_layer_types says "dense" (the first layer by default), otherwise routed experts
with a sigmoid router and its e_score_correction_bias plus one shared expert. Full and
sliding-window layers follow layer_types (`layer_pattern` / `layer_types` in the catalog).
Step-3.5 spells these differently: sliding layers take attention_other_setting's (or
num_sliding_attention_heads') query heads, num_attention_groups are the KV heads, moe_layers_enum
lists the MoE layers, share_expert_dim is the shared expert's width, router_bias the score bias,
and layer_types also lists the MTP layers after the decoder's."""

from __future__ import annotations

from typing import Any

from servefit.models.spec import ModelSpec

FAMILIES = ("laguna", "step3p5")


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
    from servefit.models.architecture import _mlp_params, _moe_params, is_moe_layer
    from servefit.models.family_traits import traits

    t = traits(s.model_type)
    h = s.hidden_size
    total = s.vocab_size * h * (1 if s.tie_word_embeddings else 2) + h
    dense, moe = _mlp_params(h, s.intermediate_size, t), _moe_params(s, t)
    for i, heads in enumerate(layer_heads(s)):
        total += layer_attention(s, heads) + (moe if is_moe_layer(s, i) else dense) + 2 * h
    return total


def _step3p5(c: dict[str, Any], spec: ModelSpec) -> None:
    """Step-3.5's config.json names (vLLM step3p5.py) into the Laguna layout."""
    from servefit.budget import count

    n = spec.num_hidden_layers
    spec.layer_types = list(spec.layer_types[:n])  # the MTP layers' kinds follow the decoder's
    if c.get("num_attention_groups") is not None:
        spec.num_key_value_heads = count(c["num_attention_groups"], "num_attention_groups", "small", minimum=1)
    raw = c.get("attention_other_setting")
    other: dict[str, Any] = raw if isinstance(raw, dict) else {}
    sliding = c.get("num_sliding_attention_heads") or (
        other.get("num_attention_heads") if other.get("attention_type") == "sliding_attention" else None)
    if sliding is not None:
        heads = count(sliding, "attention_other_setting.num_attention_heads", "small", minimum=1)
        spec.layout["num_attention_heads_per_layer"] = [
            heads if k == "sliding" else spec.num_attention_heads for k in spec.kinds()]
    spec.layout["gating"] = bool(c.get("use_head_wise_attn_gate"))
    enum = c.get("moe_layers_enum")
    if isinstance(enum, str) and spec.num_experts and c.get("mlp_layer_types") is None:
        moe = sorted(int(x) for x in enum.split(",") if x.strip().isdigit())
        spec.first_k_dense_replace = moe[0] if moe else n
    share = c.get("share_expert_dim")
    moe_width = spec.moe_intermediate_size or spec.intermediate_size
    if share is not None and spec.num_experts and moe_width:
        spec.num_shared_experts = max(1, round(count(share, "share_expert_dim", "intermediate") / moe_width))


def apply_config(c: dict[str, Any], spec: ModelSpec) -> None:
    """Laguna's config.json keys: per-layer heads and the gate into `layout` (config_json reads the
    leading dense layers of mlp_layer_types as first_k_dense_replace)."""
    from servefit.budget import BadValue, count

    if spec.model_type == "step3p5":
        _step3p5(c, spec)
        return
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
