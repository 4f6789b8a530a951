"""The Ollama engine plugin: `ollama serve` / `ollama run MODEL` with the OLLAMA_* server
environment, Modelfile PARAMETERs (site.inputs.definition, a ModelfileDoc) or request options
(site.inputs.request_options), and Ollama's memory handling in each of its three eras."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from servefit.core import EngineConfig, LaunchSite, MemoryPlan
from servefit.engines.base import Engine, Knob, program
from servefit.engines.ollama.versions import CURRENT

if TYPE_CHECKING:
    from servefit.diagnose.fixes import Fixing
    from servefit.diagnose.model import Diagnosis, Event
    from servefit.hardware.spec import GpuSpec
    from servefit.models.spec import ModelSpec


class OllamaEngine(Engine):
    name = "ollama"
    title = "Ollama"
    default_version = CURRENT
    image_patterns = ("ollama/ollama", "ollama:", "/ollama")

    def command_length(self, words: list[str]) -> int:
        if len(words) >= 2 and program(words[0]) in ("ollama", "ollama.exe") and words[1] in ("serve", "run", "start"):
            return 2
        return 0

    models_on_request = True

    def link_sites(self, sites: list[LaunchSite], scanned: set[str]) -> list[LaunchSite]:
        """A server and the Modelfile it serves become one server (engines/ollama_link)."""
        from servefit.engines.ollama_link import link_all

        return link_all(sites, scanned)

    def tune_adapter(self) -> Any:
        """The knobs tune turns for this engine (tune.py beside this module)."""
        from servefit.engines.ollama.tune import OllamaAdapter

        return OllamaAdapter()

    def oom_cause(self, primary: Event, related: list[Event], figures: dict[str, Any]) -> tuple[str, str, str] | None:
        """The runner's exit (its llama.cpp allocation failed): judged like llama.cpp's own lines."""
        if primary.pattern != "ollama.runner_oom":
            return None
        from servefit.engines.llamacpp.diagnose import slot_cause

        return slot_cause(primary, related, figures)

    def written_as(self, name: str, site: LaunchSite | None = None) -> tuple[str, str] | None:
        """num_ctx is a Modelfile PARAMETER where the server has a Modelfile, else the server-wide
        OLLAMA_CONTEXT_LENGTH (envconfig.ContextLength)."""
        if name != "num_ctx":
            return None
        if site is not None and site.inputs.definition is not None:
            return "parameter", name
        return "env", "OLLAMA_CONTEXT_LENGTH"

    def scan_chart(self, y: Any, root: Any, fc: Any, label: str) -> bool:
        from servefit.engines.ollama.charts import scan_values

        return scan_values(y, root, fc, label)

    def oom_summary(self, diag: Diagnosis, primary: Event) -> str | None:
        from servefit.engines.ollama.diagnose import summary

        return summary(diag, primary)

    def oom_fixes(self, fx: Fixing) -> list[str] | None:
        """Fix lines per root cause and stage (diagnose.py beside this module)."""
        from servefit.engines.ollama.diagnose import fixes

        return fixes(fx)

    def parse(self, site: LaunchSite, version: str | None = None) -> EngineConfig:
        from servefit.engines.ollama.config import parse

        return parse(site, version or site.engine_version, self.command_length([t.text for t in site.argv]))

    def plan(self, cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int) -> MemoryPlan:
        from servefit.engines.ollama.plan import plan
        from servefit.models.engine_support import require_planned

        require_planned(model, "Ollama")
        return plan(cfg, model, gpu, count)

    def resolve_model(self, cfg: EngineConfig, target: Any = None) -> ModelSpec:
        """A tag through servefit's Ollama library table, a GGUF path through its header."""
        from servefit.core import UsageError
        from servefit.engines.ollama.config import resolve_tag
        from servefit.models.gguf_names import resolve_gguf_ref

        ref = getattr(target, "model", None) or cfg.settings.get("model_path") or cfg.settings.get("model") or ""
        ref = str(ref)
        from servefit.engines.ollama.config import pulled_others_note

        note_others = None if getattr(target, "model", None) else pulled_others_note(cfg)
        if note_others is not None and note_others not in cfg.assumptions:
            cfg.assumptions.append(note_others)
        if ref.lower().endswith(".gguf") or ref.startswith(("hf.co/", "huggingface.co/")):
            return resolve_gguf_ref(ref.split("/", 1)[1] if ref.startswith(("hf.co/", "huggingface.co/")) else ref,
                                    online=bool(getattr(target, "online", False)),
                                    context=getattr(target, "models", None))
        cid, quant, note = resolve_tag(ref)
        from servefit.models import resolve_model  # type: ignore[attr-defined]

        if cid is None:
            try:
                return resolve_model(ref, online=bool(getattr(target, "online", False)),
                                     context=getattr(target, "models", None))
            except UsageError as exc:
                from servefit.models.evidence import is_unnamed_path

                if is_unnamed_path(ref):  # FROM a local folder: the name heuristics' answer is the one to give
                    raise
                raise UsageError(f"Ollama model {ref!r}: {note}") from exc
            except Exception as exc:
                raise UsageError(f"Ollama model {ref!r}: {note}") from exc
        if getattr(target, "model", None):
            cfg.settings["quant"] = quant
        return resolve_model(cid, online=bool(getattr(target, "online", False)),
                             context=getattr(target, "models", None))

    def knobs(self, cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int) -> list[Knob]:
        return [Knob("num_ctx", (2048, 4096, 8192, 16384, 32768, 65536, 131072)),
                Knob("OLLAMA_NUM_PARALLEL", (1, 2, 4)), Knob("OLLAMA_KV_CACHE_TYPE", ("f16", "q8_0", "q4_0")),
                Knob("OLLAMA_FLASH_ATTENTION", (True,))]


ENGINE = OllamaEngine()
