"""Parameter layouts beyond the Llama one (models/arch_classic.py, arch_hybrid.py, encoders.py,
the LLaVA towers in vision.py), each checked against a count written out by hand from the
Hugging Face module list, and how the engines plan the new kinds of model."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from servefit.core import UsageError
from servefit.models import count_params, resolve_model
from servefit.models.arch_hybrid import mamba2_mixer
from servefit.pipeline import Target, evaluate, site_from_argv


def ln(h: int) -> int:
    return 2 * h


def biased(i: int, o: int) -> int:
    return i * o + o


# --- classic decoders ---------------------------------------------------------------------------

def test_opt_125m_by_hand():
    h, v, layers, ffn = 768, 50272, 12, 3072
    layer = 4 * biased(h, h) + ln(h) + biased(h, ffn) + biased(ffn, h) + ln(h)
    total = v * h + (2048 + 2) * h + ln(h) + layers * layer  # tied lm_head; positions offset by 2
    assert total == 125_239_296
    m = resolve_model("facebook/opt-125m")
    assert count_params(m) == total == m.params


def test_opt_350m_projects_its_512_wide_embeddings_and_has_no_final_norm():
    h, v, layers, ffn, wep = 1024, 50272, 24, 4096, 512
    layer = 4 * biased(h, h) + ln(h) + biased(h, ffn) + biased(ffn, h) + ln(h)
    total = v * wep + 2050 * h + h * wep + wep * h + layers * layer
    assert count_params(resolve_model("facebook/opt-350m")) == total == 331_196_416


def test_gpt2_by_hand():
    h, v, layers = 768, 50257, 12
    layer = ln(h) + biased(h, 3 * h) + biased(h, h) + ln(h) + biased(h, 4 * h) + biased(4 * h, h)
    total = v * h + 1024 * h + layers * layer + ln(h)
    assert count_params(resolve_model("gpt2")) == total == 124_439_808
    assert resolve_model("gpt2").name == "openai-community/gpt2"


def test_pythia_counts_and_the_hub_buffers():
    h, v, layers = 512, 50304, 6
    layer = ln(h) + ln(h) + biased(h, 3 * h) + biased(h, h) + biased(h, 4 * h) + biased(4 * h, h)
    total = 2 * v * h + layers * layer + ln(h)  # untied embed_in / embed_out
    m = resolve_model("EleutherAI/pythia-70m-deduped")
    assert m.name == "EleutherAI/pythia-70m" and count_params(m) == total == m.params == 70_426_624


def test_gptj_and_bloom_by_hand():
    h, v, layers = 4096, 50400, 28
    layer = ln(h) + 4 * h * h + biased(h, 4 * h) + biased(4 * h, h)  # bias-free attention, one ln_1
    assert count_params(resolve_model("EleutherAI/gpt-j-6b")) == v * h + v * h + v + layers * layer + ln(h)
    h, v, layers = 1024, 250880, 24
    layer = ln(h) + biased(h, 3 * h) + biased(h, h) + ln(h) + biased(h, 4 * h) + biased(4 * h, h)
    total = v * h + ln(h) + layers * layer + ln(h)  # word_embeddings_layernorm, ln_f, tied head
    m = resolve_model("bigscience/bloomz-560m")
    assert m.name == "bigscience/bloom-560m" and count_params(m) == total == m.params == 559_214_592


# --- encoders -------------------------------------------------------------------------------------

def test_bert_xlmr_nomic_mpnet_by_hand():
    def bert(v: int, pos: int, types: int, h: int, layers: int, inter: int) -> int:
        layer = 4 * biased(h, h) + ln(h) + biased(h, inter) + biased(inter, h) + ln(h)
        return (v + pos + types) * h + ln(h) + layers * layer + biased(h, h)  # + pooler

    assert count_params(resolve_model("BAAI/bge-large-en-v1.5")) == bert(30522, 512, 2, 1024, 24, 4096) == 335_141_888
    assert count_params(resolve_model("BAAI/bge-m3")) == bert(250002, 8194, 1, 1024, 24, 4096)
    assert count_params(resolve_model("sentence-transformers/all-MiniLM-L6-v2")) == bert(30522, 512, 2, 384, 6, 1536)
    mpnet = bert(30527, 514, 0, 768, 12, 3072) + 32 * 12  # relative_attention_bias
    assert count_params(resolve_model("sentence-transformers/all-mpnet-base-v2")) == mpnet
    h = 768
    nomic = (30528 + 2) * h + ln(h) + 12 * (3 * h * h + h * h + 3 * h * 3072 + 2 * ln(h))
    assert count_params(resolve_model("nomic-ai/nomic-embed-text-v1")) == nomic == 136_731_648


def test_e5_mistral_is_a_decoder_without_lm_head():
    m = resolve_model("intfloat/e5-mistral-7b-instruct")
    assert count_params(m) == m.params == 7_241_732_096 - 32000 * 4096
    assert m.kinds() == ["full"] * 32


# --- hybrids -----------------------------------------------------------------------------------------

def test_mamba2_mixer_by_hand():
    m = resolve_model("nvidia/Nemotron-H-8B-Base-8K")
    h, heads, hd, groups, state, kernel = 4096, 128, 64, 8, 128, 4
    d_inner = heads * hd
    conv = d_inner + 2 * groups * state
    in_proj = h * (2 * d_inner + 2 * groups * state + heads)
    mixer = in_proj + conv * kernel + conv + 3 * heads + d_inner + d_inner * h  # conv w+b, dt/A/D, norm, out
    assert mamba2_mixer(m) == mixer
    kinds = m.kinds()
    assert (kinds.count("mamba"), kinds.count("full"), kinds.count("none")) == (24, 4, 24)
    attn = 2 * h * 32 * 128 + 2 * h * 8 * 128
    total = 2 * 131072 * h + h + 52 * h + 24 * mixer + 4 * attn + 24 * 2 * h * 21504
    assert count_params(m) == total == m.params == 8_100_852_736
    assert m.mamba["ssm_state_elems"] == heads * hd * state and m.mamba["conv_state_elems"] == 3 * conv


def test_granite4_hybrid_moe_and_lfm2_short_conv():
    g = resolve_model("ibm-granite/granite-4.0-h-tiny")
    assert g.kinds().count("full") == 4 and g.num_experts == 64
    assert count_params(g) == g.params == 6_939_037_248
    lfm = resolve_model("LiquidAI/LFM2-350M")
    h, inter = 1024, 4608
    conv = 3 * h * h + 3 * h + h * h  # in_proj, depthwise conv (3 taps), out_proj
    attn = 2 * h * h + 2 * h * 512 + 2 * 64  # q/o, k/v (8 KV heads of 64), q/k layernorms
    total = 65536 * h + h + 10 * conv + 6 * attn + 16 * (3 * h * inter + 2 * h)
    assert count_params(lfm) == total == lfm.params == 354_483_968
    assert lfm.mamba["conv_state_elems"] == 2 * h and lfm.mamba["ssm_state_elems"] == 0
    assert resolve_model("LiquidAI/LFM2.5-1.2B-Instruct").name == "LiquidAI/LFM2-1.2B"


def test_falcon_h1_runs_attention_and_mamba_in_every_layer():
    m = resolve_model("tiiuae/Falcon-H1-0.5B-Base")
    assert m.kinds() == ["full"] * 36
    h = 1024
    attn = 2 * h * 8 * 64 + 2 * h * 2 * 64
    layer = 2 * h + attn + mamba2_mixer(m, norm=False) + 3 * h * 2048
    assert count_params(m) == 2 * 32784 * h + h + 36 * layer == m.params == 521_411_104


def test_olmo2_norms_span_all_heads():
    m = resolve_model("allenai/OLMo-2-1124-7B")
    h = 4096
    layer = 4 * h * h + 2 * h + 3 * h * 11008 + 2 * h  # q_norm / k_norm over 32 x 128 each
    assert count_params(m) == 2 * 100352 * h + h + 32 * layer == 7_298_617_344


# --- LLaVA towers ----------------------------------------------------------------------------------

def test_llava_clip_tower_projector_and_newline():
    v, t = 1024, 4096
    vit = 4 * biased(v, v) + biased(v, 4096) + biased(4096, v) + 2 * ln(v)
    clip = 3 * 14 * 14 * v + (576 + 1) * v + v + 2 * ln(v) + 24 * vit  # patch, positions, class, pre/post LN
    proj = biased(v, t) + biased(t, t)
    assert resolve_model("llava-hf/llava-1.5-7b-hf").vision_params == clip + proj == 324_487_168
    assert resolve_model("llava-hf/llava-v1.6-vicuna-7b-hf").vision_params == clip + proj + t  # image_newline
    ov = resolve_model("llava-hf/llava-onevision-qwen2-0.5b-ov-hf")
    assert count_params(ov) == ov.params == 893_675_552


# --- planning ----------------------------------------------------------------------------------------

def plan(*argv: str):
    return evaluate(site_from_argv(list(argv)), Target(gpu="H100")).plan


def test_vllm_plans_an_encoder_without_kv_cache_or_profiling():
    p = plan("vllm", "serve", "BAAI/bge-m3")
    assert p.outcome == "started"
    assert p.memory.kv_cache == 0 and p.memory.activation_peak == 0 and p.kv_bytes_per_token == 0
    assert not any(f.code == "VLLM019" for f in p.findings)
    assert "attention-free model (encoder-only pooling): no KV cache is allocated" in p.messages


def test_vllm_hybrids_cache_only_their_attention_layers():
    assert plan("vllm", "serve", "ibm-granite/granite-4.0-h-tiny").kv_bytes_per_token == 4 * 2 * 4 * 128 * 2
    assert plan("vllm", "serve", "LiquidAI/LFM2-1.2B").kv_bytes_per_token == 6 * 2 * 8 * 64 * 2
    assert plan("vllm", "serve", "nvidia/NVIDIA-Nemotron-Nano-9B-v2").kv_bytes_per_token == 4 * 2 * 8 * 128 * 2
    assert plan("vllm", "serve", "tiiuae/Falcon-H1-0.5B-Instruct").kv_bytes_per_token == 36 * 2 * 2 * 64 * 2


def test_sglang_pools_every_encoder_layer_and_tgi_refuses_encoders():
    p = plan("python3", "-m", "sglang.launch_server", "--model-path", "BAAI/bge-m3", "--is-embedding")
    assert p.kv_bytes_per_token == 24 * 2 * 16 * 64 * 2
    with pytest.raises(UsageError, match="text-generation-inference cannot serve BAAI/bge-m3"):
        plan("text-generation-launcher", "--model-id", "BAAI/bge-m3")


def test_estimate_opt_125m_end_to_end():
    out = subprocess.run([sys.executable, "-m", "servefit", "estimate", "--gpu", "H100", "--format", "json", "--",
                          "vllm", "serve", "facebook/opt-125m"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["outcome"] == "started" and doc["model"]["params"] == 125_239_296
    assert doc["kv_bytes_per_token"] == 12 * 2 * 768 * 2  # float16 checkpoint, 12 layers of 12 x 64
    assert doc["max_model_len"] == 2048


# --- config.json (local checkpoints, --model-config, the model lock) -------------------------------

CONFIGS = {
    "facebook/opt-125m": {"architectures": ["OPTForCausalLM"], "model_type": "opt", "hidden_size": 768,
                          "num_hidden_layers": 12, "num_attention_heads": 12, "ffn_dim": 3072, "vocab_size": 50272,
                          "max_position_embeddings": 2048, "word_embed_proj_dim": 768, "do_layer_norm_before": True,
                          "torch_dtype": "float16"},
    "facebook/opt-350m": {"architectures": ["OPTForCausalLM"], "model_type": "opt", "hidden_size": 1024,
                          "num_hidden_layers": 24, "num_attention_heads": 16, "ffn_dim": 4096, "vocab_size": 50272,
                          "max_position_embeddings": 2048, "word_embed_proj_dim": 512, "do_layer_norm_before": False},
    "openai-community/gpt2": {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 768, "n_layer": 12,
                              "n_head": 12, "n_inner": None, "n_positions": 1024, "vocab_size": 50257},
    "BAAI/bge-large-en-v1.5": {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 1024,
                               "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096,
                               "vocab_size": 30522, "max_position_embeddings": 512, "type_vocab_size": 2},
    "nomic-ai/nomic-embed-text-v1.5": {"architectures": ["NomicBertModel"], "model_type": "nomic_bert", "n_embd": 768,
                                       "n_layer": 12, "n_head": 12, "n_inner": 3072, "n_positions": 2048,
                                       "vocab_size": 30528, "type_vocab_size": 2},
    "LiquidAI/LFM2-1.2B": {"architectures": ["Lfm2ForCausalLM"], "model_type": "lfm2", "hidden_size": 2048,
                           "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
                           "block_ff_dim": 12288, "block_auto_adjust_ff_dim": True, "block_ffn_dim_multiplier": 1.0,
                           "block_multiple_of": 256, "conv_L_cache": 3, "vocab_size": 65536,
                           "max_position_embeddings": 128000, "tie_word_embeddings": True,
                           "layer_types": ["conv", "conv", "full_attention", "conv", "conv", "full_attention", "conv",
                                           "conv", "full_attention", "conv", "full_attention", "conv",
                                           "full_attention", "conv", "full_attention", "conv"]},
    "nvidia/NVIDIA-Nemotron-Nano-9B-v2": {
        "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 4480,
        "num_hidden_layers": 56, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
        "intermediate_size": 15680, "vocab_size": 131072, "max_position_embeddings": 131072,
        "hybrid_override_pattern": "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-",
        "mamba_num_heads": 128, "mamba_head_dim": 80, "n_groups": 8, "ssm_state_size": 128, "conv_kernel": 4,
        "tie_word_embeddings": False},
    "ibm-granite/granite-4.0-h-tiny": {
        "architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid", "hidden_size": 1536,
        "num_hidden_layers": 40, "num_attention_heads": 12, "num_key_value_heads": 4, "intermediate_size": 512,
        "shared_intermediate_size": 1024, "num_local_experts": 64, "num_experts_per_tok": 6, "vocab_size": 100352,
        "max_position_embeddings": 131072, "tie_word_embeddings": True, "mamba_n_heads": 48, "mamba_d_head": 64,
        "mamba_n_groups": 1, "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_expand": 2,
        "layer_types": ["mamba"] * 5 + ["attention"] + ["mamba"] * 9 + ["attention"] + ["mamba"] * 9 + ["attention"]
        + ["mamba"] * 9 + ["attention"] + ["mamba"] * 4},
    "tiiuae/Falcon-H1-0.5B-Instruct": {
        "architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1", "hidden_size": 1024,
        "num_hidden_layers": 36, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
        "intermediate_size": 2048, "vocab_size": 32784, "max_position_embeddings": 16384,
        "tie_word_embeddings": False, "mamba_d_ssm": 1536, "mamba_n_heads": 24, "mamba_d_head": 64,
        "mamba_n_groups": 1, "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_rms_norm": False},
    "intfloat/e5-mistral-7b-instruct": {
        "architectures": ["MistralModel"], "model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000,
        "max_position_embeddings": 32768},
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_config_json_counts_and_kinds_match_the_catalog(name):
    from servefit.models.config_json import from_config

    got = from_config(CONFIGS[name], name)
    want = resolve_model(name)
    assert got.params == want.params
    assert got.kinds() == want.kinds() or got.kinds().count("full") == want.kinds().count("full")
    assert (got.intermediate_size, got.head_dim) == (want.intermediate_size, want.head_dim)
    if want.mamba:
        assert got.mamba["conv_state_elems"] == want.mamba["conv_state_elems"]
        assert got.mamba["ssm_state_elems"] == want.mamba["ssm_state_elems"]


def test_olmo1_layernorms_hold_no_weights():
    m = resolve_model("allenai/OLMo-1B-hf")
    h = 2048
    assert count_params(m) == 50304 * h + 16 * (4 * h * h + 3 * h * 8192) == 1_176_764_416 == m.params


def test_reranker_heads():
    h = 1024
    layer = 4 * biased(h, h) + ln(h) + biased(h, 4096) + biased(4096, h) + ln(h)
    enc = (250002 + 8194 + 1) * h + ln(h) + 24 * layer  # bge-m3's encoder without its pooler
    assert count_params(resolve_model("BAAI/bge-reranker-v2-m3")) == enc + biased(h, h) + biased(h, 1)
    h = 384
    layer = 4 * biased(h, h) + ln(h) + biased(h, 1536) + biased(1536, h) + ln(h)
    bert = (30522 + 512 + 2) * h + ln(h) + 6 * layer + biased(h, h)  # with the pooler
    assert count_params(resolve_model("cross-encoder/ms-marco-MiniLM-L-6-v2")) == bert + biased(h, 1)
    assert plan("vllm", "serve", "BAAI/bge-reranker-v2-m3").memory.kv_cache == 0


def test_falcon_h1_plan_says_its_mamba_state_is_not_counted():
    p = plan("vllm", "serve", "tiiuae/Falcon-H1-0.5B-Instruct")
    assert "recurrent-state (Mamba / linear attention) layers are not counted in the KV cache" in p.assumptions


@pytest.mark.parametrize("tag,name,quant", [
    ("granite3.3", "ibm-granite/granite-3.3-8b-instruct", "Q4_K_M"),
    ("smollm2:360m", "HuggingFaceTB/SmolLM2-360M-Instruct", "Q4_K_M"),
    ("nomic-embed-text", "nomic-ai/nomic-embed-text-v1.5", "F16"),
    ("all-minilm:33m", "sentence-transformers/all-MiniLM-L12-v2", "F16"),
    ("falcon3:10b", "tiiuae/Falcon3-10B-Instruct", "Q4_K_M"),
])
def test_ollama_tags_of_the_new_families(tag, name, quant):
    from servefit.engines.ollama.config import resolve_tag

    got, q, _ = resolve_tag(tag)
    assert (resolve_model(got).name, q) == (name, quant)
