"""The CUDA context's memory by the card's resident threads (hardware/cuda_context.py), and where vLLM's plan
uses it: the device-wide non-torch figure of V0 0.6.4 and V1 up to 0.9.0, and the free memory V1 checks the
budget against at start (engines/vllm/outcome.py, VLLM020)."""

from __future__ import annotations

from servefit.engines.llamacpp import planner as PL
from servefit.engines.vllm.non_torch import CUDA_CONTEXT, cuda_context_bytes
from servefit.hardware.catalog import resolve_gpu
from servefit.hardware.cuda_context import context_bytes
from servefit.pipeline import Target, evaluate
from servefit.sources import scan_file

GiB = 2**30


def test_context_by_resident_threads():
    # 28 MiB + 1980 B a thread: T4 40 x 1024, A100 108 x 2048, H100 132 x 2048, RTX 3090 82 x 1536
    assert context_bytes(resolve_gpu("T4")) == 29360128 + 1980 * 40960 == 110460928
    assert context_bytes(resolve_gpu("A100-80GB")) == 29360128 + 1980 * 221184 == 467304448
    assert context_bytes(resolve_gpu("H100")) == 29360128 + 1980 * 270336 == 564625408
    assert context_bytes(resolve_gpu("RTX 3090")) == 29360128 + 1980 * 125952 == 278745088
    # vLLM's own first snapshots (calibration logs): 0.41 GiB in use on A100s, 0.10 on a T4
    assert abs(context_bytes(resolve_gpu("A100-80GB")) / GiB - 0.41) < 0.03
    assert abs(context_bytes(resolve_gpu("T4")) / GiB - 0.10) < 0.01


def test_a_card_without_a_thread_count_falls_back_per_engine():
    mi300 = resolve_gpu("MI300X")
    assert context_bytes(mi300) is None and context_bytes(None) is None
    assert cuda_context_bytes(mi300) == cuda_context_bytes(None) == CUDA_CONTEXT == int(0.30 * GiB)
    assert PL.cuda_context(mi300) == PL.CUDA_RESERVE
    # both engines read the same figure where the threads are known
    t4 = resolve_gpu("T4")
    assert PL.cuda_context(t4) == cuda_context_bytes(t4) == 110460928


def _start(util: float):
    cmd = f"vllm serve Qwen/Qwen2.5-1.5B-Instruct --max-model-len 4096 --gpu-memory-utilization {util}\n"
    return evaluate(scan_file("serve.sh", cmd).sites[0], Target(gpu="T4", gpus=1, engine_version="0.11.0")).plan


def test_v1_checks_the_budget_against_the_free_memory_less_this_cards_context():
    # a T4 (14.58 GiB) less its 0.10 GiB context leaves 14.48 GiB free at start (a 0.30.0 log: "Free memory on
    # device (14.46/14.56 GiB) on startup"): 0.99 (14.43 GiB) starts; 0.995 (14.51 GiB) is more than is free
    assert _start(0.99).outcome == "started"
    refused = _start(0.995)
    assert refused.outcome == "rejected_config"
    assert "Free memory on device (14.48/14.58 GiB) on startup is less than desired GPU memory utilization " \
           "(0.995, 14.51 GiB)" in refused.messages


def _profile(mnbt: int, version: str = "0.8.5"):
    cmd = ("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 2048 --enforce-eager --max-num-seqs 1 "
           f"--max-num-batched-tokens {mnbt}\n")
    return evaluate(scan_file("serve.sh", cmd).sites[0], Target(gpu="RTX 4080", gpus=1, engine_version=version)).plan


def test_a_device_wide_release_does_not_count_the_context_twice_at_the_profile():
    # V1 0.8.5 charges the context in its non-torch figure (gpu_worker.py: used - torch allocated; planned with
    # the flat CUDA_CONTEXT there): the profile peak is weights + activation + that figure. At 1024 batched
    # tokens it leaves 0.21 GiB of the RTX 4080, less than its 0.24 GiB context: the profile fits (no room for
    # the KV cache), no OOM
    p = _profile(1024)
    m = p.memory
    margin = p.memory.total - m.weights - m.activation_peak - m.non_torch
    assert 0 < margin < cuda_context_bytes(resolve_gpu("RTX 4080"))
    assert p.outcome == "no_kv_memory"
    assert _profile(4096).outcome == "oom_at_load"  # past the card: OOM in the profile
