"""The vLLM engine plugin: `vllm serve`, the older `python -m vllm.entrypoints.openai.api_server`,
the `--config` YAML file, and the VLLM_* variables that change memory."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from servefit.core import EngineConfig, Finding, LaunchSite, MemoryPlan, Token
from servefit.engines.argv import parse_argv
from servefit.engines.base import (
    Engine,
    Knob,
    assume_version,
    implied_release,
    launcher_options,
    serve_command_length,
    unpinned,
)
from servefit.engines.options import load_table
from servefit.engines.vllm.era import CURRENT, vtuple
from servefit.rules.catalog import finding
from servefit.rules.registry import rule

if TYPE_CHECKING:
    from servefit.diagnose.fixes import Fixing
    from servefit.diagnose.model import Diagnosis, Event
    from servefit.hardware.spec import GpuSpec
    from servefit.models.spec import ModelSpec

POSITIVE = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "max_num_seqs", "block_size",
            "decode_context_parallel_size")
INT_LISTS = ("cuda_graph_sizes", "cudagraph_capture_sizes")
ENV_VARS = ("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "VLLM_USE_V1",
            "VLLM_PP_LAYER_PARTITION", "VLLM_MLA_DISABLE", "VLLM_ATTENTION_BACKEND", "VLLM_USE_V2_MODEL_RUNNER",
            "PYTORCH_CUDA_ALLOC_CONF", "CUDA_VISIBLE_DEVICES", "VLLM_API_KEY")


class VllmEngine(Engine):
    name = "vllm"
    title = "vLLM"
    default_version = CURRENT
    image_patterns = ("vllm/vllm-openai", "vllm-openai", "/vllm:", "vllm/vllm", "rocm/vllm", "vllm-tpu",
                      "vllm-cuda", "vllm-serving")

    def command_length(self, words: list[str]) -> int:
        from servefit.sources.detect import python_modules

        return serve_command_length(words, "vllm", python_modules("vllm"), "vllm.entrypoints.cli.main")

    def tune_adapter(self) -> Any:
        """The knobs tune turns for this engine (tune.py beside this module)."""
        from servefit.engines.vllm.tune import VllmAdapter

        return VllmAdapter()

    def expand_args(self, args: list[Token], site: LaunchSite) -> list[Token]:
        """A `--config FILE`'s keys spliced in, spans in that file."""
        return _splice_config(args, site)

    def scan_chart(self, y: Any, root: Any, fc: Any, label: str) -> bool:
        from servefit.engines.vllm.charts import scan_values

        return scan_values(y, root, fc, label)

    def scan_resource(self, y: Any, doc: Any, fc: Any, label: str) -> None:
        from servefit.engines.vllm.charts import vllm_runtime

        vllm_runtime(y, doc, fc, label)

    def scan_config(self, y: Any, doc: Any, fc: Any) -> bool:
        from servefit.engines.vllm import config_file

        if not config_file.looks_like(y, doc):
            return False
        config_file.scan(y, doc, fc)
        return True

    def context_limit(self, model: ModelSpec, version: str | None = None) -> int:
        """vLLM's derived max_model_len for the release modelled (config.py::_get_and_verify_max_len)."""
        from servefit.engines.vllm.checks import derived_max_len
        from servefit.engines.vllm.era import era

        return derived_max_len(model, era(version), False)

    def oom_cause(self, primary: Event, related: list[Event], figures: dict[str, Any]) -> tuple[str, str, str] | None:
        from servefit.engines.vllm.diagnose import cause

        return cause(primary, figures)

    def oom_summary(self, diag: Diagnosis, primary: Event) -> str | None:
        from servefit.engines.vllm.diagnose import summary

        return summary(diag, primary)

    def oom_fixes(self, fx: Fixing) -> list[str] | None:
        """Fix lines per root cause and stage (diagnose.py beside this module)."""
        from servefit.engines.vllm.diagnose import fixes

        return fixes(fx)

    @rule("VLLM001")
    def parse(self, site: LaunchSite, version: str | None = None) -> EngineConfig:
        version = version or site.engine_version
        table = load_table("vllm")
        n = self.command_length([t.text for t in site.argv])
        args, launcher_note = launcher_options(site, list(site.argv[n:]), table, "vLLM")
        missing: list[Finding] = []
        args = _splice_config(args, site, missing)
        parsed = parse_argv(table, args, version, site=site.name, unpinned=unpinned("vLLM", None, site, version))
        implied = implied_release(table, parsed.used, CURRENT, version, site)
        if implied:  # the flags date the config (or no release has them all): model that era, say so
            parsed = parse_argv(table, args, implied.version, site=site.name,
                                unpinned=unpinned("vLLM", implied, site))
        parsed.findings[:0] = missing
        where = dict(parsed.used)
        values = parsed.values
        _int_lists(parsed, site.name)
        _positive(parsed, site.name)
        spans = dict(parsed.spans)
        model_tok: Token | None = None
        if parsed.positionals:
            model_tok = parsed.positionals[0]
            for extra in parsed.positionals[1:]:
                parsed.findings.append(finding("VLLM001", f"unrecognized arguments: {extra.text}",
                                               span=extra.span, site=site.name))
        model_ref = values.get("model")
        if model_tok is not None:
            model_ref = model_tok.text
            if model_tok.span is not None:
                spans["model"] = model_tok.span
        settings: dict[str, Any] = {"model": model_ref}
        settings.update(values)
        explicit = set(values) | ({"model"} if model_ref else set())
        for opt in table.options:
            if opt.default is not None and opt.name not in settings and opt.memory:
                settings[opt.name] = opt.default
        env = {k: t.text for k, t in site.env.items()}
        modelled = version or (implied.version if implied else None)
        cfg = EngineConfig(engine="vllm", model_ref=model_ref, settings=settings, spans=spans, explicit=explicit,
                           env=env, version=modelled or CURRENT, findings=parsed.findings, site=site)
        for k, t in site.env.items():
            if k in ENV_VARS and t.span is not None:
                cfg.spans[f"env:{k}"] = t.span
        assume_version(cfg, "vLLM", CURRENT, version, implied=implied, where=where)
        if launcher_note:
            cfg.assumptions.append(launcher_note)
        _check_auto_len(cfg)
        return cfg

    def plan(self, cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int) -> MemoryPlan:
        from servefit.engines.vllm.plan import plan
        from servefit.models.engine_support import require_planned

        require_planned(model, "vLLM")
        return plan(cfg, model, gpu, count)

    def cpu_checks(self, cfg: EngineConfig, model: ModelSpec) -> list[Finding]:
        """What the CPU build refuses at start (engines/vllm/cpu_build.py)."""
        from servefit.engines.vllm.cpu_build import check

        return check(cfg, model)

    def knobs(self, cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int) -> list[Knob]:
        from servefit.engines.vllm.knobs import knobs

        return knobs(cfg, model, gpu, count)


@rule("VLLM002")
def invalid_value(message: str, **where: Any) -> Finding:
    """A flag's value vLLM's argparse (or its config check) rejects."""
    return finding("VLLM002", message, **where)


def _int_lists(parsed: Any, site: str) -> None:
    """`--cuda-graph-sizes` / `--cudagraph-capture-sizes` take integers (argparse `type=int`):
    any other word is the engine's "invalid int value" error, and the setting is dropped."""
    for name in INT_LISTS:
        vals = parsed.values.get(name)
        if not isinstance(vals, list):
            continue
        bad = next((v for v in vals if not str(v).strip().lstrip("-").isdigit()), None)
        if bad is not None:
            parsed.findings.append(invalid_value(f"argument --{name.replace('_', '-')}: invalid int value: {bad!r}",
                                           span=parsed.spans.get(name), site=site, setting=name))
            del parsed.values[name]
            parsed.spans.pop(name, None)


def _positive(parsed: Any, site: str) -> None:
    """Parallel sizes, the sequence limit and the block size count things: below 1 the engine
    fails before it plans anything; the finding names the value and planning keeps the default."""
    for name in POSITIVE:
        v = parsed.values.get(name)
        if isinstance(v, int) and not isinstance(v, bool) and v < 1:
            parsed.findings.append(invalid_value(f"argument --{name.replace('_', '-')}: must be at least 1 "
                                                      f"(got {v})", span=parsed.spans.get(name), site=site,
                                           setting=name))
            del parsed.values[name]
            parsed.spans.pop(name, None)


@rule("VLLM022")
def _check_auto_len(cfg: EngineConfig) -> None:
    if cfg.settings.get("max_model_len") == "auto" and vtuple(cfg.version or CURRENT) < (0, 20, 0):
        cfg.findings.append(finding("VLLM022", f"--max-model-len auto needs vLLM 0.20 or newer (this is {cfg.version})",
                                    span=cfg.spans.get("max_model_len"), setting="max_model_len"))


def _splice_config(args: list[Token], site: LaunchSite, missing: list[Finding] | None = None) -> list[Token]:
    """Expand `--config FILE` the way FlexibleArgumentParser._pull_args_from_config does: each
    top-level key becomes `--key`, spliced in before the command-line flags (CLI wins). A YAML
    file that is not there (written at run time, or kept elsewhere) is SF113 in `missing`."""
    for i, tok in enumerate(args):
        text = tok.text
        if text == "--config" and i + 1 < len(args):
            path_tok, rest = args[i + 1], args[:i] + args[i + 2:]
        elif text.startswith("--config="):
            path_tok, rest = Token(text.split("=", 1)[1], tok.span), args[:i] + args[i + 1:]
        else:
            continue
        from servefit.sources.site import host_file

        path = host_file(site, path_tok.text)  # beside the file, or where the file mounts the container's folder
        if path.endswith((".yaml", ".yml")) and not os.path.isfile(path) and missing is not None and \
                "$" not in path:
            from servefit.sources.problems import missing_config_file

            missing.append(missing_config_file(f"--config {path_tok.text} is not in the repository; the settings it "
                                               "holds are unknown, so only the command line's are checked",
                                               span=path_tok.span, site=site.name))
        if not path.endswith((".yaml", ".yml")) or not os.path.isfile(path):
            return rest  # vLLM would refuse a non-YAML file; an absent file cannot be read here
        words = config_words(path)
        # the positional model must stay first: splice after it
        pos = 1 if rest and not rest[0].text.startswith("-") else 0
        return rest[:pos] + words + rest[pos:]
    return args


def config_words(path: str) -> list[Token]:
    """The argv words a vLLM --config YAML stands for, with spans when the sources layer can give them."""
    try:
        from servefit.engines.vllm.config_file import config_tokens  # spans into the YAML file

        return list(config_tokens(path))
    except ImportError:
        pass
    import json

    import yaml

    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh) or {}
    words: list[Token] = []
    if not isinstance(data, dict):
        return words
    for key, val in data.items():
        flag = "--" + str(key).replace("_", "-")
        if val is True:
            words.append(Token(flag))
        elif val is False:
            words.append(Token("--no-" + flag[2:]))
        elif isinstance(val, list):
            if val:
                words.append(Token(flag))
                words.extend(Token(str(v)) for v in val)
        elif isinstance(val, dict):
            words += [Token(flag), Token(json.dumps(val))]
        elif val is not None:
            words += [Token(flag), Token(str(val))]
    return words


ENGINE = VllmEngine()
