"""config.json keys of the layouts in models/arch_classic.py, arch_hybrid.py and encoders.py:
what from_config (models/config_json.py) reads generically is completed here per model_type,
so a local checkpoint, --model-config or the model lock counts and plans these families as the
catalog does. Standard library only: this is on the fast path."""

from __future__ import annotations

from typing import Any

from servefit.models.architecture import linear_attention_state
from servefit.models.encoders import ENCODERS
from servefit.models.spec import ModelSpec

_TIED_BY_DEFAULT = ("opt", "gpt2", "bloom", "lfm2", "lfm2_moe", "granitemoehybrid", "gpt_bigcode")


def _int(v: Any, default: int = 0) -> int:
    try:
        return int(v) if v is not None else default
    except (TypeError, ValueError):
        return default


def lfm2_ff_dim(c: dict[str, Any]) -> int:
    """modeling_lfm2.py Lfm2MLP: with block_auto_adjust_ff_dim the width is 2/3 of block_ff_dim,
    times block_ffn_dim_multiplier, rounded up to block_multiple_of."""
    ff = _int(c.get("block_ff_dim") or c.get("intermediate_size"))
    if c.get("block_auto_adjust_ff_dim", True) and ff:
        ff = int(2 * ff / 3)
        mult = c.get("block_ffn_dim_multiplier")
        if mult is not None:
            ff = int(float(mult) * ff)
        step = _int(c.get("block_multiple_of"), 256) or 1
        ff = step * -(-ff // step)
    return ff


def _mamba2(c: dict[str, Any], h: int) -> dict[str, Any]:
    heads = _int(c.get("mamba_n_heads") or c.get("mamba_num_heads"))
    hd = _int(c.get("mamba_d_head") or c.get("mamba_head_dim"))
    d_ssm = _int(c.get("mamba_d_ssm")) or (heads * hd) or _int(c.get("mamba_expand"), 2) * h
    if not hd and heads:
        hd = d_ssm // heads
    m: dict[str, Any] = {"kind": "mamba2", "num_heads": heads, "head_dim": hd}
    if d_ssm != heads * hd:
        m["d_inner"] = d_ssm
    return linear_attention_state({
        **m,
        "n_groups": _int(c.get("mamba_n_groups") or c.get("n_groups"), 1),
        "state_size": _int(c.get("mamba_d_state") or c.get("ssm_state_size"), 128),
        "conv_kernel": _int(c.get("mamba_d_conv") or c.get("conv_kernel"), 4)})


def apply(c: dict[str, Any], spec: ModelSpec) -> None:
    """Complete `spec` (from the merged config dict `c`) for the layouts beyond the Llama one."""
    mt, h, n = spec.model_type, spec.hidden_size, spec.num_hidden_layers
    lay = spec.layout
    if mt in _TIED_BY_DEFAULT and c.get("tie_word_embeddings") is None:
        spec.tie_word_embeddings = True  # the config class default (PretrainedConfig: True)
    if mt == "opt":
        lay["word_embed_proj_dim"] = _int(c.get("word_embed_proj_dim"), h)
        lay["do_layer_norm_before"] = bool(c.get("do_layer_norm_before", True))
    elif mt in ENCODERS:
        spec.layer_types = ["none"] * n  # ENCODER_ONLY attention: no KV cache in vLLM
        if c.get("type_vocab_size") is not None:
            lay["type_vocab_size"] = _int(c.get("type_vocab_size"))
    elif mt == "falcon" and c.get("num_ln_in_parallel_attn") is not None:
        lay["num_ln_in_parallel_attn"] = _int(c.get("num_ln_in_parallel_attn"))
    elif mt == "falcon_h1":
        spec.mamba = _mamba2(c, h)
        lay["mamba_rms_norm"] = bool(c.get("mamba_rms_norm", False))
    elif mt == "granitemoehybrid":
        if spec.num_experts:
            spec.moe_intermediate_size = _int(c.get("intermediate_size"))
        spec.intermediate_size = _int(c.get("shared_intermediate_size"), spec.intermediate_size)
        if "mamba" in spec.kinds():
            spec.mamba = _mamba2(c, h)
    elif mt == "nemotron_h":
        spec.head_dim = _int(c.get("attention_head_dim") or c.get("head_dim"), spec.head_dim)
        if c.get("moe_shared_expert_intermediate_size"):
            lay["moe_shared_expert_intermediate_size"] = _int(c["moe_shared_expert_intermediate_size"])
        spec.mamba = _mamba2(c, h)
    elif mt in ("lfm2", "lfm2_moe"):
        spec.intermediate_size = lfm2_ff_dim(c)
        spec.mamba = linear_attention_state({"kind": "short_conv", "conv_kernel": _int(c.get("conv_L_cache"), 3),
                                             "conv_dim": h})
        if mt == "lfm2_moe":
            spec.first_k_dense_replace = _int(c.get("num_dense_layers"))
            lay["use_expert_bias"] = bool(c.get("use_expert_bias", True))
    elif mt in ("gpt_neox", "nemotron"):
        pct = c.get("rotary_pct", c.get("partial_rotary_factor"))
        if isinstance(pct, (int, float)):
            lay["rotary_pct"] = float(pct)
    if mt in ("glm4", "seed_oss") and isinstance(c.get("attention_bias"), bool):  # vLLM glm4.py, seed_oss.py: q/k/v bias
        lay["attention_bias"] = c["attention_bias"]
    if mt in ("llama", "mistral") and c.get("attention_bias") is True:  # vLLM llama.py: q/k/v and o_proj biases
        lay["attention_bias"] = lay["o_bias"] = True
    if mt in ("llama", "mistral") and c.get("mlp_bias") is True:  # vLLM llama.py LlamaMLP(bias=config.mlp_bias)
        lay["mlp_bias"] = True
    if spec.architecture in ("MistralModel", "LlamaModel", "Qwen2Model"):  # bare decoders (e5-mistral)
        lay["no_lm_head"] = True
