"""Quantized repacks users serve (names seen in gathered logs) resolve offline to their base checkpoint with the
quantization their config.json carries, and the weights are sized as that config says.

Facts read (not fitted): ybelkada/llava-1.5-7b-hf-awq config.json (its Hub commit 35709a3 'Upload
LlavaForConditionalGeneration': LlavaForConditionalGeneration, awq 4-bit group 128 gemm, modules_to_not_convert
[vision_tower, multi_modal_projector], text_config from meta-llama/Llama-2-7b-hf); TheBloke/llava-v1.5-13B-AWQ
quant_config.json (w_bit 4, q_group_size 128, GEMM, zero_point); unsloth/Qwen2.5-7B-Instruct-bnb-4bit's
quantization_config as a fine-tune of it copies it (bitsandbytes nf4, double quant, llm_int8_skip_modules null,
Qwen2.5-7B shapes: 28 layers, hidden 3584, 4 KV heads, vocab 152064, untied head)."""

from __future__ import annotations

import pytest

from servefit.memory.params import param_groups
from servefit.memory.weights import scheme_for, weight_bytes
from servefit.models import resolve_model

AWQ_4BIT_G128 = 0.5 + 2 / 128 + 0.5 / 128  # packed int4 + fp16 scale + int4 zero per group of 128
NF4_DOUBLE_QUANT = 0.5 + 1 / 64 + 4 / (64 * 256)  # nf4 + 8-bit absmax per 64 + fp32 second-level per 256 blocks


@pytest.mark.parametrize(("ref", "base", "quant", "why"), [
    ("ybelkada/llava-1.5-7b-hf-awq", "llava-hf/llava-1.5-7b-hf", {"quant_method": "awq", "bits": 4, "group_size": 128},
     "its name is the base's with quantization words); assumed AWQ 4-bit, group 128"),
    ("TheBloke/llava-v1.5-13B-AWQ", "llava-hf/llava-1.5-13b-hf", {"quant_method": "awq", "bits": 4, "group_size": 128},
     "its name is the base's family and size, llava1.5-13b); assumed AWQ 4-bit, group 128"),
    ("unsloth/Qwen2.5-7B-Instruct-bnb-4bit", "Qwen/Qwen2.5-7B-Instruct", {"quant_method": "bitsandbytes", "bits": 4},
     "a bitsandbytes 4-bit repack by unsloth); assumed bitsandbytes 4-bit"),
])
def test_resolves_offline_to_the_base(ref: str, base: str, quant: dict[str, object], why: str) -> None:
    m = resolve_model(ref, hf_home="/nonexistent-hf-home")
    assert (m.name, m.resolved_from, m.quantization) == (base, "derivative", quant)
    assert m.assumptions == [f"resolved '{ref}' to catalog entry '{base}' by name ({why}"]


@pytest.mark.parametrize(("ref", "bytes_", "scheme_bytes", "dense_params"), [
    # CLIP tower + projector (the config's modules_to_not_convert), embeddings, head and norms stay fp16
    ("ybelkada/llava-1.5-7b-hf-awq", 4_539_330_560, AWQ_4BIT_G128, 324_487_168 + 2 * 131_334_144 + 266_240),
    ("TheBloke/llava-v1.5-13B-AWQ", 7_919_142_912, AWQ_4BIT_G128, 334_974_976 + 2 * 164_167_680 + 414_720),
    # bitsandbytes leaves the output head and the embeddings in bf16 (skip_modules null: every decoder linear is nf4)
    ("unsloth/Qwen2.5-7B-Instruct-bnb-4bit", 5_546_659_583, NF4_DOUBLE_QUANT, 2 * 544_997_376 + 204_288),
])
def test_weight_bytes(ref: str, bytes_: int, scheme_bytes: float, dense_params: int) -> None:
    m = resolve_model(ref, hf_home="/nonexistent-hf-home")
    g = param_groups(m)
    assert g.embed + g.lm_head + g.norms + g.other == dense_params
    got = weight_bytes(m, 2, scheme_for(m.quantization))
    assert got == bytes_
    assert abs(got - (dense_params * 2 + (m.params - dense_params) * scheme_bytes)) < 1024
