"""Ollama as tune sees it: num_ctx (Modelfile PARAMETER, else OLLAMA_CONTEXT_LENGTH),
OLLAMA_NUM_PARALLEL, OLLAMA_KV_CACHE_TYPE, OLLAMA_FLASH_ATTENTION."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from servefit.core import MemoryPlan, UsageError
from servefit.engines.ollama.detail import of as detail_of
from servefit.engines.ollama.report import model_bytes, several_models
from servefit.tune.adapters import CTX_LADDER, _knobs, _limit
from servefit.tune.objective import Needs
from servefit.tune.space import Adapter, Dim, admitted, contexts, kv_allowed, kv_level_of, ladder
from servefit.tune.variants import level_of

if TYPE_CHECKING:
    from servefit.pipeline import Evaluation


def server_env_unknown(ev: Evaluation) -> bool:
    site = ev.site
    return site.inputs.definition is not None and not site.env and all(t.span is None for t in site.argv)


SHARED = "OLLM010"  # a second model no longer fits beside this one (report.py::room_for_another)


class OllamaAdapter(Adapter):
    engine = "ollama"
    slot_users = True
    # where OLLAMA_MAX_LOADED_MODELS lets several models stay loaded: the most this model may take
    # (None: no limit), and whether a second one of its size must keep fitting beside it
    room_cap: int | None = None
    keep_room = False

    def cell_settings(self, ev: Any, context: int, users: int) -> tuple[dict[str, Any], dict[str, str]]:
        """num_ctx C with OLLAMA_NUM_PARALLEL=N: Ollama allocates num_ctx x N cells
        (kvcache/causal.go) for N requests of C tokens."""
        return {"num_ctx": context, "OLLAMA_NUM_PARALLEL": users}, {}

    def dims(self, ev: Evaluation, needs: Needs) -> list[Dim]:
        s = ev.config.settings
        knobs = _knobs(ev)
        served = int(ev.plan.max_model_len or 4096)
        ctxs = contexts(knobs.get("num_ctx", CTX_LADDER), _limit(ev), needs, served)
        # OLLM009: past the model's length Ollama serves its length (plan.py, as llm/server.go's
        # "requested context size too large for model"), which tune writes: in the PARAMETER, else
        # in OLLAMA_CONTEXT_LENGTH, the order plan.py::default_num_ctx reads them
        asked = s["num_ctx"] if "num_ctx" in s else s.get("OLLAMA_CONTEXT_LENGTH")
        ctx_cur = asked if isinstance(asked, int) and asked > served else served
        if not ctxs:
            raise UsageError(f"{ev.model.name} was trained for {_limit(ev):,} tokens; --min-context is larger")
        par_cur = int(s.get("OLLAMA_NUM_PARALLEL") or ev.plan.max_concurrency or 1)
        slots = admitted(knobs.get("OLLAMA_NUM_PARALLEL", (1, 2, 4, 8)), ev, needs)
        kv_cur = str(s.get("kv_cache_type") or "f16")
        kvs = [v for v in knobs.get("OLLAMA_KV_CACHE_TYPE", ("f16", "q8_0", "q4_0")) if kv_allowed(v, needs)]
        fa_cur = bool(s.get("flash_attention"))
        fas = (True,) if len(kvs) > 1 else ()
        if server_env_unknown(ev):  # a Modelfile on its own: the server's environment is elsewhere
            slots, kvs, fas = [], [], ()
        # the scheduler loads another model beside this one only in what this one leaves free
        # (server/sched.go::load), and OLLAMA_NUM_PARALLEL x num_ctx applies to every model it
        # loads. Where the file lets several stay loaded, tune keeps a second model of this size
        # fitting when it fits today, and otherwise takes no more than this model takes now.
        if several_models(s):
            self.keep_room = not any(f.code == SHARED for f in ev.plan.findings)
            self.room_cap = None if self.keep_room else model_bytes(ev.plan)
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
        x = detail_of(plan)
        on_gpu = x.layers_offloaded >= x.layers_model
        return plan.outcome == "started" and (on_gpu or needs.allow_offload) and not self.crowds_out(plan)

    def crowds_out(self, plan: MemoryPlan) -> bool:
        if self.room_cap is not None:
            return model_bytes(plan) > self.room_cap
        return self.keep_room and any(f.code == SHARED for f in plan.findings)

    def shortfall(self, plan: MemoryPlan) -> str:
        return "no_room_for_another_model" if self.crowds_out(plan) else self.short_of_started

    def by_hand(self, ev: Evaluation) -> list[str]:
        """OLLAMA_MAX_LOADED_MODELS is not tune's to change (which other models the server runs is
        not in the file); where this model already leaves no room for a second, say what would."""
        if several_models(ev.config.settings) and any(f.code == SHARED for f in ev.plan.findings):
            need = model_bytes(ev.plan) / 2**30
            return ["OLLAMA_MAX_LOADED_MODELS=1 if this server runs this model alone, then tune again: a second "
                    f"model of its size does not fit beside it, so tune kept this one within the {need:.2f} GiB "
                    "Ollama sizes it at now (the other models you load are not in the file)"]
        return []
