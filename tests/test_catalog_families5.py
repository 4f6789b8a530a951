"""Issue 13 catalog additions: Ling v1's layout switches, and exact counts of
the new entries as the catalog resolves them."""

from __future__ import annotations

import pytest

from servefit.models import resolve_model
from servefit.models.config_json import from_config

# Ling-lite-1.5's shapes as its llmfit record gives them (BailingMoeForCausalLM)
LING_V1 = {
    "architectures": ["BailingMoeForCausalLM"], "model_type": "bailing_moe",
    "num_hidden_layers": 28, "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 4,
    "head_dim": 128, "intermediate_size": 5632, "moe_intermediate_size": 1408, "num_experts": 64,
    "num_experts_per_tok": 6, "num_shared_experts": 2, "first_k_dense_replace": 0,
    "vocab_size": 126464, "max_position_embeddings": 32768, "tie_word_embeddings": False,
    "use_qk_norm": False, "moe_router_enable_expert_bias": False,
}


def test_ling_v1_config_drops_qk_norms_and_expert_bias():
    m = from_config(LING_V1, "local/ling-lite")
    assert m.params == resolve_model("inclusionAI/Ling-lite-1.5").params == 16_801_974_272
    v2_style = from_config(dict(LING_V1, use_qk_norm=True, moe_router_enable_expert_bias=True), "x")
    assert v2_style.params - m.params == 28 * (2 * 128 + 64)  # per layer: q/k norms + one bias per expert
    no_flags = {k: v for k, v in LING_V1.items() if k not in ("use_qk_norm", "moe_router_enable_expert_bias")}
    assert from_config(no_flags, "x").params == v2_style.params  # absent keys keep Ling 2.0's traits


@pytest.mark.parametrize(("name", "params", "vision"), [
    ("tiiuae/falcon-11B", 10_836_484_096, 0),
    ("google/medgemma-27b-text-it", 27_009_002_240, 0),
    ("ServiceNow-AI/Apriel-1.6-15b-Thinker", 14_863_859_712, 434_957_312),
    ("ibm-granite/granite-docling-258M", 257_517_120, 93_510_912),
    ("inclusionAI/Ling-lite", 16_801_974_272, 0),
    ("inceptionai/Jais-2-8B-Chat", 8_090_401_280, 0),
    ("JetBrains/Mellum2-12B-A2.5B-Base", 12_149_923_072, 0),
    ("LGAI-EXAONE/K-EXAONE-236B-A23B", 237_099_669_632 - 5_059_148_160, 0),  # the MTP layer left out
    ("CohereLabs/command-a-vision-07-2025", 111_867_525_360, 809_945_328),
])
def test_new_entries_resolve_with_their_counts(name, params, vision):
    m = resolve_model(name)
    assert (m.params, m.vision_params) == (params, vision)


# jina-embeddings-v2-base-en's config.json keys (as public fixtures quote them)
JINA_V2 = {
    "architectures": ["JinaBertForMaskedLM"], "model_type": "bert", "position_embedding_type": "alibi",
    "feed_forward_type": "geglu", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
    "intermediate_size": 3072, "max_position_embeddings": 8192, "type_vocab_size": 2, "vocab_size": 30528,
}


def test_jina_bert_config_counts_alibi_and_the_gated_mlp():
    m = from_config(JINA_V2, "local/jina-v2")
    assert m.params == resolve_model("jinaai/jina-embeddings-v2-base-en").params == 137_368_320
    assert set(m.kinds()) == {"none"}  # an encoder: no KV cache
    plain = from_config(dict(JINA_V2, position_embedding_type="absolute", feed_forward_type="original"), "x")
    # a learned position table (8192 x 768) and a plain MLP (h -> inter with bias, not h -> 2 x inter)
    assert plain.params - m.params == 8192 * 768 + 12 * (3072 - 768 * 3072)


def test_jina_v2_languages_are_their_own_entries():
    assert resolve_model("jinaai/jina-embeddings-v2-base-zh").vocab_size == 61056
    assert resolve_model("jinaai/jina-embeddings-v2-small-en").params == 32_690_688


def test_aya_vision_config_counts_tower_and_swiglu_projector():
    cfg = {
        "architectures": ["AyaVisionForConditionalGeneration"], "model_type": "aya_vision",
        "downsample_factor": 2, "alignment_intermediate_size": 28672, "tie_word_embeddings": True,
        "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
                          "num_hidden_layers": 27, "num_attention_heads": 16, "image_size": 364, "patch_size": 14},
        "text_config": {"model_type": "cohere2", "num_hidden_layers": 32, "hidden_size": 4096,
                        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                        "vocab_size": 256000, "max_position_embeddings": 8192, "sliding_window": 4096},
    }
    m = from_config(cfg, "local/aya")
    assert (m.params, m.vision_params) == (8_631_842_032, 603_809_008)
    assert m.kinds()[:4] == ["sliding", "sliding", "sliding", "full"]  # Command R7B's 3:1 pattern
    # Command A Vision's projector has no LayerNorm: 2 x (1152 x 4) fewer with the same shapes
    assert from_config(dict(cfg, model_type="cohere2_vision"), "x").vision_params == 603_809_008 - 2 * 4608


def test_idefics2_config_counts_the_perceiver_connector():
    cfg = {
        "architectures": ["Idefics2ForConditionalGeneration"], "model_type": "idefics2",
        "vision_config": {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
                          "num_attention_heads": 16, "image_size": 980, "patch_size": 14},
        "perceiver_config": {"resampler_n_latents": 64, "resampler_depth": 3, "resampler_n_heads": 16,
                             "resampler_head_dim": 96, "num_key_value_heads": 4},
        "text_config": {"model_type": "mistral", "num_hidden_layers": 32, "hidden_size": 4096,
                        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                        "vocab_size": 32003, "max_position_embeddings": 32768},
    }
    m = from_config(cfg, "local/idefics2")
    assert m.params == resolve_model("HuggingFaceM4/idefics2-8b").params == 8_402_768_112
    shallow = from_config(dict(cfg, perceiver_config=dict(cfg["perceiver_config"], resampler_depth=2)), "x")
    # one perceiver layer: three norms, 16 x 96 query / output, 4 x 96 key / value, SwiGLU of 4 x 4096
    assert m.params - shallow.params == 3 * 4096 + 2 * 4096 * 16 * 96 + 2 * 4096 * 4 * 96 + 3 * 4096 * 16384


def test_longcat_flash_config_counts_sublayers_and_the_shortcut_moe():
    cfg = {  # LongcatFlashConfig's defaults, which its docstring says are LongCat-Flash-Chat's
        "architectures": ["LongcatFlashForCausalLM"], "model_type": "longcat_flash", "vocab_size": 131072,
        "hidden_size": 6144, "num_layers": 28, "num_attention_heads": 64, "ffn_hidden_size": 12288,
        "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
        "v_head_dim": 128, "moe_topk": 12, "n_routed_experts": 512, "zero_expert_num": 256,
        "expert_ffn_hidden_size": 2048, "max_position_embeddings": 131072,
    }
    m = from_config(cfg, "local/longcat")
    assert m.params == resolve_model("meituan-longcat/LongCat-Flash-Chat").params == 560_664_980_480
    assert m.num_hidden_layers == 56 and m.is_mla  # two MLA sublayers per decoder layer: 56 KV layers
    plain = from_config(dict(cfg, zero_expert_num=0), "x")
    assert m.params - plain.params == 28 * 256 * (6144 + 1)  # router rows and score biases of the zero experts
    assert resolve_model("meituan-longcat/LongCat-Flash-Chat-FP8").name == "meituan-longcat/LongCat-Flash-Chat"


def test_dots_ocr_config_counts_the_dots_vit():
    cfg = {
        "architectures": ["DotsOCRForCausalLM"], "model_type": "dots_ocr", "num_hidden_layers": 28,
        "hidden_size": 1536, "num_attention_heads": 12, "num_key_value_heads": 2, "intermediate_size": 8960,
        "vocab_size": 151936, "max_position_embeddings": 131072, "tie_word_embeddings": False,
        "vision_config": {"embed_dim": 1536, "hidden_size": 1536, "num_hidden_layers": 42, "intermediate_size": 4224,
                          "num_attention_heads": 12, "patch_size": 14, "spatial_merge_size": 2, "use_bias": False,
                          "post_norm": True},
    }
    m = from_config(cfg, "local/dots")
    assert (m.params, m.vision_params) == (3_039_179_264, 1_262_091_264)
    assert resolve_model("rednote-hilab/dots.mocr").params == m.params
    biased = from_config(dict(cfg, vision_config=dict(cfg["vision_config"], use_bias=True)), "x")
    # per block: q/k/v and proj biases (4 x 1536), fc1 / fc3 (2 x 4224) and fc2 (1536)
    assert biased.vision_params - m.vision_params == 42 * (4 * 1536 + 2 * 4224 + 1536)


def test_nomic_v2_moe_config_counts_moe_every_second_layer():
    cfg = {  # nomic-embed-text-v2-moe's GPT-2-style config.json keys
        "architectures": ["NomicBertModel"], "model_type": "nomic_bert", "n_embd": 768, "n_layer": 12,
        "n_head": 12, "n_inner": 3072, "vocab_size": 250048, "type_vocab_size": 1, "n_positions": 2048,
        "activation_function": "gelu", "qkv_proj_bias": True, "mlp_fc1_bias": True, "mlp_fc2_bias": True,
        "moe_every_n_layers": 2, "num_experts": 8, "moe_top_k": 2,
    }
    m = from_config(cfg, "local/nomic-v2")
    assert m.params == resolve_model("nomic-ai/nomic-embed-text-v2-moe").params == 475_292_928
    dense = from_config({k: v for k, v in cfg.items() if k != "moe_every_n_layers"}, "x")
    # six MoE layers (router, 8 x up/down, one bias) become plain biased GELU MLPs
    assert m.params - dense.params == 6 * ((768 * 8 + 2 * 8 * 3072 * 768 + 768) - (2 * 768 * 3072 + 3072 + 768))
    assert resolve_model("nomic-ai/nomic-embed-text-v1.5").params == 136_731_648  # v1.5: SwiGLU, no biases
    # layers 1, 3, 5... are the MoE ones (index % n == 1): three layers hold one MoE, not two
    three = from_config(dict(cfg, n_layer=3), "x").params - from_config(dict(cfg, n_layer=3, moe_every_n_layers=0), "x").params
    assert three == (768 * 8 + 2 * 8 * 3072 * 768 + 768) - (2 * 768 * 3072 + 3072 + 768)


def test_granite_swash_configs_count_sinks_and_the_shared_mlp():
    dense = {  # GraniteSWAConfig's defaults (its docstring names ibm-granite/granite-swash-2b)
        "architectures": ["GraniteSWAForCausalLM"], "model_type": "granite_swa", "vocab_size": 100352,
        "hidden_size": 2560, "intermediate_size": 8192, "num_hidden_layers": 24, "num_attention_heads": 20,
        "num_key_value_heads": 4, "max_position_embeddings": 8192, "tie_word_embeddings": True, "sliding_window": 128,
        "layer_types": ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(24)],
    }
    m = from_config(dense, "local/swash-2b")
    assert m.params == resolve_model("ibm-granite/granite-swash-2b").params == 2_144_463_840
    assert m.kinds()[:5] == ["full", "sliding", "sliding", "sliding", "full"]
    moe = {
        "architectures": ["GraniteMoeSWAForCausalLM"], "model_type": "granitemoe_swa", "vocab_size": 100352,
        "hidden_size": 1280, "intermediate_size": 512, "shared_intermediate_size": 1280, "num_hidden_layers": 28,
        "num_attention_heads": 20, "num_key_value_heads": 4, "num_local_experts": 48, "num_experts_per_tok": 4,
        "max_position_embeddings": 8192, "tie_word_embeddings": True, "sliding_window": 128,
    }
    a600m = from_config(moe, "local/swash-3b")
    assert a600m.params == resolve_model("ibm-granite/granite-swash-3b-a600m").params == 3_020_382_000
    no_shared = from_config(dict(moe, shared_intermediate_size=0), "x")
    assert a600m.params - no_shared.params == 28 * 3 * 1280 * 1280  # the shared MLP in every layer


def test_gpt_neo_config_alternates_global_and_local_layers():
    cfg = {  # GPTNeoConfig's defaults, which its docstring says are EleutherAI/gpt-neo-1.3B's
        "architectures": ["GPTNeoForCausalLM"], "model_type": "gpt_neo", "vocab_size": 50257,
        "max_position_embeddings": 2048, "hidden_size": 2048, "num_layers": 24, "num_heads": 16,
        "attention_types": [[["global", "local"], 12]], "window_size": 256,
    }
    m = from_config(cfg, "local/gpt-neo")
    assert m.params == resolve_model("EleutherAI/gpt-neo-1.3B").params == 1_315_575_808
    assert m.tie_word_embeddings and m.kinds()[:3] == ["full", "sliding", "full"] and m.sliding_window == 256
    # GPT-2's layout with q/k/v biases would be 3 x hidden more per layer
    assert from_config(dict(cfg, model_type="gpt2"), "x").params - m.params == 24 * 3 * 2048
