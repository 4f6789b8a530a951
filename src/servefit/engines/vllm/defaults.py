"""Scheduler and CUDA-graph defaults that depend on the GPU and the version."""

from __future__ import annotations

from servefit.engines.vllm.era import Era, vtuple


def batch_defaults(era: Era, gpu_name: str, gpu_bytes: int) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) for `vllm serve`
    (engine/arg_utils.py::EngineArgs.get_batch_defaults, UsageContext.OPENAI_API_SERVER)."""
    v = vtuple(era.version)
    if not era.v1:
        return 2048, 256  # V0 SchedulerConfig defaults (adjusted for chunked prefill by the caller)
    gib = gpu_bytes / 2**30
    if era.big_gpu_tier and gib >= 160:
        return 16384, 1024
    # the A100 exclusion arrived in 0.9 (engine/arg_utils.py, 0.8.5 vs 0.9.2); GB10 in 0.33
    big = gib >= 70 and (v < (0, 9, 0) or "a100" not in gpu_name.lower())
    if big and not (era.big_gpu_tier and "gb10" in gpu_name.lower()):
        return 8192, 1024
    return 2048, 256


def capture_sizes(era: Era, max_num_seqs: int, max_num_batched_tokens: int,
                  explicit: list[int] | None = None, max_size: int | None = None) -> list[int]:
    """Batch sizes vLLM captures CUDA graphs for (config/vllm.py::_set_cudagraph_sizes; V0:
    worker/model_runner.py _BATCH_SIZES_TO_CAPTURE)."""
    if explicit:
        return sorted({s for s in explicit if s <= max_num_batched_tokens})
    if not era.v1:  # V0: [1, 2, 4] + range(8, 257, 8), capped by max_num_seqs
        sizes = [1, 2, 4] + list(range(8, 257, 8))
        top = min(max_num_seqs, 256)
        kept = [s for s in sizes if s <= top]
        nxt = [s for s in sizes if s > top]
        return kept + nxt[:1]
    cap = max_size if max_size is not None else min(max_num_seqs * 2, 512)
    cap = min(cap, max_num_batched_tokens)
    if era.capture_stride16:
        sizes = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, cap + 1, 16))
        extra = [x for x in (max_num_batched_tokens, max_num_seqs) if x <= cap]
        return sorted({s for s in sizes + extra if s <= cap})
    sizes = [1, 2, 4] + list(range(8, cap + 1, 8))
    return [s for s in sizes if s <= cap]
