"""The findings for the outcome of vLLM's start-up: the plan (outcome.py::outcome) says what
happened and with which numbers; each rule here turns one outcome into its finding.

vLLM's own checks, by outcome:
- VLLM020: v1/worker/gpu_worker.py::init_device (free memory below the requested utilization);
- VLLM005: weights (and the profiling run) larger than the GPU: CUDA out of memory;
- VLLM004: v1/core/kv_cache_utils.py (no memory left for the cache blocks);
- VLLM003: kv_cache_utils.py::_check_enough_kv_cache_memory (one max-length request does not fit);
- VLLM025: config/compilation.py::resolve_cudagraph_mode_and_sizes (fewer Mamba cache blocks than
  --max-num-seqs for full CUDA graphs; outcome.py::mamba_blocks_short).
"""

from __future__ import annotations

from dataclasses import dataclass

from servefit.core import EngineConfig, Finding
from servefit.hardware.spec import GpuSpec
from servefit.rules.catalog import finding
from servefit.rules.registry import rule

GiB = 2**30


@dataclass
class Verdict:
    """Why the start-up failed (the rule code that says so) and the numbers its message quotes."""

    code: str = ""  # "" when vLLM starts
    reason: str = ""  # for VLLM005: "load" (weights), "profile" (weights + activation peak) or "kv" (a set KV size)
    util: float = 0.0
    budget: int = 0
    free_at_start: int = 0
    avail: int = 0  # KV memory after weights, activations, non-torch memory (and graphs since 0.20)
    check: int = 0  # what vLLM compares a request's KV need with
    needed: int = 0
    max_len: int = 0
    fit: int = 0
    max_num_batched_tokens: int = 0
    max_num_seqs: int = 0  # for VLLM025 (fit: the blocks the pool has)


def findings(cfg: EngineConfig, gpu: GpuSpec, plan, v: Verdict, cudagraph_subtracted: bool) -> list[Finding]:
    """The finding of the outcome, if vLLM does not start."""
    rules = {"VLLM020": free_memory_below_budget, "VLLM005": weights_exceed_gpu, "VLLM004": no_kv_cache_memory,
             "VLLM003": max_model_len_exceeds_kv_cache, "VLLM025": mamba_blocks_below_max_num_seqs}
    check = rules.get(v.code)
    return [check(cfg, gpu, plan, v, cudagraph_subtracted)] if check is not None else []


@rule("VLLM020")
def free_memory_below_budget(cfg: EngineConfig, gpu: GpuSpec, plan, v: Verdict, cg_in: bool) -> Finding:
    msg = (f"Free memory on device ({v.free_at_start / GiB:.2f}/{gpu.memory_bytes / GiB:.2f} GiB) on startup is less "
           f"than desired GPU memory utilization ({v.util}, {v.budget / GiB:.2f} GiB)")
    return finding("VLLM020", msg, span=cfg.spans.get("gpu_memory_utilization"), setting="gpu_memory_utilization")


@rule("VLLM005")
def weights_exceed_gpu(cfg: EngineConfig, gpu: GpuSpec, plan, v: Verdict, cg_in: bool) -> Finding:
    mem = plan.memory
    if v.reason == "load":
        return finding("VLLM005", f"weights need {mem.weights / GiB:.2f} GiB per GPU, the {gpu.name} has "
                                  f"{gpu.memory_bytes / GiB:.2f} GiB: CUDA out of memory while loading",
                       setting="model", span=cfg.spans.get("model"))
    if v.reason == "kv":
        return finding("VLLM005", f"weights ({mem.weights / GiB:.2f} GiB), non-torch memory ({mem.non_torch / GiB:.2f} "
                                  f"GiB) and the {mem.kv_cache / GiB:.2f} GiB KV cache that --kv-cache-memory-bytes "
                                  f"sets exceed the {gpu.name}'s {gpu.memory_bytes / GiB:.2f} GiB: CUDA out of memory "
                                  "allocating the KV cache (the setting bypasses --gpu-memory-utilization)",
                       setting="kv_cache_memory_bytes", span=cfg.spans.get("kv_cache_memory_bytes"))
    return finding("VLLM005", f"weights ({mem.weights / GiB:.2f} GiB) and the profiling run's activation peak "
                              f"({mem.activation_peak / GiB:.2f} GiB, {v.max_num_batched_tokens:,} tokens) exceed the "
                              f"{gpu.name}: CUDA out of memory during start-up", setting="max_num_batched_tokens",
                   span=cfg.spans.get("max_num_batched_tokens") or cfg.spans.get("max_model_len"))


@rule("VLLM004")
def no_kv_cache_memory(cfg: EngineConfig, gpu: GpuSpec, plan, v: Verdict, cg_in: bool) -> Finding:
    mem = plan.memory
    msg = "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
    return finding("VLLM004", f"{mem.weights / GiB:.2f} GiB weights + {mem.activation_peak / GiB:.2f} GiB activations + "
                              f"{(mem.non_torch + (mem.cuda_graphs if cg_in else 0)) / GiB:.2f} GiB other leave "
                              f"{v.avail / GiB:.2f} GiB of the {v.budget / GiB:.2f} GiB budget: {msg}",
                   span=cfg.spans.get("gpu_memory_utilization"), setting="gpu_memory_utilization")


@rule("VLLM003")
def max_model_len_exceeds_kv_cache(cfg: EngineConfig, gpu: GpuSpec, plan, v: Verdict, cg_in: bool) -> Finding:
    return finding("VLLM003", f"max-model-len {v.max_len:,} needs {v.needed / GiB:.2f} GiB of KV cache per GPU, "
                              f"{v.check / GiB:.2f} GiB is left on the {gpu.name}; the largest that fits is {v.fit:,}",
                   span=cfg.spans.get("max_model_len"), setting="max_model_len")


@rule("VLLM025")
def mamba_blocks_below_max_num_seqs(cfg: EngineConfig, gpu: GpuSpec, plan, v: Verdict, cg_in: bool) -> Finding:
    return finding("VLLM025", f"--max-num-seqs {v.max_num_seqs:,} is more than the {v.fit:,} KV-cache blocks left on the "
                              f"{gpu.name}: with full CUDA graphs every decode sequence needs one Mamba state block, "
                              f"so vLLM stops before capturing them; lower --max-num-seqs to at most {v.fit:,}, raise "
                              "--gpu-memory-utilization, or capture piecewise graphs only",
                   span=cfg.spans.get("max_num_seqs"), setting="max_num_seqs")
