"""V0's profiling run for Llama-3.2-Vision (mllama): worker/enc_dec_model_runner.py::profile_run builds
max_num_seqs dummy sequences, each with one image of max_num_tiles tiles, and the vision tower runs them
as one batch (mllama.py::MllamaVisionModel.forward, read in the 0.6.6 and 0.7.3 wheels). Figures by hand
from the 11B's vision config: 4 tiles of 560 px, patch 14 -> 1601 patches, padded to 1608; width 1280,
MLP 5120, 5 stored intermediate layers."""

from __future__ import annotations

import sys
from pathlib import Path

from servefit.models.catalog import lookup

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import H100, run  # noqa: E402

ARGV = "vllm serve meta-llama/Llama-3.2-11B-Vision --max-model-len 65536 --enforce-eager --max-num-seqs {}"
L = 4 * 1608  # tower tokens per image


def _tower(images: int, tp: int = 1) -> int:
    """The attention mask (L x L per image) and, per token, 5 stored hidden states and fc1 + GELU."""
    return images * L * L * 2 + images * L * (5 * 1280 + 2 * 5120 // tp) * 2


def test_v0_tower_runs_one_image_per_dummy_sequence():
    """The PR #12126 command (128 sequences): the tower's 35.38 GiB, not the 65,536-token LM forward
    (7.25 GiB), is the peak; vLLM logged 36.63 GiB there (see encoder.py::_mllama_v0)."""
    m = lookup("meta-llama/Llama-3.2-11B-Vision")
    _, p = run(ARGV.format(128), model=m, gpu=H100, version="0.6.6")
    assert p.memory.activation_peak == _tower(128)
    assert round(p.memory.activation_peak / 2**30, 2) == 35.38


def test_v0_tower_scales_with_max_num_seqs_not_batched_tokens():
    """8 sequences: 2.2 GiB of tower, so the LM forward of all 65,536 tokens is the peak again."""
    m = lookup("meta-llama/Llama-3.2-11B-Vision")
    _, p = run(ARGV.format(8), model=m, gpu=H100, version="0.6.6")
    fwd = 65536 * (3 * 4096 + 3 * 14336) * 2  # V0 runs eagerly: profile.EAGER_HIDDEN
    assert _tower(8) < fwd and p.memory.activation_peak == fwd
    _, p32 = run(ARGV.format(32), model=m, gpu=H100, version="0.6.6")
    assert p32.memory.activation_peak == _tower(32) > fwd


def test_v0_tower_mlp_is_sharded_over_tp():
    m = lookup("meta-llama/Llama-3.2-11B-Vision")
    _, p = run(ARGV.format(128) + " --tensor-parallel-size 2", model=m, gpu=H100, count=2, version="0.6.6")
    assert p.memory.activation_peak == _tower(128, tp=2)


def test_v0_dummy_sequences_and_tokens():
    """One logit row per dummy sequence for the sampler; the LM runs the whole token budget; V1 is not
    modelled for mllama (no tower term); a zero image limit drops it."""
    from servefit.engines.vllm import encoder

    m = lookup("meta-llama/Llama-3.2-11B-Vision")
    args = dict(max_model_len=65536, max_num_seqs=128, max_num_batched_tokens=65536, chunked_prefill=False, db=2,
                version=(0, 6, 6))
    p = encoder.profile(m, {}, v1=False, **args)
    assert p is not None and (p.seqs, p.items, p.lm_tokens, p.tokens_per_item) == (128, 128, 65536, 4 * 1601)
    two = encoder.profile(m, {"limit_mm_per_prompt": '{"image": 2}'}, v1=False, **dict(args, max_num_batched_tokens=8192))
    assert two is not None and (two.seqs, two.items, two.lm_tokens) == (128, 256, 8192)
    assert encoder.profile(m, {"limit_mm_per_prompt": '{"image": 0}'}, v1=False, **args) is None
    assert encoder.profile(m, {}, v1=True, **args) is None
