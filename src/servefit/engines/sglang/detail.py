"""The figures an SGLang plan adds to the common ones (MemoryPlan.detail): the resolved server
arguments and the scheduler's start-up line ("max_total_num_tokens=..., max_running_requests=...")."""

from __future__ import annotations

from dataclasses import dataclass, field

from servefit.core import EngineDetail, MemoryPlan


@dataclass
class SglangDetail(EngineDetail):
    """The server arguments SGLang settles on and the pool sizes its scheduler logs at start, as the plan
    predicts them."""

    mem_fraction_static: float = 0.0
    context_len: int = 0
    chunked_prefill_size: int = 0
    cuda_graph_max_bs: int = 0
    page_size: int = 1
    profiled_max_total_num_tokens: int = 0
    pre_model_load_gib: float = 0.0
    reserved_mem_mib: float | None = field(default=None, metadata={"omit": True})  # the auto fraction's reserve
    max_total_num_tokens: int | None = None
    max_running_requests: int | None = None
    max_req_len: int | None = None
    max_req_input_len: int | None = None
    swa_max_total_num_tokens: int | None = None


def of(plan: MemoryPlan) -> SglangDetail:
    return plan.detail if isinstance(plan.detail, SglangDetail) else SglangDetail()
