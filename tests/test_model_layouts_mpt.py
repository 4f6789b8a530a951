"""MPT (MPTForCausalLM): a config.json in MosaicML's own key names plans and counts like vLLM's mpt.py."""

from servefit.memory.params import param_groups
from servefit.models.architecture import count_params
from servefit.models.catalog import lookup
from servefit.models.config_json import from_config

# mosaicml/mpt-7b-instruct config.json as quoted in a public repository (keys that matter here)
MPT_7B = {"architectures": ["MPTForCausalLM"], "model_type": "mpt", "d_model": 4096, "n_layers": 32,
          "n_heads": 32, "expansion_ratio": 4, "vocab_size": 50432, "max_seq_len": 2048, "no_bias": True,
          "attn_config": {"alibi": True}}


def test_mpt_config_json_counts_the_hub_total():
    spec = from_config(dict(MPT_7B), "mosaicml/mpt-7b-instruct")
    assert (spec.intermediate_size, spec.tie_word_embeddings, spec.max_position_embeddings) == (16384, True, 2048)
    assert count_params(spec) == 6649286656  # llmfit's safetensors count of an mpt-7b-instruct copy


def test_mpt_expansion_ratio_sets_the_mlp_width():
    spec = from_config({**MPT_7B, "expansion_ratio": 2}, "x")
    assert spec.intermediate_size == 8192
    # a nonsense ratio falls back to GPT's 4 x d_model instead of a negative width
    assert from_config({**MPT_7B, "expansion_ratio": -3}, "x").intermediate_size == 16384


def test_mpt_weights_split_into_two_matrix_mlp():
    spec = lookup("mosaicml/mpt-7b")
    assert spec is not None and spec.model_type == "mpt"
    groups = param_groups(spec)
    assert groups.total == count_params(spec) == 6649286656
    assert sum(groups.mlp) == 32 * 2 * 4096 * 16384
