"""What an architecture's config means: the attention kind of each layer, and the parameter
count of the Hugging Face module layout (per-family module traits: models/family_traits.py).

`count_params` counts embeddings, q/k/v/o projections (with their biases where the family has
them), MLA down/up projections, dense or gated MLPs, routed + shared experts and the router,
norms, the lm_head unless tied, and the vision tower (`vision_params`). It is the guard the
catalog is checked against. Standard library only: this is on the fast path.
"""

from __future__ import annotations

from servefit.models.family_traits import Traits, traits
from servefit.models.spec import ModelSpec

# ---------------------------------------------------------------------------------------------
# Layer kinds
# ---------------------------------------------------------------------------------------------

_KIND_NAMES = {
    "full_attention": "full", "full": "full", "attention": "full", "global": "full",
    "sliding_attention": "sliding", "sliding": "sliding", "local": "sliding", "local_sliding": "sliding",
    "chunked_attention": "chunked", "chunked": "chunked",
    "linear_attention": "linear", "linear": "linear",
    "mamba": "mamba", "mamba2": "mamba", "none": "none",
    "conv": "mamba",  # LFM2 short-convolution layers: recurrent conv state, no KV cache
}


def layer_kind(name: str) -> str:
    """The ModelSpec kind ("full", "sliding", ...) of a config.json layer_types entry."""
    kind = _KIND_NAMES.get(str(name).lower())
    if kind is None:
        raise ValueError(f"unknown layer type {name!r}")
    return kind


def pattern_layers(n: int, every: int, full_at: int, other: str) -> list[str]:
    """Every `every`-th layer (index % every == full_at) full, the others `other`."""
    return ["full" if every and i % every == full_at else other for i in range(n)]


def is_moe_layer(spec: ModelSpec, i: int) -> bool:
    if not spec.is_moe or i < spec.first_k_dense_replace:
        return False
    step = max(1, spec.moe_layer_step)
    return (i + 1) % step == 0


# ---------------------------------------------------------------------------------------------
# Parameter counting
# ---------------------------------------------------------------------------------------------


def _attention_params(s: ModelSpec, t: Traits) -> int:
    h, heads = s.hidden_size, s.num_attention_heads
    if s.is_mla:
        qk = s.qk_nope_head_dim + s.qk_rope_head_dim
        if s.q_lora_rank:
            q = h * s.q_lora_rank + s.q_lora_rank + s.q_lora_rank * heads * qk  # q_a, q_a_layernorm, q_b
        else:
            q = h * heads * qk
        kv_a = h * (s.kv_lora_rank + s.qk_rope_head_dim) + s.kv_lora_rank  # kv_a_proj_with_mqa + norm
        kv_b = s.kv_lora_rank * heads * (s.qk_nope_head_dim + s.v_head_dim)
        o = heads * s.v_head_dim * h
        return q + kv_a + kv_b + o + _indexer_params(s)
    hd, kvh = s.head_dim, s.num_key_value_heads
    q_out = heads * hd * (2 if t.attn_output_gate else 1)
    n = h * q_out + 2 * h * kvh * hd + heads * hd * h
    if s.layout.get("attention_bias", t.qkv_bias):  # vLLM glm4.py: qkv_bias=config.attention_bias
        n += q_out + 2 * kvh * hd
    if s.layout.get("o_bias", t.o_bias):  # vLLM llama.py: o_proj bias=config.attention_bias
        n += h
    if s.layout.get("qk_norm", t.qk_norm):  # MiniCPM-V 4.5: a Qwen3 LM under the minicpmv model_type
        n += 2 * hd
    if s.layout.get("qk_norm_full", t.qk_norm_full):  # Molmo2-O: an OLMo LM under the molmo2 model_type
        n += (heads + kvh) * hd
    if t.attn_sinks:
        n += heads
    return n + _indexer_params(s)


def indexer_layers(s: ModelSpec) -> int:
    """Decoder layers that run their own sparse-attention indexer (and hold its key cache). MiniMax-M3's
    dense-attention layers have none (layout index_free_layers; vllm/models/minimax_m3/nvidia/model.py
    builds MiniMaxM3Indexer only where sparse_attention_freq is set). GLM-5.2's
    IndexShare (config index_topk_freq 4) lets the other layers reuse the previous indexer's top-k;
    vLLM builds no Indexer on them (vllm/models/deepseek_v32/attention.py: skip_topk =
    max(layer_id - index_skip_topk_offset + 1, 0) % index_topk_freq != 0, or index_topk_pattern "S";
    transformers modeling_glm_moe_dsa.py: self.indexer = None on "shared" layers)."""
    n = s.num_hidden_layers
    if not s.index_n_heads:
        return 0
    if s.layout.get("index_free_layers") is not None:  # MiniMax-M3: its full-attention (non-sparse) layers
        return n - int(s.layout["index_free_layers"])
    pattern = s.layout.get("index_topk_pattern")
    if pattern:
        return sum(1 for i in range(n) if i >= len(pattern) or pattern[i] != "S")
    freq = max(int(s.layout.get("index_topk_freq", 1)), 1)
    offset = int(s.layout.get("index_skip_topk_offset", 2))
    return sum(1 for i in range(n) if max(i - offset + 1, 0) % freq == 0)


def _indexer_params(s: ModelSpec) -> int:
    """DeepSeek-V3.2 / GLM-5 sparse-attention indexer (vLLM deepseek_v2.py Indexer): wq_b
    (q_lora_rank -> heads x head_dim), wk and weights_proj (hidden -> head_dim + heads, no
    bias), k_norm LayerNorm with bias."""
    if not s.index_n_heads:
        return 0
    d = s.index_head_dim
    if not s.is_mla:  # MiniMax-M3 MiniMaxM3VLIndexer: q_proj, k_proj (no bias), q_norm / k_norm RMSNorms
        return s.hidden_size * (s.index_n_heads * d + d) + 2 * d
    return s.q_lora_rank * s.index_n_heads * d + s.hidden_size * (d + s.index_n_heads) + 2 * d


def _linear_attention_params(s: ModelSpec) -> int:
    """Gated DeltaNet (Qwen3-Next) layer: in_proj_qkvz, in_proj_ba, conv1d, dt_bias, A_log,
    gated norm, out_proj. Mamba2 layer: in_proj (z, x, B, C, dt), conv1d with bias, dt_bias,
    A_log, D, gated norm, out_proj."""
    m = s.mamba
    h = s.hidden_size
    if m.get("kind") == "kda":
        # Kimi Delta Attention (vLLM layers/mamba/gdn/kimi_gdn_linear_attn.py, low-rank gates):
        # q/k/v, beta (b) and f_a from the input; f_b; dt_bias; q/k/v short conv without bias;
        # A_log; output gate g_a / g_b; gated RMSNorm over head_dim; o_proj
        heads, hd = int(m.get("num_value_heads", 0)), int(m.get("value_head_dim", 0))
        p = heads * hd
        kernel = int(m.get("conv_kernel", 4))
        return 4 * h * p + h * heads + 2 * h * hd + 2 * hd * p + p + 3 * p * kernel + heads + hd
    if m.get("kind") == "mamba2":
        heads, hd = int(m.get("num_heads", 0)), int(m.get("head_dim", 0))
        groups, state = int(m.get("n_groups", 1)), int(m.get("state_size", 0))
        d_inner = int(m.get("d_inner") or heads * hd)
        conv_dim = d_inner + 2 * groups * state
        kernel = int(m.get("conv_kernel", 4))
        return (h * (2 * d_inner + 2 * groups * state + heads) + conv_dim * (kernel + 1) + 3 * heads
                + d_inner + d_inner * h)
    nk, nv = int(m.get("num_key_heads", 0)), int(m.get("num_value_heads", 0))
    dk, dv = int(m.get("key_head_dim", 0)), int(m.get("value_head_dim", 0))
    kernel = int(m.get("conv_kernel", 4))
    key_dim, value_dim = nk * dk, nv * dv
    conv_dim = 2 * key_dim + value_dim
    return (h * (2 * key_dim + 2 * value_dim) + h * 2 * nv + conv_dim * kernel + 2 * nv + dv
            + value_dim * h)


def _mlp_params(h: int, inter: int, t: Traits, bias: bool | None = None) -> int:
    b = t.mlp_bias if bias is None else bias  # vLLM llama.py LlamaMLP: bias=config.mlp_bias
    if t.gated_mlp:
        n = 3 * h * inter
        return n + (2 * inter + h if b else 0)
    return 2 * h * inter + (inter + h if b else 0)


def _moe_params(s: ModelSpec, t: Traits) -> int:
    h = s.hidden_size
    inter = s.moe_intermediate_size or s.intermediate_size
    n = (s.num_experts + s.num_shared_experts) * _mlp_params(h, inter, t)
    routed = s.num_experts + int(s.layout.get("zero_experts", 0))  # LongCat-Flash: identity experts the router scores
    n += h * routed + (routed if t.router_bias else 0)
    if s.layout.get("expert_score_bias", t.expert_score_bias):  # Ling v1: moe_router_enable_expert_bias false
        n += routed
    if t.shared_expert_gate and s.num_shared_experts:
        n += h
    return n


def _norms_per_layer(s: ModelSpec, t: Traits) -> int:
    if s.layout.get("norms_per_layer") is not None:  # PaliGemma 2: a Gemma 2 LM (four norms) under paligemma
        return int(s.layout["norms_per_layer"])
    if s.model_type == "falcon":
        # Falcon-7B: one input_layernorm (parallel attention); new decoder architecture (40B,
        # 180B, grouped KV heads): ln_attn and ln_mlp
        # (Falcon2-11B: num_ln_in_parallel_attn 1, one LayerNorm feeding both branches)
        return 2 if s.num_key_value_heads > 1 and s.layout.get("num_ln_in_parallel_attn") != 1 else 1
    return t.norms_per_layer


def count_text_params(s: ModelSpec) -> int:
    """Parameters of the language model (everything but the vision tower)."""
    if (other := count_other_layouts(s)) is not None:  # OPT, GPT-2, BLOOM, encoders, hybrids
        return other
    t = traits(s.model_type)
    h = s.hidden_size
    norm = h * (2 if t.norm_bias else 1)
    kinds = s.kinds()
    total = (s.vocab_size + int(s.layout.get("additional_vocab", 0))) * h  # embed_tokens (Molmo: + new tokens)
    if not s.tie_word_embeddings and not s.layout.get("no_lm_head"):  # no_lm_head: e5-mistral's MistralModel
        total += s.vocab_size * h + (s.vocab_size if t.lm_head_bias else 0)
    total += norm if t.final_norm else 0  # final norm
    attn = _attention_params(s, t)
    dense = _mlp_params(h, s.intermediate_size, t, s.layout.get("mlp_bias"))
    moe = _moe_params(s, t) if s.is_moe else 0
    per_norms = _norms_per_layer(s, t) * norm
    for i, kind in enumerate(kinds):
        if kind in ("linear", "mamba"):
            total += _linear_attention_params(s)
        elif kind != "none":
            total += attn
        if is_moe_layer(s, i):  # LongCat-Flash: the shortcut MoE beside the sublayer's dense MLP
            total += moe + (dense if s.layout.get("dense_with_moe") else 0)
        else:
            total += dense
        total += per_norms + t.act_params
    if s.index_n_heads:  # GLM-5.2 IndexShare / MiniMax-M3 full-attention layers hold no indexer
        total -= _indexer_params(s) * (sum(1 for k in kinds if k == "full") - indexer_layers(s))
    return total + ranking_projector_params(s)


def ranking_projector_params(s: ModelSpec) -> int:
    """jina-reranker-v3's projector (vLLM jina.py JinaForRanking: Linear(h, h // 2), ReLU,
    Linear(h // 2, embedding_size), no biases); 0 for every other model."""
    width = int(s.layout.get("ranking_projector", 0))
    return s.hidden_size * (s.hidden_size // 2) + (s.hidden_size // 2) * width if width else 0


# model_type -> the module that counts that layout (compressed attention and hyper-connections;
# per-kind KV heads with V narrower than K; KDA with gated MLA and latent MoE; AltUp, LAuReL, per-layer
# embeddings; CCA attention with a router MLP; Inkling's per-kind attention, short convolutions, audio table)
_OWN_COUNTS = {"deepseek_v4": "arch_deepseek_v4", "mimo_v2_flash": "arch_mimo_v2", "kimi_k3": "arch_kimi_k3",
               "gemma3n": "arch_gemma3n", "gemma3n_text": "arch_gemma3n", "zaya": "arch_zaya",
               "inkling_mm_model": "arch_inkling", "inkling_text": "arch_inkling"}


def count_other_layouts(s: ModelSpec) -> int | None:
    from servefit.models.arch_gemma4 import count_text, is_gemma4

    if is_gemma4(s):  # per-layer-kind attention shapes, MoE beside the dense MLP
        return count_text(s)
    own = _OWN_COUNTS.get(s.model_type or "")
    if own is not None:  # a layout with its own module: models/arch_<name>.py count_text
        import importlib

        return importlib.import_module(f"servefit.models.{own}").count_text(s)  # type: ignore[no-any-return]
    from servefit.models.arch_classic import count_classic  # layouts beyond the Llama one
    return count_classic(s)


def count_params(spec: ModelSpec) -> int:
    """Total parameters of the checkpoint the architecture describes (vision tower included)."""
    return count_text_params(spec) + spec.vision_params


def full_layer_params(s: ModelSpec) -> tuple[int, int]:
    """(attention, MLP or MoE block) parameters of one full-attention decoder layer, as count_text_params
    counts them (the MoE block where the model has experts): what an MTP module repeats."""
    t = traits(s.model_type)
    block = _moe_params(s, t) if s.is_moe else _mlp_params(s.hidden_size, s.intermediate_size, t,
                                                           s.layout.get("mlp_bias"))
    return _attention_params(s, t), block
