"""OLMo 3 hybrid (OlmoHybridForCausalLM): Gated DeltaNet layers with OLMo's normed full-attention
layers; its config.json (transformers names) counts to the Hub total and plans a recurrent state."""

from servefit.models.architecture import count_params
from servefit.models.config_json import from_config

LAYERS = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(32)]
OLMO_HYBRID_7B = {"architectures": ["OlmoHybridForCausalLM"], "model_type": "olmo_hybrid", "vocab_size": 100352,
                  "hidden_size": 3840, "intermediate_size": 11008, "num_hidden_layers": 32,
                  "num_attention_heads": 30, "num_key_value_heads": 30, "max_position_embeddings": 65536,
                  "tie_word_embeddings": False, "layer_types": LAYERS, "linear_num_key_heads": 30,
                  "linear_num_value_heads": 30, "linear_key_head_dim": 96, "linear_value_head_dim": 192,
                  "linear_conv_kernel_dim": 4}


def test_olmo_hybrid_config_counts_the_hub_total():
    spec = from_config(dict(OLMO_HYBRID_7B), "allenai/Olmo-Hybrid-7B")
    assert count_params(spec) == 7430870688  # llmfit's safetensors count of the three 7B uploads
    assert spec.kinds().count("full") == 8 and spec.kinds().count("linear") == 24


def test_olmo_hybrid_linear_layers_hold_a_gated_deltanet_state():
    m = from_config(dict(OLMO_HYBRID_7B), "x").mamba
    assert (m["kind"], m["conv_dim"]) == ("gated_deltanet", 2 * 30 * 96 + 30 * 192)
    assert m["ssm_state_elems"] == 30 * 96 * 192  # one key x value matrix per value head
