"""Tune's view of the engines other than vLLM: their knobs (from the plugin's `knobs()` where it
gives them, else from the option names below), how a point sets their settings, and what
"users" and "started" mean for them.

- llama.cpp: the context each slot gets and the slot count (`--ctx-size` = context x
  `--parallel`, the KV cache being split between slots unless `--kv-unified`), cache types
  (f16 / q8_0 / q4_0; a quantized V cache needs flash attention), flash attention, ubatch,
  `-ngl` (partial offload only with --allow offload), and other quantizations of a `-hf
  repo:QUANT` GGUF.
- Ollama: num_ctx (Modelfile PARAMETER, else OLLAMA_CONTEXT_LENGTH), OLLAMA_NUM_PARALLEL,
  OLLAMA_KV_CACHE_TYPE, OLLAMA_FLASH_ATTENTION.
- TGI and SGLang: the option names of their launchers (max_total_tokens, max_input_tokens,
  max_batch_prefill_tokens, kv_cache_dtype, cuda_memory_fraction, num_shard; context_length,
  mem_fraction_static, max_running_requests, kv_cache_dtype, tp_size), used once their plugins
  plan them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from servefit.core import EngineConfig, MemoryPlan, UsageError
from servefit.tune.objective import Needs
from servefit.tune.space import Adapter, Dim, contexts, kv_allowed, kv_level_of, ladder
from servefit.tune.variants import GGUF_LADDER, Variant, families, level_of

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


class LlamaCppAdapter(Adapter):
    engine = "llamacpp"
    always = frozenset({"context", "parallel"})

    def dims(self, ev: Evaluation, needs: Needs) -> list[Dim]:
        s, x = ev.config.settings, ev.plan.extra
        knobs = _knobs(ev)
        ctx_cur = int(ev.plan.max_model_len or s.get("ctx_size") or 4096)
        par_cur = int(x.get("n_parallel") or s.get("parallel") or 1)
        ctxs = contexts(knobs.get("ctx_size", CTX_LADDER), max(_limit(ev), ctx_cur), needs, ctx_cur)
        if not ctxs:
            raise UsageError(f"{ev.model.name} was trained for {_limit(ev):,} tokens; --min-context is larger")
        slots = [p for p in knobs.get("parallel", SLOTS) if p >= needs.min_concurrency]
        kv_vals = knobs.get("cache_type_k", ("f16", "q8_0", "q4_0"))
        kvs = [v for v in kv_vals if kv_allowed(v, needs)]
        fa_cur = str(s.get("flash_attn") or "auto")
        ub_cur = int(s.get("ubatch_size") or 512)
        ngl_cur = s.get("n_gpu_layers")
        return [
            Dim("context", ctxs, ctx_cur),
            Dim("parallel", ladder(slots, par_cur), par_cur),
            Dim("cache_type_k", ladder(kvs, str(s.get("cache_type_k", "f16"))), str(s.get("cache_type_k", "f16"))),
            Dim("cache_type_v", ladder(kvs, str(s.get("cache_type_v", "f16"))), str(s.get("cache_type_v", "f16"))),
            Dim("flash_attn", ladder(("on",) if len(kvs) > 1 else (), fa_cur), fa_cur),
            Dim("ubatch_size", ladder([u for u in knobs.get("ubatch_size", (256, 512)) if u <= ub_cur], ub_cur),
                ub_cur),
            Dim("n_gpu_layers", (ngl_cur,), ngl_cur),
        ]

    def apply(self, settings: dict[str, Any], name: str, value: Any) -> None:
        if name != "context":  # the context per slot is not a setting: finish() turns it into -c
            settings[name] = value

    def finish(self, settings: dict[str, Any], explicit: set[str], applied: dict[str, Any]) -> None:
        ctx = applied.get("context")
        par = applied.get("parallel")
        if par is not None and "kv_unified" not in explicit:
            settings["kv_unified"] = False  # an explicit --parallel turns the unified cache off
        if ctx is not None:
            n = 1 if settings.get("kv_unified") else max(1, int(settings.get("parallel") or 1))
            settings["ctx_size"] = int(ctx) * n

    def writes(self, changed: dict[str, Any], point: dict[str, Any], current: dict[str, Any],
               cfg: EngineConfig) -> dict[str, Any]:
        out = {k: v for k, v in changed.items() if k not in ("context", "parallel")}
        if "context" in changed or "parallel" in changed:
            unified = "kv_unified" in cfg.explicit and bool(cfg.settings.get("kv_unified"))
            ctx = int(point["context"]) * (1 if unified else max(1, int(point["parallel"])))
            if ctx != cfg.settings.get("ctx_size") or "ctx_size" not in cfg.explicit:
                out["ctx_size"] = ctx
            if "parallel" in changed or "parallel" not in cfg.explicit:
                out["parallel"] = point["parallel"]  # also turns llama.cpp's automatic unified cache off
        return out

    def current_level(self, ev: Evaluation) -> int:
        q = ev.config.settings.get("gguf_quant")
        return level_of(None, str(q)) if q else level_of(ev.model.quantization)

    def variants(self, ev: Evaluation, needs: Needs) -> list[Variant]:
        s = ev.config.settings
        repo, quant = str(s.get("hf_repo") or ""), s.get("gguf_quant")
        fams = families(needs.allow_quant)
        wanted = {q.upper() for q in needs.allow_quant}
        if not repo or ":" not in repo or not quant:
            return []
        base = repo.rsplit(":", 1)[0]
        out = []
        for q in GGUF_LADDER:
            if q == str(quant).upper() or not ("gguf" in fams or q in wanted):
                continue
            out.append(Variant(key=f"gguf:{q}", label=f"GGUF {q}", level=level_of(None, q),
                               settings={"hf_repo": f"{base}:{q}", "gguf_quant": q},
                               note=f"{base} must hold a {q} file"))
        return out

    def kv_level(self, point: dict[str, Any]) -> int:
        return max(kv_level_of(point.get("cache_type_k", "f16")), kv_level_of(point.get("cache_type_v", "f16")))

    def kv_label(self, point: dict[str, Any], plan: MemoryPlan) -> str:
        k, v = point.get("cache_type_k", "f16"), point.get("cache_type_v", "f16")
        return str(k) if k == v else f"K {k} / V {v}"

    def started(self, plan: MemoryPlan, needs: Needs) -> bool:
        x = plan.extra
        on_gpu = int(x.get("n_gpu_layers_offloaded") or 0) >= int(x.get("n_layers_total") or 0)
        return plan.outcome == "started" and (on_gpu or needs.allow_offload)


def server_env_unknown(ev: Evaluation) -> bool:
    site = ev.site
    return site.extra.get("modelfile") is not None and not site.env and all(t.span is None for t in site.argv)


class OllamaAdapter(Adapter):
    engine = "ollama"

    def dims(self, ev: Evaluation, needs: Needs) -> list[Dim]:
        s = ev.config.settings
        knobs = _knobs(ev)
        ctx_cur = int(ev.plan.max_model_len or 4096)
        ctxs = contexts(knobs.get("num_ctx", CTX_LADDER), _limit(ev), needs, ctx_cur)
        if not ctxs:
            raise UsageError(f"{ev.model.name} was trained for {_limit(ev):,} tokens; --min-context is larger")
        par_cur = int(s.get("OLLAMA_NUM_PARALLEL") or ev.plan.max_concurrency or 1)
        slots = [p for p in knobs.get("OLLAMA_NUM_PARALLEL", (1, 2, 4, 8)) if p >= needs.min_concurrency]
        kv_cur = str(s.get("kv_cache_type") or "f16")
        kvs = [v for v in knobs.get("OLLAMA_KV_CACHE_TYPE", ("f16", "q8_0", "q4_0")) if kv_allowed(v, needs)]
        fa_cur = bool(s.get("flash_attention"))
        fas = (True,) if len(kvs) > 1 else ()
        if server_env_unknown(ev):  # a Modelfile on its own: the server's environment is elsewhere
            slots, kvs, fas = [], [], ()
        return [
            Dim("num_ctx", ctxs, ctx_cur),
            Dim("OLLAMA_NUM_PARALLEL", ladder(slots, par_cur), par_cur),
            Dim("OLLAMA_KV_CACHE_TYPE", ladder(kvs, kv_cur), kv_cur),
            Dim("OLLAMA_FLASH_ATTENTION", ladder(fas, fa_cur), fa_cur),
        ]

    def apply(self, settings: dict[str, Any], name: str, value: Any) -> None:
        settings[name] = value
        if name == "OLLAMA_KV_CACHE_TYPE":
            settings["kv_cache_type"] = value
        elif name == "OLLAMA_FLASH_ATTENTION":
            settings["flash_attention"] = value

    def current_level(self, ev: Evaluation) -> int:
        q = ev.config.settings.get("quant")
        return level_of(None, str(q)) if q else level_of(ev.model.quantization)

    def kv_level(self, point: dict[str, Any]) -> int:
        return kv_level_of(point.get("OLLAMA_KV_CACHE_TYPE", "f16"))

    def kv_label(self, point: dict[str, Any], plan: MemoryPlan) -> str:
        return str(point.get("OLLAMA_KV_CACHE_TYPE", "f16"))

    def started(self, plan: MemoryPlan, needs: Needs) -> bool:
        x = plan.extra
        layers, on = x.get("layers_model"), x.get("layers_offloaded")
        on_gpu = layers is None or on is None or int(on) >= int(layers)
        return plan.outcome == "started" and (on_gpu or needs.allow_offload)


class GenericAdapter(Adapter):
    """TGI and SGLang: a context option, KV dtype, the memory fraction, the shard count, and (when
    the user set it) the scheduler's running-request limit."""

    context_name = ""
    seqs_name = ""  # a dimension when the user set it
    cap_name = ""  # caps users (requests admitted at once)
    fraction_name = ""
    tp_name = ""
    fraction_ceiling = 0.0  # without --headroom, fractions up to this (or the current one) are tried

    def dims(self, ev: Evaluation, needs: Needs) -> list[Dim]:
        s, x = ev.config.settings, ev.plan.extra
        knobs = _knobs(ev)
        ctx_cur = int(ev.plan.max_model_len or s.get(self.context_name) or 4096)
        ctxs = contexts(knobs.get(self.context_name, CTX_LADDER), max(_limit(ev), ctx_cur), needs, ctx_cur)
        if not ctxs:
            raise UsageError(f"{ev.model.name} allows {_limit(ev):,} tokens; --min-context is larger")
        kv_cur = s.get("kv_cache_dtype")
        kvs = [v for v in knobs.get("kv_cache_dtype", (kv_cur,)) if kv_allowed(v, needs)]
        frac = s.get(self.fraction_name, x.get(self.fraction_name))
        frac_cur = float(frac) if frac is not None else 0.9
        cap = 1 - needs.headroom if needs.headroom is not None else max(frac_cur, self.fraction_ceiling)
        lower = needs.headroom is not None or "memory" in needs.objective or ev.plan.outcome != "started"
        fracs = [f for f in knobs.get(self.fraction_name, ()) if f <= cap + 1e-9 and (lower or f >= frac_cur)]
        tp_cur = int(s.get(self.tp_name) or x.get(self.tp_name) or 1)
        tps = [t for t in (1, 2, 4, 8) if t <= max(ev.count, 1) and ev.model.num_attention_heads % t == 0]
        dims = [Dim(self.context_name, ctxs, ctx_cur),
                Dim("kv_cache_dtype", ladder(kvs, kv_cur), kv_cur),
                Dim(self.fraction_name, ladder(fracs, frac_cur), frac_cur),
                Dim(self.tp_name, ladder(tps, tp_cur), tp_cur)]
        cur = s.get(self.seqs_name) if self.seqs_name else None
        if cur is not None:
            vals = [v for v in knobs.get(self.seqs_name, (8, 16, 32, 64, 128, 256)) if v >= needs.min_concurrency]
            dims.append(Dim(self.seqs_name, ladder(vals, int(cur)), int(cur)))
        return dims

    def kv_level(self, point: dict[str, Any]) -> int:
        return kv_level_of(point.get("kv_cache_dtype") or "auto")

    def kv_label(self, point: dict[str, Any], plan: MemoryPlan) -> str:
        v = point.get("kv_cache_dtype")
        return str(v) if v not in (None, "auto") else f"auto ({plan.extra.get('kv_cache_dtype') or 'model dtype'})"

    def users(self, plan: MemoryPlan, point: dict[str, Any]) -> int:
        n = int(math.floor(plan.max_concurrency + 1e-9))
        for name in (self.seqs_name, self.cap_name):
            cap = point.get(name) if name else None
            if cap is None and name:
                cap = plan.extra.get(name)
            if cap:
                n = min(n, int(cap))
        return n


class TgiAdapter(GenericAdapter):
    engine = "tgi"
    context_name = "max_total_tokens"
    cap_name = "max_concurrent_requests"
    fraction_name = "cuda_memory_fraction"
    tp_name = "num_shard"

    def finish(self, settings: dict[str, Any], explicit: set[str], applied: dict[str, Any]) -> None:
        total, inp = settings.get("max_total_tokens"), settings.get("max_input_tokens")
        if total and inp and int(inp) >= int(total):
            settings["max_input_tokens"] = int(total) - 1  # TGI: max_input_tokens < max_total_tokens

    def writes(self, changed: dict[str, Any], point: dict[str, Any], current: dict[str, Any],
               cfg: EngineConfig) -> dict[str, Any]:
        out = dict(changed)
        inp = cfg.settings.get("max_input_tokens")
        if "max_total_tokens" in changed and inp and "max_input_tokens" in cfg.explicit \
                and int(inp) >= int(changed["max_total_tokens"]):
            out["max_input_tokens"] = int(changed["max_total_tokens"]) - 1
        return out


class SglangAdapter(GenericAdapter):
    engine = "sglang"
    context_name = "context_length"
    seqs_name = "max_running_requests"
    fraction_name = "mem_fraction_static"
    tp_name = "tp_size"
    fraction_ceiling = 0.9  # SGLang's own default is often far lower; its OOM message says to raise it


ADAPTERS: dict[str, type[Adapter]] = {"llamacpp": LlamaCppAdapter, "ollama": OllamaAdapter, "tgi": TgiAdapter,
                                      "sglang": SglangAdapter}
