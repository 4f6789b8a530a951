"""The llama.cpp engine plugin: `llama-server` (and the official image's `/app/llama-server`
entrypoint), its flags and LLAMA_ARG_* variables, GGUF models, and llama.cpp's own memory
accounting (model buffers by -ngl/-ts, KV cache by layer, compute buffers, --fit)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from servefit.core import EngineConfig, LaunchSite, MemoryPlan
from servefit.engines.base import Engine, Knob, program
from servefit.engines.llamacpp.versions import CURRENT

if TYPE_CHECKING:
    from servefit.diagnose.fixes import Fixing
    from servefit.diagnose.model import Diagnosis, Event
    from servefit.hardware.spec import GpuSpec
    from servefit.models.spec import ModelSpec

SERVER_PROGRAMS = {"llama-server", "llama-server.exe", "llama_server"}
LEGACY_SERVER_PATHS = {"/server", "/app/server", "./server"}  # ghcr.io/ggerganov/llama.cpp:server before b3400


class LlamaCppEngine(Engine):
    name = "llamacpp"
    title = "llama.cpp"
    default_version = CURRENT
    models_on_request = True  # no -m: a router that loads the models requests name (config.router_mode)
    unnamed_models_code = "LCPP015"
    image_patterns = ("ggml-org/llama.cpp", "ggerganov/llama.cpp", "llama.cpp:server", "llama.cpp:full",
                      "llama-cpp-server", "llamacpp-server", "/llama.cpp:")

    def command_length(self, words: list[str]) -> int:
        if not words:
            return 0
        if program(words[0]) in SERVER_PROGRAMS or words[0] in LEGACY_SERVER_PATHS:
            return 1
        from servefit.sources.detect import recognise

        hit = recognise(words[:1])  # a copy kept per build (llama-server-b5000), as the data names it
        return 1 if hit is not None and hit[0] == "llamacpp" else 0

    def tune_adapter(self) -> Any:
        """The knobs tune turns for this engine (tune.py beside this module)."""
        from servefit.engines.llamacpp.tune import LlamaCppAdapter

        return LlamaCppAdapter()

    def oom_cause(self, primary: Event, related: list[Event], figures: dict[str, Any]) -> tuple[str, str, str] | None:
        """Which buffer failed (model, KV cache, compute) and how the slots split the context."""
        from servefit.engines.llamacpp.diagnose import slot_cause

        return slot_cause(primary, related, figures)

    def oom_summary(self, diag: Diagnosis, primary: Event) -> str | None:
        from servefit.engines.llamacpp.diagnose import summary

        return summary(diag, primary)

    def oom_fixes(self, fx: Fixing) -> list[str] | None:
        """Fix lines per root cause and stage (diagnose.py beside this module)."""
        from servefit.engines.llamacpp.diagnose import fixes

        return fixes(fx)

    def parse(self, site: LaunchSite, version: str | None = None) -> EngineConfig:
        from servefit.engines.llamacpp.config import parse

        return parse(site, version or site.engine_version)

    def plan(self, cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int) -> MemoryPlan:
        from servefit.engines.llamacpp.assemble import plan
        from servefit.models.engine_support import require_planned

        require_planned(model, "llama.cpp")
        return plan(cfg, model, gpu, count)

    def resolve_model(self, cfg: EngineConfig, target: Any = None) -> ModelSpec:
        """The model behind `-m` / `-hf`: a local GGUF's header, else the catalog model its name
        stands for (pipeline.evaluate may prefer this over models.resolve_model)."""
        from servefit.models.gguf_names import resolve_gguf_ref

        override = getattr(target, "model", None)
        ref = (override or cfg.settings.get("model") or cfg.model_ref or "")
        if override:  # --model REPO:QUANT / NAME-Q8_0.gguf: the weights are that quant, not the file's -m
            from servefit.models.gguf_names import parse_ref

            o = str(override)
            base, quant, _ = parse_ref(o.rsplit("/", 1)[-1] if o.startswith("http") else o)
            if quant:
                cfg.settings["gguf_base"], cfg.settings["gguf_quant"] = base, quant
        spec = resolve_gguf_ref(str(ref), online=bool(getattr(target, "online", False)),
                                context=getattr(target, "models", None), hf_repo=cfg.settings.get("hf_repo"))
        # sized from the real header (model lock, Hub): not by its name; or the resolver says how the
        # name was read (gguf_names: "GGUF 'x.gguf' taken as ..."), once
        if spec.gguf is not None or any(a.startswith("GGUF ") and " taken as " in a for a in spec.assumptions):
            cfg.assumptions[:] = [a for a in cfg.assumptions if " by its name" not in a]
        return spec

    def knobs(self, cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int) -> list[Knob]:
        ctx = [c for c in (4096, 8192, 16384, 32768, 65536, 131072) if c <= max(4096, model.max_position_embeddings)]
        return [Knob("ctx_size", tuple(ctx)), Knob("cache_type_k", ("f16", "q8_0", "q4_0")),
                Knob("cache_type_v", ("f16", "q8_0", "q4_0")), Knob("flash_attn", ("on", "auto")),
                Knob("parallel", (1, 2, 4, 8)), Knob("ubatch_size", (256, 512, 1024))]


ENGINE = LlamaCppEngine()
