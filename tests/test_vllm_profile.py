"""vLLM's start-up profile terms, replayed from the engine's code: which rank runs the dummy
sampler, which graphs get captured in which era, the FA3 split buffers, and the non-torch
snapshot semantics per release. Every number here is computed by hand from the engine's shapes."""

from __future__ import annotations

import sys
from pathlib import Path

from servefit.engines.vllm.profile import (
    CUDA_CONTEXT,
    FA3_MAX_SPLITS,
    GRAPH_FULL_PER_LAYER,
    GRAPH_PIECEWISE_PER_LAYER,
    PCIE_NON_TORCH_GIB,
    SAMPLER_BYTES_PER_LOGIT,
    non_torch_bytes,
)
from servefit.hardware.catalog import resolve_gpu

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import H100, L4, run  # noqa: E402

GiB = 2**30
PADDED_VOCAB = 128256  # Llama-3's vocab is already a multiple of vLLM's padding (64)


def test_v0_driver_peaks_at_the_dummy_sampler_not_on_top_of_the_forward():
    # V0 0.7: 2048-token chunks with chunked prefill off at 4096 -> 4096 tokens over 256 requests.
    # The forward's peak (4096 x (4 x 4096 + 3 x 14336) x 2 B = 0.45 GiB) is freed before the
    # driver samples 256 x 128256 logits at 39 B each (1.19 GiB): the peak is the larger one.
    _, p = run("vllm serve m --max-model-len 4096", version="0.7.3")
    fwd = 4096 * (4 * 4096 + 3 * 14336) * 2
    sampler = 256 * PADDED_VOCAB * SAMPLER_BYTES_PER_LOGIT
    assert sampler > fwd
    assert p.memory.activation_peak == sampler


def test_v0_forward_wins_when_it_is_larger_than_the_sampler():
    _, p = run("vllm serve m --max-model-len 32768 --max-num-seqs 8", version="0.7.3")
    assert p.memory.activation_peak == 32768 * (4 * 4096 + 3 * 14336) * 2


def test_graph_count_per_era():
    # 0.10: piecewise only, sizes [1, 2, 4] + 8..512 step 8 (max_num_seqs 256 -> cap 512)
    _, p10 = run("vllm serve m --max-model-len 8192", version="0.10.1")
    assert p10.detail.cuda_graph_sizes == 3 + 64
    assert p10.memory.cuda_graphs == 67 * 32 * GRAPH_PIECEWISE_PER_LAYER
    # 0.11 (FULL_AND_PIECEWISE): 35 piecewise sizes at max_num_seqs 128 (cap 256), plus full decode
    # graphs for the sizes up to 128: [1, 2, 4] + 8..128 step 8 = 19
    _, p11 = run("vllm serve m --max-model-len 8192 --max-num-seqs 128", version="0.11.0")
    assert p11.detail.cuda_graph_sizes == 35 + 19
    assert p11.memory.cuda_graphs == 32 * (35 * GRAPH_PIECEWISE_PER_LAYER + 19 * GRAPH_FULL_PER_LAYER)


def test_fa3_split_buffers_only_on_hopper_full_graphs():
    argv = "vllm serve m --max-model-len 8192 --max-num-seqs 128"
    _, hopper = run(argv, gpu=H100, version="0.11.0")
    _, ada = run(argv, gpu=L4, version="0.11.0")
    # [32 splits, 32 heads, 128 tokens, 128 head_dim] fp32 + the fp32 LSE [32, 32, 128]
    split = FA3_MAX_SPLITS * 32 * 128 * (128 + 1) * 4
    assert hopper.memory.cuda_graphs - ada.memory.cuda_graphs == split
    # no full graphs before 0.11, so no split buffers on Hopper either
    _, h10 = run(argv, gpu=H100, version="0.10.1")
    _, l10 = run(argv, gpu=L4, version="0.10.1")
    assert h10.memory.cuda_graphs == l10.memory.cuda_graphs


def test_graph_pool_grows_with_tp_and_activation_quantization():
    _, one = run("vllm serve m --max-model-len 8192", gpu=H100, version="0.10.1")
    _, two = run("vllm serve m --max-model-len 8192 -tp 2", gpu=H100, version="0.10.1", count=2)
    assert two.memory.cuda_graphs == int(one.memory.cuda_graphs * 1.3)
    _, fp8 = run("vllm serve m --max-model-len 8192 --quantization fp8", gpu=H100, version="0.10.1")
    assert fp8.memory.cuda_graphs == int(one.memory.cuda_graphs * 1.8)


def test_non_torch_by_snapshot_era_and_interconnect():
    a100, rtx = resolve_gpu("A100-80GB"), resolve_gpu("RTX 4090")
    # up to 0.6.4 vLLM charged all device memory torch had not allocated: the CUDA context too
    assert non_torch_bytes(1, 1, a100, (0, 6, 4)) == int(0.13 * GiB) + CUDA_CONTEXT
    assert non_torch_bytes(1, 1, a100, (0, 7, 3)) == int(0.13 * GiB)
    # PCIe cards: few NCCL channels, no custom all-reduce, flat in the world size
    assert non_torch_bytes(2, 2, rtx, (0, 7, 3)) == non_torch_bytes(8, 8, rtx, (0, 7, 3)) == int(PCIE_NON_TORCH_GIB * GiB)
    assert non_torch_bytes(2, 2, a100, (0, 7, 3)) == int(0.55 * GiB)
    assert non_torch_bytes(1, 1, rtx, (0, 7, 3)) == int(0.13 * GiB)
