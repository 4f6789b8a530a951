"""Ling 1.x (BailingMoeForCausalLM) shares model_type bailing_moe with Ling 2.0 but has neither q/k
norms nor the router's expert bias: config.json's use_qk_norm / moe_router_enable_expert_bias decide."""

from servefit.models.architecture import count_params
from servefit.models.catalog import lookup
from servefit.models.config_json import from_config

LING_LITE = {"architectures": ["BailingMoeForCausalLM"], "model_type": "bailing_moe", "num_hidden_layers": 28,
             "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 4, "intermediate_size": 5632,
             "moe_intermediate_size": 1408, "num_experts": 64, "num_experts_per_tok": 6, "num_shared_experts": 2,
             "first_k_dense_replace": 0, "vocab_size": 126464, "max_position_embeddings": 32768,
             "tie_word_embeddings": False, "use_qk_norm": False, "moe_router_enable_expert_bias": False}


def test_ling_1_config_counts_the_hub_total():
    assert count_params(from_config(dict(LING_LITE), "inclusionAI/Ling-lite-1.5")) == 16801974272


def test_ling_2_flags_add_q_k_norms_and_expert_bias():
    v2 = {**LING_LITE, "use_qk_norm": True, "moe_router_enable_expert_bias": True}
    assert count_params(from_config(v2, "x")) - 16801974272 == 28 * (2 * 128 + 64)
    # without the flags the family default (Ling 2.0's) holds, as for the catalogued 2.0 entries
    bare = {k: v for k, v in LING_LITE.items() if k not in ("use_qk_norm", "moe_router_enable_expert_bias")}
    assert count_params(from_config(bare, "x")) == count_params(from_config(v2, "x"))


def test_catalogued_ling_lite_is_the_1x_layout():
    spec = lookup("inclusionAI/Ling-lite")
    assert spec is not None and spec.layout == {"qk_norm": False, "expert_score_bias": False}
    assert count_params(spec) == 16801974272
