"""The figures a llama.cpp plan adds to the common ones (MemoryPlan.detail): the buffers it prints
at start (llama-model.cpp "model buffer size", llama-kv-cache.cpp "KV buffer size", llama-context.cpp
"compute buffer size"), in MiB as logged, and the context it resolved."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from servefit.core import EngineDetail, MemoryPlan


def _omit() -> Any:
    return field(default=None, metadata={"omit": True})


@dataclass
class LlamaCppDetail(EngineDetail):
    """The buffer sizes llama.cpp logs at start and the context it settles on, as the plan predicts them, to
    set beside the server's own log."""

    kv_buffer_mib: float = 0.0
    kv_buffer_gpu_mib: float = 0.0
    model_buffer_mib: float = 0.0
    model_buffer_host_mib: float = 0.0
    compute_buffer_mib: float = 0.0
    compute_buffer_host_mib: float = 0.0
    kv_cache_cells: int = 0
    n_ctx: int = 0
    n_ctx_per_seq: int = 0
    n_parallel: int = 1
    kv_unified: bool = False
    flash_attn: bool = False
    n_gpu_layers_offloaded: int = 0
    n_layers_total: int = 0
    n_ubatch: int = 512
    model_source: str = ""
    gguf_ftype: Any = None
    kv_cache_cells_swa: int | None = _omit()  # sliding-window layers' cells (iSWA)
    kv_buffer_swa_mib: float | None = _omit()
    rs_buffer_mib: float | None = _omit()  # recurrent state (Mamba / hybrid)
    devices_mib: dict[str, dict[str, float]] | None = _omit()  # per device, when several
    fit: dict[str, Any] | None = _omit()  # what --fit changed


def of(plan: MemoryPlan) -> LlamaCppDetail:
    return plan.detail if isinstance(plan.detail, LlamaCppDetail) else LlamaCppDetail()
