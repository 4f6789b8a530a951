"""Module traits and encoders added with issue 13's fourth-round checkpoints: HyperCLOVAX's post
norms, FlexOlmo's OLMoE layout, PaliGemma 2's Gemma 2 norms under the paligemma model_type and
Qwen2.5-Omni's thinker (Qwen2.5-VL tower plus a Whisper-style audio encoder), each by hand."""

from __future__ import annotations

from servefit.models import count_params, from_config, resolve_model
from servefit.pipeline import Target, evaluate, site_from_argv


def lin(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def test_hyperclovax_has_four_norms_a_layer():
    h, inter, v = 6144, 14336, 110592
    attn = 2 * h * 48 * 128 + 2 * h * 8 * 128
    total = 2 * v * h + h + 38 * (attn + 3 * h * inter + 4 * h)  # input, post_attention, post_norm1, post_norm2
    m = resolve_model("naver-hyperclovax/HyperCLOVAX-SEED-Think-14B")
    assert count_params(m) == m.params == total == 14_748_112_896


def test_flexolmo_is_olmoe_with_seven_experts():
    h, inter = 4096, 11008
    attn = 4 * h * h + 2 * h  # q, k, v, o and q_norm / k_norm over the full width
    moe = 7 * 3 * h * inter + 7 * h  # experts and router
    m = resolve_model("allenai/FlexOlmo-7x7B-1T")
    assert count_params(m) == 2 * 100352 * h + h + 32 * (attn + moe + 2 * h) == m.params


def test_paligemma2_counts_gemma2_norms():
    m = resolve_model("google/paligemma2-3b-pt-448")
    g = resolve_model("google/gemma-2-2b-it")
    text = count_params(m) - m.vision_params
    assert text == count_params(g) + (257216 - 256000) * 2304  # Gemma 2 2B with PaliGemma's vocabulary
    assert m.params == count_params(m) == 3_033_127_152
    assert resolve_model("google/paligemma2-3b-ft-docci-448").name == m.name


def whisper_encoder(d: int = 1280, layers: int = 32, ffn: int = 5120, mel: int = 128, out: int = 3584) -> int:
    conv = mel * d * 3 + d + d * d * 3 + d
    layer = 3 * lin(d, d) + d * d + 4 * d + lin(d, ffn) + lin(ffn, d)  # k_proj without bias
    return conv + layers * layer + 2 * d + lin(d, out) + 2 * out  # ln_post, proj, audio_bos_eos_token


def test_qwen25_omni_thinker_by_hand():
    m = resolve_model("Qwen/Qwen2.5-Omni-7B")
    vl = resolve_model("Qwen/Qwen2.5-VL-7B-Instruct")
    assert m.vision_params == vl.vision_params + whisper_encoder() == 676_550_144 + 639_647_232
    assert m.params == count_params(resolve_model("Qwen/Qwen2.5-7B-Instruct")) + m.vision_params == 8_931_813_888
    plan = evaluate(site_from_argv(["vllm", "serve", "Qwen/Qwen2.5-Omni-7B", "--max-model-len", "8192"]),
                    Target(gpu="H100", engine_version="0.33.0")).plan
    assert plan.kv_bytes_per_token == 28 * 2 * 4 * 128 * 2


def test_qwen25_omni_config_json_serves_the_thinker():
    vision = dict(resolve_model("Qwen/Qwen2.5-Omni-7B").vision)
    vision.pop("audio")
    cfg = {"architectures": ["Qwen2_5OmniModel"], "model_type": "qwen2_5_omni",
           "thinker_config": {
               "text_config": {"hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28,
                               "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064,
                               "max_position_embeddings": 32768},
               "vision_config": {**vision, "model_type": "qwen2_5_omni_vision_encoder"},
               "audio_config": {"d_model": 1280, "encoder_layers": 32, "encoder_ffn_dim": 5120, "num_mel_bins": 128,
                                "output_dim": 3584}},
           "talker_config": {"hidden_size": 896, "num_hidden_layers": 24}}
    assert from_config(cfg, "x").params == 8_931_813_888


def test_ollama_library_names_of_this_round():
    from servefit.engines.ollama.config import resolve_tag

    got = {tag: resolve_tag(tag)[:2] for tag in ("minicpm-v", "deepseek-ocr:3b", "wizard-math:7b", "wizard-math:13b")}
    assert got == {"minicpm-v": ("openbmb/MiniCPM-V-2_6", "Q4_K_M"), "deepseek-ocr:3b": ("deepseek-ai/DeepSeek-OCR", "F16"),
                   "wizard-math:7b": ("mistralai/Mistral-7B-v0.1", "Q4_0"),
                   "wizard-math:13b": ("meta-llama/Llama-2-13b-hf", "Q4_0")}
