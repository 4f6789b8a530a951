"""The figures a vLLM plan adds to the common ones (MemoryPlan.detail): the settings as resolved for
the release and the numbers vLLM logs at start (v1/core/kv_cache_utils.py: "# GPU blocks" / the KV
cache size; v1/worker/gpu_worker.py: "Available KV cache memory")."""

from __future__ import annotations

from dataclasses import dataclass, field

from servefit.core import EngineDetail, MemoryPlan


@dataclass
class VllmDetail(EngineDetail):
    """The settings vLLM settles on for the release and the figures it logs at start (available KV cache
    memory, GPU blocks), as the plan predicts them."""

    available_kv_cache_bytes: int = 0  # what gpu_worker.determine_available_memory leaves for the KV cache
    # "X GiB for peak activation" as gpu_worker.py logs it: from 0.26.1 with the CUDA-graph estimate in it
    logged_activation_bytes: int = 0
    # "X GiB for consumed memory (weights + non-torch)" as 0.26.1+ logs it (utils/mem_utils.py::memory_profiling
    # total_consumed, from mem_get_info): with what the profiling run keeps (forward.py held_after_profile);
    # 0 before 0.26.1, which does not log it
    logged_consumed_bytes: int = 0
    cuda_graph_sizes: int = 0  # batch sizes captured
    # "Graph capturing finished in N secs, took X GiB" as capture_model logs it (engines/vllm/capture.py)
    logged_cuda_graph_bytes: int = 0
    block_size: int = 0
    num_gpu_blocks: int = 0
    kv_groups: int = 0  # KV cache groups (hybrid / sliding-window layers page separately)
    max_num_seqs: int = 0
    max_num_batched_tokens: int = 0
    gpu_memory_utilization: float = 0.0
    dtype: str = ""
    kv_cache_dtype: str = ""
    # V0 with tensor parallelism: the figures a worker other than the driver logs. Logits are gathered
    # to the driver, the only rank that runs the dummy sampler (worker/model_runner.py::
    # ModelRunner.execute_model), so the other ranks peak at the forward and keep more for the KV cache
    worker_activation_bytes: int | None = field(default=None, metadata={"omit": True})
    worker_available_kv_cache_bytes: int | None = field(default=None, metadata={"omit": True})


def of(plan: MemoryPlan) -> VllmDetail:
    """The plan's vLLM figures (empty ones for a plan that stopped before sizing the KV cache)."""
    return plan.detail if isinstance(plan.detail, VllmDetail) else VllmDetail()
