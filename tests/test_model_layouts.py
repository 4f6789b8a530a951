"""Exact parameter counts of the layouts added for the Llama / Mistral / Qwen catalog: each total
is a checkpoint's safetensors count (llmfit 1.1.17's model database), reproduced to the element."""

from __future__ import annotations

from servefit.engines.vllm import encoder, vision_tower
from servefit.models import catalog, count_params
from servefit.models.architecture import count_text_params
from servefit.models.spec import ModelSpec
from servefit.models.vision import count_vision_params

MLLAMA_VISION = {"model_type": "mllama_vision_model", "hidden_size": 1280, "num_hidden_layers": 32,
                 "num_global_layers": 8, "intermediate_size": 5120, "image_size": 560, "patch_size": 14,
                 "max_num_tiles": 4, "supported_aspect_ratios": [[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1], [4, 1]],
                 "vision_output_dim": 7680}


def spec(name: str) -> ModelSpec:
    return catalog.lookup(name) or ModelSpec(name="", architecture="", model_type="", num_hidden_layers=1,
                                             hidden_size=1, num_attention_heads=1, num_key_value_heads=1,
                                             head_dim=1, intermediate_size=1, vocab_size=1, max_position_embeddings=1)


def test_mllama_tower_and_projector():
    # 863567379 (tiled ViT, pending.md's breakdown) + projector 7680 -> 4096 with bias
    assert count_vision_params(MLLAMA_VISION, 4096, "mllama") == 863567379 + 7680 * 4096 + 4096
    assert count_vision_params(MLLAMA_VISION, 8192, "mllama") == 863567379 + 7680 * 8192 + 8192


def test_mllama_totals_within_the_cross_attention_extras():
    """The text model as plain layers misses only the cross-attention q/k norms, gates and 8
    image-token embedding rows: 9775192080 - 9775157248 = 32768 + 8 x 258 for the 11B."""
    for layers, h, heads, inter, total in ((40, 4096, 32, 14336, 10670220835), (100, 8192, 64, 28672, 88593355323)):
        m = ModelSpec(name="x", architecture="MllamaForConditionalGeneration", model_type="mllama",
                      num_hidden_layers=layers, hidden_size=h, num_attention_heads=heads, num_key_value_heads=8,
                      head_dim=128, intermediate_size=inter, vocab_size=128256, max_position_embeddings=131072)
        text = count_text_params(m)
        extras = 8 * h + (layers // 5) * (2 * 128 + 2)
        assert text + extras + count_vision_params(MLLAMA_VISION, h, "mllama") == total


def test_pixtral_12b_llava_layout_is_exact():
    m = spec("mistral-community/pixtral-12b")
    assert m.vision_params == 403489792 + 31467520  # encoder without merger + biased 2-layer projector
    assert count_params(m) == 12682739712


def test_qwen3_vl_towers_are_exact():
    # deepstack mergers (3) included; the 8B and 235B share one tower with a 4096-wide output
    assert spec("Qwen/Qwen3-VL-8B-Instruct").vision_params == 576388336
    assert spec("Qwen/Qwen3-VL-235B-A22B-Instruct").vision_params == 576388336
    assert spec("Qwen/Qwen3-VL-2B-Instruct").vision_params == 406957056
    for name, total in (("Qwen/Qwen3-VL-4B-Instruct", 4437815808), ("Qwen/Qwen3-VL-30B-A3B-Instruct", 31070754032),
                        ("Qwen/Qwen3-VL-32B-Instruct", 33357390064)):
        assert count_params(spec(name)) == total


def test_qwen3_5_counts_leave_out_only_the_mtp_layer():
    """params = the checkpoint total minus one MTP layer (fc 2h -> h, three norms, a gated
    attention layer and its MLP / MoE), which engines load only for speculative decoding."""
    m = spec("Qwen/Qwen3.5-27B")
    assert count_params(m) == m.params == 27781427952 - 424699392 == 27356728560  # MTP-stripped copies count this
    moe = spec("Qwen/Qwen3.5-35B-A3B")
    assert count_params(moe) == moe.params == 35107181936  # llmfit also lists MTP-stripped copies at this count
    assert moe.kinds().count("linear") == 30 and moe.mamba["ssm_state_elems"] == 32 * 128 * 128
    assert spec("Qwen/Qwen3.5-0.8B").vision_params == count_vision_params(
        {"model_type": "qwen3_5", "depth": 12, "hidden_size": 768, "intermediate_size": 3072,
         "out_hidden_size": 1024}, 1024, "qwen3_5")


def test_qwen3_towers_profile_like_qwen2_vl_with_their_processor_limits():
    m = spec("Qwen/Qwen3.6-35B-A3B")
    p = encoder.profile(m, {"limit_mm_per_prompt": '{"image": 2}'}, v1=True, max_model_len=131072, max_num_seqs=1,
                        max_num_batched_tokens=8192, chunked_prefill=True, db=2)
    assert p is not None and p.modality == "image"  # videos capped at 25165824 px: 12288 tokens < 16384
    assert (p.items, p.tokens_per_item) == (1, 16384)
    assert p.outputs == 16384 * 2048 * 2
    vl = encoder.profile(spec("Qwen/Qwen3-VL-8B-Instruct"), {}, v1=True, max_model_len=32768, max_num_seqs=4,
                         max_num_batched_tokens=8192, chunked_prefill=True, db=2)
    assert vl is not None and vl.outputs == vl.items * vl.tokens_per_item * 4096 * 4 * 2  # + 3 deepstack levels
    assert vision_tower.sharded(m) and vision_tower.sharded(spec("Qwen/Qwen3-VL-8B-Instruct"))
