"""SGLang as tune sees it: context_length, KV dtype, mem_fraction_static, tp_size, and where the
file sets them max_running_requests and max_total_tokens (the KV pool's cap)."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from servefit.tune.adapters import GenericAdapter
from servefit.tune.space import Dim, Space, ladder

if TYPE_CHECKING:
    from servefit.core import MemoryPlan
    from servefit.pipeline import Evaluation
    from servefit.tune.objective import Needs

POOL_CAP = "max_total_tokens"
# SGL007: a cap above the pool the memory holds (SGLang ignores it and warns); SGL008: a cap of one
# request or less. Both are lint warnings: a candidate that causes one ranks after one that does not.
CAP_FINDINGS = ("SGL007", "SGL008")


class SglangAdapter(GenericAdapter):
    engine = "sglang"
    context_name = "context_length"
    seqs_name = "max_running_requests"
    fraction_name = "mem_fraction_static"
    fraction_of_free = True  # model_runner.py::profile_max_num_token: of the memory free before loading
    started_last = (" (SGLang takes its fraction of the memory free when it starts; compose's depends_on sets the "
                    "order)")
    split_note = ("; SGLang takes its fraction of the memory free when it starts (model_runner.py::"
                  "profile_max_num_token): started after the others its KV pool holds {tokens:,} tokens")
    tp_name = "tp_size"
    fraction_ceiling = 0.9  # SGLang's own default is often far lower; its OOM message says to raise it
    quant_name = "quantization"

    def online_fp8(self, ev: Evaluation) -> bool:
        """`--quantization fp8` of a full-precision checkpoint, offered on GPUs with FP8 tensor cores
        (compute capability 8.9+) only: whether a release falls back to a weight-only kernel below
        that is not checked here."""
        return ev.gpu.vendor == "nvidia" and ev.gpu.compute_capability >= 89
    short_of_started = "oom_under_load"

    def dims(self, ev: Evaluation, needs: Needs) -> list[Dim]:
        dims = super().dims(ev, needs)
        cur = ev.config.settings.get(POOL_CAP)
        if cur is not None and POOL_CAP in ev.config.explicit:
            dims.append(Dim(POOL_CAP, ladder(self.pools(ev, dims), int(cur)), int(cur)))
        return dims

    def pools(self, ev: Evaluation, dims: list[Dim]) -> list[int]:
        """The KV pool the memory holds, without a cap, at each memory setting tune tries (fraction, KV
        dtype, shards): --max-total-tokens only lowers it (plan.py: min(profiled, max_total_tokens),
        after ModelRunner.profile_max_num_token), so these are the caps that let the pool fill, and the
        lower ones free memory. The context does not enter the profiled pool."""
        from servefit.engines import get

        space = Space(ev=ev, adapter=self, dims=dims)
        base = space.current()
        turned = {d.name: d.values for d in dims if d.name in (self.fraction_name, "kv_cache_dtype", self.tp_name)}
        out: set[int] = set()
        for combo in itertools.product(*turned.values()):
            cfg, model = space.apply({**base, **dict(zip(turned, combo, strict=True))})
            cfg.settings.pop(POOL_CAP, None)
            cfg.explicit.discard(POOL_CAP)
            plan = get(self.engine).plan(cfg, model, ev.gpu, ev.count)
            if plan.outcome == "started" and plan.kv_cache_tokens > 0:
                out.add(int(plan.kv_cache_tokens))
        return sorted(out)

    def penalty(self, point: dict[str, Any], plan: MemoryPlan) -> int:
        return int(any(f.code in CAP_FINDINGS for f in plan.findings))

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
