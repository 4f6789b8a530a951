"""Which top-k / top-p sampler vLLM's dummy sampler run profiles, per release and VLLM_USE_FLASHINFER_SAMPLER
(v1/sample/ops/topk_topp_sampler.py::TopKTopPSampler.__init__ and flashinfer_sample, read in the 0.9.2,
0.10.0, 0.10.2, 0.11.0, 0.12.0, 0.13.0, 0.19.1 and 0.20.0 wheels)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from servefit.engines.vllm.era import era
from servefit.engines.vllm.plan import resolve
from servefit.engines.vllm.profile import flashinfer_sampler

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import L4, LLAMA8B, run  # noqa: E402


@pytest.mark.parametrize("version,env,expected", [
    ("0.10.1.1", {}, None), ("0.11.0", {}, None),  # FlashInfer's sampler where it is installed
    ("0.10.1.1", {"VLLM_USE_FLASHINFER_SAMPLER": "0"}, False), ("0.11.0", {"VLLM_USE_FLASHINFER_SAMPLER": "1"}, True),
    ("0.13.0", {}, False), ("0.13.0", {"VLLM_USE_FLASHINFER_SAMPLER": "1"}, True),  # opt-in from 0.12
    ("0.9.0", {"VLLM_USE_FLASHINFER_SAMPLER": "1"}, False), ("0.12.0", {}, False),
    ("0.11.1", {}, False), ("0.11.2", {"VLLM_USE_FLASHINFER_SAMPLER": "1"}, True),  # opt-in already in 0.11.1's wheel
])
def test_which_sampler_profiles(version, env, expected):
    cfg, _ = run("vllm serve m --max-model-len 8192", version=version)
    r = resolve(cfg, LLAMA8B, L4, era(version))
    assert flashinfer_sampler(r, env) is expected


def test_flashinfer_sampler_profile_and_the_note_where_it_depends_on_the_install():
    """256 requests x 128,256 logits: 14 bytes each with FlashInfer (the logits in bf16 and fp32, the masked
    logits, the probabilities), 39 native; both above the 2,048-token forward."""
    argv = "vllm serve m --max-model-len 8192"
    _, fi = run(argv, version="0.11.0", env={"VLLM_USE_FLASHINFER_SAMPLER": "1"})
    _, native = run(argv, version="0.11.0", env={"VLLM_USE_FLASHINFER_SAMPLER": "0"})
    _, unset = run(argv, version="0.11.0")
    assert fi.memory.activation_peak == 256 * 128256 * 14
    assert native.memory.activation_peak == unset.memory.activation_peak == 256 * 128256 * 39
    notes = [a for a in unset.assumptions if a.startswith("PyTorch's top-k")]
    assert notes == ["PyTorch's top-k / top-p sampler: vLLM 0.11.0 samples with FlashInfer instead where FlashInfer is "
                     "installed (an optional extra up to 0.11.0) and VLLM_USE_FLASHINFER_SAMPLER is not 0; its profile is "
                     "0.76 GiB smaller, and the KV cache that much larger"]
    assert not [a for a in fi.assumptions + native.assumptions if a.startswith("PyTorch's top-k")]
    _, later = run(argv, version="0.13.0")
    assert not [a for a in later.assumptions if a.startswith("PyTorch's top-k")]
    _, opted = run(argv, version="0.13.0", env={"VLLM_USE_FLASHINFER_SAMPLER": "1"})
    assert opted.memory.activation_peak == 256 * 128256 * 14
    _, v016 = run(argv, version="0.16.0", env={"VLLM_USE_FLASHINFER_SAMPLER": "1"})  # the calibrated 15 from 0.16
    assert v016.memory.activation_peak == 256 * 128256 * 15
