"""Parameter counts of the recurrent families: Mamba2 mixers beside attention (Nemotron-H,
Granite 4.0, Falcon-H1, Zamba2), LFM2's short gated convolutions, the pure state-space models (Mamba,
Falcon-Mamba, Mamba2 / Mamba-Codestral) and Jamba (Mamba1 mixers, attention and MoE).

Layer kinds come from ModelSpec.layer_types: "mamba" is the recurrent mixer (Mamba1, Mamba2, or
LFM2's short convolution), "full" an attention layer, "none" (Nemotron-H only) an MLP-only
block. Standard library only: this is on the fast path.
"""

from __future__ import annotations

from servefit.models.spec import ModelSpec


def mamba2_mixer(s: ModelSpec, norm: bool = True) -> int:
    """vLLM model_executor/layers/mamba/mamba_mixer2.py MambaMixer2 (HF modeling_nemotron_h /
    modeling_granitemoehybrid / modeling_falcon_h1): in_proj hidden -> (z, x, B, C, dt) without
    bias, depthwise conv1d over x, B, C with bias, dt_bias, A_log and D per head, gated
    RMSNorm over d_inner (Falcon-H1: only when mamba_rms_norm), out_proj d_inner -> hidden."""
    m, h = s.mamba, s.hidden_size
    heads, hd = int(m.get("num_heads", 0)), int(m.get("head_dim", 0))
    groups, state = int(m.get("n_groups", 1)), int(m.get("state_size", 0))
    kernel = int(m.get("conv_kernel", 4))
    d_inner = int(m.get("d_inner") or heads * hd)
    conv_dim = d_inner + 2 * groups * state
    n = h * (2 * d_inner + 2 * groups * state + heads) + conv_dim * (kernel + 1) + 3 * heads + d_inner * h
    return n + (d_inner if norm else 0)


def mamba1_mixer(s: ModelSpec) -> int:
    """vLLM model_executor/layers/mamba/mamba_mixer.py MambaMixer (HF modeling_mamba /
    modeling_falcon_mamba / modeling_jamba): in_proj hidden -> 2 x d_inner, depthwise conv1d over
    d_inner (bias per use_conv_bias), x_proj d_inner -> dt_rank + 2 x state, dt_proj dt_rank ->
    d_inner with bias, A_log (d_inner x state), D, out_proj d_inner -> hidden (in / out biases per
    use_bias); Jamba's dt / B / C RMSNorms carry weights (rms_norm_has_weight), Falcon-Mamba's not."""
    m, h = s.mamba, s.hidden_size
    d, state = int(m.get("d_inner") or 2 * h), int(m.get("state_size", 16))
    rank, kernel = int(m.get("dt_rank") or -(-h // 16)), int(m.get("conv_kernel", 4))
    n = h * 2 * d + d * kernel + d * (rank + 2 * state) + rank * d + d + d * state + d + d * h
    if m.get("conv_bias", True):
        n += d
    if m.get("proj_bias"):
        n += 2 * d + h
    if m.get("bc_norms"):
        n += rank + 2 * state
    return n


def _ssm(s: ModelSpec) -> int:
    """vLLM models/mamba.py MambaForCausalLM (also FalconMambaForCausalLM) and mamba2.py
    Mamba2ForCausalLM: embeddings, per layer one RMSNorm and the mixer, norm_f; lm_head tied or
    not per config (Mamba: tied; Falcon-Mamba, Mamba2: untied)."""
    h = s.hidden_size
    mixer = mamba2_mixer(s) if s.mamba.get("kind") == "mamba2" else mamba1_mixer(s)
    return s.vocab_size * h * (1 if s.tie_word_embeddings else 2) + h + s.num_hidden_layers * (h + mixer)


def _jamba(s: ModelSpec) -> int:
    """vLLM models/jamba.py JambaForCausalLM: per layer input_layernorm, a Mamba1 mixer with dt / B
    / C RMSNorms or bias-free GQA attention (layers_block_type), pre_ff_layernorm, then a SwiGLU
    MLP or, every expert_layer_period-th layer, the MoE (bias-free router + num_experts SwiGLU
    experts); final_layernorm; lm_head untied unless the config ties it."""
    from servefit.models.architecture import is_moe_layer

    h = s.hidden_size
    n = s.vocab_size * h * (1 if s.tie_word_embeddings else 2) + h
    for i, kind in enumerate(s.kinds()):
        n += 2 * h + (mamba1_mixer(s) if kind == "mamba" else _gqa(s))
        if is_moe_layer(s, i):
            n += s.num_experts * 3 * h * s.moe_intermediate_size + h * s.num_experts
        else:
            n += 3 * h * s.intermediate_size
    return n


def _experts(s: ModelSpec, gated: bool, score_bias: bool) -> int:
    h, e = s.hidden_size, s.num_experts
    per = (3 if gated else 2) * h * s.moe_intermediate_size
    return e * per + e * h + (e if score_bias else 0)


def _nemotron_h(s: ModelSpec) -> int:
    """modeling_nemotron_h.py NemotronHForCausalLM: every block is one RMSNorm plus one mixer,
    from hybrid_override_pattern: 'M' Mamba2, '*' bias-free attention, '-' relu^2 up/down MLP,
    'E' MoE (Nemotron 3: routed relu^2 experts, a shared expert of
    moe_shared_expert_intermediate_size, the router's weight; its e_score_correction_bias is
    not in the Hub's parameter count, 128 per layer; Nemotron 3 Super's latent MoE: the routed
    experts work in moe_latent_size between fc1_latent_proj / fc2_latent_proj, the router and the
    shared expert in the hidden width); norm_f; untied lm_head."""
    h = s.hidden_size
    n = s.vocab_size * h * (1 if s.tie_word_embeddings else 2) + h
    shared = int(s.layout.get("moe_shared_expert_intermediate_size", 0))
    latent = int(s.layout.get("moe_latent_size", 0))
    for kind in s.kinds():
        n += h
        if kind == "mamba":
            n += mamba2_mixer(s)
        elif kind == "full":
            n += _gqa(s)
        elif s.is_moe and latent:
            e = s.num_experts
            n += e * 2 * latent * s.moe_intermediate_size + e * h + 2 * h * latent + 2 * h * shared
        elif s.is_moe:
            n += _experts(s, gated=False, score_bias=False) + 2 * h * shared
        else:
            n += 2 * h * s.intermediate_size
    return n


def _gqa(s: ModelSpec, qk_norm: int = 0) -> int:
    h, hd = s.hidden_size, s.head_dim
    return 2 * h * s.num_attention_heads * hd + 2 * h * s.num_key_value_heads * hd + qk_norm


def _granite4(s: ModelSpec) -> int:
    """modeling_granitemoehybrid.py GraniteMoeHybridForCausalLM: per layer input_layernorm,
    a Mamba2 or bias-free attention mixer, post_attention_layernorm, the routed experts
    (router + input_linear gate/up + output_linear, when num_local_experts > 0) and the
    shared_mlp of shared_intermediate_size (our intermediate_size); norm; tied lm_head.
    modeling_granitemoe_swa.py GraniteMoeSWAForCausalLM: the same blocks, every one attention
    (sliding or full) with a learnable sink logit per head."""
    h = s.hidden_size
    n = s.vocab_size * h * (1 if s.tie_word_embeddings else 2) + h
    sinks = s.num_attention_heads if s.model_type == "granitemoe_swa" else 0
    for kind in s.kinds():
        n += 2 * h + (mamba2_mixer(s) if kind == "mamba" else _gqa(s) + sinks) + 3 * h * s.intermediate_size
        if s.is_moe:
            n += _experts(s, gated=True, score_bias=False)
    return n


def _falcon_h1(s: ModelSpec) -> int:
    """modeling_falcon_h1.py FalconH1ForCausalLM: every layer runs attention and a Mamba2
    mixer in parallel on input_layernorm's output, then pre_ff_layernorm and a SwiGLU
    feed_forward; final_layernorm; lm_head tied or not per config."""
    h = s.hidden_size
    n = s.vocab_size * h * (1 if s.tie_word_embeddings else 2) + h
    norm = bool(s.layout.get("mamba_rms_norm", False))
    per = 2 * h + _gqa(s) + mamba2_mixer(s, norm=norm) + 3 * h * s.intermediate_size
    return n + s.num_hidden_layers * per


def _lfm2(s: ModelSpec) -> int:
    """modeling_lfm2.py / vLLM models/lfm2.py: conv layers (ShortConv: in_proj hidden -> 3 x
    hidden, depthwise conv of conv_L_cache taps, out_proj, no biases) or attention layers with
    q_layernorm / k_layernorm; operator_norm and ffn_norm; SwiGLU w1 / w3 / w2 of the
    adjusted block_ff_dim (our intermediate_size); embedding_norm; tied lm_head. lfm2_moe:
    layers from num_dense_layers on are MoE (router + expert_bias + experts)."""
    h = s.hidden_size
    kernel = int(s.mamba.get("conv_kernel", 3))
    n = s.vocab_size * h * (1 if s.tie_word_embeddings else 2) + h
    for i, kind in enumerate(s.kinds()):
        n += 2 * h
        n += 4 * h * h + h * kernel if kind == "mamba" else _gqa(s, qk_norm=2 * s.head_dim)
        if s.is_moe and i >= s.first_k_dense_replace:
            n += _experts(s, gated=True, score_bias=bool(s.layout.get("use_expert_bias", True)))
        else:
            n += 3 * h * s.intermediate_size
    return n


def _zamba2(s: ModelSpec) -> int:
    """vLLM zamba2.py / modeling_zamba2.py: every layer a Mamba2 mixer with its input_layernorm; the
    "full" (hybrid) layers also run a shared transformer block on concat(hidden, embeddings) and a
    hidden x hidden linear of their own. num_mem_blocks blocks are shared round-robin over the
    hybrid layers; each holds input_layernorm (2 x hidden), q/k/v from 2 x hidden to heads x
    head_dim, o_proj to hidden, pre_ff_layernorm and a gated MLP; each hybrid layer adds a LoRA
    (adapter_rank) on the MLP's gate_up and, with use_shared_attention_adapter, on q, k and v."""
    h, lay = s.hidden_size, s.layout
    kinds = s.kinds()
    hybrid = sum(1 for k in kinds if k == "full")
    rank, inter, a = int(lay.get("adapter_rank", 128)), s.intermediate_size, 2 * h
    qkv = s.num_attention_heads * s.head_dim + 2 * s.num_key_value_heads * s.head_dim
    block = a + a * qkv + s.num_attention_heads * s.head_dim * h + h + 3 * h * inter
    adapters = h * rank + rank * 2 * inter + (3 * 2 * a * rank if lay.get("use_shared_attention_adapter") else 0)
    n = s.vocab_size * h * (1 if s.tie_word_embeddings else 2) + h
    n += len(kinds) * (mamba2_mixer(s) + h) + int(lay.get("num_mem_blocks", 1)) * block
    return n + hybrid * (adapters + h * h)


_HYBRIDS = {"zamba2": _zamba2, "nemotron_h": _nemotron_h, "granitemoehybrid": _granite4, "granitemoe_swa": _granite4, "falcon_h1": _falcon_h1,
            "lfm2": _lfm2, "lfm2_moe": _lfm2, "mamba": _ssm, "falcon_mamba": _ssm, "mamba2": _ssm,
            "jamba": _jamba}


def count_hybrid(s: ModelSpec) -> int | None:
    fn = _HYBRIDS.get(s.model_type)
    return fn(s) if fn is not None else None
