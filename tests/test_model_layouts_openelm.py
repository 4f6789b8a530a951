"""OpenELM: per-layer query / KV heads and FFN widths from two multiplier ranges
(configuration_openelm.py), counted to the Hub totals of all four sizes."""

import pytest

from servefit.budget import BadValue
from servefit.memory.params import param_groups
from servefit.models.arch_openelm import layer_shapes, make_divisible
from servefit.models.architecture import count_params
from servefit.models.config_json import from_config


def _config(layers: int, dim: int, head_dim: int) -> dict:
    # the keys an OpenELM config.json carries (trust_remote_code OpenELMConfig)
    return {"architectures": ["OpenELMForCausalLM"], "model_type": "openelm", "num_transformer_layers": layers,
            "model_dim": dim, "head_dim": head_dim, "num_gqa_groups": 4, "ffn_multipliers": [0.5, 4.0],
            "qkv_multipliers": [0.5, 1.0], "ffn_dim_divisor": 256, "ffn_with_glu": True,
            "normalize_qk_projections": True, "share_input_output_layers": True, "vocab_size": 32000,
            "max_context_length": 2048}


@pytest.mark.parametrize("layers,dim,head_dim,total", [(16, 1280, 64, 271527168), (20, 1536, 64, 457179136),
                                                       (28, 2048, 64, 1079891456), (36, 3072, 128, 3036647424)])
def test_openelm_config_counts_the_hub_total(layers, dim, head_dim, total):
    spec = from_config(_config(layers, dim, head_dim), "apple/OpenELM")
    assert count_params(spec) == total  # llmfit's safetensors counts of apple/OpenELM-*
    assert param_groups(spec).total == total
    assert spec.tie_word_embeddings and spec.max_position_embeddings == 2048


def test_openelm_270m_layer_shapes():
    spec = from_config(_config(16, 1280, 64), "apple/OpenELM-270M")
    shapes = layer_shapes(spec)
    assert [q for q, _, _ in shapes] == [12] * 5 + [16] * 7 + [20] * 4
    assert [kv for _, kv, _ in shapes] == [3] * 5 + [4] * 7 + [5] * 4
    assert [f for _, _, f in shapes][:3] == [768, 1024, 1280] and shapes[-1][2] == 5120
    # the widest layer stands for the model where one number is needed (KV cache: an upper bound)
    assert (spec.num_attention_heads, spec.num_key_value_heads, spec.intermediate_size) == (20, 5, 5120)


def test_make_divisible_never_rounds_down_more_than_ten_percent():
    assert make_divisible(1280 * 0.53, 256) == 768  # 678.4 -> 768
    assert make_divisible(300, 256) == 256 * 2  # 256 would be 15% below 300


def test_bad_multiplier_is_a_clear_error():
    with pytest.raises(BadValue, match="ffn_multipliers"):
        from_config({**_config(16, 1280, 64), "ffn_multipliers": [0.5, "x"]}, "x")
