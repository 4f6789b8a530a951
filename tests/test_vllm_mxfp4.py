"""gpt-oss's MXFP4 experts as each release's MoE kernel loads them (engines/vllm/weights.py
mxfp4_backend / mxfp4_factor; vLLM quantization/mxfp4.py::get_mxfp4_backend and
Mxfp4MoEMethod.create_weights / process_weights_after_loading)."""

from __future__ import annotations

import pytest

from servefit.core import LaunchSite
from servefit.engines.vllm.weights import mxfp4_backend
from servefit.pipeline import Target, evaluate, site_from_argv

GiB = 2**30
IMAGE = "vllm/vllm-openai:v0.11.0"


@pytest.mark.parametrize(("version", "cc", "env", "image", "want"), [
    ((0, 10, 1), 90, {}, IMAGE, "marlin"),  # torch 2.7.1: below get_mxfp4_backend's torch 2.8.0
    ((0, 11, 0), 90, {}, None, "marlin"),  # a pip install: no triton_kernels
    ((0, 11, 0), 90, {}, IMAGE, "triton"),
    ((0, 10, 2), 120, {}, IMAGE, "triton"),  # 0.10.2 / 0.11 only ask for compute >= 9
    ((0, 12, 0), 90, {}, None, "triton"),  # vendored from 0.12
    ((0, 12, 0), 120, {}, None, "marlin"),  # 0.12 serves 9.0 - 10.x only
    ((0, 20, 0), 80, {}, None, "marlin"),
    ((0, 12, 0), 90, {"VLLM_MXFP4_USE_MARLIN": "1"}, None, "marlin"),
    ((0, 11, 0), 90, {"VLLM_MXFP4_USE_MARLIN": "1"}, IMAGE, "triton"),  # 0.11 does not read it
    ((0, 11, 0), 90, {"VLLM_USE_FLASHINFER_MOE_MXFP4_BF16": "1"}, None, "flashinfer_sm90"),
    ((0, 12, 0), 100, {}, None, "flashinfer_sm100"),  # FlashInfer is a dependency from 0.12
    ((0, 11, 0), 100, {}, IMAGE, "flashinfer_sm100"),
    ((0, 11, 0), 100, {}, None, "marlin"),  # pip: neither FlashInfer nor triton_kernels
])
def test_backend_per_release(version, cc, env, image, want):
    assert mxfp4_backend(version, cc, env, image) == want


def plan(version: str, image: str | None, gpu: str = "H100", tp: int = 1, env: dict | None = None):
    argv = ["vllm", "serve", "openai/gpt-oss-120b", "--max-model-len", "16000", "--tensor-parallel-size", str(tp)]
    site: LaunchSite = site_from_argv(argv, env or {})
    site.image = image
    return evaluate(site, Target(gpu=gpu, gpus=tp, engine_version=version)).plan


def test_triton_loads_unpadded_experts_with_their_scales_twice():
    marlin, triton = plan("0.11.0", None), plan("0.11.0", IMAGE)
    # 36 layers x 128 experts x (gate, up, down) of 2880 x 2880: Marlin pads to 2944 x 3072 at 0.5 + 1/32
    # bytes a parameter; Triton keeps 2880 x 2880 at 0.5 bytes plus two copies of the 1/32-byte scales
    experts = 36 * 128 * 3
    want = experts * (2944 * 3072 * (0.5 + 1 / 32) - 2880 * 2880 * (0.5 + 2 / 32))
    assert marlin.memory.weights - triton.memory.weights == pytest.approx(want, rel=0.002)
    # the 0.11.0 image logged 64.38 GiB (llm-d), a 0.10.1 pip install 65.97 (vLLM issue 23278)
    assert triton.memory.weights / GiB == pytest.approx(64.12, abs=0.01)
    assert plan("0.10.1", IMAGE).memory.weights == marlin.memory.weights
    # the KV cache gains what the weights shed
    assert triton.detail.resolved("available_kv_cache_bytes") - marlin.detail.resolved("available_kv_cache_bytes") \
        == pytest.approx(marlin.memory.weights - triton.memory.weights, abs=8)


def test_triton_pads_the_rank_intermediate_to_64():
    # TP4: 2880 / 4 = 720 rows per rank, padded to 768 for Triton (and to 768 for Marlin, hidden to 3072)
    marlin, triton = plan("0.12.0", None, tp=4, env={"VLLM_MXFP4_USE_MARLIN": "1"}), plan("0.12.0", None, tp=4)
    experts = 36 * 128 * 3
    want = experts * (768 * 3072 * (0.5 + 1 / 32) - 768 * 2880 * (0.5 + 2 / 32))  # every rank holds every expert
    assert marlin.memory.weights - triton.memory.weights == pytest.approx(want, rel=0.002)


def test_pip_install_of_011_says_what_the_image_would_load():
    notes = [a for a in plan("0.11.0", None).assumptions if "MXFP4" in a]
    assert len(notes) == 1 and "triton_kernels" in notes[0] and "1.79 GiB less per GPU" in notes[0]
    assert not [a for a in plan("0.11.0", IMAGE).assumptions if "MXFP4" in a]
    assert not [a for a in plan("0.12.0", None).assumptions if "MXFP4" in a]


def test_flashinfer_sm100_pads_both_dimensions_to_256():
    b200, marlin = plan("0.12.0", None, gpu="B200"), plan("0.12.0", None, gpu="B200", env={"VLLM_MXFP4_USE_MARLIN": "1"})
    # 2880 -> 3072 on both sides, where Marlin pads the intermediate size to 2944 only
    want = 36 * 128 * 3 * (3072 * 3072 - 2944 * 3072) * (0.5 + 1 / 32)
    assert b200.memory.weights - marlin.memory.weights == pytest.approx(want, rel=0.002)
