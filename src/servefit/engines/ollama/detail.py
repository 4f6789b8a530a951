"""The figures an Ollama plan adds to the common ones (MemoryPlan.detail): the scheduler's numbers
as llm/memory.go logs them (the `offload` line, GiB), or the layout era's per-buffer lines, and
the llama.cpp runner underneath (its buffers; in the llama-server era, its whole plan)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from servefit.core import EngineDetail, MemoryPlan
from servefit.engines.llamacpp.detail import LlamaCppDetail


def _omit() -> Any:
    return field(default=None, metadata={"omit": True})


@dataclass
class RunnerBuffers(EngineDetail):
    """The buffers the llama.cpp runner logs (before 0.30), as the llamacpp planner predicts them."""

    model_buffer_mib: float = 0.0
    model_buffer_host_mib: float = 0.0
    kv_buffer_mib: float = 0.0
    compute_buffer_mib: float = 0.0
    n_ctx_per_seq: int = 0
    n_gpu_layers_offloaded: int = 0
    kv_cache_cells: int = 0
    n_ubatch: int = 0  # llama_context: n_ubatch as the runner logs it
    runner_llama_cpp_build: str = ""


@dataclass
class OllamaDetail(EngineDetail):
    """The figures Ollama logs when it loads a model (the classic `offload` line, the layout era's buffers, or
    the llama-server command), as the plan predicts them, with the llama.cpp runner underneath."""

    # the llama.cpp underneath: its buffers, or (llama-server era) its whole plan; flattened into
    # the JSON, Ollama's own fields after it
    runner: RunnerBuffers | LlamaCppDetail | None = None
    era: str = ""  # classic | layout | llama-server
    num_ctx: int = 0
    num_parallel: int = 1
    kv_cache_type: str = "f16"
    flash_attention: bool = False
    layers_offloaded: int = 0
    layers_model: int = 0
    memory_required_gib: float = 0.0
    # classic era (llm/memory.go offload line)
    memory_required_partial_gib: float | None = _omit()
    memory_required_kv_gib: float | None = _omit()
    memory_weights_total_gib: float | None = _omit()
    memory_weights_repeating_gib: float | None = _omit()
    memory_weights_nonrepeating_gib: float | None = _omit()
    memory_graph_full_gib: float | None = _omit()
    memory_graph_partial_gib: float | None = _omit()
    memory_required_allocations_gib: list[float] | None = _omit()
    # layout era (ml/backend per-buffer lines)
    total_memory_gib: float | None = _omit()
    vram_gib: float | None = _omit()
    model_weights_gib: float | None = _omit()
    compute_graph_gib: float | None = _omit()
    kv_cache_cells: int | None = _omit()
    kv_cache_gib: float | None = _omit()
    # llama-server era
    llama_server_argv: str | None = _omit()
    llama_cpp_build: str | None = _omit()


def of(plan: MemoryPlan) -> OllamaDetail:
    return plan.detail if isinstance(plan.detail, OllamaDetail) else OllamaDetail()
