"""Model catalog, config.json parsing, parameter counting and the resolution order."""

from __future__ import annotations

import json
import re
import struct
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from servefit import data
from servefit.core import UsageError
from servefit.models import all_models, catalog_entries, count_params, nearest, resolve_model
from servefit.models.checkpoint_files import params_from_safetensors
from servefit.models.config_json import from_config
from servefit.models.spec import ModelSpec
from servefit.models.vision import count_vision_params

SCHEMA = Path(data.__file__).parent.parent / "schemas" / "models.schema.json"
RAW: list[dict[str, Any]] = catalog_entries.entries()
BY_NAME = {m.name: m for m in all_models()}


def spec(name: str) -> ModelSpec:
    return BY_NAME[name]


# --- the catalog as data ----------------------------------------------------------------------

def test_catalog_validates_against_schema():
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = [f"{list(e.path)}: {e.message}" for e in jsonschema.Draft202012Validator(schema).iter_errors(RAW)]
    assert errors == []


def test_catalog_has_at_least_50_entries_with_unique_ids():
    assert len(RAW) >= 50
    ids = [rid.lower() for e in RAW for rid in [e["name"], *e.get("aliases", [])]]
    assert len(ids) == len(set(ids))


def test_line_scan_index_matches_the_parsed_catalog():
    chunks = catalog_entries._chunks()
    assert [(n, list(a)) for n, a, _ in chunks] == [(e["name"], e.get("aliases", [])) for e in RAW]
    assert all(catalog_entries._entry(i) == e for i, e in enumerate(RAW))


@pytest.mark.parametrize("entry", RAW, ids=[e["name"] for e in RAW])
def test_param_count_matches_architecture(entry):
    """The guard that the catalog numbers are real and the counting right: every entry's
    checkpoint total within 0.5% of the count from its architecture."""
    m = spec(entry["name"])
    computed = count_params(m)
    assert abs(computed - m.params) / m.params <= 0.005, (computed, m.params)


def test_largest_param_deviation_is_tiny():
    worst = max(abs(count_params(m) - m.params) / m.params for m in BY_NAME.values())
    assert worst < 1e-4  # Command-R+'s per-head q/k norms (0.85M of 104B) are the only gap


def test_hf_totals_differ_by_a_tied_lm_head_or_buffers_exactly():
    """hf_params (the raw Hub count) differs from params by a tied lm_head stored twice, or by
    buffers saved with the weights: Pythia's per-layer causal mask and rotary inv_freq, BERT's
    position_ids, Kimi-K3's over-wide A_log vectors; nothing else."""
    for e in RAW:
        if "hf_params" not in e:
            continue
        m = spec(e["name"])
        extra = e["hf_params"] - m.params
        if m.model_type == "gpt_neox":
            rot = int(m.head_dim * m.layout["rotary_pct"]) // 2
            assert extra == m.num_hidden_layers * (m.max_position_embeddings ** 2 + rot), e["name"]
        elif m.model_type in ("bert", "xlm-roberta"):
            assert extra == m.max_position_embeddings, e["name"]
        elif m.model_type in ("gpt2", "gptj"):  # GPT-2 and GPT-J save each layer's causal mask (h.N.attn.bias)
            assert extra == m.num_hidden_layers * m.max_position_embeddings ** 2, e["name"]
        elif m.model_type == "gpt_neo":  # GPT-Neo saves the causal mask of its global layers only
            assert extra == m.kinds().count("full") * m.max_position_embeddings ** 2, e["name"]
        elif m.model_type == "kimi_k3":  # A_log stored head_dim wide per KDA layer, narrowed to the heads on load
            # (SGLang kimi_k3.py _a_log_weight_loader: "Checkpoint stores A_log as [head_dim]")
            wide = m.mamba["value_head_dim"] - m.mamba["num_value_heads"]
            assert extra == m.kinds().count("linear") * wide == 69 * 32, e["name"]
        else:
            assert m.tie_word_embeddings and extra == m.vocab_size * m.hidden_size, e["name"]


_BARE_HUB_CONFIG = re.compile(r"^(https?://)?huggingface\.co/[^ ;]+ config\.json( \([^)]*\))?$")
_DOCUMENT = re.compile(
    r"https?://"  # a URL
    r"|search.index files? \d+"  # a file of the public-code index, re-readable by its id
    r"|[\w.-]+/[\w.-]+[@ ][0-9a-f]{7,}"  # owner/repo at a commit
    r"|\b(transformers|litgpt|llmfit|mteb|vllm|sglang|llama\.cpp)\b[^;]*?\b\d+\.\d+(\.\d+)?\b"  # package + version
    r"|safetensors metadata|model card|public (test )?fixture|quoted verbatim|as quoted",
    re.I,
)


@pytest.mark.parametrize("entry", RAW, ids=[e["name"] for e in RAW])
def test_source_names_a_document_that_was_read(entry):
    """Provenance: `source` names what was read (a URL, a repository file or search-index file,
    or a package with its version and file), never only the Hub config.json it claims to mirror."""
    src = entry["source"].strip()
    parts = [p.strip() for p in src.split(";") if p.strip()]
    assert not all(_BARE_HUB_CONFIG.match(p) for p in parts), src
    assert _DOCUMENT.search(src), src


def test_source_rule_rejects_a_bare_hub_reference():
    assert _BARE_HUB_CONFIG.match("huggingface.co/01-ai/Yi-9B config.json")
    assert _BARE_HUB_CONFIG.match("huggingface.co/x/y config.json (Mistral-7B-v0.3 layout)")
    assert not _DOCUMENT.search("huggingface.co/01-ai/Yi-9B config.json")
    assert _DOCUMENT.search("litgpt 0.5.13 litgpt/config.py (Falcon3-1B)")
    assert _DOCUMENT.search("llmfit 1.1.17 (PyPI wheel) embedded data/hf_models.json")


def test_brief_reference_counts():
    assert spec("meta-llama/Llama-3.1-8B-Instruct").params == 8_030_261_248
    assert spec("meta-llama/Llama-3.1-70B-Instruct").params == 70_553_706_496
    assert spec("mistralai/Mistral-7B-v0.1").params == 7_241_732_096
    assert spec("Qwen/Qwen2.5-7B-Instruct").params == 7_615_616_512
    assert spec("deepseek-ai/DeepSeek-V3").params == 671_026_419_200
    assert round(spec("openai/gpt-oss-20b").params / 1e9, 1) == 20.9
    assert round(spec("openai/gpt-oss-120b").params / 1e9, 1) == 116.8


def test_vision_towers_are_counted():
    # Gemma 3: SigLIP-So400m (416.9M) + projector; Llama 4: 34-layer ViT + pixel-shuffle adapter
    assert spec("google/gemma-3-4b-it").vision_params == 419_816_304
    assert spec("meta-llama/Llama-4-Scout-17B-16E-Instruct").vision_params == 871_932_416
    assert spec("mistralai/Mistral-Small-3.1-24B-Instruct-2503").vision_params == 438_958_080
    assert spec("google/gemma-3-1b-it").vision_params == 0


# --- exact facts --------------------------------------------------------------------------------

def test_llama31_8b_facts():
    m = resolve_model("meta-llama/Llama-3.1-8B-Instruct")
    assert (m.num_hidden_layers, m.num_key_value_heads, m.head_dim) == (32, 8, 128)
    assert (m.vocab_size, m.max_position_embeddings) == (128256, 131072)
    assert m.rope_scaling is not None and m.rope_scaling["rope_type"] == "llama3"
    assert m.rope_scaling["factor"] == 8.0 and m.original_max_position_embeddings == 8192
    assert m.resolved_from == "catalog" and m.kinds() == ["full"] * 32 and not m.tie_word_embeddings


def test_deepseek_v3_facts():
    m = resolve_model("deepseek-ai/DeepSeek-V3")
    assert m.is_mla and m.kv_lora_rank == 512 and m.qk_rope_head_dim == 64 and m.q_lora_rank == 1536
    assert m.num_hidden_layers == 61 and m.first_k_dense_replace == 3
    assert (m.num_experts, m.num_shared_experts, m.num_experts_per_tok) == (256, 1, 8)
    assert m.head_dim == 192 and m.quantization and m.quantization["quant_method"] == "fp8"


def test_gemma3_27b_facts():
    m = resolve_model("google/gemma-3-27b-it")
    kinds = m.kinds()
    assert m.num_hidden_layers == 62 and len(kinds) == 62
    assert kinds.count("sliding") == 52 and kinds.count("full") == 10
    assert [i for i, k in enumerate(kinds) if k == "full"] == [5, 11, 17, 23, 29, 35, 41, 47, 53, 59]
    assert m.sliding_window == 1024 and m.multimodal
    assert spec("google/gemma-3-1b-it").sliding_window == 512


def test_gpt_oss_20b_facts():
    m = resolve_model("openai/gpt-oss-20b")
    assert m.layer_types == ["sliding", "full"] * 12 and m.sliding_window == 128
    assert (m.num_experts, m.num_experts_per_tok) == (32, 4)
    assert m.quantization == {"quant_method": "mxfp4"}


def test_gemma2_llama4_qwen3next_patterns():
    assert spec("google/gemma-2-9b-it").layer_types[:4] == ["sliding", "full", "sliding", "full"]
    scout = spec("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert scout.attention_chunk_size == 8192
    assert scout.kinds().count("full") == 12 and scout.kinds()[3] == "full" and scout.kinds()[0] == "chunked"
    assert spec("meta-llama/Llama-4-Maverick-17B-128E-Instruct").moe_layer_step == 2
    nxt = spec("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert nxt.kinds().count("linear") == 36 and nxt.kinds().count("full") == 12
    assert nxt.mamba["ssm_state_elems"] == 32 * 128 * 128 and nxt.mamba["conv_state_elems"] == 3 * 8192
    assert spec("mistralai/Mistral-7B-v0.1").kinds() == ["sliding"] * 32
    assert spec("meta-llama/Llama-3.2-1B-Instruct").tie_word_embeddings


def test_catalog_specs_are_fresh_copies():
    a = resolve_model("openai/gpt-oss-20b")
    a.assumptions.append("x")
    a.layer_types.append("full")
    assert a.quantization is not None
    a.quantization["bits"] = 3
    b = resolve_model("openai/gpt-oss-20b")
    assert b.assumptions == [] and len(b.layer_types) == 24 and b.quantization == {"quant_method": "mxfp4"}


# --- name heuristics ----------------------------------------------------------------------------

@pytest.mark.parametrize("ref,name,quant", [
    ("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "meta-llama/Llama-3.1-8B-Instruct",
     {"quant_method": "awq", "bits": 4, "group_size": 128}),
    ("Qwen/Qwen2.5-7B-Instruct-AWQ", "Qwen/Qwen2.5-7B-Instruct",
     {"quant_method": "awq", "bits": 4, "group_size": 128}),
    ("neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8", "meta-llama/Llama-3.1-70B-Instruct", {"quant_method": "fp8"}),
    ("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8-dynamic", "meta-llama/Llama-3.1-8B-Instruct",
     {"quant_method": "fp8"}),
    ("unsloth/Llama-3.2-3B-Instruct-bnb-4bit", "meta-llama/Llama-3.2-3B-Instruct",
     {"quant_method": "bitsandbytes", "bits": 4}),
    ("unsloth/DeepSeek-R1-Distill-Llama-8B-unsloth-bnb-4bit", "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
     {"quant_method": "bitsandbytes", "bits": 4}),
    ("Qwen/Qwen2.5-14B-Instruct-GPTQ-Int4", "Qwen/Qwen2.5-14B-Instruct",
     {"quant_method": "gptq", "bits": 4, "group_size": 128}),
    ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8", "Qwen/Qwen2.5-7B-Instruct",
     {"quant_method": "gptq", "bits": 8, "group_size": 128}),
    ("TheBloke/Llama-2-7B-Chat-GPTQ", "meta-llama/Llama-2-7b-hf",
     {"quant_method": "gptq", "bits": 4, "group_size": 128}),
    ("TheBloke/Mixtral-8x7B-Instruct-v0.1-AWQ", "mistralai/Mixtral-8x7B-Instruct-v0.1",
     {"quant_method": "awq", "bits": 4, "group_size": 128}),
    ("RedHatAI/Llama-3.3-70B-Instruct-quantized.w4a16", "meta-llama/Llama-3.3-70B-Instruct",
     {"quant_method": "compressed-tensors", "bits": 4, "group_size": 128}),
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8", "meta-llama/Llama-3.1-8B-Instruct",
     {"quant_method": "compressed-tensors", "bits": 8}),
    ("neuralmagic/Meta-Llama-3.1-8B-Instruct-W4A16", "meta-llama/Llama-3.1-8B-Instruct",
     {"quant_method": "compressed-tensors", "bits": 4, "group_size": 128}),
    ("mlx-community/Llama-3.2-3B-Instruct-MLX-4bit", "meta-llama/Llama-3.2-3B-Instruct",
     {"quant_method": "mlx", "bits": 4, "group_size": 64}),
    ("bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "meta-llama/Llama-3.1-8B-Instruct", {"quant_method": "gguf"}),
    ("unsloth/gemma-3-27b-it-Q4_K_M", "google/gemma-3-27b-it",
     {"quant_method": "gguf", "type": "Q4_K_M", "bits": 4}),
    ("Qwen/Qwen3-30B-A3B-GPTQ-Int4", "Qwen/Qwen3-30B-A3B", {"quant_method": "gptq", "bits": 4, "group_size": 128}),
    ("Qwen/Qwen3-8B-FP8", "Qwen/Qwen3-8B", {"quant_method": "fp8", "weight_block_size": [128, 128]}),
    ("casperhansen/llama-3-8b-instruct-awq", "meta-llama/Meta-Llama-3-8B-Instruct",
     {"quant_method": "awq", "bits": 4, "group_size": 128}),
    ("mistralai/Mixtral-8x22B-Instruct-v0.1-AWQ", "mistralai/Mixtral-8x22B-Instruct-v0.1",
     {"quant_method": "awq", "bits": 4, "group_size": 128}),
    ("llama3.1:8b", "meta-llama/Llama-3.1-8B-Instruct", {"quant_method": "gguf", "type": "Q4_K_M", "bits": 4}),
    ("qwen2.5:7b-instruct-q8_0", "Qwen/Qwen2.5-7B-Instruct", {"quant_method": "gguf", "type": "Q8_0", "bits": 8}),
    ("gpt-oss:20b", "openai/gpt-oss-20b", {"quant_method": "mxfp4"}),
])
def test_quantized_variant_names(ref, name, quant):
    m = resolve_model(ref, hf_home="/nonexistent-hf-home")
    assert m.name == name and m.resolved_from == "derivative"
    assert m.quantization == quant
    assert len(m.assumptions) == 1 and m.assumptions[0].startswith(f"resolved '{ref}' to catalog entry '{name}'")


def test_awq_assumption_sentence():
    m = resolve_model("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4")
    assert m.assumptions == [
        "resolved 'hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4' to catalog entry "
        "'meta-llama/Llama-3.1-8B-Instruct' by name (an AWQ 4-bit repack by hugging-quants); assumed AWQ 4-bit, "
        "group 128"]
    assert m.params == 8_030_261_248  # the logical count; weight bytes come from the scheme


@pytest.mark.parametrize("ref,name", [
    ("META-LLAMA/LLAMA-3.1-8B-INSTRUCT", "meta-llama/Llama-3.1-8B-Instruct"),
    ("meta-llama/Meta-Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct"),  # alias
    ("Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),  # without org
    ("gpt-oss-120b", "openai/gpt-oss-120b"),
    ("deepseek-ai/DeepSeek-R1-0528", "deepseek-ai/DeepSeek-R1"),
])
def test_exact_alias_and_orgless_ids_need_no_assumption(ref, name):
    m = resolve_model(ref)
    assert m.name == name and m.assumptions == [] and m.quantization == spec(name).quantization


def test_reupload_under_another_org_and_base_sibling_are_noted():
    m = resolve_model("unsloth/Llama-3.2-3B-Instruct")
    assert m.name == "meta-llama/Llama-3.2-3B-Instruct" and m.quantization is None
    assert "another organization" in m.assumptions[0]
    b = resolve_model("mistralai/Mistral-Nemo-Base-2407")
    assert b.name == "mistralai/Mistral-Nemo-Instruct-2407" and "base/instruct" in b.assumptions[0]
    bf = resolve_model("unsloth/gpt-oss-20b-BF16")
    assert bf.quantization is None and bf.torch_dtype == "bfloat16"


def test_unknown_model_names_nearest_entries():
    with pytest.raises(UsageError) as exc:
        resolve_model("acme/Llama-3.2-8B-Turbo", hf_home="/nonexistent-hf-home")  # Llama 3.2 has no 8B
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith("unknown model 'acme/Llama-3.2-8B-Turbo'; nearest: ")
    assert msg.endswith("Pass --model-config PATH/config.json, a local model directory, "
                        "or --online to read it from the Hub")
    near = msg.split("nearest: ")[1].split(". Pass")[0].split(", ")
    assert len(near) == 3 and all(n in BY_NAME and "8B" in n for n in near)
    assert any("Llama-3" in n for n in near)


def test_nearest():
    assert nearest("Qwen/Qwen2.5-7B-Instruct-Turbo", 2)[0] == "Qwen/Qwen2.5-7B-Instruct"
    assert nearest("zzz", 5) == []  # no catalogued family in the name: no noise


def test_empty_ref_is_a_usage_error():
    with pytest.raises(UsageError):
        resolve_model("")


def test_catalog_resolution_is_fast():
    resolve_model("meta-llama/Llama-3.1-8B-Instruct")
    t = time.perf_counter()
    for _ in range(50):
        resolve_model("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", hf_home="/nonexistent-hf-home")
    assert (time.perf_counter() - t) / 50 < 0.005


# --- config.json ----------------------------------------------------------------------------

LLAMA31_8B_CFG = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu", "hidden_size": 4096,
    "intermediate_size": 14336, "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "pretraining_tp": 1,
    "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                            "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 128256,
}
GEMMA3_4B_CFG = {  # the real file leaves heads, head_dim and vocab to Gemma3TextConfig's defaults
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
    "image_token_index": 262144, "mm_tokens_per_image": 256, "model_type": "gemma3",
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                    "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "torch_dtype": "bfloat16",
    "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                      "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27,
                      "patch_size": 14, "vision_use_head": False},
}
GPT_OSS_20B_CFG = {
    "architectures": ["GptOssForCausalLM"], "attention_bias": True, "experts_per_token": 4, "head_dim": 64,
    "hidden_size": 2880, "initial_context_length": 4096, "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 12, "max_position_embeddings": 131072,
    "model_type": "gpt_oss", "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 24,
    "num_key_value_heads": 8, "num_local_experts": 32,
    "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                       "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
                     "rope_type": "yarn", "truncate": False},
    "sliding_window": 128, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 201088,
}
DEEPSEEK_V3_CFG = {
    "architectures": ["DeepseekV3ForCausalLM"], "first_k_dense_replace": 3, "hidden_size": 7168,
    "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v3",
    "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256,
    "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 61, "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                     "original_max_position_embeddings": 4096, "type": "yarn"},
    "tie_word_embeddings": False, "topk_group": 4, "torch_dtype": "bfloat16", "v_head_dim": 128,
    "vocab_size": 129280,
}
QWEN3_NEXT_CFG = {
    "architectures": ["Qwen3NextForCausalLM"], "decoder_sparse_step": 1, "full_attention_interval": 4,
    "head_dim": 256, "hidden_size": 2048, "intermediate_size": 5120, "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
    "linear_value_head_dim": 128, "max_position_embeddings": 262144, "mlp_only_layers": [],
    "model_type": "qwen3_next", "moe_intermediate_size": 512, "num_attention_heads": 16, "num_experts": 512,
    "num_experts_per_tok": 10, "num_hidden_layers": 48, "num_key_value_heads": 2, "partial_rotary_factor": 0.25,
    "rope_theta": 10000000, "shared_expert_intermediate_size": 512, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "vocab_size": 151936,
}
GLM4_9B_CFG = {  # ChatGLM naming
    "architectures": ["ChatGLMModel"], "add_bias_linear": False, "add_qkv_bias": True, "ffn_hidden_size": 13696,
    "hidden_size": 4096, "kv_channels": 128, "model_type": "chatglm", "multi_query_attention": True,
    "multi_query_group_num": 2, "num_attention_heads": 32, "num_layers": 40, "padded_vocab_size": 151552,
    "rmsnorm": True, "rope_ratio": 500, "seq_length": 131072, "torch_dtype": "bfloat16",
}
FALCON_7B_CFG = {
    "alibi": False, "architectures": ["FalconForCausalLM"], "bias": False, "hidden_size": 4544,
    "model_type": "falcon", "multi_query": True, "new_decoder_architecture": False, "num_attention_heads": 71,
    "num_hidden_layers": 32, "parallel_attn": True, "torch_dtype": "bfloat16", "vocab_size": 65024,
}
LLAMA4_SCOUT_CFG = {
    "architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
    "text_config": {
        "attention_chunk_size": 8192, "head_dim": 128, "hidden_size": 5120, "interleave_moe_layer_step": 1,
        "intermediate_size": 8192, "intermediate_size_mlp": 16384, "max_position_embeddings": 10485760,
        "model_type": "llama4_text", "num_attention_heads": 40, "num_experts_per_tok": 1,
        "num_hidden_layers": 48, "num_key_value_heads": 8, "num_local_experts": 16,
        "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0, "use_qk_norm": True, "vocab_size": 202048},
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "vision_config": {"hidden_size": 1408, "image_size": 336, "intermediate_size": 5632,
                      "model_type": "llama4_vision_model", "num_attention_heads": 16, "num_channels": 3,
                      "num_hidden_layers": 34, "patch_size": 14, "pixel_shuffle_ratio": 0.5,
                      "projector_input_dim": 4096, "projector_output_dim": 4096, "vision_output_dim": 4096},
}
MISTRAL_SMALL_31_CFG = {
    "architectures": ["Mistral3ForConditionalGeneration"], "image_token_index": 10, "model_type": "mistral3",
    "multimodal_projector_bias": False, "projector_hidden_act": "gelu", "spatial_merge_size": 2,
    "text_config": {"head_dim": 128, "hidden_size": 5120, "intermediate_size": 32768,
                    "max_position_embeddings": 131072, "model_type": "mistral", "num_attention_heads": 32,
                    "num_hidden_layers": 40, "num_key_value_heads": 8, "rope_theta": 1000000000.0,
                    "sliding_window": None, "vocab_size": 131072},
    "torch_dtype": "bfloat16",
    "vision_config": {"head_dim": 64, "hidden_size": 1024, "image_size": 1540, "intermediate_size": 4096,
                      "model_type": "pixtral", "num_attention_heads": 16, "num_channels": 3,
                      "num_hidden_layers": 24, "patch_size": 14, "rope_theta": 10000.0},
}
GEMMA2_9B_CFG = {  # older file: no layer_types, Gemma 2 alternates
    "architectures": ["Gemma2ForCausalLM"], "cache_implementation": "hybrid", "head_dim": 256,
    "hidden_size": 3584, "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "gemma2",
    "num_attention_heads": 16, "num_hidden_layers": 42, "num_key_value_heads": 8, "query_pre_attn_scalar": 256,
    "sliding_window": 4096, "torch_dtype": "bfloat16", "vocab_size": 256000,
}
QWEN25_7B_CFG = {
    "architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584, "intermediate_size": 18944,
    "max_position_embeddings": 32768, "max_window_layers": 28, "model_type": "qwen2", "num_attention_heads": 28,
    "num_hidden_layers": 28, "num_key_value_heads": 4, "rope_theta": 1000000.0, "sliding_window": 131072,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_sliding_window": False, "vocab_size": 152064,
}
PHI35_MOE_CFG = {
    "architectures": ["PhiMoEForCausalLM"], "attention_bias": True, "hidden_size": 4096, "intermediate_size": 6400,
    "lm_head_bias": True, "max_position_embeddings": 131072, "model_type": "phimoe", "num_attention_heads": 32,
    "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 16,
    "original_max_position_embeddings": 4096,
    "rope_scaling": {"long_factor": [1.0] * 64, "short_factor": [1.0] * 64, "type": "longrope"},
    "sliding_window": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 32064,
}
MIXTRAL_CFG = {
    "architectures": ["MixtralForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32,
    "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
    "rope_theta": 1e6, "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "vocab_size": 32000,
}
MISTRAL_V01_CFG = {
    "architectures": ["MistralForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "vocab_size": 32000,
}

CONFIGS = {
    "meta-llama/Llama-3.1-8B-Instruct": LLAMA31_8B_CFG,
    "google/gemma-3-4b-it": GEMMA3_4B_CFG,
    "openai/gpt-oss-20b": GPT_OSS_20B_CFG,
    "deepseek-ai/DeepSeek-V3": DEEPSEEK_V3_CFG,
    "Qwen/Qwen3-Next-80B-A3B-Instruct": QWEN3_NEXT_CFG,
    "THUDM/glm-4-9b-chat": GLM4_9B_CFG,
    "tiiuae/falcon-7b": FALCON_7B_CFG,
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": LLAMA4_SCOUT_CFG,
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503": MISTRAL_SMALL_31_CFG,
    "google/gemma-2-9b-it": GEMMA2_9B_CFG,
    "Qwen/Qwen2.5-7B-Instruct": QWEN25_7B_CFG,
    "microsoft/Phi-3.5-MoE-instruct": PHI35_MOE_CFG,
    "mistralai/Mixtral-8x7B-Instruct-v0.1": MIXTRAL_CFG,
    "mistralai/Mistral-7B-v0.1": MISTRAL_V01_CFG,
}
_FACTS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
          "intermediate_size", "vocab_size", "max_position_embeddings", "tie_word_embeddings", "num_experts",
          "num_experts_per_tok", "num_shared_experts", "moe_intermediate_size", "first_k_dense_replace",
          "moe_layer_step", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
          "attention_chunk_size", "multimodal", "vision_params", "original_max_position_embeddings")


@pytest.mark.parametrize("name", list(CONFIGS))
def test_from_config_agrees_with_the_catalog(name):
    got = from_config(CONFIGS[name], name)
    want = spec(name)
    assert got.resolved_from == "config"
    for f in _FACTS:
        assert getattr(got, f) == getattr(want, f), f
    assert got.kinds() == want.kinds()
    if "sliding" in want.kinds():
        assert got.sliding_window == want.sliding_window
    assert (got.quantization or {}).get("quant_method") == (want.quantization or {}).get("quant_method")
    assert got.architecture == want.architecture and got.model_type == want.model_type
    assert abs(got.params - want.params) / want.params <= 0.005


def test_from_config_aliases_and_defaults():
    cfg = {"architectures": ["FooForCausalLM"], "model_type": "foo", "n_layer": 4, "n_embd": 256, "n_head": 8,
           "n_head_kv": 2, "vocab_size": 1000, "n_positions": 2048}
    m = from_config(cfg, "x/foo")
    assert (m.num_hidden_layers, m.hidden_size, m.num_attention_heads, m.num_key_value_heads) == (4, 256, 8, 2)
    assert m.head_dim == 32 and m.intermediate_size == 1024 and m.max_position_embeddings == 2048
    assert m.torch_dtype == "bfloat16" and m.layer_types == [] and not m.multimodal
    mq = from_config({**cfg, "n_head_kv": None, "num_kv_heads": 4}, "x/foo")
    assert mq.num_key_value_heads == 4
    assert from_config({**cfg, "n_head_kv": None, "dtype": "float16"}, "x").num_key_value_heads == 8
    assert from_config({**cfg, "dtype": "float16"}, "x").torch_dtype == "float16"


def test_from_config_layer_types_and_shared_expert_size():
    base = {"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 16,
            "num_key_value_heads": 16, "intermediate_size": 5632, "vocab_size": 151936, "num_experts": 60,
            "num_experts_per_tok": 4, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
            "max_position_embeddings": 8192}
    m = from_config(base, "Qwen/Qwen1.5-MoE-A2.7B")
    assert m.num_shared_experts == 4
    lt = from_config({**base, "layer_types": ["linear_attention", "full_attention", "sliding_attention",
                                              "chunked_attention"]}, "x")
    assert lt.layer_types == ["linear", "full", "sliding", "chunked"]
    with pytest.raises(ValueError):
        from_config({**base, "layer_types": ["warp_attention"] * 4}, "x")


def test_from_config_mamba_hybrids():
    nemotron = {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 4096,
                "num_hidden_layers": 8, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                "intermediate_size": 21504, "vocab_size": 131072, "max_position_embeddings": 8192,
                "hybrid_override_pattern": "M-M*-M-M", "mamba_num_heads": 128, "mamba_head_dim": 64,
                "n_groups": 8, "ssm_state_size": 128, "conv_kernel": 4}
    m = from_config(nemotron, "nvidia/Nemotron-H-8B-Base-8K")
    assert m.layer_types == ["mamba", "none", "mamba", "full", "none", "mamba", "none", "mamba"]
    conv_dim = 128 * 64 + 2 * 8 * 128
    assert m.mamba["conv_state_elems"] == 3 * conv_dim and m.mamba["ssm_state_elems"] == 128 * 64 * 128
    granite = {**nemotron, "model_type": "granitemoehybrid", "hybrid_override_pattern": None,
               "layer_types": ["mamba"] * 3 + ["attention"] + ["mamba"] * 4}
    g = from_config(granite, "ibm-granite/granite-4.0-h-small")
    assert g.kinds().count("full") == 1 and g.mamba["kind"] == "mamba2" and g.params > 0


def test_vision_count_generic_clip_is_positive():
    assert count_vision_params({"hidden_size": 1024, "num_hidden_layers": 24, "intermediate_size": 4096,
                                "patch_size": 14, "image_size": 336}, 4096, "llava") > 300_000_000


# --- resolution order -----------------------------------------------------------------------

def _safetensors(path: Path, tensors: dict[str, list[int]]) -> None:
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in tensors.items():
        n = 1
        for d in shape:
            n *= d
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + 2 * n]}
        offset += 2 * n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)


TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
        "max_position_embeddings": 512, "tie_word_embeddings": True, "torch_dtype": "bfloat16"}


def test_local_directory_counts_params_from_safetensors_headers(tmp_path):
    d = tmp_path / "tiny-llama"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(TINY))
    arch = from_config(TINY, "t").params
    m = resolve_model(str(d))
    assert m.resolved_from == "local" and m.params == arch  # no headers: architecture count
    assert any("counted from the architecture" in a for a in m.assumptions)
    _safetensors(d / "model.safetensors", {
        "model.embed_tokens.weight": [100, 64],
        "lm_head.weight": [100, 64],  # a tied head stored twice: counted once
        "model.layers.0.self_attn.q_proj.weight": [64, 64],
        "model.layers.1.mlp.down_proj.weight": [64, 128],
        "model.layers.2.self_attn.q_proj.weight": [64, 64],  # an MTP layer past num_hidden_layers
        "mtp.fc.weight": [64, 128],
        "model.norm.weight": [64],
    })
    m = resolve_model(str(d))
    assert m.params == 100 * 64 + 64 * 64 + 64 * 128 + 64
    assert m.name == str(d) and m.assumptions == []


def test_index_total_size_when_shards_are_absent(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 2000},
                                                                       "weight_map": {}}))
    m = from_config(TINY, "t")
    assert params_from_safetensors(str(tmp_path), m) == 1000


def test_config_path_file_or_directory(tmp_path):
    f = tmp_path / "config.json"
    f.write_text(json.dumps(LLAMA31_8B_CFG))
    by_file = resolve_model("whatever/name", config_path=str(f))
    by_dir = resolve_model("", config_path=str(tmp_path))
    assert by_file.resolved_from == by_dir.resolved_from == "config"
    assert by_file.name == "whatever/name" and by_dir.name == tmp_path.name
    assert by_file.params == 8_030_261_248
    with pytest.raises(UsageError):
        resolve_model("x", config_path=str(tmp_path / "missing.json"))
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{not json")
    with pytest.raises(UsageError):
        resolve_model("x", config_path=str(tmp_path / "bad"))


def test_hf_cache_layout_wins_over_the_catalog(tmp_path):
    repo = tmp_path / "hub" / "models--meta-llama--Llama-3.1-8B-Instruct"
    snap = repo / "snapshots" / "0e9e39f249a16976918f6564b8830bc894c89659"
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0e9e39f249a16976918f6564b8830bc894c89659")
    (snap / "config.json").write_text(json.dumps({**LLAMA31_8B_CFG, "max_position_embeddings": 4096}))
    m = resolve_model("meta-llama/Llama-3.1-8B-Instruct", hf_home=str(tmp_path))
    assert m.resolved_from == "hf-cache" and m.max_position_embeddings == 4096
    assert m.name == "meta-llama/Llama-3.1-8B-Instruct" and m.params == 8_030_261_248
    # a snapshot without refs/main is still found; other repos fall through to the catalog
    (repo / "refs" / "main").unlink()
    assert resolve_model("meta-llama/Llama-3.1-8B-Instruct", hf_home=str(tmp_path)).resolved_from == "hf-cache"
    assert resolve_model("Qwen/Qwen3-8B", hf_home=str(tmp_path)).resolved_from == "catalog"


def test_hf_home_environment(tmp_path, monkeypatch):
    snap = tmp_path / "hub" / "models--acme--tiny" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(TINY))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    m = resolve_model("acme/tiny")
    assert m.resolved_from == "hf-cache" and m.num_hidden_layers == 2


def test_yaml_keeps_name_and_aliases_on_single_lines():
    for name in catalog_entries.catalog_files():
        text = (Path(data.__file__).parent / name).read_text()
        parsed = yaml.safe_load(text)
        assert text.count("\n- name: ") + text.startswith("- name: ") == len(parsed), name
        assert all(isinstance(e.get("aliases", []), list) for e in parsed), name
