"""Module traits and encoders added with issue 13's fourth-round checkpoints: HyperCLOVAX's post
norms, FlexOlmo's OLMoE layout, PaliGemma 2's Gemma 2 norms under the paligemma model_type and
Qwen2.5-Omni's thinker (Qwen2.5-VL tower plus a Whisper-style audio encoder), each by hand."""

from __future__ import annotations

from servefit.models import count_params, resolve_model
from servefit.models.config_json import from_config
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


def gemma3n_text(layers: int, inter: int, shared: int) -> int:
    h, ple, alt, rank = 2048, 256, 4, 64
    n = 262400 * h + 262144 * layers * ple + h * layers * ple + ple + 2 * (alt - 1) * h * h + h  # tied embeddings
    for i in range(layers):
        n += 2 * h * 8 * 256 + 256 + (2 * h * 2 * 256 + 256 if i < layers - shared else 0)  # q, o, q_norm; k, v, k_norm
        n += 3 * h * inter + 4 * h  # MLP, four norms
        n += h + alt * alt + alt ** 3 + h * alt + h  # AltUp: output scale, correction / prediction coefs, router, norm
        n += 2 * h * rank + h + 2 * h * ple + h  # LAuReL, per-layer input gate / projection / norm
    return n


def test_gemma3n_e2b_by_hand():
    m = resolve_model("google/gemma-3n-E2B-it")
    assert count_params(m) - m.vision_params == gemma3n_text(30, 8192, 10)
    assert m.params == count_params(m) == 5_439_438_272 - 10 * (2 * 2048 * 512 + 256)  # the stored shared k / v
    e4b = resolve_model("google/gemma-3n-E4B-it")
    # the two records leave the same towers after their text models (with every layer's k / v)
    assert 7_849_978_192 - gemma3n_text(35, 16384, 0) == 5_439_438_272 - gemma3n_text(30, 8192, 0) == e4b.vision_params


def test_gemma3n_kv_skips_the_shared_layers():
    plan = evaluate(site_from_argv(["vllm", "serve", "google/gemma-3n-E4B-it", "--max-model-len", "8192"]),
                    Target(gpu="L4", engine_version="0.33.0")).plan
    assert plan.kv_bytes_per_token == 20 * 2 * 2 * 256 * 2  # 35 layers, the last 15 read earlier caches
    assert plan.detail.kv_groups >= 2  # sliding (512) and full layers in their own groups


def test_gemma3n_config_json():
    cfg = {"architectures": ["Gemma3nForConditionalGeneration"], "model_type": "gemma3n",
           "text_config": {"model_type": "gemma3n_text", "vocab_size": 262400, "hidden_size": 2048,
                           "intermediate_size": [8192] * 30, "num_hidden_layers": 30, "num_attention_heads": 8,
                           "num_key_value_heads": 2, "head_dim": 256, "max_position_embeddings": 32768,
                           "sliding_window": 512, "num_kv_shared_layers": 10, "vocab_size_per_layer_input": 262144,
                           "hidden_size_per_layer_input": 256, "altup_num_inputs": 4, "laurel_rank": 64,
                           "layer_types": ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention"
                                           for i in range(30)]},
           "vision_config": {"architecture": "mobilenetv5_300m_enc", "hidden_size": 2048}}
    got, want = from_config(cfg, "x"), resolve_model("google/gemma-3n-E2B-it")
    assert (got.params, got.kinds(), got.tie_word_embeddings) == (want.params, want.kinds(), True)


def test_arctic_moe_beside_a_dense_residual_mlp_by_hand():
    h, moe = 7168, 4864
    attn = 2 * h * 56 * 128 + 2 * h * 8 * 128
    per = attn + 128 * 3 * h * moe + h * 128 + 3 * h * h + 3 * h  # experts, router, residual MLP of hidden_size, 3 norms
    m = resolve_model("Snowflake/snowflake-arctic-instruct")
    assert count_params(m) == 2 * 32000 * h + h + 35 * per == m.params == 478_584_608_768


def test_dbrx_config_json_reads_its_nested_configs():
    cfg = {"architectures": ["DbrxForCausalLM"], "model_type": "dbrx", "d_model": 6144, "n_heads": 48, "n_layers": 40,
           "max_seq_len": 32768, "vocab_size": 100352, "tie_word_embeddings": False,
           "attn_config": {"kv_n_heads": 8, "clip_qkv": 8, "rope_theta": 500000},
           "ffn_config": {"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4}}
    m = from_config(cfg, "x")
    h = 6144
    per = h * (h + 2 * 8 * 128) + h * h + 16 * 3 * h * 10752 + 16 * h + 2 * h  # Wqkv, out_proj, experts, router, norms
    assert m.params == 2 * 100352 * h + h + 40 * per == resolve_model("databricks/dbrx-instruct").params
    plan = evaluate(site_from_argv(["vllm", "serve", "databricks/dbrx-instruct", "--tensor-parallel-size", "8",
                                    "--max-model-len", "8192"]), Target(gpu="H100", engine_version="0.33.0")).plan
    assert plan.kv_bytes_per_token == 40 * 2 * 1 * 128 * 2  # 8 KV heads over TP8
