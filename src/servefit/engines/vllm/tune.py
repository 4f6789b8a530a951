"""vLLM as tune sees it: max-model-len, KV dtype, max-num-seqs, batched tokens, memory
utilization, eager mode and tensor parallelism, and online FP8 or another checkpoint."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from servefit.core import EngineConfig, MemoryPlan, UsageError
from servefit.engines.vllm.detail import of as detail_of
from servefit.tune.objective import Needs
from servefit.tune.space import Adapter, Dim, admitted, contexts, kv_allowed, kv_level_of, ladder, shared
from servefit.tune.variants import Variant, checkpoint_variants, families, level_of

if TYPE_CHECKING:
    from servefit.pipeline import Evaluation


class VllmAdapter(Adapter):
    engine = "vllm"
    request_cap = "max_num_seqs"
    fraction_name = "gpu_memory_utilization"
    split_note = ("; vLLM refuses to start when the memory free is below its fraction of the total "
                  "(v1/worker/utils.py::request_memory), so the fraction leaves the others' shares free")

    def cell_settings(self, ev: Any, context: int, users: int) -> tuple[dict[str, Any], dict[str, str]]:
        """--max-model-len C (past the model's own limit only as VLLM_ALLOW_LONG_MAX_MODEL_LEN
        allows); the users are the requests of C tokens the KV pool holds."""
        return {"max_model_len": context}, {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}

    def dims(self, ev: Evaluation, needs: Needs) -> list[Dim]:
        from servefit.engines import get
        from servefit.engines.vllm.checks import derived_max_len
        from servefit.engines.vllm.era import era
        from servefit.engines.vllm.overrides import as_loaded

        cfg, plan, s = ev.config, ev.plan, ev.config.settings
        knobs = {k.name: k.values for k in get("vllm").knobs(cfg, ev.model, ev.gpu, ev.count)}
        e = era(cfg.version, cfg.env)
        limit = derived_max_len(as_loaded(cfg, ev.model), e, bool(s.get("disable_sliding_window")))
        if cfg.env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0").lower() in ("1", "true"):
            limit = max(limit, needs.min_context or 0, plan.max_model_len)
        cur_len = int(plan.max_model_len or limit)
        lens = contexts(tuple(knobs.get("max_model_len", ())), limit, needs, cur_len)
        if not lens:
            raise UsageError(f"{ev.model.name} allows at most {limit:,} tokens in vLLM; --min-context "
                             f"{needs.min_context:,} needs VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 in the server's environment")
        kv_cur = str(s.get("kv_cache_dtype") or "auto")
        kvs = [v for v in knobs.get("kv_cache_dtype", ("auto",)) if kv_allowed(v, needs)]
        x = detail_of(plan)
        seqs_cur = int(x.max_num_seqs or 256)
        seqs = admitted(knobs.get("max_num_seqs", ()), ev, needs)
        tok_cur = int(x.max_num_batched_tokens or 2048)
        toks = [v for v in (2048, 4096, 8192, 16384) if v < tok_cur]
        util_cur = float(x.gpu_memory_utilization or 0.9)
        # a lower fraction only ever costs KV blocks: it is tried for --headroom, the memory
        # objective, or when vLLM refuses the current one (VLLM020: more than is free at start)
        lower = needs.headroom is not None or "memory" in needs.objective or \
            any(f.code == "VLLM020" for f in plan.findings)
        cap = 1 - needs.headroom if needs.headroom is not None else util_cur
        utils = [v for v in knobs.get("gpu_memory_utilization", ()) if v <= cap + 1e-9] if lower else []
        utils = shared(utils, needs)  # beside servers on the same GPU: a fraction that leaves them room
        eager_cur = bool(s.get("enforce_eager"))
        eagers = knobs.get("enforce_eager", (False, True)) if needs.allow_eager else ()
        tp_cur = int(plan.parallel.get("tensor", 1))
        return [
            Dim("max_model_len", lens, cur_len),
            Dim("kv_cache_dtype", ladder(kvs, kv_cur), kv_cur),
            Dim("max_num_seqs", ladder(seqs, seqs_cur), seqs_cur),
            Dim("max_num_batched_tokens", ladder(toks, tok_cur), tok_cur),
            Dim("gpu_memory_utilization", ladder(utils, util_cur), util_cur),
            Dim("enforce_eager", ladder(eagers, eager_cur), eager_cur),
            Dim("tensor_parallel_size", ladder(knobs.get("tensor_parallel_size", (1,)), tp_cur), tp_cur),
        ]

    def writes(self, changed: dict[str, Any], point: dict[str, Any], current: dict[str, Any],
               cfg: EngineConfig) -> dict[str, Any]:
        """The changed settings, and the context the plan was made for where the file leaves it to the
        model's length (LONG_DEFAULT, 32k, or more): lint warns VLLM018 about such a file (checks.py::max_model_len_unset),
        so tune writes the length, also where it changes nothing else (tune and lint agree)."""
        from servefit.engines.vllm.checks import LONG_DEFAULT

        out = dict(changed)
        length = int(point.get("max_model_len") or 0)
        if cfg.settings.get("max_model_len") is None and length >= LONG_DEFAULT:
            out["max_model_len"] = length
        return out

    def variants(self, ev: Evaluation, needs: Needs) -> list[Variant]:
        from servefit.engines.vllm.checks import MIN_CAPABILITY
        from servefit.engines.vllm.era import vtuple

        fams = families(needs.allow_quant)
        out: list[Variant] = []
        v = vtuple(ev.config.version or "0.33.0")
        idx = 0 if v < (0, 21, 0) else (1 if v < (0, 33, 0) else 2)
        need = MIN_CAPABILITY["fp8"][idx]
        gpu = ev.gpu
        if "fp8" in fams and not ev.model.quantization and not ev.config.settings.get("quantization") \
                and (gpu.vendor != "nvidia" or (need is not None and gpu.compute_capability >= need)):
            how = "native FP8" if gpu.fp8 or gpu.compute_capability >= 89 else "weight-only FP8 (Marlin)"
            out.append(Variant(key="fp8", label=f"online fp8 ({how})", level=level_of({"quant_method": "fp8"}),
                               settings={"quantization": "fp8"}))
        ref = ev.config.model_ref
        out += checkpoint_variants(ev.model, ref, fams, needs.variants)
        return out

    def kv_level(self, point: dict[str, Any]) -> int:
        return kv_level_of(point.get("kv_cache_dtype", "auto"))

    def kv_label(self, point: dict[str, Any], plan: MemoryPlan) -> str:
        v = str(point.get("kv_cache_dtype", "auto"))
        return f"auto ({detail_of(plan).kv_cache_dtype or '?'})" if v == "auto" else v

    def users(self, plan: MemoryPlan, point: dict[str, Any]) -> int:
        n = int(math.floor(plan.max_concurrency + 1e-9))
        cap = detail_of(plan).max_num_seqs
        return min(n, int(cap)) if cap else n

    def penalty(self, point: dict[str, Any], plan: MemoryPlan) -> int:
        return int(bool(point.get("enforce_eager")))
