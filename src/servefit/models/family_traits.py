"""Per-family module traits (biases, extra norms, gates, sinks): what a model_type's modules carry
beyond the Llama layout, so that parameter counts (models/architecture.py) and GGUF layouts
(models/gguf_layout.py) follow the checkpoint. Standard library only: this is on the fast path."""

from __future__ import annotations

from dataclasses import dataclass

from servefit.models.spec import ModelSpec


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
