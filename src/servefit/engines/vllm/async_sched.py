"""The tokens a sliding-window (or chunked-local) KV group reserves for batches still in flight, which
decide how many of its blocks one request can hold and so the token count and concurrency vLLM logs.

From 0.26 vllm/v1/kv_cache_interface.py::SlidingWindowSpec.max_memory_usage_bytes (and
ChunkedLocalAttentionSpec's) sizes a request's blocks with VllmConfig.max_in_flight_tokens =
max_concurrent_batches x max_num_batched_tokens (config/vllm.py), where max_concurrent_batches is
2 under async scheduling with one pipeline stage (Model Runner V2: pp + 1), else the pipeline size;
before 0.26 the spec adds max_num_batched_tokens once (read in the 0.19.0 - 0.25.1 and 0.26.0 - 0.33.0
wheels). Async scheduling is on by default (VllmConfig.__post_init__, async_scheduling None) unless
the model runs as a pooling model, the speculative method is not one of the EAGLE / MTP / DFlash /
ngram_gpu / DSpark kinds (draft_model joins them in 0.27), or the executor cannot do it (Ray's
RayDistributedExecutor has no supports_async_scheduling: False); --async-scheduling /
--no-async-scheduling decide where given."""

from __future__ import annotations

from typing import Any

IN_FLIGHT_FROM = (0, 26, 0)
ASYNC_SPEC_METHODS = ("eagle", "eagle3", "mtp", "dflash", "ngram_gpu", "dspark", "extract_hidden_states")
DRAFT_MODEL_ASYNC_FROM = (0, 27, 0)


def async_scheduling(settings: dict[str, Any], version: tuple[int, int, int], pooling: bool) -> bool:
    """Whether the scheduler runs asynchronously (config/vllm.py::VllmConfig.__post_init__, 0.26 - 0.33)."""
    flag = settings.get("async_scheduling")
    if isinstance(flag, bool):
        return flag
    if pooling or settings.get("distributed_executor_backend") == "ray":
        return False
    sc = settings.get("speculative_config")
    method = str(sc.get("method") or "") if isinstance(sc, dict) else ""
    if method and isinstance(sc, dict):
        method = "mtp" if method.endswith("mtp") else method
        allowed = ASYNC_SPEC_METHODS + (("draft_model",) if version >= DRAFT_MODEL_ASYNC_FROM else ())
        return method in allowed and not sc.get("disable_padded_drafter_batch")
    return True


def in_flight_tokens(settings: dict[str, Any], version: tuple[int, int, int], max_num_batched_tokens: int,
                     pp: int, pooling: bool, v2_runner: bool) -> int:
    """VllmConfig.max_in_flight_tokens from 0.26 (see the module's docstring); before it one batch's tokens,
    times the pipeline stages with pipeline parallelism."""
    pp = max(pp, 1)
    if version < IN_FLIGHT_FROM:
        return max_num_batched_tokens * pp
    if async_scheduling(settings, version, pooling):
        batches = pp + 1 if v2_runner else (2 if pp == 1 else pp)
    else:
        batches = pp
    return max_num_batched_tokens * batches
