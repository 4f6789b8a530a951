"""SGLang as tune sees it: context_length, KV dtype, mem_fraction_static, tp_size,
max_running_requests."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.tune.adapters import GenericAdapter

if TYPE_CHECKING:
    from servefit.core import MemoryPlan
    from servefit.pipeline import Evaluation
    from servefit.tune.objective import Needs


class SglangAdapter(GenericAdapter):
    engine = "sglang"
    context_name = "context_length"
    seqs_name = "max_running_requests"
    fraction_name = "mem_fraction_static"
    tp_name = "tp_size"
    fraction_ceiling = 0.9  # SGLang's own default is often far lower; its OOM message says to raise it
    short_of_started = "oom_under_load"

    def gpus_per_shard(self, ev: Evaluation) -> int:
        """pp_size, times dp_size without DP attention (each replica has its own tp x pp GPUs: plan.py's SGL010)."""
        s = ev.config.settings
        dp = 1 if s.get("enable_dp_attention") else int(s.get("dp_size") or 1)
        return int(s.get("pp_size") or 1) * dp

    def started(self, plan: MemoryPlan, needs: Needs) -> bool:
        """SGLang starts, but SGL011 says the static pool leaves less than the prefill activations
        and the CUDA graphs need (plan.py::reserve_finding): CUDA out of memory under the first
        long prefill or at graph capture. Not a configuration tune may write, nor an explain cell
        that fits."""
        return plan.outcome == "started" and not any(f.code == "SGL011" for f in plan.findings)
