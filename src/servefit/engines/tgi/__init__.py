"""The Text Generation Inference plugin: `text-generation-launcher` and the TGI images, whose
settings mostly come from environment variables (every launcher flag has an env twin:
`--max-total-tokens` / MAX_TOTAL_TOKENS; the flag wins). Modelled: TGI 3.3.7 (newest), with the
1.x / 2.x differences that change memory (see era.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from servefit.core import EngineConfig, LaunchSite, MemoryPlan
from servefit.engines.argv import parse_argv, parse_env
from servefit.engines.base import Engine, Knob, assume_version, implied_release, program, unpinned
from servefit.engines.options import load_table
from servefit.engines.tgi.concepts import add_hints
from servefit.engines.tgi.era import CURRENT, vtuple
from servefit.rules.catalog import finding
from servefit.rules.registry import rule
from servefit.sources import image_release

if TYPE_CHECKING:
    from servefit.diagnose.fixes import Fixing
    from servefit.diagnose.model import Diagnosis, Event
    from servefit.hardware.spec import GpuSpec
    from servefit.models.spec import ModelSpec

# variables read outside `Args` that change memory (launcher resolve_attention, models/globals.py)
ENV_VARS = ("TGI_WIGGLE_ROOM", "ATTENTION", "PREFIX_CACHING", "PREFILL_CHUNKING", "CUDA_VISIBLE_DEVICES",
            "NVIDIA_VISIBLE_DEVICES", "REQUEST_LOGPROBS", "FLASH_DECODING")
# spellings other engines use for TGI's choices (cross-engine hints)
KV_HINTS = {"fp8": "fp8_e4m3fn", "fp8_e4m3": "fp8_e4m3fn", "float8_e4m3fn": "fp8_e4m3fn", "e4m3": "fp8_e4m3fn",
            "e5m2": "fp8_e5m2"}


class TgiEngine(Engine):
    name = "tgi"
    title = "Text Generation Inference"
    default_version = CURRENT
    image_patterns = ("ghcr.io/huggingface/text-generation-inference", "text-generation-inference", "tgi-gaudi",
                      "huggingface-pytorch-tgi-inference", "huggingface-text-generation-inference", "/tgi:")

    def command_length(self, words: list[str]) -> int:
        if words and program(words[0]) == "text-generation-launcher":
            return 1
        return 0

    def tune_adapter(self) -> Any:
        """The knobs tune turns for this engine (tune.py beside this module)."""
        from servefit.engines.tgi.tune import TgiAdapter

        return TgiAdapter()

    def oom_cause(self, primary: Event, related: list[Event], figures: dict[str, Any]) -> tuple[str, str, str] | None:
        from servefit.engines.tgi.diagnose import cause

        return cause(primary, figures)

    def oom_summary(self, diag: Diagnosis, primary: Event) -> str | None:
        from servefit.engines.tgi.diagnose import summary

        return summary(diag, primary)

    def oom_fixes(self, fx: Fixing) -> list[str] | None:
        """Fix lines per root cause and stage (diagnose.py beside this module)."""
        from servefit.engines.tgi.diagnose import fixes

        return fixes(fx)

    @rule("TGI001", "TGI002")
    def parse(self, site: LaunchSite, version: str | None = None) -> EngineConfig:
        version = version or site.engine_version
        table = load_table("tgi")
        n = self.command_length([t.text for t in site.argv])
        args = list(site.argv[n:])
        parsed = parse_argv(table, args, version, site=site.name, unpinned=unpinned("TGI", None, site, version))
        env = dict(site.env)
        sagemaker = image_release.build_env("tgi")  # sagemaker-entrypoint.sh: HF_* / SM_* -> the launcher's variables
        if (site.image and "tgi-inference" in site.image) or ("HF_MODEL_ID" in env and "MODEL_ID" not in env):
            for src, dst in sagemaker.items():
                if src in env:
                    env[dst] = env[src]
        where = {**parsed.used, **{k: t.span for k, t in env.items() if k in table.env_history}}
        implied = implied_release(table, where, CURRENT, version, site)
        if implied:  # the options date the config (or no release has them all): model that era, say so
            parsed = parse_argv(table, args, implied.version, site=site.name,
                                unpinned=unpinned("TGI", implied, site))
        version_read = implied.version if implied else version
        for extra in parsed.positionals:  # clap takes no positionals
            parsed.findings.append(finding("TGI001", f"error: unexpected argument '{extra.text}' found",
                                           span=extra.span, site=site.name))
        parse_env(table, env, parsed, site=site.name, version=version_read)
        _fix_choice_hints(parsed.findings)
        add_hints(parsed.findings, "TGI001", "tgi", "TGI")
        values: dict[str, Any] = dict(parsed.values)
        if isinstance(values.get("cuda_graphs"), list):
            graphs = [x.strip() for v in values["cuda_graphs"] for x in str(v).split(",") if x.strip()]
            try:
                values["cuda_graphs"] = [int(x) for x in graphs]
            except ValueError:
                parsed.findings.append(finding("TGI002", f"argument --cuda-graphs: invalid value '{','.join(graphs)}' "
                                               "(comma-separated batch sizes, 0 disables)",
                                               span=parsed.spans.get("cuda_graphs"), site=site.name))
                values.pop("cuda_graphs")
        settings: dict[str, Any] = {}
        for opt in table.options:
            if opt.memory and opt.default is not None:
                settings[opt.name] = opt.default
        settings.update(values)
        model_ref = values.get("model_id")
        cfg = EngineConfig(engine="tgi", model_ref=model_ref, settings=settings, spans=dict(parsed.spans),
                           explicit=set(values), env={k: t.text for k, t in env.items()}, version=version_read or CURRENT,
                           findings=parsed.findings, site=site)
        if "model_id" in cfg.spans:
            cfg.spans["model"] = cfg.spans["model_id"]
        for k in ENV_VARS:
            tok = env.get(k)
            if tok is not None and tok.span is not None:
                cfg.spans[f"env:{k}"] = tok.span
        if model_ref is None:
            cfg.assumptions.append("no --model-id / MODEL_ID: TGI would load bigscience/bloom-560m")
        assume_version(cfg, "TGI", CURRENT, version, vkey=vtuple, implied=implied, where=where)
        return cfg

    def plan(self, cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int) -> MemoryPlan:
        from servefit.engines.tgi.plan import plan
        from servefit.models.engine_support import require_planned

        require_planned(model, "TGI")
        return plan(cfg, model, gpu, count)

    def knobs(self, cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int) -> list[Knob]:
        mpe = model.max_position_embeddings or 4096
        lengths = tuple(x for x in (2048, 4096, 8192, 16384, 32768, 65536, 131072) if x <= mpe)
        out = [Knob("max_total_tokens", lengths),
               Knob("max_batch_prefill_tokens", (2048, 4096, 8192, 16384)),
               Knob("cuda_memory_fraction", (0.8, 0.9, 1.0))]
        if vtuple(cfg.version) >= (2, 4, 0):
            out.append(Knob("kv_cache_dtype", (None, "fp8_e4m3fn")))
        return out


def _fix_choice_hints(findings: list) -> None:
    for f in findings:
        if f.code == "TGI001" and f.message.startswith("unrecognized argument: "):  # clap's wording
            # the argument may hold a space (a compose list item `'--model-id meta-llama/Llama-3.2-1B'`): the hint
            # in parentheses, if any, follows it
            flag, paren, rest = f.message[len("unrecognized argument: "):].partition(" (")
            if rest.startswith("did you mean "):
                rest = "; tip: a similar argument exists: '" + rest[len("did you mean "):].rstrip("?)") + "'"
            elif paren:
                rest = " (" + rest
            if " " in flag and flag.startswith("-"):
                rest += "; the option and its value are one argument here: write each as its own list item"
            f.message = f"error: unexpected argument '{flag}' found{rest}"
        if f.code == "TGI002" and ("--kv-cache-dtype" in f.message or "KV_CACHE_DTYPE" in f.message):
            for other, ours in KV_HINTS.items():
                if f"'{other}'" in f.message:
                    f.message += f"; TGI spells it {ours} (vLLM and SGLang write fp8_e4m3)"
                    break


ENGINE = TgiEngine()
