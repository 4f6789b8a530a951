"""vLLM 0.8 - 0.10 run V0 where V1 lacks a feature (engines/vllm/v1_oracle.py, read from engine/arg_utils.py::
EngineArgs._is_v1_supported_oracle in the 0.8.0, 0.8.2, 0.8.5, 0.9.0, 0.9.2, 0.10.0, 0.10.1.1 and 0.10.2
wheels), and a GGUF file's weights in its own type (memory/weights.py gguf_scheme)."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from servefit.engines.vllm.non_torch import CUDA_CONTEXT, lmem_growth_bytes
from servefit.hardware.catalog import resolve_gpu
from servefit.memory.weights import gguf_scheme, scheme_for

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import DSV3, LLAMA8B, run  # noqa: E402

T4, L4, H100, B200 = (resolve_gpu(n) for n in ("T4", "L4", "H100", "B200"))
BASE = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 4096"


def v0_note(plan) -> str | None:
    return next((a for a in plan.assumptions if "runs this command on its V0 engine" in a), None)


@pytest.mark.parametrize("version, v0", [("0.7.3", False), ("0.8.0", True), ("0.9.0", True), ("0.10.1.1", True),
                                         ("0.10.2", False), ("0.11.0", False)])
def test_turing_runs_v0_from_08_until_0102(version, v0):
    # "Compute Capability < 8.0": the oracle's check up to 0.10.1.1; 0.7.3 is V0 by default (no note: no fallback)
    _, plan = run(BASE, gpu=T4, version=version)
    note = v0_note(plan)
    assert (note is not None) == v0, plan.assumptions
    if v0:
        assert "compute capability 7.5" in note


def test_fallback_changes_what_non_torch_counts():
    # V1 up to 0.9.0 charges the whole device (CUDA context included); V0 0.9.0 measures from its snapshot,
    # so the T4 that falls back carries its lone growth alone
    _, plan = run(BASE, gpu=T4, version="0.9.0")
    assert plan.memory.non_torch == lmem_growth_bytes(T4)
    _, forced = run(BASE, gpu=T4, version="0.9.0", env={"VLLM_USE_V1": "1"})  # no fallback when set
    assert v0_note(forced) is None
    assert forced.memory.non_torch == lmem_growth_bytes(T4) + CUDA_CONTEXT


@pytest.mark.parametrize("quant, version, v0", [("gguf", "0.8.2", True), ("gguf", "0.8.5", True), ("gguf", "0.9.0", False),
                                                ("bitsandbytes", "0.8.2", True), ("bitsandbytes", "0.8.5", False)])
def test_quantization_fallback_by_release(quant, version, v0):
    _, plan = run(f"{BASE} --quantization {quant}", gpu=L4, version=version)
    assert (v0_note(plan) is not None) == v0, plan.assumptions


@pytest.mark.parametrize("gpu, version, v0", [(L4, "0.10.1.1", True), (H100, "0.10.1.1", False), (H100, "0.8.0", True),
                                              (L4, "0.10.2", True), (B200, "0.10.2", False)])
def test_fp8_kv_cache_falls_back_where_v1_cannot_run_it(gpu, version, v0):
    # FlashAttention 3 (Hopper) only until 0.10.1; 0.8.0 takes no --kv-cache-dtype at all; 0.10.2 adds Blackwell
    _, plan = run(f"{BASE} --kv-cache-dtype fp8", gpu=gpu, version=version)
    assert (v0_note(plan) is not None) == v0, plan.assumptions


def test_flashinfer_takes_fp8_kv_in_0102_only():
    cmd = f"{BASE} --kv-cache-dtype fp8"
    assert v0_note(run(cmd, gpu=L4, version="0.10.2", env={"VLLM_ATTENTION_BACKEND": "FLASHINFER"})[1]) is None
    assert v0_note(run(cmd, gpu=L4, version="0.10.1.1", env={"VLLM_ATTENTION_BACKEND": "FLASHINFER"})[1]) is not None


def test_lora_pipeline_and_encoder_decoder():
    assert "--enable-lora" in v0_note(run(f"{BASE} --enable-lora", gpu=L4, version="0.8.2")[1])
    assert v0_note(run(f"{BASE} --enable-lora", gpu=L4, version="0.8.5")[1]) is None
    mllama = replace(LLAMA8B, architecture="MllamaForConditionalGeneration")
    assert "MllamaForConditionalGeneration" in v0_note(run(BASE, model=mllama, gpu=L4, version="0.10.1.1")[1])
    assert v0_note(run(BASE, gpu=L4, version="0.10.1.1")[1]) is None


def test_gguf_bytes_per_parameter_follow_the_file_type():
    assert gguf_scheme("Q8_0").bytes_per_param == 34 / 32
    assert gguf_scheme("q4_k_m").bytes_per_param == 144 / 256
    assert gguf_scheme("Q6_K").bytes_per_param == 210 / 256
    assert gguf_scheme("BF16").bytes_per_param == 2
    assert gguf_scheme("").bytes_per_param == 144 / 256  # not named: Q4_K, as before
    s = scheme_for({"quant_method": "gguf", "type": "Q8_0"})
    assert s is not None and s.embeddings and s.bytes_per_param == 34 / 32


def _calibration_row(case_id: str) -> dict:
    run_py = Path(__file__).parents[1] / "benchmarks" / "accuracy" / "run.py"
    spec = importlib.util.spec_from_file_location("accuracy_run_oracle", run_py)
    assert spec and spec.loader
    acc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(acc)
    case = next(c for c in acc.load_cases("vllm", "calibration") if c["id"] == case_id)
    return acc.compare(case)


def test_eformat_gguf_q8_case_runs_v0_with_q8_weights():
    # calibration: a Q8_0 GGUF Llama-3.2-3B on an RTX 4070 Laptop with 0.8.2, which logs V0's worker.py lines.
    # Before: planned as V1 (non-torch +0.30 GiB CUDA context, +1533%) with 4.5-bit weights (-31%, concurrency +31%)
    row = _calibration_row("eformat-rtx4070laptop-llama32-3b-gguf-q8")
    err = row["errors"]
    assert row["pairs"]["non_torch_gib"] == (0.02, 0.027)
    assert abs(err["weights_gib"] - -0.016) <= 0.005, err
    assert abs(err["max_concurrency"] - 0.030) <= 0.01, err
    assert abs(err["kv_cache_gib"] - 0.032) <= 0.01, err


def test_gguf_embedding_stays_quantized_on_the_first_pipeline_stage():
    # tied embeddings: the first stage holds the embedding beside its half of the layers, the last stage
    # nothing more (its lm_head is the embedding), so the stages differ by the Q8_0 embedding alone
    tied = replace(LLAMA8B, tie_word_embeddings=True, quantization={"quant_method": "gguf", "type": "Q8_0"},
                   params=LLAMA8B.params - 128256 * 4096)  # no lm_head of its own
    _, plan = run("vllm serve x.gguf --pipeline-parallel-size 2 --max-model-len 4096", model=tied, gpu=H100,
                  count=2, version="0.10.2")
    first, last = (d.weights for d in plan.devices)
    embed_q8 = 128256 * 4096 * 34 / 32
    assert abs((first - last) - embed_q8) / embed_q8 < 0.02, (first - last, embed_q8)


@pytest.mark.parametrize("extra, version, why", [
    ("--num-scheduler-steps 8", "0.9.0", "--num-scheduler-steps"),
    ("--num-scheduler-steps 8", "0.10.1.1", None),  # gone from 0.10.1.1's oracle
    ("--num-scheduler-steps 1", "0.9.0", None),  # the default
    ("--scheduling-policy priority", "0.8.5", "--scheduling-policy"),
    ("--scheduling-policy priority", "0.9.2", None),
    ("--cpu-offload-gb 4", "0.8.2", "--cpu-offload-gb"),
    ("--cpu-offload-gb 4", "0.8.5", None),
    ("--cpu-offload-gb 0", "0.8.2", None),
    ("--disable-async-output-proc", "0.10.2", "--disable-async-output-proc"),
    ("--enable-prompt-embeds", "0.10.2", "--enable-prompt-embeds"),
    ("--speculative-model [ngram] --num-speculative-tokens 3", "0.8.2", "speculative decoding (ngram)"),
    ('--speculative-config {"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}', "0.8.5",
     "speculative decoding (ngram)"),
    ('--speculative-config {"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}', "0.9.0", None),
])
def test_scheduler_and_speculative_flags_by_release(extra, version, why):
    note = v0_note(run(f"{BASE} {extra}", gpu=L4, version=version)[1])
    assert (note is None) if why is None else (note is not None and f"V1 lacks {why} in this release" in note), note


def test_fp8_kv_backends_by_release():
    cmd = f"{BASE} --kv-cache-dtype fp8"
    triton = {"VLLM_ATTENTION_BACKEND": "TRITON_ATTN_VLLM_V1"}
    assert v0_note(run(cmd, gpu=L4, version="0.10.2", env=triton)[1]) is None  # Ada: supports_fp8 (8.9)
    assert v0_note(run(cmd, gpu=resolve_gpu("A100"), version="0.10.2", env=triton)[1]) is not None
    assert v0_note(run(cmd, gpu=B200, version="0.10.0")[1]) is None  # capability 10.0 from 0.10.0
    assert v0_note(run(cmd, gpu=B200, version="0.9.2")[1]) is not None
    # an MLA model on Hopper: FlashAttention 3 takes it before 0.10.2 (the check does not ask about MLA)
    assert v0_note(run(cmd, model=DSV3, gpu=H100, count=8, version="0.10.1.1")[1]) is None
    # 0.10.2 asks the MLA backend instead: FlashMLA (the default) takes it, FlashAttention does not
    assert v0_note(run(cmd, model=DSV3, gpu=H100, count=8, version="0.10.2")[1]) is None
    flash = {"VLLM_ATTENTION_BACKEND": "FLASH_ATTN_VLLM_V1"}
    assert v0_note(run(cmd, model=DSV3, gpu=H100, count=8, version="0.10.2", env=flash)[1]) is not None
