"""Mistral 3's Pixtral tower without xformers (vLLM 0.12 - 0.28): the dense block-diagonal attention mask
over all the profiling batch's patches (mm_profiling.py PIXTRAL_DENSE_MASK), read in vllm/model_executor/
models/pixtral.py of the 0.11.0 - 0.33.0 wheels and PyTorch's aten attention.cpp::preprocess_mask."""

from __future__ import annotations

import pytest

from servefit.engines.vllm import encoder, mm_profiling
from servefit.models.catalog import lookup

MISTRAL_SMALL = "mistralai/Mistral-Small-3.2-24B-Instruct-2506"
# one 1540 x 1540 image: (1540 / 14)^2 = 12100 patches; its ViT working set per patch (encoder._fixed_peak):
# 588 fp32 + bf16 pixel values and 3 x 1024 hidden + 3 x 4096 MLP values in bf16
PER_PATCH = 588 * 6 + (3 * 1024 + 3 * 4096) * 2


def _peak(batched: int, version: tuple[int, int, int]) -> encoder.EncoderProfile:
    prof = encoder.profile(lookup(MISTRAL_SMALL), {}, v1=True, max_model_len=16000, max_num_seqs=1024,
                           max_num_batched_tokens=batched, chunked_prefill=True, db=2, tp=1, version=version)
    assert prof is not None and prof.tokens_per_item == 3025  # 55 x 55 merged tokens
    return prof


@pytest.mark.parametrize("version", [(0, 12, 0), (0, 20, 0), (0, 28, 0)])
def test_two_images_hold_a_24200_square_mask(version):
    prof = _peak(8192, version)
    assert prof.items == 2  # 8192 // 3025
    # 24200 patches: the mask is 24200^2 bf16 values; 24200 is a multiple of 8, so SDPA pads no copy
    assert prof.peak == 24200 * 24200 * 2 + 24200 * PER_PATCH == 2_000_081_600


def test_an_unaligned_mask_adds_its_padded_copy():
    # 16384 batched tokens: 5 images, 60500 patches (60500 % 8 = 4): preprocess_mask pads each row to 60504
    prof = _peak(16384, (0, 20, 0))
    assert prof.items == 5
    mask, padded = 60500 * 60500 * 2, 60500 * 60504 * 2
    assert prof.peak == mask + max(padded, 60500 * PER_PATCH) == 14_641_484_000
    # one image (2048 batched tokens: the budget is the image's 3025 tokens): the MLP outweighs the copy
    one = _peak(2048, (0, 20, 0))
    assert one.items == 1
    assert one.peak == 12100 * 12100 * 2 + 12100 * PER_PATCH == 707_220_800


@pytest.mark.parametrize("version", [(0, 11, 0), (0, 29, 0), (0, 33, 0)])
def test_no_mask_with_xformers_or_the_varlen_encoder_attention(version):
    assert _peak(8192, version).peak == 24200 * PER_PATCH


def test_only_the_pixtral_tower_of_mistral3_takes_the_mask():
    assert mm_profiling.pixtral_mask_bytes(lookup(MISTRAL_SMALL), 96, 2, (0, 20, 0)) == (18432, 0)
    assert mm_profiling.pixtral_mask_bytes(lookup(MISTRAL_SMALL), 100, 2, (0, 20, 0)) == (20000, 100 * 104 * 2)
    gemma = lookup("google/gemma-3-27b-it")
    assert mm_profiling.pixtral_mask_bytes(gemma, 100, 2, (0, 20, 0)) == (0, 0)
