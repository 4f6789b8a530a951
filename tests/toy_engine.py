"""A toy engine that exists only in the test package: `toyserve MODEL --ctx N --slots N`.
It is registered under the `servefit.engines` entry-point group by a dist-info written in the
test (tests/test_toy_engine.py), and must then be found, linted, estimated and tuned with
nothing in servefit naming it (docs/adding-an-engine.md); its logs are diagnosed and its context
swept from the tables it returns."""

from __future__ import annotations

from typing import Any

from servefit.core import DeviceMemory, EngineConfig, Finding, LaunchSite, MemoryPlan
from servefit.engines.base import Engine, program
from servefit.tune.space import Adapter, Dim, ladder

KV_BYTES = 2  # f16 cache
# What `servefit diagnose` reads in the toy's logs and how sweeps set its context: the same shape as
# the built-ins' data files (schemas/engine_logs.schema.json, engine_sweep.schema.json).
TABLES: dict[str, dict[str, Any]] = {
    "logs": {
        "hint_order": 60,
        "hints": ["toyserve"],
        "settings": ["ctx", "slots"],
        "stage_names": {"kv_alloc": "allocating the KV cache (--ctx x --slots)"},
        "patterns": [
            {"name": "start", "kind": "start", "needles": ["toyserve starting"],
             "regex": r"toyserve starting \(v(?P<engine_version__s>[\d.]+)\)"},
            {"name": "config", "kind": "config", "needles": ["toyserve config"], "regex": "toyserve config "},
            {"name": "kv_oom", "kind": "fatal", "rank": 3, "needles": ["cannot allocate kv cache"],
             "regex": r"cannot allocate kv cache of (?P<kv_cache_needed__gib>[\d.]+) GiB",
             "cause": ["kv_cache_overflow", "startup", "high"], "stage": "kv_alloc"},
        ],
        "fix": {"settings": {"ctx": ["--ctx"], "slots": ["--slots"]}, "targets": {"kv_cache_overflow": ["ctx"]}},
    },
    "sweep": {"context": "ctx", "variants": [{"name": "one slot", "settings": {"slots": 1}}]},
}


class ToyAdapter(Adapter):
    engine = "toyllm"
    slot_users = True  # the users of a sweep cell are slots

    def cell_settings(self, ev: Any, context: int, users: int) -> tuple[dict[str, Any], dict[str, str]]:
        return {"ctx": context, "slots": users}, {}

    def dims(self, ev: Any, needs: Any) -> list[Dim]:
        s = ev.config.settings
        ctxs = tuple(c for c in (2048, 4096, 8192, 16384, 32768)
                     if c <= ev.model.max_position_embeddings and c >= (needs.min_context or 0))
        return [Dim("ctx", ladder(ctxs, s["ctx"]), s["ctx"]),
                Dim("slots", ladder((1, 2, 4, 8), s["slots"]), s["slots"])]


class ToyEngine(Engine):
    name = "toyllm"
    title = "ToyLLM"
    default_version = "1.0"
    image_patterns = ("toyllm/",)
    markers = ("toyserve",)

    def command_length(self, words: list[str]) -> int:
        return 1 if words and program(words[0]) == "toyserve" else 0

    def parse(self, site: LaunchSite, version: str | None = None) -> EngineConfig:
        n = self.command_length([t.text for t in site.argv])
        args = site.argv[n:]
        settings: dict[str, Any] = {"ctx": 4096, "slots": 1}
        cfg = EngineConfig(engine=self.name, model_ref=None, settings=settings, version=version or "1.0", site=site)
        i = 0
        while i < len(args):
            tok = args[i]
            if tok.text in ("--ctx", "--slots") and i + 1 < len(args):
                key = tok.text[2:]
                val = args[i + 1]
                try:
                    settings[key] = int(val.text)
                except ValueError:
                    cfg.findings.append(Finding("TOY002", "invalid-value", "error", f"{tok.text}: not a number",
                                                span=val.span))
                if val.span is not None:
                    cfg.spans[key] = val.span
                cfg.explicit.add(key)
                i += 2
                continue
            if not tok.text.startswith("-") and cfg.model_ref is None:
                cfg.model_ref = tok.text
                settings["model"] = tok.text
                if tok.span is not None:
                    cfg.spans["model"] = tok.span
                cfg.explicit.add("model")
            i += 1
        return cfg

    def plan(self, cfg: EngineConfig, model: Any, gpu: Any, count: int) -> MemoryPlan:
        ctx, slots = int(cfg.settings["ctx"]), int(cfg.settings["slots"])
        per_token = 2 * model.num_hidden_layers * model.num_key_value_heads * model.head_dim * KV_BYTES
        weights = int(model.params * 2)
        kv = ctx * slots * per_token
        budget = int(gpu.memory_bytes * 0.9)
        free = budget - weights - kv
        outcome = "started" if free >= 0 else "oom_at_load"
        mem = DeviceMemory(total=gpu.memory_bytes, budget=budget, weights=weights, kv_cache=kv,
                           free_headroom=max(free, 0) + gpu.memory_bytes - budget)
        findings = [] if outcome == "started" else [
            Finding("TOY001", "kv-does-not-fit", "error", f"{ctx} x {slots} slots need {kv / 2**30:.2f} GiB of KV cache",
                    span=cfg.spans.get("ctx"))]
        return MemoryPlan(engine=self.name, engine_version=cfg.version or "1.0", outcome=outcome, memory=mem,
                          kv_bytes_per_token=per_token, kv_cache_tokens=ctx * slots if free >= 0 else 0,
                          max_model_len=ctx, max_concurrency=float(slots) if free >= 0 else 0.0, findings=findings)

    def tune_adapter(self) -> Adapter:
        return ToyAdapter()

    def table(self, key: str) -> dict[str, Any]:
        return TABLES.get(key, {})

    def oom_fixes(self, fx: Any) -> list[str] | None:
        if fx.diag.root_cause != "kv_cache_overflow":
            return None
        ctx = fx.num(fx.current("ctx"))
        to = f" to {int(ctx) // 2}" if ctx else ""
        return [f"Lower --ctx{fx.was(ctx and int(ctx))}{to}", "Or lower --slots: each slot holds --ctx tokens"]


ENGINE = ToyEngine()
