"""OpenELM (Apple): layer-wise scaling, so every decoder layer has its own query / KV heads and FFN
width, derived from two multiplier ranges the config names (apple/OpenELM configuration_openelm.py
OpenELMConfig.__post_init__; llama.cpp convert_hf_to_gguf.py OpenELMModel reads the same lists).

Layer i of L: qkv multiplier and FFN multiplier linearly spaced over the layers (rounded to two
places), query width make_divisible(model_dim x m, head_dim x num_gqa_groups), KV heads the query
heads / num_gqa_groups, FFN width make_divisible(model_dim x m, ffn_dim_divisor). Modules: fused
bias-free qkv_proj and out_proj, per-head RMSNorm on q and k, attn_norm and ffn_norm, a SwiGLU FFN
(proj_1 to 2 x width, proj_2 back), a final norm, the input embedding reused as the output layer."""

from __future__ import annotations

from typing import Any

from servefit.models.spec import ModelSpec


def make_divisible(v: float, divisor: int) -> int:
    """configuration_openelm.py make_divisible (from MobileNet): round to a multiple of divisor,
    never more than 10% below v."""
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


def _spaced(mult: Any, n: int) -> list[float]:
    """A number for every layer, two numbers spread over the layers (numpy.linspace, rounded to
    two places as the config class does), or an explicit per-layer list."""
    if isinstance(mult, (int, float)):
        return [float(mult)] * n
    vals = [float(x) for x in mult]
    if len(vals) != 2:
        return vals
    if n == 1:
        return [round(vals[0], 2)]
    step = (vals[1] - vals[0]) / (n - 1)
    return [round(vals[0] + i * step, 2) for i in range(n - 1)] + [round(vals[1], 2)]


def layer_shapes(s: ModelSpec) -> list[tuple[int, int, int]]:
    """(query heads, KV heads, FFN width) of every layer."""
    lay, d, hd = s.layout, s.hidden_size, s.head_dim
    groups = int(lay.get("num_gqa_groups", 1)) or 1
    n = s.num_hidden_layers
    qkv = _spaced(lay.get("qkv_multipliers", 1.0), n)
    ffn = _spaced(lay.get("ffn_multipliers", 4.0), n)
    divisor = int(lay.get("ffn_dim_divisor", 256)) or 256
    out = []
    for q_mult, f_mult in zip(qkv, ffn, strict=True):
        q = make_divisible(d * q_mult, hd * groups) // hd
        out.append((q, q // groups, make_divisible(f_mult * d, divisor)))
    return out


def layer_params(s: ModelSpec, q: int, kv: int, ffn: int) -> tuple[int, int]:
    """(attention, FFN) weights of one layer: qkv_proj + out_proj (+ q / k norms), proj_1 + proj_2."""
    d, hd = s.hidden_size, s.head_dim
    return d * (q + 2 * kv) * hd + q * hd * d + 2 * hd, 3 * d * ffn


def count_text(s: ModelSpec) -> int:
    d = s.hidden_size
    n = s.vocab_size * d * (1 if s.tie_word_embeddings else 2) + d
    for q, kv, ffn in layer_shapes(s):
        attn, mlp = layer_params(s, q, kv, ffn)
        n += attn + mlp + 2 * d
    return n


def apply_config(c: dict[str, Any], spec: ModelSpec) -> None:
    """OpenELM's config.json keys: the multipliers into `layout`; heads, KV heads and MLP width
    become the widest layer's (the KV cache is then an upper bound: the layers differ)."""
    from servefit.budget import BadValue, count, number

    for key in ("qkv_multipliers", "ffn_multipliers"):
        v = c.get(key)
        vals = v if isinstance(v, list) else [v] if v is not None else []
        if len(vals) > 4096:
            raise BadValue(f"{key} has {len(vals):,} entries, more than the 4,096 servefit reads")
        for i, x in enumerate(vals):
            number(x, f"{key}[{i}]", minimum=0, maximum=64, open_min=True)
        if v is not None:
            spec.layout[key] = v
    for key, default in (("num_gqa_groups", 1), ("ffn_dim_divisor", 256)):
        if c.get(key) is not None:
            count(c[key], key, "small", minimum=1)
            spec.layout[key] = int(c[key])
        else:
            spec.layout[key] = default
    if c.get("share_input_output_layers") is not None:
        spec.tie_word_embeddings = bool(c["share_input_output_layers"])
    shapes = layer_shapes(spec)
    spec.num_attention_heads = max(q for q, _, _ in shapes)
    spec.num_key_value_heads = max(kv for _, kv, _ in shapes)
    spec.intermediate_size = max(f for _, _, f in shapes)
