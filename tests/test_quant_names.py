"""The quantization a repack's name says (models/quant_names.py), one spelling per case, and what
the engines make of it: the catalog entry it resolves to, the storage it implies, and vLLM's
refusal of ExLlama checkpoints (config/model.py::_verify_quantization, "Unknown quantization
method")."""

from __future__ import annotations

import pytest

from servefit.engines.vllm import ENGINE
from servefit.hardware.spec import GpuSpec
from servefit.memory.weights import scheme_for
from servefit.models.catalog import lookup, parse_variant
from servefit.pipeline import site_from_argv

AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128}
GPTQ4 = {"quant_method": "gptq", "bits": 4, "group_size": 128}
GPTQ8 = {"quant_method": "gptq", "bits": 8, "group_size": 128}
W4A16 = {"quant_method": "compressed-tensors", "bits": 4, "group_size": 128}
W8A8 = {"quant_method": "compressed-tensors", "bits": 8}
FP8 = {"quant_method": "fp8"}
NVFP4 = {"quant_method": "modelopt_fp4", "bits": 4, "group_size": 16}
BNB4 = {"quant_method": "bitsandbytes", "bits": 4}
BNB8 = {"quant_method": "bitsandbytes", "bits": 8}


@pytest.mark.parametrize("ref,quant", [
    ("someone/Qwen2.5-7B-Instruct-autoawq", AWQ),
    ("someone/Llama-3.1-8B-Instruct-AutoAWQ", AWQ),
    ("someone/Qwen2.5-7B-Instruct-awq-4bit", AWQ),
    ("someone/Qwen2.5-7B-Instruct-AWQ-INT4", AWQ),
    ("someone/Qwen2.5-7B-Instruct-AWQ_INT4", AWQ),
    ("someone/Qwen2.5-7B-Instruct-int4-awq", AWQ),
    ("someone/Qwen2.5-7B-Instruct-4bit-AWQ", AWQ),
    ("someone/Qwen2.5-7B-Instruct-gptq-int4", GPTQ4),
    ("someone/Qwen2.5-7B-Instruct-GPTQ-Int8", GPTQ8),
    ("someone/Qwen2.5-7B-Instruct-4bit-gptq", GPTQ4),
    ("someone/Qwen2.5-7B-Instruct-gptq-8bit", GPTQ8),
    ("someone/Qwen2.5-7B-Instruct-AutoGPTQ", GPTQ4),
    ("someone/Qwen2.5-7B-Instruct-GPTQ-4bit-32g-actorder", {"quant_method": "gptq", "bits": 4, "group_size": 32}),
    ("someone/Qwen2.5-7B-Instruct-w4a16", W4A16),
    ("someone/Qwen2.5-7B-Instruct-W4A16-G64", {**W4A16, "group_size": 64}),
    ("someone/Qwen2.5-7B-Instruct-quantized.w4a16", W4A16),
    ("someone/Qwen2.5-7B-Instruct-w8a8", W8A8),
    ("someone/Qwen2.5-7B-Instruct-quantized.w8a8", W8A8),
    ("someone/Qwen2.5-7B-Instruct-fp8-dynamic", FP8),
    ("someone/Qwen2.5-7B-Instruct-FP8-Dynamic", FP8),
    ("someone/Qwen2.5-7B-Instruct-FP8_DYNAMIC", FP8),
    ("someone/Qwen2.5-7B-Instruct-nvfp4", NVFP4),
    ("someone/Qwen2.5-7B-Instruct-NVFP4A16", NVFP4),
    ("someone/Qwen2.5-7B-Instruct-MXFP4", {"quant_method": "mxfp4"}),
    ("someone/Qwen2.5-7B-Instruct-bnb-4bit", BNB4),
    ("someone/Qwen2.5-7B-Instruct-bnb-8bit", BNB8),
    ("someone/Qwen2.5-7B-Instruct-bnb-nf4", BNB4),
    ("someone/Qwen2.5-7B-Instruct-unsloth-bnb-4bit", BNB4),
    ("someone/Qwen2.5-7B-Instruct-exl2-4.0bpw", {"quant_method": "exl2", "bits": 4.0}),
    ("someone/Qwen2.5-7B-Instruct-6.5bpw-h8-exl2", {"quant_method": "exl2", "bits": 6.5}),
    ("someone/Qwen2.5-7B-Instruct-exl2", {"quant_method": "exl2"}),
    ("Qwen2.5-7B-Instruct-Q4_K_M.gguf", {"quant_method": "gguf", "type": "Q4_K_M", "bits": 4}),
    ("Qwen2.5-7B-Instruct-IQ3_XXS.gguf", {"quant_method": "gguf", "type": "IQ3_XXS", "bits": 3}),
    ("someone/Qwen2.5-7B-Instruct-Q8_0", {"quant_method": "gguf", "type": "Q8_0", "bits": 8}),
    ("someone/Qwen2.5-7B-Instruct-GGUF", {"quant_method": "gguf"}),
])
def test_each_spelling_resolves_to_the_base_with_its_scheme(ref, quant):
    assert parse_variant(ref).quant == quant
    m = lookup(ref)
    assert m is not None
    assert m.name == ("Qwen/Qwen2.5-7B-Instruct" if "Qwen" in ref else "meta-llama/Llama-3.1-8B-Instruct")
    assert m.quantization == quant


def test_the_quant_words_leave_the_stem():
    plain = parse_variant("Qwen/Qwen2.5-7B-Instruct").stem
    for ref in ("someone/Qwen2.5-7B-Instruct-autoawq", "someone/Qwen2.5-7B-Instruct-gptq-4bit-gs32",
                "someone/Qwen2.5-7B-Instruct-6.5bpw-h8-exl2", "someone/Qwen2.5-7B-Instruct-NVFP4A16"):
        assert parse_variant(ref).stem == plain, ref
    # h8 is a word of the model's name unless the name is an ExLlama one
    assert parse_variant("someone/Qwen2.5-7B-h8-Instruct").stem != plain


def test_unquantized_qat_weights_are_not_gguf():
    # google/gemma-3-*-qat-q4_0-unquantized holds the QAT weights in bf16; the -gguf one is the file
    assert parse_variant("someone/Qwen2.5-7B-Instruct-qat-q4_0-unquantized").quant is None
    assert parse_variant("someone/Qwen2.5-7B-Instruct-qat-q4_0-gguf").quant == {
        "quant_method": "gguf", "type": "Q4_0", "bits": 4}


def test_labels_say_the_bits_and_group():
    assert parse_variant("x/Qwen2.5-7B-Instruct-gptq-4bit-32g").quant_label == "GPTQ 4-bit, group 32"
    assert parse_variant("x/Qwen2.5-7B-Instruct-exl2-4.65bpw").quant_label == "ExLlamaV2 4.65 bits per weight"
    assert parse_variant("x/Qwen2.5-7B-Instruct-autoawq").quant_label == "AWQ 4-bit, group 128"


def test_exl2_storage_is_its_bits_per_weight():
    # 6.5 bits per weight: 6.5 / 8 = 0.8125 bytes per linear weight
    s = scheme_for({"quant_method": "exl2", "bits": 6.5})
    assert s is not None and s.bytes_per_param == 0.8125 and s.bits == 6
    # AWQ 4-bit, group 32: 0.5 + 2 / 32 (fp16 scale) + 0.5 / 32 (packed zero) bytes per weight
    a = scheme_for({"quant_method": "awq", "bits": 4, "group_size": 32})
    assert a is not None and a.bytes_per_param == 0.5 + 2 / 32 + 0.5 / 32


def test_vllm_refuses_an_exl2_checkpoint():
    cfg = ENGINE.parse(site_from_argv(["vllm", "serve", "someone/Qwen2.5-7B-Instruct-exl2-4.0bpw"]), "0.10.0")
    gpu = GpuSpec(key="l4", name="NVIDIA L4", vendor="nvidia", memory_bytes=23_654_957_056, compute_capability=89)
    m = lookup("someone/Qwen2.5-7B-Instruct-exl2-4.0bpw")
    assert m is not None
    plan = ENGINE.plan(cfg, m, gpu, 1)
    msgs = [f.message for f in cfg.findings + plan.findings if f.code == "VLLM014"]
    assert msgs == ["Unknown quantization method: exl2 (not in vLLM 0.10.0)"]


# --- a config.json's quantization_config ------------------------------------------------------------

def _ct(**weights) -> dict:
    return {"quant_method": "compressed-tensors", "config_groups": {"group_0": {"targets": ["Linear"],
                                                                                  "weights": weights}}}


@pytest.mark.parametrize("config,bytes_per_param,bits", [
    # FP8 per channel (RedHatAI ...-FP8-dynamic): one byte per weight, not the 4-bit default
    (_ct(num_bits=8, type="float", strategy="channel", group_size=None), 1.0, 8),
    (_ct(num_bits=8, type="int", strategy="channel"), 1.0, 8),  # W8A8 INT8
    # W4A16 group 128: 0.5 + 2 / 128 (scale) + 0.5 / 128 (zero) bytes
    (_ct(num_bits=4, type="int", strategy="group", group_size=128), 0.5 + 2 / 128 + 0.5 / 128, 4),
    # NVFP4: 4 bits + one fp8 scale per 16 weights; MXFP4: one e8m0 scale per 32
    (_ct(num_bits=4, type="float", strategy="tensor_group", group_size=16), 0.5 + 1 / 16, 4),
    (_ct(num_bits=4, type="float", strategy="group", group_size=32), 0.5 + 1 / 32, 4),
    # ModelOpt names the algorithm: NVFP4 is vLLM's modelopt_fp4, FP8 stays one byte
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}, 0.5 + 1 / 16, 4),
    ({"quant_method": "modelopt", "quantization": {"quant_algo": "FP8"}}, 1.0, 8),
])
def test_config_quantization_storage(config, bytes_per_param, bits):
    s = scheme_for(config)
    assert s is not None and (s.bytes_per_param, s.bits) == (bytes_per_param, bits)


def test_modelopt_nvfp4_is_named_as_vllm_names_it_and_a_flag_still_wins():
    s = scheme_for({"quant_method": "modelopt", "quant_algo": "NVFP4"})
    assert s is not None and s.name == "modelopt_fp4"
    fp8 = scheme_for(_ct(num_bits=4, type="int", group_size=128), "fp8")
    assert fp8 is not None and (fp8.name, fp8.bytes_per_param) == ("fp8", 1.0)


def test_an_exl2_config_is_read_not_refused():
    from servefit.budget import BadValue
    from servefit.models.config_json import validate_config

    validate_config({"quantization_config": {"quant_method": "exl2", "bits": 4.65, "head_bits": 6}})
    with pytest.raises(BadValue, match="not a whole number"):
        validate_config({"quantization_config": {"quant_method": "gptq", "bits": 4.5}})


@pytest.mark.parametrize("config, bytes_per_param", [
    ({"quant_method": "mlx", "bits": 4, "group_size": 64}, 0.5 + 4 / 64),  # 4-bit codes, fp16 scale + bias per 64
    ({"quant_method": "mlx", "bits": 8}, 1 + 4 / 64),  # MLX's default group is 64
])
def test_mlx_repacks_are_sized_as_mlx_stores_them(config, bytes_per_param):
    # mlx-community/...-4bit was sized at 2 bytes per parameter while the assumption said "MLX 4-bit"
    s = scheme_for(config)
    assert s is not None and (s.name, s.bytes_per_param) == ("mlx", bytes_per_param)


def test_qwen_own_fp8_checkpoints_are_block_wise():
    from servefit.models.name_variant import parse_variant

    # Qwen's -FP8 checkpoints ship weight_block_size [128, 128]; a third party's FP8 name says nothing of blocks
    assert parse_variant("Qwen/Qwen3-235B-A22B-FP8").quant == {"quant_method": "fp8", "weight_block_size": [128, 128]}
    assert parse_variant("someone/Qwen3-235B-A22B-FP8").quant == FP8
