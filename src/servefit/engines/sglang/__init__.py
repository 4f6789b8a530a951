"""The SGLang plugin: `python -m sglang.launch_server`, `sglang serve`, and the lmsysorg/sglang
images (the diffusion server, `sglang serve --model-type diffusion`: diffusion.py). Modelled:
SGLang 0.5.23 (newest), with the 0.4.x / 0.5.x differences that change the KV pool (see
defaults.py). SGLang reads its options only from the command line (and `--config`
YAML); its one memory-relevant variable is SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from servefit.core import EngineConfig, LaunchSite, MemoryPlan, Token
from servefit.engines.argv import parse_argv
from servefit.engines.base import (
    Engine,
    Knob,
    assume_version,
    implied_release,
    launcher_options,
    python_module,
    serve_command_length,
    unpinned,
)
from servefit.engines.options import load_table
from servefit.engines.sglang.defaults import CURRENT, era, human_readable_int, vtuple
from servefit.engines.sglang.diffusion import DIFFUSION_MODULES
from servefit.engines.tgi.concepts import add_hints
from servefit.rules.catalog import finding
from servefit.rules.registry import rule

if TYPE_CHECKING:
    from servefit.diagnose.fixes import Fixing
    from servefit.diagnose.model import Diagnosis, Event
    from servefit.hardware.spec import GpuSpec
    from servefit.models.spec import ModelSpec

ENV_VARS = ("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "CUDA_VISIBLE_DEVICES", "SGLANG_ENABLE_TORCH_COMPILE")
# spellings other engines use for SGLang's choices (cross-engine hints)
KV_HINTS = {"fp8_e4m3fn": "fp8_e4m3", "fp8": "fp8_e4m3", "fp8_e5m2fn": "fp8_e5m2", "float8_e4m3fn": "fp8_e4m3"}
QUANT_HINTS = {"eetq": "fp8 or w8a8_int8", "bitsandbytes-nf4": "bitsandbytes", "bitsandbytes-fp4": "bitsandbytes",
               "exl2": "(none: SGLang has no exl2 support)", "gptq-marlin": "gptq_marlin"}


class SglangEngine(Engine):
    name = "sglang"
    title = "SGLang"
    default_version = CURRENT
    image_patterns = ("lmsysorg/sglang", "sglang")

    def command_length(self, words: list[str]) -> int:
        from servefit.sources.detect import python_modules

        llm = (*(m for m in python_modules("sglang") if m not in DIFFUSION_MODULES), "sglang.cli.main")
        return serve_command_length(words, "sglang", llm, "sglang.cli.main") or serve_command_length(
            words, "sglang", DIFFUSION_MODULES, DIFFUSION_MODULES[1])

    def tune_adapter(self) -> Any:
        """The knobs tune turns for this engine (tune.py beside this module)."""
        from servefit.engines.sglang.tune import SglangAdapter

        return SglangAdapter()

    def oom_summary(self, diag: Diagnosis, primary: Event) -> str | None:
        from servefit.engines.sglang.diagnose import summary

        return summary(diag, primary)

    def oom_fixes(self, fx: Fixing) -> list[str] | None:
        """Fix lines per root cause and stage (diagnose.py beside this module)."""
        from servefit.engines.sglang.diagnose import fixes

        return fixes(fx)

    def parse(self, site: LaunchSite, version: str | None = None) -> EngineConfig:
        from servefit.engines.sglang import diffusion

        version = version or site.engine_version
        words = [t.text for t in site.argv]
        n = self.command_length(words)
        args = list(site.argv[n:])
        backend, mt = None, None
        if python_module(words)[0] in DIFFUSION_MODULES:
            backend = "diffusion"
        elif n == 2 or python_module(words)[0] == "sglang.cli.main":  # `sglang serve`: --model-type picks the server
            backend, mt, args = diffusion.split_model_type(args)
        args, launcher_note = launcher_options(site, args, load_table("sglang"), "SGLang")
        cfg, rejected = self._read(site, args, version, backend, mt)
        if launcher_note:
            cfg.assumptions.append(launcher_note)
        if backend in (None, "auto") and n and diffusion.diffusion_only([u.text for u in rejected]):
            cfg, _ = self._read(site, args, version, "diffusion", None, "read as the diffusion server: the "
                                "flags SGLang's LLM server rejects are all the diffusion server's")
        return cfg

    @rule("SGL001", "SGL002")
    def _read(self, site: LaunchSite, args: list[Token], version: str | None, backend: str | None,
              mt: Token | None, why: str = "") -> tuple[EngineConfig, list[Token]]:
        """The server's reading (the LLM server's, or the diffusion server's where `backend` says),
        and the flags its parser rejects. `mt`: where `--model-type` was given."""
        from servefit.engines.sglang import diffusion

        if backend == "diffusion":
            cfg, extras = diffusion.parse(site, args, version, why)
            cfg.findings[:0] = [finding("SGL001", f"unrecognized arguments: {x.text}", span=x.span, site=site.name)
                                for x in extras]
            if cfg.model_ref is None and "config" not in cfg.settings:
                cfg.findings.insert(0, finding("SGL002", "the diffusion server needs --model-path",
                                               span=site.argv[0].span if site.argv else None, site=site.name,
                                               setting="model_path"))
            _ambiguous(cfg.findings, load_table("sglang_diffusion"), version)
            return cfg, []
        table = load_table("sglang")
        args = _splice_config(args, site)
        parsed = parse_argv(table, args, version, site=site.name, unpinned=unpinned("SGLang", None, site, version))
        implied = implied_release(table, parsed.used, CURRENT, version, site)
        if implied:  # the flags date the config (or no release has them all): model that era, say so
            parsed = parse_argv(table, args, implied.version, site=site.name,
                                unpinned=unpinned("SGLang", implied, site))
        where = dict(parsed.used)
        given, version = version, version or (implied.version if implied else None)
        for extra in parsed.positionals:
            parsed.findings.append(finding("SGL001", f"unrecognized arguments: {extra.text}", span=extra.span,
                                           site=site.name))
        _fix_choice_hints(parsed.findings)
        _ambiguous(parsed.findings, table, version)
        add_hints(parsed.findings, "SGL001", "sglang", "SGLang")
        values: dict[str, Any] = dict(parsed.values)
        e = era(version)
        if "context_length" in values:
            raw = str(values["context_length"])
            try:
                values["context_length"] = human_readable_int(raw, e)
            except ValueError as exc:
                why = _context_complaint(raw, str(exc), e)
                parsed.findings.append(finding("SGL002", f"argument --context-length: {why}",
                                               span=parsed.spans.get("context_length"), site=site.name,
                                               setting="context_length"))
                values.pop("context_length")
        settings: dict[str, Any] = {}
        for opt in table.options:
            if opt.memory and opt.default is not None:
                settings[opt.name] = opt.default
        settings.update(values)
        model_ref = values.get("model_path")
        env = {k: t.text for k, t in site.env.items()}
        cfg = EngineConfig(engine="sglang", model_ref=model_ref, settings=settings, spans=dict(parsed.spans),
                           explicit=set(values), env=env, version=version or CURRENT, findings=parsed.findings,
                           site=site)
        if "model_path" in cfg.spans:
            cfg.spans["model"] = cfg.spans["model_path"]
        for k in ENV_VARS:
            tok = site.env.get(k)
            if tok is not None and tok.span is not None:
                cfg.spans[f"env:{k}"] = tok.span
        elided = any(v in ("...", "$@", "$*", "%*") for v, _ in site.unresolved_spans)  # SF001 says so
        if model_ref is None and not elided and not _splat(site):
            cfg.findings.append(finding("SGL002", "the following arguments are required: --model-path",
                                        span=site.argv[0].span if site.argv else None, site=site.name,
                                        setting="model_path"))
        assume_version(cfg, "SGLang", CURRENT, given, vkey=vtuple, implied=implied, where=where)
        if backend is not None and backend not in diffusion.BACKENDS:
            cfg.findings.append(finding("SGL002", f"argument --model-type: '{backend}' is not a server SGLang "
                                        f"ships (choose from {', '.join(diffusion.BACKENDS)}; an installed "
                                        "plugin can add others)", span=mt.span if mt else None,
                                        site=site.name, setting="model_type"))
        return cfg, parsed.unknown

    def plan(self, cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int) -> MemoryPlan:
        from servefit.engines.sglang.plan import plan
        from servefit.models.engine_support import require_planned

        require_planned(model, "SGLang")
        return plan(cfg, model, gpu, count)

    def knobs(self, cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int) -> list[Knob]:
        mpe = model.max_position_embeddings or 4096
        lengths = tuple(x for x in (4096, 8192, 16384, 32768, 65536, 131072) if x <= mpe)
        return [Knob("mem_fraction_static", (0.7, 0.8, 0.85, 0.88, 0.9)),
                Knob("context_length", lengths),
                Knob("chunked_prefill_size", (2048, 4096, 8192)),
                Knob("kv_cache_dtype", ("auto", "fp8_e4m3"))]


def _context_complaint(raw: str, exc: str, e: Any) -> str:
    """argparse's complaint for a bad --context-length, plus what SGLang would have accepted."""
    if "Decimals" in exc:
        return exc
    why = f"invalid {'human_readable_int' if e.human_context else 'int'} value: '{raw}'"
    if not e.human_context and raw[-1:] in "kMGT" and raw[:-1].replace(".", "").isdigit():
        return why + f" (suffixes are accepted from SGLang 0.5.16; this is {e.version})"
    if raw[-1:] in "KmgtB" or raw[-2:] in ("KB", "kb"):
        return why + " (SGLang writes 32k = 32000 or 32Ki = 32768; 'K' is not a suffix)"
    return why


def _ambiguous(findings: list, table: Any, version: str | None) -> None:
    """argparse's own words for a prefix that matches several long options of this release (a
    flag the release dropped, --cuda-graph-max-bs, is the prefix of the two that replaced it);
    what the release says about the dropped flag is kept after them."""
    for f in findings:
        if f.code == "SGL001" and f.message.startswith("unrecognized argument: --"):
            flag, _, why = f.message.split(": ", 1)[1].partition(" ")
            hits = sorted({k for k in table.by_flag if k.startswith(flag) and k.startswith("--")
                           and table.in_release(k, version)})
            if len(hits) > 1:
                f.message = f"ambiguous option: {flag} could match {', '.join(hits)}" + (
                    f"; {flag} {why}" if why and flag in table.history else "")


def _fix_choice_hints(findings: list) -> None:
    for f in findings:
        if f.code != "SGL002":
            continue
        table = KV_HINTS if "--kv-cache-dtype" in f.message else QUANT_HINTS if "--quantization" in f.message else {}
        for other, ours in table.items():
            if f"'{other}'" in f.message:
                f.message += f"; SGLang spells it {ours}"
                break


def _splice_config(args: list[Token], site: LaunchSite) -> list[Token]:
    """`--config FILE.yaml` (server_args.py::ConfigArgumentMerger): the file's keys become flags
    placed before the command line's, so the command line wins."""
    for i, tok in enumerate(args):
        if tok.text == "--config" and i + 1 < len(args):
            path_tok, rest = args[i + 1], args[:i] + args[i + 2:]
        elif tok.text.startswith("--config="):
            path_tok, rest = Token(tok.text.split("=", 1)[1], tok.span), args[:i] + args[i + 1:]
        else:
            continue
        from servefit.sources.site import host_file

        path = host_file(site, path_tok.text)  # beside the file, or where the file mounts the container's folder
        if not os.path.isfile(path):
            return rest
        return _config_words(path) + rest
    return args


def _config_words(path: str) -> list[Token]:
    import yaml

    from servefit.sources.base import read_text
    from servefit.sources.text import whole
    from servefit.sources.yamlpos import YamlProblem, compose_all

    text = read_text(path)  # a regular file, at most 1 MiB
    if text is None:
        return []
    try:
        compose_all(whole(text, path))  # bounded: alias bombs and deep nesting are refused first
        data = yaml.safe_load(text) or {}
    except (YamlProblem, yaml.YAMLError, RecursionError):
        return []
    words: list[Token] = []
    for key, val in (data.items() if isinstance(data, dict) else ()):
        flag = "--" + str(key).replace("_", "-")
        if val is True:
            words.append(Token(flag))
        elif val is False or val is None:
            continue
        elif isinstance(val, list):
            words.append(Token(flag))
            words.extend(Token(str(v)) for v in val)
        else:
            words.extend([Token(flag), Token(str(val))])
    return words


ENGINE = SglangEngine()


def _splat(site: LaunchSite) -> bool:
    """An argument that is a whole unset variable or command output (`launch_server $EXTRA`,
    `${SERVE_ARGS_STR}`): its words may hold --model-path, so its absence is not known (SF001 says so)."""
    at = {(sp.file, sp.start) for _, sp in site.unresolved_spans if sp is not None}
    return any(t.text.startswith("$") and t.span is not None and (t.span.file, t.span.start) in at
               for t in site.argv[1:])
