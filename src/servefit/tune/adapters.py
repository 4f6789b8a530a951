"""What the engines' tune adapters share (each engine's own adapter lives in its package,
engines/<name>/tune.py, and the plugin hands it out through `Engine.tune_adapter`): the context
and slot ladders, the plugin's knobs, the model's context limit, and the adapter for engines
whose knobs are a context option, a KV dtype, a memory fraction and a shard count (TGI, SGLang).
What the built-in adapters turn:

- llama.cpp: the context each slot gets and the slot count (`--ctx-size` = context x
  `--parallel`, the KV cache being split between slots unless `--kv-unified`), cache types
  (f16 / q8_0 / q4_0; a quantized V cache needs flash attention), flash attention, ubatch,
  `-ngl` (partial offload only with --allow offload), and other quantizations of a `-hf
  repo:QUANT` GGUF.
- Ollama: num_ctx (Modelfile PARAMETER, else OLLAMA_CONTEXT_LENGTH), OLLAMA_NUM_PARALLEL,
  OLLAMA_KV_CACHE_TYPE, OLLAMA_FLASH_ATTENTION.
- TGI: max_total_tokens (the prompt limit kept below it), kv_cache_dtype, cuda_memory_fraction
  (up to its default 1.0), num_shard, and max_concurrent_requests where the file sets it.
- SGLang: context_length, kv_cache_dtype, mem_fraction_static, tp_size, and where the file sets
  them max_running_requests and max_total_tokens (the KV pool's cap: the pools the memory holds).
- TGI and SGLang: online FP8 of a full-precision checkpoint (--quantize / --quantization fp8) with
  --allow quant=fp8, where the release runs it on the GPU (GenericAdapter.variants).

A knob whose flag or variable the engine's release lacks is left as it is (space.py::released).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from servefit.core import MemoryPlan, UsageError
from servefit.tune.objective import Needs
from servefit.tune.space import Adapter, Dim, admitted, contexts, kv_allowed, kv_level_of, ladder, shared
from servefit.tune.variants import Variant, families, level_of

if TYPE_CHECKING:
    from servefit.pipeline import Evaluation

CTX_LADDER = (2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)
SLOTS = (1, 2, 4, 8, 16, 32)


def _knobs(ev: Evaluation) -> dict[str, tuple[Any, ...]]:
    from servefit.engines import get

    try:
        return {k.name: tuple(k.values) for k in get(ev.config.engine).knobs(ev.config, ev.model, ev.gpu, ev.count)}
    except Exception:
        return {}


def _limit(ev: Evaluation) -> int:
    return int(ev.model.max_position_embeddings or 131072)


class GenericAdapter(Adapter):
    """TGI and SGLang: a context option, KV dtype, the memory fraction, the shard count, and (when
    the user set it) the limit on the requests served at once."""

    context_name = ""
    seqs_name = ""  # a dimension when the user set it
    cap_name = ""  # caps users (requests admitted at once)
    fraction_name = ""
    tp_name = ""
    fraction_ceiling = 0.0  # without --headroom, fractions up to this (or the current one) are tried
    quant_name = ""  # the option that quantizes a full-precision checkpoint as it loads

    def online_fp8(self, ev: Evaluation) -> bool:
        """Whether this engine release quantizes to FP8 at load on this GPU."""
        return False

    def variants(self, ev: Evaluation, needs: Needs) -> list[Variant]:
        """Online FP8 of a full-precision checkpoint, with --allow quant=fp8, where the engine runs it."""
        s = ev.config.settings
        if "fp8" not in families(needs.allow_quant) or ev.model.quantization or s.get(self.quant_name) \
                or not self.online_fp8(ev):
            return []
        return [Variant(key="fp8", label="online fp8", level=level_of({"quant_method": "fp8"}),
                        settings={self.quant_name: "fp8"})]

    def dims(self, ev: Evaluation, needs: Needs) -> list[Dim]:
        s, x = ev.config.settings, ev.plan.detail
        knobs = _knobs(ev)
        ctx_cur = int(ev.plan.max_model_len or s.get(self.context_name) or 4096)
        ctxs = contexts(knobs.get(self.context_name, CTX_LADDER), max(_limit(ev), ctx_cur), needs, ctx_cur)
        if not ctxs:
            raise UsageError(f"{ev.model.name} allows {_limit(ev):,} tokens; --min-context is larger")
        kv_cur = s.get("kv_cache_dtype")
        kvs = [v for v in knobs.get("kv_cache_dtype", (kv_cur,)) if kv_allowed(v, needs)]
        frac = s.get(self.fraction_name, x.resolved(self.fraction_name))
        frac_cur = float(frac) if frac is not None else 0.9
        cap = 1 - needs.headroom if needs.headroom is not None else max(frac_cur, self.fraction_ceiling)
        lower = needs.headroom is not None or "memory" in needs.objective or not self.started(ev.plan, needs) \
            or needs.share is not None
        fracs = [f for f in knobs.get(self.fraction_name, ()) if f <= cap + 1e-9 and (lower or f >= frac_cur)]
        fracs = shared(fracs, needs)
        tp_cur = int(s.get(self.tp_name) or x.resolved(self.tp_name) or 1)
        per_tp = self.gpus_per_shard(ev)
        tps = [t for t in (1, 2, 4, 8)
               if t * per_tp <= max(ev.count, per_tp) and ev.model.num_attention_heads % t == 0]
        dims = [Dim(self.context_name, ctxs, ctx_cur),
                Dim("kv_cache_dtype", ladder(kvs, kv_cur), kv_cur),
                Dim(self.fraction_name, ladder(fracs, frac_cur), frac_cur),
                Dim(self.tp_name, ladder(tps, tp_cur), tp_cur)]
        cur = s.get(self.seqs_name) if self.seqs_name else None
        if cur is not None:
            vals = admitted(knobs.get(self.seqs_name, (8, 16, 32, 64, 128, 256)), ev, needs)
            dims.append(Dim(self.seqs_name, ladder(vals, int(cur)), int(cur)))
        return dims

    @property
    def request_cap(self) -> str:  # type: ignore[override]
        return self.seqs_name or self.cap_name

    def gpus_per_shard(self, ev: Evaluation) -> int:
        """GPUs each tensor-parallel rank stands for (pipeline stages, data-parallel replicas):
        a shard count is only tried where shards x this fits the GPUs."""
        return 1

    def cell_settings(self, ev: Evaluation, context: int, users: int) -> tuple[dict[str, Any], dict[str, str]]:
        return {self.context_name: context}, {}

    def kv_level(self, point: dict[str, Any]) -> int:
        return kv_level_of(point.get("kv_cache_dtype") or "auto")

    def kv_label(self, point: dict[str, Any], plan: MemoryPlan) -> str:
        v = point.get("kv_cache_dtype")
        return str(v) if v not in (None, "auto") else f"auto ({plan.detail.resolved('kv_cache_dtype') or 'model dtype'})"

    def users(self, plan: MemoryPlan, point: dict[str, Any]) -> int:
        n = int(math.floor(plan.max_concurrency + 1e-9))
        for name in (self.seqs_name, self.cap_name):
            cap = point.get(name) if name else None
            if cap is None and name:
                cap = plan.detail.resolved(name)
            if cap:
                n = min(n, int(cap))
        return n
