"""Scheduler and CUDA-graph defaults that depend on the GPU and the version."""

from __future__ import annotations

from servefit.engines.vllm.era import Era, vtuple
from servefit.hardware.spec import GpuSpec


def batch_defaults(era: Era, gpu_name: str, gpu_bytes: int, nvml_memory: bool = True) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) for `vllm serve`
    (engine/arg_utils.py::EngineArgs.get_batch_defaults, UsageContext.OPENAI_API_SERVER). The tiers
    read the device's memory through NVML (platforms/cuda.py::NvmlCudaPlatform.
    get_device_total_memory); where NVML does not report memory (`nvml_memory` False: GB10, whose
    nvmlDeviceGetMemoryInfo is NOT_SUPPORTED) the query raises up to 0.32 and get_batch_defaults falls
    back to 0 bytes, the small tier; 0.33 reads CUDA's total instead and keeps GB10 on the small tier
    by its compute capability (is_gb10). Either way GB10 is on the small tier."""
    v = vtuple(era.version)
    if not era.v1:
        return 2048, 256  # V0 SchedulerConfig defaults (adjusted for chunked prefill by the caller)
    if not nvml_memory:
        return 2048, 256
    gib = gpu_bytes / 2**30
    if era.big_gpu_tier and gib >= 160:
        return 16384, 1024
    # the A100 exclusion arrived in 0.9 (engine/arg_utils.py, 0.8.5 vs 0.9.2)
    if gib >= 70 and (v < (0, 9, 0) or "a100" not in gpu_name.lower()):
        return 8192, 1024
    return 2048, 256


def nvml_reports_memory(gpu: GpuSpec) -> bool:
    """Whether NVML gives the device's memory: not on GB10 (DGX Spark and its OEM twins: unified
    memory at compute capability 12.1), where nvidia-smi shows the memory as not supported."""
    return not (gpu.vendor == "nvidia" and gpu.unified_memory and gpu.compute_capability == 121)


def capture_sizes(era: Era, max_num_seqs: int, max_num_batched_tokens: int,
                  explicit: list[int] | None = None, max_size: int | None = None,
                  decode_query_len: int = 1, blackwell: bool = False, full_decode: bool = True) -> list[int]:
    """Batch sizes vLLM captures CUDA graphs for (config/vllm.py::VllmConfig._set_cudagraph_sizes;
    V0: worker/model_runner.py _BATCH_SIZES_TO_CAPTURE). `decode_query_len` is 1 + the speculative
    tokens (the uniform decode batch's tokens per request); `blackwell` a cc 10.x device. What
    changed, read in each wheel: V1 before 0.10 captures up to 512 whatever max_num_seqs; the default
    ceiling min(max_num_seqs x 2, 512) (from 0.10) counts
    decode_query_len from 0.13, and is 1024 on data-centre Blackwell in 0.33 (not in 0.25.1);
    max_num_batched_tokens joins the list when it fits the ceiling from 0.20.1 (not in 0.20.0);
    max_num_seqs (the widest uniform decode batch) joins in 0.33 (not in 0.25.1), with speculative
    decoding as the request-count grid x decode_query_len; and from 0.12, when full decode graphs
    are captured with speculative decoding (`full_decode`: the resolved mode's decode_mode() is FULL),
    every size is rounded up to a multiple of decode_query_len
    (config/compilation.py::CompilationConfig.adjust_cudagraph_sizes_for_spec_decode, called by
    v1/worker/gpu_model_runner.py::_check_and_update_cudagraph_mode up to 0.19, by
    CompilationConfig's own mode resolution in 0.24, both only under that condition)."""
    v = vtuple(era.version)
    q = max(1, decode_query_len) if era.v1 else 1
    rq = q if full_decode else 1
    if explicit:
        return _round_for_spec(sorted({s for s in explicit if s <= max_num_batched_tokens}), rq, v)
    if not era.v1:
        # V0 up to 0.6.4: worker/model_runner.py _BATCH_SIZES_TO_CAPTURE = [1, 2, 4] + range(8, 257, 8), up to
        # the first size that holds max_num_seqs (_get_graph_batch_size), 256 at most. From 0.6.5
        # config.py::VllmConfig._set_cudagraph_sizes: [1, 2, 4] + range(8, 8193, 8) up to the first size
        # >= max_num_seqs, no 256 ceiling (read in the 0.6.5, 0.6.6, 0.7.3 and 0.8.5 wheels)
        sizes = [1, 2, 4] + list(range(8, 8193 if v >= (0, 6, 5) else 257, 8))
        top = next((s for s in sizes if s >= max_num_seqs), sizes[-1])
        return [s for s in sizes if s <= top]
    ceiling = 1024 if blackwell and v >= (0, 33, 0) else 512
    spec_q = q if v >= (0, 13, 0) else 1
    # before 0.10 V1 captured up to 512 whatever max_num_seqs (config.py::SchedulerConfig.cuda_graph_sizes
    # defaults to [512] in 0.9.2; [min(max_num_seqs x 2, 512)] from 0.10.0)
    by_seqs = max_num_seqs * spec_q * 2 if v >= (0, 10, 0) else ceiling
    cap = max_size if max_size is not None else min(by_seqs, ceiling)
    cap = min(cap, max_num_batched_tokens)
    if not era.capture_stride16:
        sizes = [1, 2, 4] + list(range(8, cap + 1, 8))
        return _round_for_spec([s for s in sizes if s <= cap], rq, v)
    sizes = [1, 2, 4] + list(range(8, min(cap + 1, 256), 8)) + list(range(256, cap + 1, 16))
    if v >= (0, 20, 1) and max_num_batched_tokens <= cap:
        sizes.append(max_num_batched_tokens)
    if v >= (0, 33, 0) and max_size is None:
        if q > 1:
            reqs = min(max_num_seqs, ceiling)
            counts = [n for n in (1, 2, 4) if n <= reqs] + list(range(8, min(reqs + 1, 256), 8)) \
                + list(range(256, reqs + 1, 16)) + [reqs]
            sizes += [n * q for n in counts if n * q <= cap]
        elif max_num_seqs <= cap:
            sizes.append(max_num_seqs)
    return _round_for_spec(sorted({s for s in sizes if s <= cap}), rq, v)


def _round_for_spec(sizes: list[int], q: int, v: tuple[int, int, int]) -> list[int]:
    """adjust_cudagraph_sizes_for_spec_decode (from 0.12): each size rounded up to a multiple of
    decode_query_len, kept when it stays within the largest size."""
    if q <= 1 or v < (0, 12, 0) or not sizes:
        return sizes
    top = sizes[-1]
    rounded = sorted({-(-s // q) * q for s in sizes if -(-s // q) * q <= top})
    return rounded or ([q] if q <= top else [])
