"""Ollama >= 0.30: llm/llama_server.go::startLlamaServer runs upstream llama-server as
  llama-server --model BLOB -c num_ctx*np -np np --flash-attn on|off|auto [--cache-type-k/v T]
               [-b N -ub N] [-ngl N]
with the server's environment inherited (LLAMA_ARG_* not passed as flags take effect). llama.cpp's
own accounting (and --fit, which only picks layers since -c is explicit) then decides; this module
builds that command and hands it to the llamacpp planner."""

from __future__ import annotations

from typing import Any

from servefit import data
from servefit.core import EngineConfig, LaunchSite, MemoryPlan, Token
from servefit.engines.llamacpp.detail import of as llama_detail
from servefit.engines.llamacpp.model import LModel
from servefit.engines.ollama.detail import OllamaDetail
from servefit.engines.ollama.report import gib
from servefit.hardware.spec import GpuSpec
from servefit.models.spec import ModelSpec

GIB, MIB = 2**30, 2**20
KEEP = {"LCPP003", "LCPP004", "LCPP005", "LCPP006", "LCPP016", "LCPP017"}


def llama_build(v: tuple[int, ...]) -> str:
    from servefit.engines.ollama.versions import vtuple

    table = data.load("engines/ollama.yaml")["llama_cpp_build"]
    best = "b9460"
    for ov, b in sorted(((vtuple(k), b) for k, b in table.items())):
        if v >= ov:
            best = b
    return best


def auto_batch(cfg: EngineConfig, lm: LModel, gpu: GpuSpec, num_ctx: int, np_: int, fa: str) -> int:
    """server/sched.go::automaticGenerationBatch with llm/llama_server.go::PredictServerVRAM."""
    eff = min(num_ctx, lm.n_ctx_train or num_ctx) * np_
    if fa == "off" and gpu.vendor == "nvidia":
        return 256 if eff > 4096 and gpu.memory_bytes <= 8 * GIB else 512
    avail = gpu.memory_bytes
    heads_kv = min((h for h in lm.n_head_kv if h), default=1)
    predicted = lm.weight_bytes + 2 * lm.n_layer * heads_kv * (lm.n_embd // max(1, lm.n_head_max)) * eff * 2
    for size, share, surcharge in ((2048, 0.60, 2 * GIB), (1024, 0.75, 768 * MIB)):
        want = eff > (32768 if size == 2048 else 4096)
        if want and predicted <= 0.8 * avail and predicted <= share * avail and predicted + surcharge <= 0.8 * avail:
            return size
    return 512


def plan_llama_server(cfg: EngineConfig, spec: ModelSpec, lm: LModel, gpu: GpuSpec, n_dev: int, ctx: dict[str, Any],
                      assumptions: list[str]) -> MemoryPlan:
    from servefit.engines.llamacpp import ENGINE as LCPP

    s = cfg.settings
    v = tuple(int(x) for x in (cfg.version or "0.30.0").split(".")[:3])
    np_, num_ctx = ctx["num_parallel"], ctx["num_ctx"]
    fa_env = s.get("flash_attention")
    fa = "on" if fa_env is True else "off" if fa_env is False else "auto"
    if fa == "auto" and gpu.vendor == "nvidia" and 0 < gpu.compute_capability < 60:
        fa = "off"  # ml.FlashAttentionSupported
    words = ["llama-server", "--model", str(s.get("model_path") or f"{lm.name}.gguf"),
             "-c", str(num_ctx * np_), "-np", str(np_), "--flash-attn", fa]
    if s.get("OLLAMA_KV_CACHE_TYPE"):
        words += ["--cache-type-k", s["kv_cache_type"], "--cache-type-v", s["kv_cache_type"]]
    if "num_batch" in s:
        nb = int(s["num_batch"])
    else:
        nb = auto_batch(cfg, lm, gpu, num_ctx, np_, fa)
        assumptions.append(f"num_batch unset: Ollama's automatic batch picks {nb} (-b = -ub)")
    if nb > 0:
        words += ["-b", str(nb), "-ub", str(nb)]
    if int(s.get("num_gpu", -1)) >= 0:
        words += ["-ngl", str(int(s["num_gpu"]))]
    env = {k: t for k, t in (s.get("llama_env") or {}).items()}
    site = LaunchSite(file=cfg.site.file if cfg.site else "<ollama>", line=0, argv=[Token(w) for w in words],
                      env=env, engine="llamacpp", name=cfg.site.name if cfg.site else "ollama")
    build = llama_build(v)
    lcfg = LCPP.parse(site, build)
    lcfg.settings["gguf_quant"] = s.get("quant")
    if not s.get("model_path"):
        lcfg.settings["model"] = None
    p = LCPP.plan(lcfg, spec, gpu, n_dev)
    x = llama_detail(p)
    gpu_used = sum(d.weights + d.kv_cache + d.activation_peak for d in (p.devices or [p.memory]))
    p.engine, p.engine_version = "ollama", ".".join(map(str, v))
    p.detail = OllamaDetail(runner=x, memory_required_gib=gib(gpu_used), num_ctx=num_ctx, num_parallel=np_,
                            layers_offloaded=x.n_gpu_layers_offloaded, layers_model=x.n_layers_total,
                            kv_cache_gib=gib(x.kv_buffer_mib * MIB), kv_cache_type=s["kv_cache_type"],
                            flash_attention=x.flash_attn, era="llama-server", llama_server_argv=" ".join(words),
                            llama_cpp_build=build)
    p.findings = [f for f in lcfg.findings + p.findings if f.code in KEEP]
    p.max_model_len = num_ctx
    p.messages = [" ".join(words)] + p.messages
    assumptions.append(f"Ollama {'.'.join(map(str, v))} runs llama-server (llama.cpp {build} assumed)")
    return p
