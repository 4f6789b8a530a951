"""The DeepSeek, Gemma, Phi, GLM, gpt-oss, Kimi and MiniMax catalog entries: every one plans through
vLLM, and the layouts added for them (V3.2 / GLM-5 indexer, KDA, MiniMax-M2 q/k norms, GLM-4
norms) reproduce the independent totals the entries record."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from servefit import data
from servefit.models import catalog_entries, count_params, resolve_model
from servefit.models.catalog import spec_from_entry
from servefit.models.config_json import from_config
from servefit.pipeline import Target, evaluate, site_from_argv

FILES = ("deepseek", "gemma", "phi", "glm", "gpt_oss", "kimi", "minimax")
ENTRIES: list[dict[str, Any]] = [
    e for f in FILES for e in yaml.safe_load((data.DATA_DIR / "models" / f"{f}.yaml").read_text())
]


def spec(name: str):
    return spec_from_entry(next(e for e in ENTRIES if e["name"] == name))


def plan(name: str, tp: int, *extra: str):
    site = site_from_argv(["vllm", "serve", name, "--tensor-parallel-size", str(tp), *extra])
    return evaluate(site, Target(gpu="H200", gpus=tp, engine_version="0.33.0"))


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_every_entry_plans_on_h200(entry):
    big = entry["params"] > 40e9
    ev = plan(entry["name"], 8 if big else 1)
    assert ev.model.name == entry["name"] and ev.model.params == entry["params"]
    assert ev.model.resolved_from == "catalog" and ev.plan.kv_bytes_per_token > 0
    assert ev.plan.outcome in ("started", "refused_max_model_len", "oom_at_load")
    if not big:  # up to 40B fits one H200 with room for its full context
        assert ev.plan.outcome == "started", (ev.plan.outcome, ev.plan.messages)
        assert ev.plan.kv_cache_tokens >= ev.plan.max_model_len


def test_alias_lists_are_unique_to_these_families():
    ids = [rid.lower() for e in catalog_entries.entries() for rid in [e["name"], *e.get("aliases", [])]]
    mine = [rid.lower() for e in ENTRIES for rid in [e["name"], *e.get("aliases", [])]]
    assert all(ids.count(rid) == 1 for rid in mine)


# --- DeepSeek-V3.2 / GLM-5: the sparse-attention indexer ----------------------------------------

def test_v32_indexer_parameters_and_raw_total():
    v3, v32 = resolve_model("deepseek-ai/DeepSeek-V3"), spec("deepseek-ai/DeepSeek-V3.2-Exp")
    per_layer = 1536 * 64 * 128 + 7168 * (128 + 64) + 2 * 128  # wq_b, wk + weights_proj, k_norm
    assert per_layer == 13959424
    assert count_params(v32) - count_params(v3) == 61 * per_layer
    # the safetensors total: V3's raw total plus 62 indexers (MTP layer included) and their FP8 scales
    scales = (1536 // 128) * (64 * 128 // 128) + (7168 // 128)
    assert 684531386000 + 62 * (per_layer + scales) == 685396921376


def test_v32_kv_cache_holds_the_indexer_keys():
    ev = plan("deepseek-ai/DeepSeek-V3.2", 8)
    # bf16 latent (512 + 64) x 2 bytes, plus the fp8 indexer key (128) and its fp32 scale (4)
    assert ev.plan.kv_bytes_per_token == 61 * ((512 + 64) * 2 + 128 + 4)
    assert plan("deepseek-ai/DeepSeek-V3.1", 8).plan.kv_bytes_per_token == 61 * (512 + 64) * 2


def test_v32_config_json_keeps_the_indexer():
    cfg = {
        "architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32", "hidden_size": 7168,
        "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61,
        "num_attention_heads": 128, "num_key_value_heads": 128, "n_routed_experts": 256, "n_shared_experts": 1,
        "num_experts_per_tok": 8, "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 1536,
        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280,
        "max_position_embeddings": 163840, "index_n_heads": 64, "index_head_dim": 128, "index_topk": 2048,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    }
    m = from_config(cfg, "local/v32")
    assert (m.index_n_heads, m.index_head_dim, m.index_topk) == (64, 128, 2048)
    assert m.params == spec("deepseek-ai/DeepSeek-V3.2").params == 671877944064


def test_glm5_count_and_raw_total_with_its_mtp_layer():
    m = spec("zai-org/GLM-5")
    assert count_params(m) == 743911218432
    h, heads = 6144, 64
    mla = (h * 2048 + 2048 + 2048 * heads * 256 + h * (512 + 64) + 512 + 512 * heads * (192 + 256)
           + heads * 256 * h + 2048 * 32 * 128 + h * (128 + 32) + 2 * 128)
    moe = 257 * 3 * h * 2048 + h * 256 + 256
    mtp = mla + moe + 2 * h + 2 * h + 2 * h * h + h  # layer, enorm + hnorm, eh_proj, shared_head norm
    assert count_params(m) + mtp == 753864139008


# --- GLM-4.5 / 4.7-Flash / GLM-4-0414 ----------------------------------------------------------

@pytest.mark.parametrize("name,raw,embeddings", [
    ("zai-org/GLM-4.5-Air", 110468824832, True),
    ("zai-org/GLM-4.7-Flash", 31221488576, True),
    ("zai-org/GLM-4.6", 356785898816, False),
])
def test_glm_moe_raw_totals_are_the_main_model_plus_one_mtp_layer(name, raw, embeddings):
    from servefit.models.architecture import _attention_params, _moe_params
    from servefit.models.family_traits import traits

    m = spec(name)
    h, t = m.hidden_size, traits(m.model_type)
    mtp = _attention_params(m, t) + _moe_params(m, t) + 2 * h + 2 * h + 2 * h * h + h
    if embeddings:
        mtp += 2 * m.vocab_size * h
    qk_norms = 2 * 128 * (m.num_hidden_layers + 1) if name == "zai-org/GLM-4.6" else 0
    assert count_params(m) + mtp + qk_norms == raw


def test_glm4_0414_has_four_norms_per_layer():
    assert spec("zai-org/GLM-4-9B-0414").params - spec("THUDM/glm-4-9b-chat").params == 40 * 2 * 4096
    assert count_params(spec("zai-org/GLM-4-9B-0414")) == 9400279040


def test_glm_fp8_repacks_resolve_by_name_to_their_base():
    m = resolve_model("zai-org/GLM-4.5-Air-FP8")
    assert m.name == "zai-org/GLM-4.5-Air" and m.quantization == {"quant_method": "fp8"}
    assert resolve_model("zai-org/GLM-4.7-FP8").name == "zai-org/GLM-4.7"


# --- Kimi, MiniMax -----------------------------------------------------------------------------

def test_kimi_k2_and_minimax_m2_logical_counts():
    assert count_params(spec("moonshotai/Kimi-K2-Instruct")) == 1026408232448
    m2 = spec("MiniMaxAI/MiniMax-M2")
    assert count_params(m2) == 228689764864
    # q_norm over 48 x 128 and k_norm over 8 x 128 in each of the 62 layers
    m2.model_type = "mixtral"
    assert 228689764864 - count_params(m2) == 62 * (48 + 8) * 128 + 62 * 256


KIMI_LINEAR_CFG = {  # moonshotai/Kimi-Linear-48B-A3B-Instruct (transformers configuration_kimi_linear.py)
    "architectures": ["KimiLinearForCausalLM"], "model_type": "kimi_linear", "hidden_size": 2304,
    "intermediate_size": 9216, "moe_intermediate_size": 1024, "num_hidden_layers": 27, "num_attention_heads": 32,
    "num_key_value_heads": 32, "num_experts": 256, "num_experts_per_token": 8, "num_shared_experts": 1,
    "first_k_dense_replace": 1, "kv_lora_rank": 512, "q_lora_rank": None, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 163840, "max_position_embeddings": 1048576,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "linear_attn_config": {"full_attn_layers": [4, 8, 12, 16, 20, 24, 27], "head_dim": 128, "num_heads": 32,
                           "short_conv_kernel_size": 4,
                           "kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26]},
}


def test_kimi_linear_kda_layers_from_config_json():
    m = from_config(KIMI_LINEAR_CFG, "moonshotai/Kimi-Linear-48B-A3B-Instruct")
    assert m.num_experts_per_tok == 8 and m.first_k_dense_replace == 1
    assert m.params == 49122681728  # the checkpoint's count, reproduced exactly (data/models/kimi.yaml)
    kinds = m.kinds()
    assert kinds.count("linear") == 20 and [i for i, k in enumerate(kinds) if k == "full"] == [3, 7, 11, 15, 19, 23, 26]
    assert m.mamba["ssm_state_elems"] == 32 * 128 * 128 and m.mamba["conv_state_elems"] == 3 * 3 * 4096
