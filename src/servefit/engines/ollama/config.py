"""Ollama's settings for one model: the server's OLLAMA_* environment (envconfig/config.go), the
Modelfile PARAMETERs (or request options), and the model tag -> catalog model + quantization."""

from __future__ import annotations

import os
from typing import Any

from servefit import data
from servefit.core import EngineConfig, Finding, LaunchSite, Span, Token
from servefit.engines.base import assume_version, implied_release
from servefit.engines.ollama import versions as V
from servefit.engines.ollama_modelfile import (
    GO_FALSE,
    GO_TRUE,
    check_parameters,
    invalid_parameter,
    modelfile_of,
    unknown_parameter,
    value_problem,
)
from servefit.engines.options import load_table
from servefit.models.gguf_names import parse_ref
from servefit.models.name_words import file_name
from servefit.rules.catalog import finding
from servefit.rules.registry import rule

KV_TYPES_OLD = ("f16", "q8_0", "q4_0")  # fs/ggml/ggml.go::SupportsKVCacheType (before 0.30)
KV_TYPES_LLAMA = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")


def resolve_tag(ref: str) -> tuple[str | None, str | None, str]:
    """`llama3.1:8b-instruct-q4_K_M` -> (catalog id, quant, note) through the tag table
    (engines/ollama/tags.py). hf.co/... refs are GGUF repos: (None, quant, note)."""
    from servefit.engines.ollama.tags import lookup

    t = lookup(ref)
    return t.model, t.quant, t.note


@rule("OLLM013")
def _env_value(var: str, tok: Token, typ: str, findings: list[Finding], site: str) -> Any:
    """envconfig.Var trims spaces and quotes; Uint logs "invalid environment variable, using default";
    BoolWithDefault treats an unparsable value as true."""
    text = tok.text.strip().strip("'\"").strip()
    if typ == "uint":
        if not text:
            return None
        try:
            n = int(text, 10)
            if n < 0:
                raise ValueError
            return n
        except ValueError:
            findings.append(finding("OLLM013", f"invalid environment variable, using default: {var}={tok.text!r}",
                                    span=tok.span, site=site, setting=var))
            return None
    if typ == "bool":
        if not text:
            return None
        if text in GO_TRUE:
            return True
        if text in GO_FALSE:
            return False
        findings.append(finding("OLLM013", f"{var}={tok.text!r} is not a boolean; Ollama reads it as true",
                                span=tok.span, site=site, setting=var))
        return True
    return text


def _program(w: str) -> str:
    return os.path.basename(w)


@rule("OLLM016")
def misspelled_env(site: LaunchSite, known: Any) -> list[Finding]:
    """An OLLAMA_* variable that no release's envconfig/config.go reads and that is one slip from one it does
    (OLLAMA_CONTEXT_LENGHT, OLLAMA_KEEPALIVE): the server never looks it up, so the setting is lost. Names
    far from every variable are left alone: forks read their own (ipex-llm's OLLAMA_NUM_GPU)."""
    import difflib

    out = []
    for var, tok in site.env.items():
        if not var.startswith("OLLAMA_") or var in known:
            continue
        near = difflib.get_close_matches(var, list(known), n=1, cutoff=0.85)
        if near:
            out.append(finding("OLLM016", f"{var} is not a variable Ollama reads (did you mean {near[0]}?): the "
                                          f"server ignores it, so {near[0]} keeps its default", span=tok.span,
                               site=site.name, setting=near[0]))
    return out


@rule("OLLM005", "OLLM014", "OLLM015")
def parse(site: LaunchSite, version: str | None, command_length: int) -> EngineConfig:
    table = load_table("ollama")  # the OLLAMA_* variables each release's envconfig reads
    where = {k: t.span for k, t in site.env.items() if k in table.env_history}
    implied = implied_release(table, where, V.CURRENT, version, site)
    modelled = version or (implied.version if implied else None)
    v = V.vtuple(modelled)
    findings: list[Finding] = []
    args = list(site.argv[command_length:])
    if command_length == 0 and args and args[0].text in ("serve", "run", "start"):
        args = args[1:]  # the image's entrypoint is `ollama`; its args start with the subcommand
    spans: dict[str, Span] = {}
    s: dict[str, Any] = {}
    explicit: set[str] = set()
    # the model: `ollama run MODEL`, the Modelfile's FROM, or what a wrapper found
    words = [t.text for t in site.argv]
    model_tok: Token | None = None
    if len(words) >= 2 and _program(words[0]) == "ollama" and words[1] == "run":
        model_tok = next((t for t in site.argv[2:] if not t.text.startswith("-")), None)
    doc = modelfile_of(site)
    if model_tok is None and doc is not None:
        model_tok = doc.from_ref
    others: list[str] = []
    if model_tok is None and site.inputs.pulled:
        model_tok = site.inputs.pulled[0]
        others = [t.text for t in site.inputs.pulled[1:]]
    ref = model_tok.text if model_tok else None
    if model_tok is not None and model_tok.span is not None:
        spans["model"] = model_tok.span
    s["model"] = ref
    # parameters: Modelfile PARAMETER < request options (site.inputs.request_options)
    params: dict[str, str] = {}
    if doc is not None:
        findings.extend(f for f in doc.findings if f.code == "OLLM001")
        findings.extend(check_parameters(doc, modelled))
        params.update(doc.values())
        for name, toks in doc.parameters.items():
            if toks[-1].span is not None:
                spans[name] = toks[-1].span
    table = data.load("engines/ollama.yaml")["parameters"]
    for name, val in site.inputs.request_options.items():
        spec = table.get(name)
        bad = value_problem(spec["type"], str(val)) if spec else None
        if spec is None:  # API options: unknown keys are ignored ("invalid option provided")
            findings.append(unknown_parameter(f"invalid option provided: {name} (ignored)", site=site.name,
                                    setting=name, severity="warning"))
            continue
        if bad:
            findings.append(invalid_parameter(bad, site=site.name, setting=name))
            continue
        params[name] = str(val)
    for name in ("num_ctx", "num_batch", "num_gpu", "main_gpu"):
        if name in params and not value_problem("int", params[name]):
            s[name] = int(params[name])
            explicit.add(name)
    if "use_mmap" in params and params["use_mmap"] in GO_TRUE | GO_FALSE:
        s["use_mmap"] = params["use_mmap"] in GO_TRUE
        explicit.add("use_mmap")
    s["parameters"] = params
    # server environment
    types = {o["name"]: o.get("type", "str") for o in data.load("engines/ollama.yaml")["options"]}
    for var, tok in site.env.items():
        if var in types:
            val = _env_value(var, tok, types[var], findings, site.name)
            if val is not None:
                s[var] = val
                explicit.add(var)
            if tok.span is not None:
                spans[var] = tok.span
        elif var.startswith("LLAMA_ARG_"):
            s.setdefault("llama_env", {})[var] = tok
    findings.extend(misspelled_env(site, load_table("ollama").env_history))
    kvt = str(s.get("OLLAMA_KV_CACHE_TYPE", "") or "").lower()
    s["kv_cache_type"] = kvt or "f16"
    fa = s.get("OLLAMA_FLASH_ATTENTION")
    s["flash_attention"] = fa  # None: unset
    if kvt and kvt != "f16":
        allowed = KV_TYPES_LLAMA if v >= V.LLAMA_SERVER else KV_TYPES_OLD
        if kvt not in allowed:
            findings.append(finding("OLLM014", f"OLLAMA_KV_CACHE_TYPE={kvt} is not one of {', '.join(allowed)}"
                                    + ("; llama-server exits on it" if v >= V.LLAMA_SERVER else "; f16 is used"),
                                    span=spans.get("OLLAMA_KV_CACHE_TYPE"), site=site.name,
                                    setting="OLLAMA_KV_CACHE_TYPE",
                                    severity="error" if v >= V.LLAMA_SERVER else "warning"))
        elif v >= V.LLAMA_SERVER and fa is False:
            findings.append(finding("OLLM005", f"OLLAMA_KV_CACHE_TYPE={kvt} with OLLAMA_FLASH_ATTENTION off: Ollama "
                                    "passes --flash-attn off and llama-server fails (\"quantized V cache requires "
                                    "flash_attn to be enabled\")", span=spans.get("OLLAMA_FLASH_ATTENTION"),
                                    site=site.name, setting="OLLAMA_FLASH_ATTENTION", severity="error"))
        elif v < V.LLAMA_SERVER and not fa:
            findings.append(finding("OLLM005", f"OLLAMA_KV_CACHE_TYPE={kvt} is ignored without "
                                    "OLLAMA_FLASH_ATTENTION=1 (\"OLLAMA_FLASH_ATTENTION must be enabled to use a "
                                    "quantized OLLAMA_KV_CACHE_TYPE\"): the KV cache stays f16",
                                    span=spans.get("OLLAMA_KV_CACHE_TYPE"), site=site.name,
                                    setting="OLLAMA_KV_CACHE_TYPE"))
    lib = str(s.get("OLLAMA_LLM_LIBRARY") or "").strip().lower()
    if lib.startswith("cpu") and V.LLM_LIBRARY_GPU_ONLY <= v < V.LLM_LIBRARY_FILTERS:
        findings.append(finding("OLLM015", f"OLLAMA_LLM_LIBRARY={lib} is ignored by Ollama {'.'.join(map(str, v))}: "
                                "from 0.5.8 to 0.12.5 it only picks one of the GPU libraries Ollama ships "
                                "(cuda_v12, rocm ...), and it names none, so models still load on the GPU; to keep "
                                "them on the CPU set num_gpu 0, or CUDA_VISIBLE_DEVICES=-1",
                                span=spans.get("OLLAMA_LLM_LIBRARY"), site=site.name, setting="OLLAMA_LLM_LIBRARY"))
    catalog_id, quant, note = (None, None, "")
    if ref:
        if ref.lower().endswith(".gguf"):
            path = ref
            if doc is not None and not os.path.isabs(ref):
                path = os.path.join(os.path.dirname(doc.file), os.path.expanduser(ref))
            s["model_path"] = path if os.path.isfile(path) else None
            base, quant, _ = parse_ref(file_name(ref))
            catalog_id = path if os.path.isfile(path) else base
            note = f"GGUF {file_name(ref)}"
        else:
            from servefit.engines.ollama.tags import lookup

            tag = lookup(ref)
            catalog_id, quant, note = tag.model, tag.quant, tag.note
            s["tag_context"] = tag.context or None  # the library GGUF's context_length
    s["quant"] = quant
    s["tag_note"] = note
    cfg = EngineConfig(engine="ollama", model_ref=catalog_id or ref, settings=s, spans=spans, explicit=explicit,
                       env={k: t.text for k, t in site.env.items()}, version=".".join(map(str, v)),
                       findings=findings, site=site)
    assume_version(cfg, "Ollama", V.CURRENT, version, implied=implied, where=where)
    if note and ref and catalog_id != ref:
        cfg.assumptions.append(f"model tag {note}")
    s["pulled_others"] = others  # said by OllamaEngine.resolve_model unless --model names the one to size
    return cfg


def pulled_others_note(cfg: EngineConfig) -> str | None:
    """The models the server pulls besides the one sized: Ollama loads each model a request names,
    each on a plan of its own, so they are named as not sized, never left out silently."""
    others = list(cfg.settings.get("pulled_others") or ())
    if not others:
        return None
    names = ", ".join(others[:-1]) + (" and " if len(others) > 1 else "") + others[-1]
    return (f"the server also has {names} (pulled or created beside it), not sized here: Ollama loads each model "
            "a request names, on its own plan; `--model NAME` (or `# servefit: model=NAME` above the server) "
            "sizes one of them")
