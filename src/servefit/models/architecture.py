"""What an architecture's config means: per-family module traits, the attention kind of each
layer, and the parameter count of the Hugging Face module layout.

`count_params` counts embeddings, q/k/v/o projections (with their biases where the family has
them), MLA down/up projections, dense or gated MLPs, routed + shared experts and the router,
norms, the lm_head unless tied, and the vision tower (`vision_params`). It is the guard the
catalog is checked against. Standard library only: this is on the fast path.
"""

from __future__ import annotations

from dataclasses import dataclass

from servefit.models.spec import ModelSpec

# ---------------------------------------------------------------------------------------------
# Family traits: what a model_type's modules carry beyond the Llama layout
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Traits:
    """What a family's modules carry beyond the Llama layout (biases, extra norms, gates, sinks), so
    parameters are counted the way the checkpoint stores them."""

    qkv_bias: bool = False  # q/k/v projections carry a bias
    o_bias: bool = False  # output projection carries a bias
    qk_norm: bool = False  # per-head RMSNorm on q and k (head_dim weights each)
    norms_per_layer: int = 2  # norm modules per decoder layer
    norm_bias: bool = False  # LayerNorm with bias (2 x hidden per norm)
    gated_mlp: bool = True  # gate/up/down (3 matrices) vs up/down (2)
    mlp_bias: bool = False  # MLP / expert projections carry biases
    router_bias: bool = False  # router (gate) carries a bias
    expert_score_bias: bool = False  # DeepSeek-V3 e_score_correction_bias (one per expert)
    shared_expert_gate: bool = False  # sigmoid gate (hidden -> 1) on the shared expert
    lm_head_bias: bool = False
    attn_sinks: bool = False  # one learned sink logit per head (gpt-oss)
    attn_output_gate: bool = False  # q_proj also produces a per-head output gate (Qwen3-Next)
    qk_norm_full: bool = False  # RMSNorm over all q heads and all k heads (MiniMax-M2; OLMo 2: heads x head_dim each)
    final_norm: bool = True  # False: OLMo 1's non-parametric LayerNorms hold no weights
    act_params: int = 0  # learned scalars of each layer's activation (Apertus xIELU: alpha_p, alpha_n)


_LLAMA = Traits()
TRAITS: dict[str, Traits] = {
    "qwen": Traits(qkv_bias=True),  # first-generation Qwen: c_attn with bias (vLLM models/qwen.py)
    "qwen2": Traits(qkv_bias=True),
    "qwen2_moe": Traits(qkv_bias=True, shared_expert_gate=True),
    "qwen2_vl": Traits(qkv_bias=True),
    "qwen2_5_vl": Traits(qkv_bias=True),
    "qwen3": Traits(qk_norm=True),
    "qwen3_moe": Traits(qk_norm=True),
    "laguna": Traits(qk_norm=True, expert_score_bias=True),  # vLLM laguna.py (models/arch_laguna.py)
    "step3p5": Traits(qk_norm=True, expert_score_bias=True),  # vLLM step3p5.py: router_bias, share_expert
    "qwen3_next": Traits(qk_norm=True, shared_expert_gate=True, attn_output_gate=True),
    # Qwen3-VL text models are Qwen3 / Qwen3-MoE; Qwen3.5 / 3.6 are Qwen3-Next's hybrid layout
    # (vLLM model_executor/models/qwen3_5.py) with a dense MLP (qwen3_5) or the gated shared expert
    "qwen3_vl": Traits(qk_norm=True),
    "qwen3_vl_moe": Traits(qk_norm=True),
    "qwen3_omni_moe": Traits(qk_norm=True),  # Qwen3-Omni's thinker: a Qwen3-MoE LM (qwen3_omni_moe_thinker.py)
    "qwen3_5": Traits(qk_norm=True, attn_output_gate=True),
    "qwen3_5_moe": Traits(qk_norm=True, shared_expert_gate=True, attn_output_gate=True),
    # their language models alone (Qwen3_5ForCausalLM; transformers 5.24.0 Qwen3_5TextConfig)
    "qwen3_5_text": Traits(qk_norm=True, attn_output_gate=True),
    "qwen3_5_moe_text": Traits(qk_norm=True, shared_expert_gate=True, attn_output_gate=True),
    "gemma2": Traits(norms_per_layer=4),
    "gemma3": Traits(norms_per_layer=4, qk_norm=True),
    "gemma3_text": Traits(norms_per_layer=4, qk_norm=True),
    "gpt_oss": Traits(qkv_bias=True, o_bias=True, mlp_bias=True, router_bias=True, attn_sinks=True),
    "phimoe": Traits(qkv_bias=True, o_bias=True, norm_bias=True, lm_head_bias=True),
    "cohere": Traits(norms_per_layer=1),
    "cohere2": Traits(norms_per_layer=1),  # modeling_cohere2.py: one input_layernorm per layer
    # Jais 2 (transformers modeling_jais2.py; vLLM jais2.py): biased q/k/v/o, a plain up/down MLP with
    # biases (relu2), LayerNorms with biases
    "jais2": Traits(qkv_bias=True, o_bias=True, gated_mlp=False, mlp_bias=True, norm_bias=True),
    # Mellum 2 (transformers modeling_mellum.py MellumAttention): q_norm / k_norm over head_dim
    "mellum": Traits(qk_norm=True),
    # K-EXAONE (transformers modeling_exaone_moe.py): q_norm / k_norm over head_dim, a shared expert
    # and the router's e_score_correction_bias
    "exaone_moe": Traits(qk_norm=True, expert_score_bias=True),
    # LongCat-Flash (transformers modeling_longcat_flash.py; vLLM longcat_flash.py): each decoder layer is
    # two MLA sublayers with a dense MLP each and one shortcut MoE whose router scores 512 experts
    # and 256 zero-compute (identity) ones, with e_score_correction_bias
    "longcat_flash": Traits(expert_score_bias=True),
    # dots.ocr (vLLM dots_ocr.py): a Qwen2ForCausalLM language model (q/k/v biases) under dots_ocr
    "dots_ocr": Traits(qkv_bias=True),
    # Granite "swash" (transformers modeling_granite_swa.py GraniteSWAAttention): a learnable sink per head
    "granite_swa": Traits(attn_sinks=True),
    # Aya Vision (Command R7B / Aya Expanse LM) and Command A Vision: the Cohere LMs under their own model_type
    "aya_vision": Traits(norms_per_layer=1),
    "cohere2_vision": Traits(norms_per_layer=1),
    "chatglm": Traits(qkv_bias=True),
    "glm": Traits(qkv_bias=True),
    "falcon": Traits(norm_bias=True, gated_mlp=False),
    "deepseek_v3": Traits(expert_score_bias=True),
    # DeepSeek-V3 layout with the V3.2 sparse-attention indexer (spec.index_n_heads)
    "deepseek_v32": Traits(expert_score_bias=True),
    "kimi_linear": Traits(expert_score_bias=True),  # KDA layers + NoPE MLA layers, 256 experts
    "kimi_k2": Traits(expert_score_bias=True),  # Kimi K2: DeepseekV3ForCausalLM, 384 experts
    # vLLM glm4.py Glm4DecoderLayer: post_self_attn_layernorm and post_mlp_layernorm as well
    "glm4": Traits(qkv_bias=True, norms_per_layer=4),
    "glm4v": Traits(qkv_bias=True, norms_per_layer=4),  # GLM-4.1V text model (modeling_glm4v.py Glm4vTextDecoderLayer)
    "glm_ocr": Traits(norms_per_layer=4),  # GLM-OCR text model: GLM-4.1V's without q/k/v bias (modeling_glm_ocr.py)
    # vLLM glm4_moe.py Glm4MoeAttention (qkv bias; GLM-4.5's use_qk_norm head norms not modelled:
    # 2 x 128 per layer) and Glm4MoE (e_score_correction_bias)
    "glm4_moe": Traits(qkv_bias=True, expert_score_bias=True),
    "glm4v_moe": Traits(qkv_bias=True, expert_score_bias=True),  # GLM-4.5V / 4.6V text model: GLM-4.5-Air's
    "glm4_moe_lite": Traits(expert_score_bias=True),  # GLM-4.7-Flash: DeepSeek-V3 MLA layout
    "glm_moe_dsa": Traits(expert_score_bias=True),  # GLM-5: V3.2 layout (vllm deepseek_v32)
    # vLLM minimax_m2.py MiniMaxM2Attention: q_norm / k_norm span all heads; router score bias
    "minimax_m2": Traits(qk_norm_full=True, expert_score_bias=True),
    # MiniMax-M3 (transformers modeling_minimax_m3_vl.py; vLLM models/minimax_m3): per-head q/k norms,
    # a shared expert, the router's e_score_correction_bias; sparse layers add a Lightning Indexer
    "minimax_m3_vl": Traits(qk_norm=True, expert_score_bias=True),
    "minimax_m3": Traits(qk_norm=True, expert_score_bias=True),
    "gpt2": Traits(qkv_bias=True, o_bias=True, norm_bias=True, gated_mlp=False, mlp_bias=True),
    "phi": Traits(qkv_bias=True, o_bias=True, norms_per_layer=1, norm_bias=True, gated_mlp=False,
                  mlp_bias=True, lm_head_bias=True),
    "starcoder2": Traits(qkv_bias=True, o_bias=True, norm_bias=True, gated_mlp=False, mlp_bias=True),
    # modeling_gpt_neox.py (Pythia): fused query_key_value + dense with biases, two LayerNorms
    "gpt_neox": Traits(qkv_bias=True, o_bias=True, norm_bias=True, gated_mlp=False, mlp_bias=True),
    # modeling_gptj.py: bias-free q/k/v/out_proj, one ln_1 (parallel residual), lm_head with bias
    "gptj": Traits(norms_per_layer=1, norm_bias=True, gated_mlp=False, mlp_bias=True, lm_head_bias=True),
    # modeling_nemotron.py: LayerNorm1P (weight + bias), relu^2 up/down MLP without a gate
    "nemotron": Traits(norm_bias=True, gated_mlp=False),
    # vLLM mpt.py MPTBlock: fused Wqkv and out_proj, up_proj -> GELU -> down_proj, no biases
    # where config.no_bias (every MPT checkpoint), LayerNorms without bias, ALiBi (no positions)
    "mpt": Traits(gated_mlp=False),
    "llava_onevision": Traits(qkv_bias=True),  # its language model is Qwen2
    "olmo": Traits(norms_per_layer=0, final_norm=False),  # modeling_olmo.py OlmoLayerNorm: no weights
    # modeling_olmo2.py / olmo3 / olmoe: q_norm and k_norm over the full projection width
    "olmo2": Traits(qk_norm_full=True),
    "olmo3": Traits(qk_norm_full=True),
    "olmoe": Traits(qk_norm_full=True),
    # modeling_olmo_hybrid.py: OLMo 3's full-attention layers (q_norm / k_norm over the projection
    # width) between Gated DeltaNet layers whose q/k/v/g/a/b/o projections and conv hold the same
    # count as Qwen3-Next's fused in_proj_qkvz / in_proj_ba (mamba.kind gated_deltanet)
    "olmo_hybrid": Traits(qk_norm_full=True),
    # vLLM hunyuan_v1.py HunYuanAttention: query_layernorm / key_layernorm over head_dim (use_qk_norm)
    "hunyuan_v1_dense": Traits(qk_norm=True),
    "hunyuan_v1_moe": Traits(qk_norm=True),
    # Muse-Glimmer (modeling_muse_glimmer.py MuseGlimmerTextAttention / DecoderLayer): a separate gate_proj
    # (hidden -> heads x head_dim, the output gate), weightless q/k norms, four centered RMSNorms per layer
    "muse_glimmer": Traits(attn_output_gate=True, norms_per_layer=4),
    "bee": Traits(qk_norm=True),  # Bee-8B's language model is Qwen3's (vLLM bee.py over llava_onevision.py)
    "rvl": Traits(qk_norm=True),  # R-4B's language model is Qwen3's (vLLM rvl.py over llava_onevision.py)
    "hunyuan_vl": Traits(qk_norm=True),  # HunyuanOCR's text model (modeling_hunyuan_vl.py HunYuanVLDenseV1Attention)
    # transformers modeling_hy_v3.py (Hy3): q_norm / k_norm over head_dim; HYV3MoE's
    # e_score_correction_bias is a buffer the checkpoint stores (the Hub count includes it)
    "hy_v3": Traits(qk_norm=True, expert_score_bias=True),
    # vLLM arcee.py ArceeMLP: up_proj -> relu^2 -> down_proj, no gate
    "arcee": Traits(gated_mlp=False),
    # vLLM apertus.py: q_norm / k_norm over head_dim, up/down MLP with xIELU (alpha_p, alpha_n per layer)
    "apertus": Traits(qk_norm=True, gated_mlp=False, act_params=2),
    # vLLM stablelm.py: LayerNorm with bias, q/k/v bias only where config.use_qkv_bias (layout.attention_bias)
    "stablelm": Traits(norm_bias=True),
    # vLLM exaone4.py Exaone4DecoderLayer: q_norm / k_norm, post_attention_layernorm and
    # post_feedforward_layernorm (no input norm)
    "exaone4": Traits(qk_norm=True),
    # vLLM ernie45_moe.py Ernie4_5_MoeMoE: routed experts with e_score_correction_bias, shared
    # experts as one MLP of moe_num_shared_experts x moe_intermediate_size (same count)
    "ernie4_5_moe": Traits(expert_score_bias=True),
    # vLLM dots1.py Dots1Attention: q_norm / k_norm over head_dim (Qwen3's); Dots1MoE: noaux_tc
    # e_score_correction_bias, n_shared_experts in one MLP
    "dots1": Traits(qk_norm=True, expert_score_bias=True),
    # vLLM bailing_moe.py (Ling / Ring 2.0, BailingMoeV2): fused qkv without bias, per-head
    # query_layernorm / key_layernorm, expert bias (moe_router_enable_expert_bias)
    "bailing_moe": Traits(qk_norm=True, expert_score_bias=True),
    # vLLM mimo.py: Qwen2's layout (q/k/v bias); its MTP layers are not loaded for serving
    "mimo": Traits(qkv_bias=True),
    # Kimi-VL (vLLM kimi_vl.py) and Kimi-K2.5 (kimi_k25.py): DeepSeek-V3 text models with the
    # noaux_tc e_score_correction_bias, under the multimodal model_type
    "kimi_vl": Traits(expert_score_bias=True),
    "kimi_k25": Traits(expert_score_bias=True),
    # vLLM hyperclovax.py HyperCLOVAXDecoderLayer (use_post_norm): post_norm1 / post_norm2 as well
    "hyperclovax": Traits(norms_per_layer=4),
    # FlexOlmo (transformers modeling_flex_olmo.py; vLLM's Transformers backend): OLMoE's layout
    "flex_olmo": Traits(qk_norm_full=True),
}


def traits(model_type: str) -> Traits:
    return TRAITS.get(model_type, _LLAMA)


# the classic layouts (models/arch_classic.py) and encoders (models/encoders.py) whose MLP is an
# up / down pair; NomicBert's SwiGLU and JinaBERT's GLU (layout.glu_mlp) have a gate
_UNGATED_LAYOUTS = {"opt", "bloom", "gpt_bigcode", "gpt_neo", "mpt", "codegen", "bert", "roberta", "xlm-roberta",
                    "mpnet"}


def is_gated_mlp(s: ModelSpec) -> bool:
    """Whether the MLP is gate / up / down (SwiGLU and kin) or a plain up / down pair."""
    if "glu_mlp" in s.layout:
        return bool(s.layout["glu_mlp"])
    return traits(s.model_type).gated_mlp and s.model_type not in _UNGATED_LAYOUTS


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
