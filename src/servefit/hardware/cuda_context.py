"""The memory a process's CUDA context holds on an NVIDIA card, by the card's resident threads: the local
memory the driver reserves for every thread the card can hold at once (SMs x max resident threads per SM,
data/gpu_sms.yaml) is most of it, so an H100's context is about five times a T4's. llama.cpp's plan reads
its free memory after creating the context (engines/llamacpp/planner.py::cuda_context) and vLLM's start-up
profile charges it in the releases that count the whole device (engines/vllm/non_torch.py)."""

from __future__ import annotations

from servefit import data
from servefit.hardware.spec import GpuSpec

MIB = 2**20
# 28 MiB + 1980 B per resident thread: the line through two llama-server logs that show the total and the free
# memory it reads with cudaMemGetInfo right after creating its context (lazily loaded modules, no kernel run
# yet): a Tesla T4 (40 x 1024 threads) "VRAM: 14912 MiB" and "14807 MiB free" (105 MiB; the calibration case
# lcpp-nbchat16's source log) and an H100 80GB HBM3 (132 x 2048) "80552 MiB free" of its 81090 MiB (538 MiB;
# public llama-server logs of 2026). Checked on logs not used for it, where common_memory_breakdown_print shows
# cudaMemGetInfo's total and free side by side: an RTX 3090 (82 x 1536) "24124 = 23860 + ..." (ollama/ollama
# issue #17482; predicted free 23858) and an RTX 5090 (170 x 1536) "32111 = 31605 + ..." (ggml-org/llama.cpp
# PR #25465; predicted 31590); and an RTX 4090 (128 x 1536) logging 23818 MiB free (predicted 23810 with the
# pre-R570 total of 24209 MiB, 23712 with the R570+ 24111). A PyTorch process's context is the same size: the
# vLLM logs that print the free memory at their first snapshot (v1/worker/gpu_worker.py, "Free memory on
# device (free/total GiB) on startup", taken in init_device after torch.cuda.set_device and empty_cache) show
# 0.41 GiB in use on an A100 40GB (0.31.0) and on an A100 80GB (a 0.26.1 main build), 0.44 by this line, and
# 0.10 GiB on a T4 (0.30.0), 0.10 by this line (calibration logs of benchmarks/accuracy/cases/vllm.yaml).
CONTEXT_BASE = 28 * MIB
CONTEXT_PER_THREAD = 1980


def resident_threads(gpu: GpuSpec | None) -> int | None:
    """SMs x max resident threads per SM (data/gpu_sms.yaml), or None for a card not listed there."""
    if gpu is None or gpu.vendor != "nvidia":
        return None
    table = data.load("gpu_sms.yaml")
    sms, per_sm = table["sms"].get(gpu.key), table["threads_per_sm"].get(str(gpu.compute_capability))
    return sms * per_sm if sms and per_sm else None


def context_bytes(gpu: GpuSpec | None) -> int | None:
    """The CUDA context's memory on this card (CONTEXT_BASE + CONTEXT_PER_THREAD x resident threads), or None
    where the card's thread count is not known (not listed, or not NVIDIA): each caller says what it assumes."""
    threads = resident_threads(gpu)
    return CONTEXT_BASE + CONTEXT_PER_THREAD * threads if threads else None
