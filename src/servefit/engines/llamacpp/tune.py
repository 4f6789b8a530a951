"""llama.cpp as tune sees it: the context each slot gets and the slot count (`--ctx-size` =
context x `--parallel` unless `--kv-unified`), cache types, flash attention, ubatch, `-ngl`, and
other quantizations of a `-hf repo:QUANT` GGUF."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from servefit.core import EngineConfig, MemoryPlan, UsageError
from servefit.engines.llamacpp.detail import of as detail_of
from servefit.tune.adapters import CTX_LADDER, SLOTS, _knobs, _limit
from servefit.tune.objective import Needs
from servefit.tune.space import Adapter, Dim, admitted, contexts, kv_allowed, kv_level_of, ladder
from servefit.tune.variants import GGUF_LADDER, Variant, families, level_of

if TYPE_CHECKING:
    from servefit.pipeline import Evaluation


def split_warning(plan: MemoryPlan) -> bool:
    """LCPP007 as a warning: the slots hold less than the file asks of a request (assemble.py)."""
    return any(f.code == "LCPP007" and f.severity == "warning" for f in plan.findings)


def past_training(plan: MemoryPlan) -> bool:
    """LCPP011 as a warning: a slot holds more than the model was trained for (llama-context.cpp
    "n_ctx_seq > n_ctx_train -- possible training context overflow"); lint warns, so tune does not
    count it as serving."""
    return any(f.code == "LCPP011" and f.severity == "warning" for f in plan.findings)


def little_headroom(plan: MemoryPlan) -> bool:
    """LCPP018: a device keeps less free than --fit's 1 GiB margin (assemble.py advice; llama.cpp's
    common/common.h fit_params_target default, 1024 MiB per device). Lint says so about the file tune writes, so tune does not
    count such a plan as serving: it only proposes what lint accepts."""
    return any(f.code == "LCPP018" for f in plan.findings)


class LlamaCppAdapter(Adapter):
    engine = "llamacpp"
    slot_users = True
    slots_hold = False  # the slots hold what the file asks of a request now: tune keeps them so

    def cell_settings(self, ev: Any, context: int, users: int) -> tuple[dict[str, Any], dict[str, str]]:
        """`-c C x N -np N`: llama.cpp splits -c over the slots (llama-context.cpp n_ctx_seq =
        n_ctx / n_seq_max) unless the user chose --kv-unified, where the slots share the -c cells
        (n_ctx_seq = n_ctx): N requests of C tokens hold C x N of them either way."""
        unified = "kv_unified" in ev.config.explicit and bool(ev.config.settings.get("kv_unified"))
        out: dict[str, Any] = {"ctx_size": context * users, "parallel": users}
        if not unified:
            out["kv_unified"] = False  # an explicit -np turns the automatic unified cache off
        return out, {}
    always = frozenset({"context", "parallel"})
    # the file's context and slots as a point, and its own -c / -np / -kvu: a point that keeps them
    # is the file's server (writes() leaves -c and -np alone), llama-server's automatic slots included
    file_cells: tuple[int, int] | None = None
    file_slots: dict[str, Any] = {}
    fit_ctx_asked = False  # the file sets --fit-ctx: fit may move experts to the CPU to keep that context
    file_cpu_moe = 0  # the layers whose experts --fit moves to the CPU for the file's own config

    def dims(self, ev: Evaluation, needs: Needs) -> list[Dim]:
        s, x = ev.config.settings, detail_of(ev.plan)
        knobs = _knobs(ev)
        ctx_cur = int(ev.plan.max_model_len or s.get("ctx_size") or 4096)
        par_cur = int(x.n_parallel or s.get("parallel") or 1)
        if "parallel" not in ev.config.explicit and "kv_unified" not in ev.config.explicit and s.get("kv_unified"):
            # no -np: llama-server's automatic slots (4 since b6925) share one unified cache of -c cells,
            # which is one request of the whole context, not 4 x -c (`-c C x N -np N` is tune's point)
            par_cur = 1
        self.file_cells = (ctx_cur, par_cur)
        self.fit_ctx_asked = "fit_ctx" in ev.config.explicit
        self.file_cpu_moe = int((x.fit or {}).get("n_cpu_moe") or 0)
        self.file_slots = {k: (s.get(k), k in ev.config.explicit) for k in ("ctx_size", "parallel", "kv_unified")}
        ctxs = contexts(knobs.get("ctx_size", CTX_LADDER), max(_limit(ev), ctx_cur), needs, ctx_cur)
        # a slot shorter than the file asks of a request (-n N lets one generate N tokens) stops it
        # early, and LCPP007 warns: where the slots hold it now, tune keeps them holding it
        self.slots_hold = not split_warning(ev.plan)
        if not ctxs:
            raise UsageError(f"{ev.model.name} was trained for {_limit(ev):,} tokens; --min-context is larger")
        slots = admitted(knobs.get("parallel", SLOTS), ev, needs)
        kv_vals = knobs.get("cache_type_k", ("f16", "q8_0", "q4_0"))
        kvs = [v for v in kv_vals if kv_allowed(v, needs)]
        fa_cur = str(s.get("flash_attn") or "auto")
        ub_cur = int(s.get("ubatch_size") or 512)
        ngl_cur = s.get("n_gpu_layers")
        ngls: tuple[Any, ...] = (ngl_cur,)
        if isinstance(ngl_cur, int) and 0 <= ngl_cur < x.n_layers_total and not needs.allow_offload:
            # -ngl below the model's layers keeps them on the CPU, which tune does not count as serving
            # (started()): every layer on the GPU is tried, written as the usual -ngl 99 (llama.cpp
            # offloads min(-ngl, n_layer + 1) layers: llama-model.cpp load_tensors)
            ngls = (ngl_cur, max(99, x.n_layers_total))
        return [
            Dim("context", ctxs, ctx_cur),
            Dim("parallel", ladder(slots, par_cur), par_cur),
            Dim("cache_type_k", ladder(kvs, str(s.get("cache_type_k", "f16"))), str(s.get("cache_type_k", "f16"))),
            Dim("cache_type_v", ladder(kvs, str(s.get("cache_type_v", "f16"))), str(s.get("cache_type_v", "f16"))),
            Dim("flash_attn", ladder(("on",) if len(kvs) > 1 else (), fa_cur), fa_cur),
            Dim("ubatch_size", ladder([u for u in knobs.get("ubatch_size", (256, 512)) if u <= ub_cur], ub_cur),
                ub_cur),
            Dim("n_gpu_layers", ngls, ngl_cur),
        ]

    def apply(self, settings: dict[str, Any], name: str, value: Any) -> None:
        if name != "context":  # the context per slot is not a setting: finish() turns it into -c
            settings[name] = value

    def finish(self, settings: dict[str, Any], explicit: set[str], applied: dict[str, Any]) -> None:
        ctx = applied.get("context")
        par = applied.get("parallel")
        if (ctx, par) == self.file_cells:  # writes() changes neither -c nor -np: the file's slots stand
            for k, (v, was_explicit) in self.file_slots.items():
                if v is None:
                    settings.pop(k, None)
                else:
                    settings[k] = v
                (explicit.add if was_explicit else explicit.discard)(k)
            explicit.discard("context")
            if not self.file_slots["parallel"][1]:
                explicit.discard("parallel")
            return
        if par is not None and "kv_unified" not in explicit:
            settings["kv_unified"] = False  # an explicit --parallel turns the unified cache off
        if ctx is not None:
            n = 1 if settings.get("kv_unified") else max(1, int(settings.get("parallel") or 1))
            settings["ctx_size"] = int(ctx) * n

    def writes(self, changed: dict[str, Any], point: dict[str, Any], current: dict[str, Any],
               cfg: EngineConfig) -> dict[str, Any]:
        """`-c C x N -np N`, not `-kvu`: split slots hold N requests of C tokens at once, what tune
        promises, where a unified cache lets one request take every cell (the plan counts it as one
        request of -c). Ollama drives llama-server the same way (llm/llama_server.go)."""
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
        x = detail_of(plan)
        # the experts --fit moves to the CPU to make room (fit.py, LCPP009) are offload as layers are,
        # unless the file's --fit-ctx asks fit to keep that context by moving weights off the GPU: then as
        # many as fit moves for the file's own config, no more (a longer context tune picks would move more)
        moved = int((x.fit or {}).get("n_cpu_moe") or 0)
        on_gpu = x.n_gpu_layers_offloaded >= x.n_layers_total and \
            moved <= (self.file_cpu_moe if self.fit_ctx_asked else 0)
        return plan.outcome == "started" and (on_gpu or needs.allow_offload) and not self.too_short(plan) \
            and not past_training(plan) and not little_headroom(plan)

    def too_short(self, plan: MemoryPlan) -> bool:
        return self.slots_hold and split_warning(plan)

    def shortfall(self, plan: MemoryPlan) -> str:
        if self.too_short(plan):
            return "slots_too_short"
        if past_training(plan):
            return "context_past_training"
        return "little_headroom" if little_headroom(plan) else self.short_of_started
