"""vLLM's online-quantization shorthands for --quantization (vllm/config/quantization.py::_ONLINE_SHORTHANDS,
0.22+): what they store (memory/weights.py ONLINE_SHORTHANDS) and what servefit plans for them."""

from __future__ import annotations

import pytest
from test_vllm_engine import DSV3, L4, LLAMA8B, run

from servefit.memory.weights import ONLINE_SHORTHANDS, online_shorthand, scheme_for

GiB = 2**30
DENSE_FP8 = ("fp8_per_tensor", "fp8_per_block", "fp8_per_channel")


@pytest.mark.parametrize("name", DENSE_FP8)
def test_fp8_shorthands_store_one_byte_a_weight_in_every_linear_layer(name):
    s = online_shorthand(name)
    assert s is not None and (s.name, s.bytes_per_param, s.experts_only, s.bits) == (name, 1.0, False, 8)


def test_mxfp8_adds_an_e8m0_scale_per_32_weights():
    s = online_shorthand("MXFP8")
    assert s is not None and (s.bytes_per_param, s.experts_only, s.bits) == (1.03125, False, 8)


@pytest.mark.parametrize("name,per_weight,bits", [("int8_per_channel_weight_only", 1.0, 8),
                                                  ("nvfp4_per_token", 0.5625, 4)])
def test_moe_only_shorthands_leave_the_linear_layers_alone(name, per_weight, bits):
    s = online_shorthand(name)
    assert s is not None and (s.bytes_per_param, s.experts_only, s.bits) == (per_weight, True, bits)


def test_a_shorthand_is_read_only_as_a_vllm_flag_not_as_a_checkpoint_method():
    # a checkpoint's own quant_method goes through its config; scheme_for (shared with SGLang) does not
    # read the vLLM shorthands, vllm/plan.py does
    assert scheme_for({"quant_method": "fp8"}).bytes_per_param == 1.0
    assert online_shorthand("fp8") is None and online_shorthand(None) is None
    assert set(ONLINE_SHORTHANDS) == {*DENSE_FP8, "mxfp8", "int8_per_channel_weight_only", "nvfp4_per_token"}


@pytest.mark.parametrize("name", DENSE_FP8)
def test_llama8b_with_an_fp8_shorthand_plans_the_fp8_weights(name):
    # Llama-3.1-8B: 6,979,321,856 linear weights in FP8 + the embedding, lm_head (2 x 525,336,576) and norms
    # (266,240) in bf16 + the rope cos/sin cache (131,072 positions x 128 x 2 bytes): 9,114,755,072 bytes,
    # the 8.49 GiB the --quantization fp8 logs of Llama-3.1-8B show
    _, fp8 = run("vllm serve meta-llama/Llama-3.1-8B-Instruct --quantization fp8", LLAMA8B, L4, version="0.24.0")
    _, short = run(f"vllm serve meta-llama/Llama-3.1-8B-Instruct --quantization {name}", LLAMA8B, L4,
                   version="0.24.0")
    assert short.memory.weights == fp8.memory.weights
    assert short.memory.weights == 6_979_321_856 + 2 * (2 * 525_336_576 + 266_240) + 131_072 * 128 * 2 \
        == 9_114_755_072


def test_int8_weight_only_moe_shorthand_leaves_a_dense_model_in_bf16():
    _, bf16 = run("vllm serve meta-llama/Llama-3.1-8B-Instruct", LLAMA8B, L4, version="0.24.0")
    _, short = run("vllm serve meta-llama/Llama-3.1-8B-Instruct --quantization int8_per_channel_weight_only",
                   LLAMA8B, L4, version="0.24.0")
    assert short.memory.weights == bf16.memory.weights
    assert round(short.memory.weights / GiB, 2) == 14.99


def test_a_checkpoint_quantization_wins_over_a_shorthand():
    # DeepSeek-V3's FP8 checkpoint: the flag does not re-store it
    _, ck = run("vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8", DSV3, L4, count=8, version="0.24.0")
    _, flag = run("vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8 --quantization mxfp8", DSV3, L4,
                  count=8, version="0.24.0")
    assert flag.memory.weights == ck.memory.weights
