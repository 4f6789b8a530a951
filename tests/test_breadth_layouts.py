"""Layouts added for issue 13's third round (breadth): GPT-BigCode (StarCoder, SantaCoder, Granite
Code 20B / 34B), Llama with attention / MLP biases (Granite Code 3B / 8B), and the module traits of
the newer families (Apertus' xIELU scalars, EXAONE 4's sliding layers), each checked against a count
written out by hand and, for config.json, against the catalog entry."""

from __future__ import annotations

import pytest

from servefit.models import count_params, resolve_model
from servefit.models.config_json import from_config
from servefit.pipeline import Target, evaluate, site_from_argv


def biased(i: int, o: int) -> int:
    return i * o + o


def test_starcoder_by_hand():
    h, v, layers, inner, pos, kv = 6144, 49152, 40, 24576, 8192, 128  # one K/V head of 128
    block = 2 * h + biased(h, h + 2 * kv) + biased(h, h) + 2 * h + biased(h, inner) + biased(inner, h)
    total = v * h + pos * h + layers * block + 2 * h  # tied lm_head
    m = resolve_model("bigcode/starcoder")
    assert count_params(m) == total == m.params == 15_517_456_384
    assert (m.num_key_value_heads, m.head_dim, m.max_position_embeddings) == (1, 128, 8192)


def test_granite_code_llama_with_biases_by_hand():
    h, v, layers, inter, heads, kvh, hd = 4096, 49152, 36, 14336, 32, 8, 128
    attn = biased(h, heads * hd) + 2 * biased(h, kvh * hd) + biased(heads * hd, h)
    mlp = 2 * biased(h, inter) + biased(inter, h)
    total = v * h + h + layers * (attn + mlp + 2 * h)  # tied
    assert resolve_model("ibm-granite/granite-8b-code-instruct-4k").params == total == 8_054_910_976


def test_apertus_counts_two_activation_scalars_per_layer():
    m = resolve_model("swiss-ai/Apertus-8B-Instruct-2509")
    h, v, inter, hd = m.hidden_size, m.vocab_size, m.intermediate_size, m.head_dim
    attn = h * m.num_attention_heads * hd * 2 + 2 * h * m.num_key_value_heads * hd + 2 * hd  # q, o, k, v, q/k norms
    per = attn + 2 * h * inter + 2 * h + 2  # up / down, two norms, xIELU alpha_p and alpha_n
    assert count_params(m) == 2 * v * h + h + m.num_hidden_layers * per == m.params


def test_exaone4_32b_keeps_every_fourth_layer_global():
    kinds = resolve_model("LGAI-EXAONE/EXAONE-4.0-32B").kinds()
    assert kinds[:4] == ["sliding", "sliding", "sliding", "full"] and kinds.count("full") == 16


CONFIGS = {
    # StarCoder's config.json keys (GPT-2 names; no tie_word_embeddings: the config class default, true)
    "bigcode/starcoder": {"architectures": ["GPTBigCodeForCausalLM"], "model_type": "gpt_bigcode", "n_embd": 6144,
                          "n_layer": 40, "n_head": 48, "n_inner": 24576, "n_positions": 8192, "vocab_size": 49152,
                          "multi_query": True},
    "ibm-granite/granite-8b-code-instruct-4k": {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 36,
        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 49152,
        "max_position_embeddings": 4096, "attention_bias": True, "mlp_bias": True, "tie_word_embeddings": True},
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_config_json_counts_match_the_catalog(name):
    got = from_config(CONFIGS[name], name)
    want = resolve_model(name)
    assert (got.params, got.num_key_value_heads, got.tie_word_embeddings) == (
        want.params, want.num_key_value_heads, want.tie_word_embeddings)


def test_a_llama_config_without_biases_is_not_counted_with_them():
    cfg = dict(CONFIGS["ibm-granite/granite-8b-code-instruct-4k"], attention_bias=False, mlp_bias=False)
    assert from_config(cfg, "x").params == 8_054_910_976 - 36 * (4096 + 1024 * 2 + 4096 + 2 * 14336 + 4096)


def test_vllm_caches_one_kv_head_for_starcoder():
    plan = evaluate(site_from_argv(["vllm", "serve", "bigcode/starcoder", "--max-model-len", "8192"]),
                    Target(gpu="H100", engine_version="0.11.0")).plan
    assert plan.kv_bytes_per_token == 40 * 2 * 128 * 2  # 40 layers x K and V x 1 head x 128 x bf16


def siglip(h: int, layers: int, inter: int, patch: int, image: int) -> int:
    """SigLIP without its head: patch conv with bias, a position row per patch, post LayerNorm."""
    layer = 4 * biased(h, h) + biased(h, inter) + biased(inter, h) + 4 * h
    return 3 * patch * patch * h + h + (image // patch) ** 2 * h + layers * layer + 2 * h


def test_paligemma_tower_and_linear_projector_by_hand():
    m = resolve_model("google/paligemma-3b-pt-224")
    assert m.vision_params == siglip(1152, 27, 4304, 14, 224) + biased(1152, 2048)
    assert m.params == count_params(m) == 2_923_466_480


@pytest.mark.parametrize("name,scale,text", [("HuggingFaceTB/SmolVLM-256M-Instruct", 4, 576),
                                             ("HuggingFaceM4/Idefics3-8B-Llama3", 2, 4096)])
def test_idefics3_connector_shuffles_pixels_into_the_lm_width(name, scale, text):
    m = resolve_model(name)
    v = m.vision
    tower = siglip(v["hidden_size"], v["num_hidden_layers"], v["intermediate_size"], v["patch_size"], v["image_size"])
    assert m.vision_params == tower + v["hidden_size"] * scale * scale * text  # modality_projection, no bias
    assert count_params(m) == m.params


def test_phi35_vision_clip_and_hd_projector_by_hand():
    h, text = 1024, 3072
    layer = 4 * biased(h, h) + biased(h, 4096) + biased(4096, h) + 4 * h
    clip = 3 * 14 * 14 * h + (24 * 24 + 1) * h + h + 24 * layer + 4 * h  # class token, pre / post LayerNorm
    proj = biased(4 * h, text) + biased(text, text) + 2 * 4 * h  # img_projection, glb_GN, sub_GN
    assert resolve_model("microsoft/Phi-3.5-vision-instruct").vision_params == clip + proj


def test_granite_vision_keeps_the_siglip_head_and_four_feature_layers():
    h, inter, text = 1152, 4304, 2048
    head = h + biased(h, 3 * h) + biased(h, h) + 2 * h + biased(h, inter) + biased(inter, h)  # probe, MHA, LN, MLP
    proj = biased(4 * h, text) + biased(text, text) + text  # linear_1 over 4 layers' features, linear_2, newline
    m = resolve_model("ibm-granite/granite-vision-3.2-2b")
    assert m.vision_params == siglip(h, 27, inter, 14, 384) + head + proj
