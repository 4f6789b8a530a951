"""Parameter counts of decoder layouts that differ from the Llama one in more than per-module
traits: OPT (learned positions, optional embedding projection), GPT-2 and GPT-Neo (learned positions),
BLOOM (embedding LayerNorm, ALiBi), GPT-BigCode (StarCoder: learned positions, multi-query
attention), DeciLM (Llama-Nemotron Super / Ultra: per-layer attention and FFN widths), Snowflake Arctic
(MoE beside a dense residual MLP), and the hybrid Mamba / short-convolution families
(Nemotron-H, Granite 4.0, Falcon-H1, LFM2). Encoders (BERT & co.) are in models/encoders.py.

Each layout follows the Hugging Face modeling file named in its function's docstring (vLLM's
model file loads the same tensors). Standard library only: this is on the fast path.
"""

from __future__ import annotations

from servefit.models.arch_laguna import FAMILIES as LAGUNA_LIKE
from servefit.models.spec import ModelSpec


def _ln(h: int) -> int:
    return 2 * h  # LayerNorm with bias


def _dense_attn(h: int, bias: bool) -> int:
    """q, k, v and output projections of a multi-head layer of width h (fused or not)."""
    return 4 * h * h + (4 * h if bias else 0)


def _mlp2(h: int, inter: int, bias: bool) -> int:
    """Up / down MLP without a gate."""
    return 2 * h * inter + (inter + h if bias else 0)


def _opt(s: ModelSpec) -> int:
    """modeling_opt.py OPTForCausalLM: embed_tokens (vocab x word_embed_proj_dim), learned
    positions with 2 extra rows (OPTLearnedPositionalEmbedding offset), project_in / project_out
    when word_embed_proj_dim differs from hidden_size, pre-LN layers with biased q/k/v/out_proj
    and fc1 / fc2, final_layer_norm only when do_layer_norm_before; lm_head tied."""
    h, lay = s.hidden_size, s.layout
    wep = int(lay.get("word_embed_proj_dim") or h)
    n = s.vocab_size * wep + (s.max_position_embeddings + 2) * h
    if wep != h:
        n += 2 * h * wep
    if lay.get("do_layer_norm_before", True):
        n += _ln(h)
    if not s.tie_word_embeddings:
        n += s.vocab_size * wep
    per = _dense_attn(h, True) + 2 * _ln(h) + _mlp2(h, s.intermediate_size, True)
    return n + s.num_hidden_layers * per


def _gpt2(s: ModelSpec) -> int:
    """modeling_gpt2.py GPT2LMHeadModel: wte, wpe (n_positions rows), Conv1D c_attn / c_proj /
    c_fc / c_proj with biases, ln_1 / ln_2, ln_f; lm_head tied to wte."""
    h = s.hidden_size
    n = s.vocab_size * h + s.max_position_embeddings * h + _ln(h)
    if not s.tie_word_embeddings:
        n += s.vocab_size * h
    per = _dense_attn(h, True) + 2 * _ln(h) + _mlp2(h, s.intermediate_size, True)
    return n + s.num_hidden_layers * per


def _gpt_neo(s: ModelSpec) -> int:
    """modeling_gpt_neo.py GPTNeoForCausalLM: wte, wpe, ln_1 / ln_2, bias-free q / k / v_proj and a
    biased out_proj, c_fc / c_proj with biases, ln_f; lm_head tied to wte (GPT-2's count without the
    q/k/v biases)."""
    return _gpt2(s) - s.num_hidden_layers * 3 * s.hidden_size


def _bloom(s: ModelSpec) -> int:
    """modeling_bloom.py BloomForCausalLM: word_embeddings + word_embeddings_layernorm, fused
    query_key_value and dense with biases, 4h MLP with biases, two LayerNorms per block, ln_f;
    ALiBi (no position table); lm_head tied."""
    h = s.hidden_size
    n = s.vocab_size * h + 2 * _ln(h)
    if not s.tie_word_embeddings:
        n += s.vocab_size * h
    per = _dense_attn(h, True) + 2 * _ln(h) + _mlp2(h, s.intermediate_size, True)
    return n + s.num_hidden_layers * per


def _gpt_bigcode(s: ModelSpec) -> int:
    """modeling_gpt_bigcode.py GPTBigCodeForCausalLM (vLLM gpt_bigcode.py, TGI flash_santacoder):
    wte, wpe (n_positions rows), per block ln_1, c_attn (hidden -> hidden + 2 x kv heads x
    head_dim: one K/V head with multi_query) and c_proj with biases, ln_2, c_fc / c_proj (n_inner)
    with biases, ln_f; lm_head tied (StarCoder-15B's checkpoint stores a copy)."""
    h = s.hidden_size
    kv = 2 * s.num_key_value_heads * s.head_dim
    n = s.vocab_size * h * (1 if s.tie_word_embeddings else 2) + s.max_position_embeddings * h + _ln(h)
    per = _ln(h) + h * (h + kv) + (h + kv) + h * h + h + _ln(h) + _mlp2(h, s.intermediate_size, True)
    return n + s.num_hidden_layers * per


def decilm_ffn_width(ffn_mult: float, hidden: int) -> int:
    """vLLM nemotron_nas.py _ffn_mult_to_intermediate_size: int(2 x ffn_mult x hidden / 3)
    rounded up to a multiple of 256."""
    n = int(2 * ffn_mult * hidden / 3)
    return -(-n // 256) * 256


def _decilm(s: ModelSpec) -> int:
    """vLLM nemotron_nas.py DeciLMForCausalLM (Llama-Nemotron Super / Ultra, NAS-pruned Llama):
    per layer from block_configs, a bias-free GQA attention with its input_layernorm unless the
    attention is a no-op ("none" in layer_types), and a SwiGLU MLP of
    _ffn_mult_to_intermediate_size(ffn_mult) with its post_attention_layernorm unless the FFN is a
    no-op (layout.ffn_mult 0); final norm; untied lm_head. Every attention layer here has the same
    KV head count (num_attention_heads // n_heads_in_group)."""
    h, hd = s.hidden_size, s.head_dim
    attn = 2 * h * s.num_attention_heads * hd + 2 * h * s.num_key_value_heads * hd + h
    n = s.vocab_size * h * (1 if s.tie_word_embeddings else 2) + h
    for kind, mult in zip(s.kinds(), s.layout.get("ffn_mult") or [], strict=True):
        n += attn if kind != "none" else 0
        n += 3 * h * decilm_ffn_width(mult, h) + h if mult else 0
    return n


def _arctic(s: ModelSpec) -> int:
    """vLLM arctic.py ArcticForCausalLM (served up to 0.27): per layer input_layernorm, bias-free GQA
    attention, post_attention_layernorm, the MoE (router + num_experts SwiGLU experts of
    intermediate_size) and, in parallel (use_residual), residual_layernorm and a dense SwiGLU
    residual MLP whose width is hidden_size (ArcticMLP is_residual_mlp); final norm; untied."""
    h, hd = s.hidden_size, s.head_dim
    attn = 2 * h * s.num_attention_heads * hd + 2 * h * s.num_key_value_heads * hd
    moe = s.num_experts * 3 * h * (s.moe_intermediate_size or s.intermediate_size) + h * s.num_experts
    per = attn + moe + 3 * h * h + 3 * h
    return s.vocab_size * h * (1 if s.tie_word_embeddings else 2) + h + s.num_hidden_layers * per


def count_classic(s: ModelSpec) -> int | None:
    """The count for a layout this module (or encoders / arch_hybrid) knows; None otherwise."""
    fn = _LAYOUTS.get(s.model_type)
    if fn is not None:
        return fn(s)
    if s.model_type == "openelm":  # per-layer heads and FFN widths
        from servefit.models import arch_openelm

        return arch_openelm.count_text(s)
    if s.model_type == "hrm_text":  # two weight-shared stacks run in cycles
        from servefit.models import arch_hrm

        return arch_hrm.count_text(s)
    if s.model_type in LAGUNA_LIKE:  # per-layer query heads and an attention output gate
        from servefit.models import arch_laguna

        return arch_laguna.count_text(s)
    from servefit.models import arch_hybrid, encoders
    return encoders.count_encoder(s) if s.model_type in encoders.ENCODERS else arch_hybrid.count_hybrid(s)


_LAYOUTS = {"opt": _opt, "gpt2": _gpt2, "gpt_neo": _gpt_neo, "bloom": _bloom, "gpt_bigcode": _gpt_bigcode, "nemotron-nas": _decilm,
            "arctic": _arctic}
