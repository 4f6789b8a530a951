"""Vision towers of issue 13's fourth round (models/vision_towers.py): MoonViT (Kimi-VL, Kimi-K2.5),
DeepSeek-VL2's SigLIP with its attention-pooling head and downsampling MLP, DeepSeek-OCR's
DeepEncoder (SAM ViT-B + CLIP-L) and MiniCPM-V's resampler, each counted by hand from the vLLM
model file, with the KV bytes per token of one checkpoint and the config.json readers."""

from __future__ import annotations

import pytest

from servefit.models import count_params, resolve_model
from servefit.models.config_json import from_config
from servefit.pipeline import Target, evaluate, site_from_argv


def lin(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def vit_layer(h: int, inter: int) -> int:
    return 2 * 2 * h + 3 * lin(h, h) + lin(h, h) + lin(h, inter) + lin(inter, h)


def kv_per_token(name: str, tp: int = 1) -> int:
    argv = ["vllm", "serve", name, "--max-model-len", "4096", "--tensor-parallel-size", str(tp)]
    return evaluate(site_from_argv(argv), Target(gpu="H100", engine_version="0.33.0")).plan.kv_bytes_per_token


def test_kimi_vl_moonvit_by_hand():
    h, text = 1152, 2048
    tower = 3 * 14 * 14 * h + h + 64 * 64 * h + 27 * vit_layer(h, 4304) + 2 * h  # patch conv, positions, final LN
    proj = 2 * h + lin(4 * h, 4 * h) + lin(4 * h, text)  # pre_norm, linear_1, linear_2
    m = resolve_model("moonshotai/Kimi-VL-A3B-Instruct")
    assert m.vision_params == tower + proj == 447_545_840
    moonlight = resolve_model("moonshotai/Moonlight-16B-A3B-Instruct")
    assert count_params(m) - m.vision_params == count_params(moonlight)  # the text model is Moonlight's
    assert kv_per_token("moonshotai/Kimi-VL-A3B-Instruct") == 27 * (512 + 64) * 2  # MLA latent, bf16


def test_kimi_k25_projects_the_same_tower_into_7168():
    m = resolve_model("moonshotai/Kimi-K2.5")
    assert m.vision_params - 447_545_840 == lin(4608, 7168) - lin(4608, 2048)
    assert m.params == count_params(m) == count_params(resolve_model("moonshotai/Kimi-K2-Thinking")) + m.vision_params


def siglip_so400m_384() -> int:
    h = 1152
    return 3 * 14 * 14 * h + h + 27 * 27 * h + 27 * vit_layer(h, 4304) + 2 * h


def test_deepseek_vl2_tiny_keeps_the_pooling_head_by_hand():
    h, text = 1152, 1280
    head = h + lin(h, h) + lin(h, 2 * h) + lin(h, h) + 2 * h + lin(h, 4304) + lin(4304, h)  # timm AttentionPoolLatent
    proj = lin(4 * h, text) + lin(text, text) + 2 * text  # downsample_mlp_gelu, image_newline, view_seperator
    m = resolve_model("deepseek-ai/deepseek-vl2-tiny")
    assert m.vision_params == siglip_so400m_384() + head + proj == 435_767_360
    assert m.params == count_params(m) == 3_370_501_440


def test_deepseek_ocr_deepencoder_by_hand():
    h = 768
    sam = 3 * 16 * 16 * h + h + 64 * 64 * h
    for i in range(12):
        rel = 2 * (2 * (64 if i in (2, 5, 8, 11) else 14) - 1) * 64  # rel_pos_h / rel_pos_w, head_dim 64
        sam += 2 * 2 * h + lin(h, 3 * h) + lin(h, h) + rel + lin(h, 4 * h) + lin(4 * h, h)
    sam += h * 256 + 512 + 256 * 256 * 9 + 512 + 256 * 512 * 9 + 512 * 1024 * 9  # neck, net_2, net_3
    clip = 1024 + 3 * 14 * 14 * 1024 + 257 * 1024 + 2 * 1024 + 24 * vit_layer(1024, 4096)
    m = resolve_model("deepseek-ai/DeepSeek-OCR")
    assert m.vision_params == sam + clip + lin(2048, 1280) + 2 * 1280 == 401_372_160
    assert m.params == count_params(m) == 3_336_106_240
    assert kv_per_token("deepseek-ai/DeepSeek-OCR") == 12 * 2 * 10 * 128 * 2  # MHA: use_mla false


def test_minicpm_v26_resampler_by_hand():
    h, e, q = 1152, 3584, 64
    tower = 3 * 14 * 14 * h + h + 70 * 70 * h + 27 * vit_layer(h, 4304) + 2 * h  # 980 px
    resampler = q * e + h * e + lin(e, 3 * e) + lin(e, e) + 3 * 2 * e + e * e  # queries, kv_proj, MHA, 3 LNs, proj
    m = resolve_model("openbmb/MiniCPM-V-2_6")
    assert m.vision_params == tower + resampler
    assert m.params == count_params(m) == 8_099_175_152
    assert kv_per_token("openbmb/MiniCPM-V-2_6") == 28 * 2 * 4 * 128 * 2


def test_minicpm_v45_counts_its_qwen3_head_norms():
    m = resolve_model("openbmb/MiniCPM-V-4_5")
    assert m.layout["qk_norm"] and count_params(m) == m.params == 8_695_895_280


KIMI_VL = {
    "architectures": ["KimiVLForConditionalGeneration"], "model_type": "kimi_vl",
    "vision_config": {"model_type": "moonvit", "hidden_size": 1152, "num_hidden_layers": 27, "intermediate_size": 4304,
                      "patch_size": 14, "init_pos_emb_height": 64, "init_pos_emb_width": 64, "num_attention_heads": 16,
                      "merge_kernel_size": [2, 2]},
    "text_config": {"model_type": "deepseek_v3", "hidden_size": 2048, "num_hidden_layers": 27, "num_attention_heads": 16,
                    "num_key_value_heads": 16, "intermediate_size": 11264, "moe_intermediate_size": 1408,
                    "n_routed_experts": 64, "num_experts_per_tok": 6, "n_shared_experts": 2, "first_k_dense_replace": 1,
                    "kv_lora_rank": 512, "q_lora_rank": None, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
                    "v_head_dim": 128, "vocab_size": 163840, "max_position_embeddings": 131072},
}
DEEPSEEK_OCR = {
    "architectures": ["DeepseekOCRForCausalLM"], "model_type": "deepseek_vl_v2",
    "language_config": {"vocab_size": 129280, "hidden_size": 1280, "intermediate_size": 6848,
                        "moe_intermediate_size": 896, "num_hidden_layers": 12, "num_attention_heads": 10,
                        "num_key_value_heads": 10, "n_routed_experts": 64, "num_experts_per_tok": 6,
                        "n_shared_experts": 2, "first_k_dense_replace": 1, "max_position_embeddings": 8192,
                        "use_mla": False, "kv_lora_rank": 512},
    "projector_config": {"input_dim": 2048, "n_embed": 1280, "projector_type": "linear"},
    "vision_config": {"image_size": 1024, "model_name": "deeplip_b_l", "model_type": "vision",
                      "width": {"clip-l-14-224": {"width": 1024, "layers": 24}, "sam_vit_b": {"width": 768}}},
}
MINICPM_V26 = {
    "architectures": ["MiniCPMV"], "model_type": "minicpmv", "hidden_size": 3584, "num_hidden_layers": 28,
    "num_attention_heads": 28, "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 151666,
    "max_position_embeddings": 32768, "query_num": 64, "version": 2.6,
    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152, "num_hidden_layers": 27,
                      "intermediate_size": 4304, "num_attention_heads": 16, "image_size": 980, "patch_size": 14},
}


@pytest.mark.parametrize("cfg,name", [(KIMI_VL, "moonshotai/Kimi-VL-A3B-Instruct"),
                                      (DEEPSEEK_OCR, "deepseek-ai/DeepSeek-OCR")])
def test_config_json_towers_match_the_catalog(cfg, name):
    got, want = from_config(cfg, name), resolve_model(name)
    assert (got.vision_params, got.kv_lora_rank, got.num_key_value_heads) == (
        want.vision_params, want.kv_lora_rank, want.num_key_value_heads)
    assert got.params == count_params(want)


def test_minicpm_config_json_reads_query_num_at_the_top():
    got = from_config(MINICPM_V26, "x")
    assert (got.vision_params, got.params) == (resolve_model("openbmb/MiniCPM-V-2_6").vision_params, 8_099_175_152)
    # version 2.6 is vLLM's MiniCPMV2_6 over Qwen2: q/k/v biases (28 x (3584 + 2 x 512))
    assert got.params - from_config({**MINICPM_V26, "version": 2.5}, "x").params == 28 * (3584 + 2 * 512)
    assert from_config({**MINICPM_V26, "query_num": 96}, "x").vision_params - got.vision_params == 32 * 3584


def test_molmo_7b_d_by_hand():
    e, text, inter = 1024, 3584, 18944
    vit = e + 577 * e + 3 * 14 * 14 * e + 2 * e + 23 * vit_layer(e, 4096)  # class token, positions, bias-free patch
    pool = lin(2 * e, e) * 3 + lin(e, e)  # q / k / v over two layers' features, wo
    proj = 2 * e * inter + inter * text  # bias-free SwiGLU projector
    m = resolve_model("allenai/Molmo-7B-D-0924")
    assert m.vision_params == vit + pool + proj + 2 * 2 * e  # pad_embed
    assert count_params(m) - m.vision_params - count_params(resolve_model("Qwen/Qwen2-7B-Instruct")) == 128 * text
    assert m.params == count_params(m) == 8_021_025_280
    assert kv_per_token("allenai/Molmo-7B-D-0924") == 28 * 2 * 4 * 128 * 2


def test_molmo2_keeps_25_vision_layers_and_untied_qwen3_by_hand():
    h, text, inter = 1152, 2560, 9728
    vit = 729 * h + lin(3 * 14 * 14, h) + 25 * vit_layer(h, 4304)
    tower = vit + lin(2 * h, h) * 3 + lin(h, h) + 2 * h * inter + inter * text
    m = resolve_model("allenai/Molmo2-4B")
    assert m.vision_params == tower
    attn = 2 * text * 32 * 128 + 2 * text * 8 * 128 + 2 * 128  # q, o, k, v, q_norm / k_norm
    lm = (151936 + 128) * text + 151936 * text + text + 36 * (attn + 3 * text * inter + 2 * text)
    assert count_params(m) == lm + tower == m.params == 4_850_869_200
    o = resolve_model("allenai/Molmo2-O-7B")  # an OLMo LM: q / k norms over all 32 heads
    assert o.layout["qk_norm_full"] and count_params(o) == o.params == 7_760_786_896


def test_molmo_config_json_files():
    v1 = {"architectures": ["MolmoForCausalLM"], "model_type": "molmo", "hidden_size": 3584, "intermediate_size": 37888,
          "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
          "embedding_size": 152064, "max_position_embeddings": 4096, "qkv_bias": True}
    assert from_config(v1, "x").params == 8_021_025_280
    v2 = {"architectures": ["Molmo2ForConditionalGeneration"], "model_type": "molmo2",
          "text_config": {"hidden_size": 2560, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                          "vocab_size": 151936, "additional_vocab_size": 128, "num_hidden_layers": 36,
                          "intermediate_size": 9728, "max_position_embeddings": 36864, "use_qk_norm": True,
                          "qk_norm_type": "qwen3"},
          "vit_config": {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27, "image_patch_size": 14,
                         "image_default_input_size": [378, 378]},
          "adapter_config": {"vit_layers": [-3, -9], "intermediate_size": 9728}}
    got = from_config(v2, "x")
    assert (got.params, got.vision["num_hidden_layers"]) == (4_850_869_200, 25)


def test_lfm2_vl_siglip2_naflex_and_projector_by_hand():
    h, text = 768, 1024
    tower = lin(3 * 16 * 16, h) + 256 * h + 12 * vit_layer(h, 3072) + 2 * h  # patch Linear, 256 positions, post LN
    proj = 2 * 4 * h + lin(4 * h, 2560) + lin(2560, text)  # LayerNorm over 2x2 unshuffled patches, two Linears
    m = resolve_model("LiquidAI/LFM2-VL-450M")
    assert m.vision_params == tower + proj
    assert count_params(m) == count_params(resolve_model("LiquidAI/LFM2-350M")) + m.vision_params == m.params
    cfg = {"architectures": ["Lfm2VlForConditionalGeneration"], "model_type": "lfm2_vl", "projector_hidden_size": 2560,
           "text_config": {"model_type": "lfm2", "hidden_size": 1024, "num_hidden_layers": 16, "num_attention_heads": 16,
                           "num_key_value_heads": 8, "vocab_size": 65536, "block_ff_dim": 6656,
                           "block_multiple_of": 256, "block_ffn_dim_multiplier": 1.0, "conv_L_cache": 3,
                           "max_position_embeddings": 128000,
                           "layer_types": ["full_attention" if k == "full" else "conv" for k in m.kinds()]},
           "vision_config": {"model_type": "siglip2_vision_model", "hidden_size": 768, "num_hidden_layers": 12,
                             "intermediate_size": 3072, "patch_size": 16, "num_patches": 256}}
    got = from_config(cfg, "x")
    assert (got.model_type, got.params) == ("lfm2", m.params)
