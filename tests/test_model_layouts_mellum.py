"""Mellum2 (MellumForCausalLM): a Qwen3-MoE-style layout under its own model_type; its config.json
counts to the Hub total (q/k norms on, every layer sparse)."""

from servefit.models.architecture import count_params
from servefit.models.config_json import from_config

MELLUM2 = {"architectures": ["MellumForCausalLM"], "model_type": "mellum", "vocab_size": 98304, "hidden_size": 2304,
           "intermediate_size": 7168, "num_hidden_layers": 28, "num_attention_heads": 32, "num_key_value_heads": 4,
           "head_dim": 128, "moe_intermediate_size": 896, "num_experts": 64, "num_experts_per_tok": 8,
           "max_position_embeddings": 131072, "tie_word_embeddings": False, "mlp_layer_types": ["sparse"] * 28}


def test_mellum2_config_counts_the_hub_total():
    spec = from_config(dict(MELLUM2), "JetBrains/Mellum2-12B-A2.5B-Base")
    assert spec.first_k_dense_replace == 0
    assert count_params(spec) == 12149923072  # llmfit's count of the Base, Instruct and Thinking uploads


def test_mellum2_has_per_head_q_k_norms():
    spec = from_config(dict(MELLUM2), "x")
    no_norm = from_config({**MELLUM2, "model_type": "qwen3_moe"}, "x")  # Qwen3-MoE: the same norms
    assert count_params(spec) == count_params(no_norm)
    llama_like = from_config({**MELLUM2, "model_type": "mixtral"}, "x")  # no q/k norms
    assert count_params(spec) - count_params(llama_like) == 28 * 2 * 128
