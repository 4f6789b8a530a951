"""llama-server's command line and LLAMA_ARG_* environment -> settings, the way
common/arg.cpp::common_params_parse reads them (flags win over env; a negatable flag's
LLAMA_ARG_NO_<X> means off whatever its value), with the build's defaults applied."""

from __future__ import annotations

import os
import re
from typing import Any

from servefit.core import EngineConfig, Finding, LaunchSite, Token
from servefit.engines.argv import Parsed, parse_argv, parse_env
from servefit.engines.base import assume_version, implied_release, moving_tag, unpinned
from servefit.engines.llamacpp import versions as V
from servefit.engines.options import Implied, load_table
from servefit.models.gguf_names import parse_ref
from servefit.models.name_words import file_name
from servefit.rules.catalog import finding
from servefit.rules.registry import rule

UINT32_MAX = 2**32 - 1  # fit_params_min_ctx for "keep the full context" (common/arg.cpp)
QUANTIZED_KV = {"q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"}
FA_VALUES = {"on": "on", "enabled": "on", "1": "on", "true": "on", "off": "off", "disabled": "off", "0": "off",
             "false": "off", "auto": "auto", "-1": "auto"}
_BOOL_ENV = {"enabled": "true", "disabled": "false"}


@rule("LCPP001")
def invalid_argument(message: str, **where: Any) -> Finding:
    """llama-server rejects an argument (a stray word, a switch given a value)."""
    return finding("LCPP001", message, **where)


@rule("LCPP002")
def invalid_value(message: str, **where: Any) -> Finding:
    """A flag's value llama-server does not accept."""
    return finding("LCPP002", message, **where)


@rule("LCPP003")
def needs_flash_attention(message: str, **where: Any) -> Finding:
    """A quantized V cache without flash attention: the context fails to initialise."""
    return finding("LCPP003", message, **where)


def _fa(parsed: Parsed, b: int, findings: list[Finding], site: str) -> str | None:
    """common/arg.cpp `-fa`: a value on|off|auto since b6325; a bare switch before."""
    raw = parsed.values.get("flash_attn")
    span = parsed.spans.get("flash_attn") or parsed.flag_spans.get("flash_attn")
    if raw is None:
        return None
    if raw == [] or raw is True:
        if b >= V.FA_AUTO:
            findings.append(invalid_value("argument -fa: expected value on|off|auto (since b6325 `-fa` "
                                    "takes a value; a bare -fa is an error)", span=span, site=site,
                                    setting="flash_attn"))
            return "on"
        return "on"
    text = str(raw).strip().lower()
    if b < V.FA_AUTO:  # a switch: the word after it is a stray argument
        findings.append(invalid_argument(f"error: invalid argument: {raw} (before b6325 -fa is a switch "
                                "without a value)", span=span, site=site, setting="flash_attn"))
        return "on"
    val = FA_VALUES.get(text)
    if val is None:
        findings.append(invalid_value(f"error: unknown value for --flash-attn: '{raw}'", span=span,
                                site=site, setting="flash_attn"))
        return "auto"
    return val


def _ngl(text: Any, b: int) -> int | str:
    """-ngl N | auto (-1) | all (-2); values above the layer count mean all. N is read by std::stoi (common/arg.cpp:
    the int handler before b7553, `params.n_gpu_layers = std::stoi(value)` after), the number it starts with:
    `-ngl 100,100` is 100."""
    from servefit.engines.argv import _cpp_number

    s = str(text).strip().lower()
    if s in ("auto", "-1"):
        return "auto"
    if s in ("all", "-2"):
        return "all"
    n = int(_cpp_number("int", s))
    if n in (-1, -2):
        return "auto" if n == -1 else "all"
    if n < 0:
        raise ValueError(s)
    return n


def split_floats(text: str) -> list[float]:
    parts = [p for p in re.split(r"[,/]+", text.strip()) if p]
    return [float(p) for p in parts]


def model_words(site: LaunchSite) -> int:
    from servefit.engines.llamacpp import ENGINE

    return ENGINE.command_length([t.text for t in site.argv])


def _bare_fa_dates(parsed: Parsed, table: Any, implied: Implied | None, version: str | None, site: LaunchSite,
                   where: dict[str, Any]) -> Implied | None:
    """A bare `-fa` where no build is given: only builds before b6325 take it (common/arg.cpp: a
    switch then, `on|off|auto` from b6325), so the config dates itself to the newest build read
    before that, unless its other options need a later one (then no build takes them all, and the
    bare switch stays an error)."""
    raw = parsed.values.get("flash_attn")
    if version or moving_tag(site) or not (raw == [] or raw is True):
        return implied
    if implied is not None and (implied.version is None or V.build(implied.version) < V.FA_AUTO):
        return implied  # the options already date it (before b6325, or to no build at all)
    # else none, or an option removed later dates it to a build that refuses the bare switch: the newest
    # build before b6325 takes them all where it has every option (`--ctx-size-draft` is in both)
    before = [r for r in table.releases if V.build(r) < V.FA_AUTO]
    if not before:
        return implied
    newest = max(before, key=V.build)
    for name in where:  # an option a later build added: no build takes them all
        h = table.history.get(name) or table.env_history.get(name)
        if h is not None and not h.present(newest):
            if implied is None:
                return implied
            # the options dated it to a build that refuses the bare switch: say that no build takes them all,
            # not that this one has every option (countzero/windows_llama.cpp: --ctx-size-draft with -fa)
            where["-fa"] = parsed.flag_spans.get("flash_attn") or parsed.spans.get("flash_attn")
            return Implied(None, (("-fa", f"a bare switch only before b{V.FA_AUTO}"),
                                  (name, h.why_absent(newest))))
    where["-fa"] = parsed.flag_spans.get("flash_attn") or parsed.spans.get("flash_attn")
    return Implied(newest, (("-fa", f"a bare switch, as builds before b{V.FA_AUTO} take it: from then it needs "
                                    "on|off|auto"),))


def _dating_env(site: LaunchSite, table: Any) -> dict[str, Any]:
    """The LLAMA_ARG_* twins the site sets, where each release's parser lists them. LLAMA_ARG_NO_<X>
    is left out: from b8121 every negatable flag honours it by rule (common_arg::get_value_from_env),
    so its leaving the list dates nothing."""
    return {k: t.span for k, t in site.env.items()
            if k in table.env_history and k.startswith("LLAMA_ARG_") and not k.startswith("LLAMA_ARG_NO_")}


def parse(site: LaunchSite, version: str | None) -> EngineConfig:
    table = load_table("llamacpp")
    n = model_words(site)
    args = list(site.argv[n:])
    parsed = parse_argv(table, args, f"b{V.build(version)}", site=site.name,
                        unpinned=unpinned("llama.cpp", None, site, version))
    where = {**parsed.used, **_dating_env(site, table)}
    implied = implied_release(table, where, V.CURRENT, version, site)
    implied = _bare_fa_dates(parsed, table, implied, version, site, where)
    b = V.build(implied.version if implied and implied.version else version)
    ver = f"b{b}"
    if implied:  # the options date the config (or no build has them all): model that build, say so
        parsed = parse_argv(table, args, ver, site=site.name, unpinned=unpinned("llama.cpp", implied, site))
    # llama-swap macros (${PORT}, ${MODEL_ID}) are filled in by llama-swap at run time: not a bad value
    parsed.findings = [f for f in parsed.findings if "${" not in f.message]
    for f in parsed.findings:  # llama.cpp's own wording (common/arg.cpp: "error: invalid argument: X")
        if f.code == "LCPP001" and f.message.startswith("unrecognized argument: "):
            f.message = "error: invalid argument: " + f.message[len("unrecognized argument: "):]
    for tok in parsed.positionals:
        parsed.findings.append(invalid_argument(f"error: invalid argument: {tok.text}", span=tok.span,
                                       site=site.name))
    env: dict[str, Token] = {}
    for k, tok in site.env.items():
        low = tok.text.strip().lower()
        if k.startswith("LLAMA_ARG_NO_") and k not in table.by_env:
            pos = "LLAMA_ARG_" + k[len("LLAMA_ARG_NO_"):]  # LLAMA_ARG_NO_MMAP=anything -> mmap off
            if pos in table.by_env and table.by_env[pos].type == "bool":
                env[pos] = Token("false", tok.span)
                continue
        env[k] = Token(_BOOL_ENV.get(low, tok.text), tok.span) if low in _BOOL_ENV else tok
    explicit_argv = set(parsed.values)
    parse_env(table, env, parsed, site=site.name)
    findings = parsed.findings
    vals = parsed.values
    s: dict[str, Any] = {}
    spans = dict(parsed.spans)
    # model reference
    ref = vals.get("model") or vals.get("hf_repo") or vals.get("model_url") or vals.get("docker_repo")
    if vals.get("hf_repo") and vals.get("hf_file"):
        ref = vals["hf_file"]
    s["model"] = ref
    if vals.get("hf_repo"):
        s["hf_repo"] = vals["hf_repo"]
    base = quant = None
    if ref:
        base, quant, _ = parse_ref(str(ref).rsplit("/", 1)[-1] if str(ref).startswith("http") else str(ref))
        if vals.get("hf_repo") and not vals.get("hf_file") and not quant:
            quant = "Q4_K_M"
    s["gguf_base"], s["gguf_quant"] = base, quant
    # values as the engine holds them
    s["ctx_size"] = int(vals.get("ctx_size", 0) or 0)
    # common/common.h common_params::n_ctx, what an unset -c means: 4096 from PR #10136 until --fit (b7407) made it 0
    # again (the training context, which fit may lower); 0 before #10136. -c 0 is the training context on every build.
    s["ctx_default"] = 4096 if "ctx_size" not in vals and V.CTX_4096 <= b < V.FIT else 0
    s["parallel"] = int(vals.get("parallel", -1 if b >= V.NP_AUTO else 1))
    s["batch_size"] = int(vals.get("batch_size", 2048))
    s["ubatch_size"] = int(vals.get("ubatch_size", 512))
    for key in ("cache_type_k", "cache_type_v"):
        s[key] = str(vals.get(key, "f16")).lower()
    fa = _fa(parsed, b, findings, site.name)
    s["flash_attn"] = fa or ("auto" if b >= V.FA_AUTO else "off")
    if vals.get("no_kv_unified"):
        s["kv_unified"] = False
    elif vals.get("kv_unified") is not None:
        s["kv_unified"] = bool(vals["kv_unified"])
    else:
        s["kv_unified"] = b >= V.NP_AUTO and s["parallel"] < 0
    if s["parallel"] < 0:
        s["parallel"] = 4 if b >= V.NP_AUTO else 1
    s["swa_full"] = bool(vals.get("swa_full", False))
    for k in ("rope_scale", "rope_freq_scale"):  # the context the file stretches RoPE over (LCPP011)
        if vals.get(k) is not None:
            s[k] = vals[k]
    s["kv_offload"] = not vals.get("no_kv_offload", False) and vals.get("kv_offload", True) is not False
    # before -ngl auto (b7553) -1 was the "unset" sentinel: common/common.cpp common_model_params_to_llama
    # copies n_gpu_layers into llama_model_default_params only `if (params.n_gpu_layers != -1)`, so -ngl -1
    # leaves the library default (0 before #15434, 999 from b6325), as if -ngl were not given
    ngl_unset = "n_gpu_layers" not in vals or (b < V.NGL_AUTO and str(vals["n_gpu_layers"]).strip() == "-1")
    try:
        s["n_gpu_layers"] = _ngl(vals["n_gpu_layers"], b) if not ngl_unset else (
            "auto" if b >= V.NGL_AUTO else ("all" if b >= V.FA_AUTO else 0))
    except ValueError:
        findings.append(invalid_value(f"argument -ngl: invalid value '{vals['n_gpu_layers']}' (a number, auto "
                                "or all)", span=spans.get("n_gpu_layers"), site=site.name, setting="n_gpu_layers"))
        s["n_gpu_layers"] = "auto"
    if V.FIT <= b < V.NGL_AUTO and s["n_gpu_layers"] in ("all", 999):
        # common_model_params_to_llama leaves llama_model_default_params' 999 when -ngl is unset, and fit
        # (llama_params_fit_impl) counts -ngl as set only when it differs from that default: unset or 999 is fit's
        s["n_gpu_layers"] = "auto" if ngl_unset or str(vals["n_gpu_layers"]).strip() == "999" \
            else "all"
    # the number common/arg.cpp stored (fit's "already set by user to N" quotes it): -ngl 999 is 999, all is -2
    s["n_gpu_layers_arg"] = {"all": -2, "auto": -1}.get(str(s["n_gpu_layers"]), s["n_gpu_layers"])
    if isinstance(s["n_gpu_layers"], int) and s["n_gpu_layers"] >= 999:
        s["n_gpu_layers"] = "all"
    s["split_mode"] = vals.get("split_mode", "layer")
    s["main_gpu"] = int(vals.get("main_gpu", 0) or 0)
    s["tensor_split"] = None
    if vals.get("tensor_split"):
        try:
            s["tensor_split"] = split_floats(str(vals["tensor_split"]))
        except ValueError:
            findings.append(invalid_value(f"argument -ts: invalid value '{vals['tensor_split']}'",
                                    span=spans.get("tensor_split"), site=site.name, setting="tensor_split"))
    fit = vals.get("fit")
    s["fit"] = b >= V.FIT and (fit is None or str(fit).lower() in ("on", "true", "1", "enabled"))
    s["fit_target"] = [1024]
    if vals.get("fit_target"):
        try:
            s["fit_target"] = [int(float(x)) for x in split_floats(str(vals["fit_target"]))] or [1024]
        except (ValueError, OverflowError):
            findings.append(invalid_value(f"argument -fitt: invalid value '{vals['fit_target']}'",
                                    span=spans.get("fit_target"), site=site.name, setting="fit_target"))
    s["fit_ctx"] = int(vals.get("fit_ctx", 4096) or 4096)
    # common/arg.cpp -c handler (from PR #19070): an explicit -c 0 also sets fit_params_min_ctx = UINT32_MAX, fit then
    # keeps the full training context ("user has requested full context size"). Arguments apply in order, so a
    # -fitc after it would win; given both, servefit keeps -fitc.
    if b >= V.FIT_FULL_CTX and "ctx_size" in vals and s["ctx_size"] == 0 and "fit_ctx" not in vals:
        s["fit_ctx"] = UINT32_MAX
    s["override_tensor"] = [p for p in str(vals.get("override_tensor", "") or "").split(",") if "=" in p]
    s["cpu_moe"] = bool(vals.get("cpu_moe", False))
    s["n_cpu_moe"] = int(vals.get("n_cpu_moe", 0) or 0)
    load_mode = str(vals.get("load_mode", "") or "")
    s["mmap"] = vals.get("mmap", True) is not False and load_mode not in ("none", "dio")
    s["mlock"] = bool(vals.get("mlock", False)) or "mlock" in load_mode
    s["mmproj"] = vals.get("mmproj")
    s["mmproj_offload"] = vals.get("mmproj_offload", True) is not False
    s["model_draft"] = vals.get("model_draft") or vals.get("hf_repo_draft")
    for key in ("n_gpu_layers_draft", "ctx_size_draft", "cache_type_k_draft", "cache_type_v_draft", "device",
                "models_max", "models_dir", "embedding", "verbosity", "draft_max", "lora", "n_predict", "spec_type"):
        if key in vals:
            s[key] = vals[key]
    if str(s.get("device", "")).lower() == "none":
        s["n_gpu_layers"] = 0
    if s["cache_type_v"] in QUANTIZED_KV and s["flash_attn"] == "off":
        findings.append(needs_flash_attention(f"quantized V cache ({s['cache_type_v']}) requires flash_attn to be enabled; "
            "llama-server fails at start (llama_init_from_model: quantized V cache requires flash_attn to be enabled)",
            span=spans.get("flash_attn") or spans.get("cache_type_v"), site=site.name, setting="cache_type_v"))
    elif s["cache_type_v"] in QUANTIZED_KV and s["flash_attn"] == "auto" and "flash_attn" not in vals:
        findings.append(needs_flash_attention(f"quantized V cache ({s['cache_type_v']}) needs flash attention; -fa is not set, so this "
            "build (-fa auto) turns it on when the device has a kernel for the K/V pair (on CUDA: q8_0/q8_0 or "
            "q4_0/q4_0). With -fa off, or on builds before b6325 (flash attention off by default), llama-server "
            "refuses: \"quantized V cache requires flash_attn to be enabled\"; write -fa on",
            span=spans.get("cache_type_v"), site=site.name, setting="flash_attn", severity="info"))
    # before router mode: common/arg.cpp falls back to DEFAULT_MODEL_PATH; not for a Dockerfile's bare ENTRYPOINT
    # with no CMD, whose arguments (the model among them) are what `docker run IMAGE ...` gives (SF115 says so)
    if not ref and b < V.ROUTER and not site.workload.args_at_run:
        s["model"] = ref = "models/7B/ggml-model-f16.gguf"
    elif not ref:
        findings.extend(router_mode(site, s, spans, b))
    cfg = EngineConfig(engine="llamacpp", model_ref=_catalog_ref(s, ref), settings=s, spans=spans,
                       explicit=set(vals), env={k: t.text for k, t in site.env.items()}, version=ver,
                       findings=findings, site=site)
    cfg.explicit |= {k for k in explicit_argv}
    if ref and cfg.model_ref and cfg.model_ref != ref and not os.path.isfile(str(ref)):
        cfg.assumptions.append(f"model {file_name(str(ref))!r} taken as {cfg.model_ref} by its name"
                               + (f" ({quant}, sized as llama-quantize makes it)" if quant else ""))
    if not set(vals) & {"model", "hf_repo", "model_url", "docker_repo"} and ref:
        cfg.assumptions.append(f"no -m: llama-server b{b} loads its default {ref} (router mode came in b{V.ROUTER})")
    assume_version(cfg, "llama.cpp", V.CURRENT, version, hint="--engine-version bNNNN", implied=implied, where=where)
    return cfg


@rule("LCPP015")
def router_mode(site: LaunchSite, s: dict[str, Any], spans: dict[str, Any], b: int) -> list[Finding]:
    """No -m / -hf / -mu / -dr: llama-server is a router (tools/server/server.cpp: is_router_server =
    model path and hf_repo empty) that loads the models requests name, from --models-dir or its
    cache, keeping up to --models-max (default 4, 0 = no limit) loaded at once."""
    from servefit.sources.image_release import official_image

    first = site.argv[0].span if site.argv else None
    if site.image and official_image(site.image) is False:
        # someone's own build of the server (ghcr.io/kth8/llama-server:qwen2.5-1.5b-instruct): its
        # Dockerfile may set ENV LLAMA_ARG_MODEL, which servefit cannot see, so no router is claimed
        # (SF115 says the model is not known)
        return []
    if site.name.startswith("dockerfile") and len(site.argv) <= 1:
        # a Dockerfile whose ENTRYPOINT is the bare server (`ENTRYPOINT ["/llama-server"]`, no CMD: llama.cpp's own
        # .devops/cuda.Dockerfile server target) defines an image: `docker run IMAGE -m ...` gives the arguments
        # (pintar-team/llama-server), so no router is claimed (SF115 says the model is not known)
        return []
    n = int(s.get("models_max", 4) or 0)
    if n == 1:
        return []
    where = f"from {s['models_dir']}" if s.get("models_dir") else "from its cache (or --models-preset)"
    many = f"up to {n} at once" if n else "with no limit on how many stay loaded (--models-max 0)"
    return [finding("LCPP015", f"no -m: llama-server runs as a router and loads the models requests name {where}, "
                    f"{many}; their memory adds up, and servefit cannot size models this file does not name",
                    span=spans.get("models_max") or first, site=site.name, setting="models_max")]


def _catalog_ref(s: dict[str, Any], ref: Any) -> str | None:
    """What pipeline.evaluate hands to models.resolve_model: a local GGUF stays a path; a file or
    repo name becomes the first catalog name that resolves (the original stays in settings)."""
    if not ref:
        return None
    ref = str(ref)
    if ref.lower().endswith(".gguf") and os.path.isfile(ref):
        return ref
    if "$" in ref:  # `-hf org/repo:${QUANT}`: the file is not known, as for a variable model (SF001 says so)
        return ref
    from servefit.models.gguf_names import catalog_candidates

    cands = catalog_candidates(s.get("gguf_base") or ref)
    try:
        from servefit.models import resolve_model  # type: ignore[attr-defined]
    except ImportError:
        return cands[0]
    for cand in cands:
        try:
            return str(resolve_model(cand).name)
        except Exception:
            continue
    return cands[0]
