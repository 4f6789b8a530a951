"""Hy3 (HYV3ForCausalLM): q/k norms, a stored expert-score bias, and mlp_layer_types naming the
leading dense layer; its config.json counts to the Hub total less the MTP layer."""

from servefit.models.architecture import count_params
from servefit.models.config_json import from_config

HY3 = {"architectures": ["HYV3ForCausalLM"], "model_type": "hy_v3", "vocab_size": 120832, "hidden_size": 4096,
       "intermediate_size": 13312, "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
       "head_dim": 128, "max_position_embeddings": 131072, "tie_word_embeddings": False, "num_experts": 192,
       "num_experts_per_tok": 8, "num_shared_experts": 1, "moe_intermediate_size": 1536,
       "mlp_layer_types": ["dense"] + ["sparse"] * 79}
MTP = 3752612288  # one attention + MoE layer, the 2h -> h projection, norms (298786155776 on the Hub)


def test_hy3_config_counts_the_hub_total_without_mtp():
    spec = from_config(dict(HY3), "tencent/Hy3")
    assert spec.first_k_dense_replace == 1
    assert count_params(spec) + MTP == 298786155776


def test_mlp_layer_types_set_the_dense_prefix():
    two = from_config({**HY3, "mlp_layer_types": ["dense", "dense"] + ["sparse"] * 78}, "x")
    assert two.first_k_dense_replace == 2
    # an explicit first_k_dense_replace wins over the list
    assert from_config({**HY3, "first_k_dense_replace": 3}, "x").first_k_dense_replace == 3
