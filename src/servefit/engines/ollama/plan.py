"""What Ollama does with a model at load, per era (docs B1):
- classic (<= 0.11.4; llama-runner models until 0.12.10): llm/memory.go::EstimateGPULayers;
- layout (0.11.5 - 0.2x): llm/server.go::buildLayout packs layers from the last one down into
  free - MinimumMemory - OLLAMA_GPU_OVERHEAD - graph, with the real cache/graph sizes;
- llama-server (>= 0.30): llm/llama_server.go builds `llama-server -c num_ctx*np -np np ...` and
  llama.cpp's own rules (--fit for the layers) decide -- planned by the llamacpp engine.
Settings first: num_ctx (request > Modelfile > OLLAMA_CONTEXT_LENGTH > default by version/VRAM,
server/routes.go + llm/server.go cap at the training context), num_parallel (server/sched.go)."""

from __future__ import annotations

from typing import Any

from servefit import data
from servefit.core import DeviceMemory, EngineConfig, MemoryPlan
from servefit.engines.llamacpp import model as M
from servefit.engines.ollama import classic as CL
from servefit.engines.ollama import versions as V
from servefit.engines.ollama.detail import OllamaDetail
from servefit.engines.ollama.detail import of as detail_of
from servefit.engines.ollama.report import advice, gib, human_bytes, offload_line, weights_fields
from servefit.hardware.spec import GpuSpec
from servefit.models.spec import ModelSpec

MIB, GIB = 2**20, 2**30
OLLAMA_RESERVE = 256 * MIB  # what the driver/other contexts hold on an idle GPU ("available" vs total)


def table() -> dict[str, Any]:
    return dict(data.load("engines/ollama.yaml"))


def ollama_arch(lm: M.LModel) -> str:
    return str(table()["arch_names"].get(lm.arch, lm.arch))


def ollama_engine(arch: str, v: tuple[int, ...], new_engine: bool) -> bool:
    if new_engine and v >= V.LAYOUT:
        return True
    return any(V.vtuple(e["since"]) <= v < V.vtuple(e.get("until") or "9999.0.0") and arch in e["archs"]
               for e in table()["ollama_engine"])


def gpu_free(gpu: GpuSpec) -> int:
    if gpu.vendor == "apple":  # Metal's recommendedMaxWorkingSetSize (discover/gpu_darwin.go), which the
        return gpu.memory_bytes  # catalog records as the device's memory
    if gpu.unified_memory:
        return gpu.memory_bytes - max(4 * GIB, gpu.memory_bytes // 12)
    return gpu.memory_bytes - OLLAMA_RESERVE


def default_num_ctx(s: dict[str, Any], v: tuple[int, ...], arch: str, gpu: GpuSpec, n_dev: int) -> tuple[int, str]:
    if "num_ctx" in s:
        return int(s["num_ctx"]), "PARAMETER num_ctx"
    env = int(s.get("OLLAMA_CONTEXT_LENGTH") or 0)
    if env:
        return env, "OLLAMA_CONTEXT_LENGTH"
    overhead = int(s.get("OLLAMA_GPU_OVERHEAD") or 0)
    total = n_dev * max(0, gpu.memory_bytes - overhead)
    if v >= V.VRAM_TIERS:  # server/routes.go::Serve "vram-based default context"
        tier = 262144 if total >= 47 * GIB else 32768 if total >= 23 * GIB else 4096
        return tier, f"VRAM-based default for {total / GIB:.0f} GiB"
    return (4096 if v >= V.CTX_4096 else 2048), "Ollama default"


def context_floor(num_ctx: int, v: tuple[int, ...], arch: str, total_vram: int) -> int:
    """server/routes.go::scheduleRunner after modelOptions (so whatever set num_ctx: request, Modelfile
    PARAMETER, OLLAMA_CONTEXT_LENGTH or the default): gpt-oss gets opts.NumCtx = max(opts.NumCtx, 8192), from
    v0.11.0 (ModelFamilies contains "gptoss") to v0.15.4; from v0.11.4 only when !s.lowVRAM (Serve: the GPUs'
    TotalMemory - OLLAMA_GPU_OVERHEAD summed is >= lowVRAMThreshold, 20 GiB); qwen3vl / qwen3vlmoe from v0.12.7.
    v0.15.5 drops it for the VRAM-based default context."""
    families = ("gptoss", "gpt-oss") + (("qwen3vl", "qwen3vlmoe") if v >= V.QWEN3VL_8K else ())
    if not V.GPTOSS_8K <= v < V.VRAM_TIERS or arch not in families:
        return num_ctx
    if v >= V.GPTOSS_8K_LOW_VRAM and total_vram < 20 * GIB:
        return num_ctx
    return max(num_ctx, 8192)


def minimum_memory(gpu: GpuSpec) -> int:
    mm = table()["minimum_memory_mib"]
    return int(mm["metal" if gpu.vendor == "apple" else "rocm" if gpu.vendor == "amd" else "cuda"]) * MIB


def plan(cfg: EngineConfig, spec: ModelSpec, gpu: GpuSpec, count: int) -> MemoryPlan:
    s = cfg.settings
    v = V.vtuple(cfg.version)
    assumptions: list[str] = []
    lm = M.load({"model": s.get("model_path"), "gguf_quant": s.get("quant")}, spec, assumptions)
    if lm.source == "catalog" and s.get("tag_context"):  # the library's GGUF says its own context_length
        lm.n_ctx_train = int(s["tag_context"])
    arch = ollama_arch(lm)
    n_dev = 1 if gpu.vendor == "apple" else max(1, count or 1)
    num_ctx, ctx_src = default_num_ctx(s, v, arch, gpu, n_dev)
    total_vram = n_dev * max(0, gpu.memory_bytes - int(s.get("OLLAMA_GPU_OVERHEAD") or 0))
    floored = context_floor(num_ctx, v, arch, total_vram)
    if floored != num_ctx:
        ctx_src = f"{ctx_src}, raised to Ollama's gpt-oss minimum of {floored}"
        num_ctx = floored
    requested_ctx = num_ctx
    if lm.n_ctx_train and num_ctx > lm.n_ctx_train and v >= V.CTX_CAP:
        num_ctx = lm.n_ctx_train  # llm/server.go "requested context size too large for model" (v0.9.3+)
    num_ctx = max(num_ctx, 4)
    np_env = s.get("OLLAMA_NUM_PARALLEL")
    np_auto = not np_env and V.NUM_PARALLEL_AUTO <= v < V.NUM_PARALLEL_1
    num_parallel = int(np_env or 1)
    if lm.embedding or arch in table()["single_slot"]:
        num_parallel = 1
    eng = ollama_engine(arch, v, bool(s.get("OLLAMA_NEW_ENGINE")))
    era = V.era(v, arch, eng, bool(s.get("OLLAMA_NEW_ESTIMATES")))
    ctx = {"num_ctx": num_ctx, "requested_ctx": requested_ctx, "ctx_src": ctx_src, "num_parallel": num_parallel,
           "np_auto": np_auto, "era": era, "arch": arch, "n_dev": n_dev, "v": v}
    if era == "llamaserver":
        from servefit.engines.ollama.server import plan_llama_server

        p = plan_llama_server(cfg, spec, lm, gpu, n_dev, ctx, assumptions)
    else:
        p = _plan_estimate(cfg, spec, lm, gpu, n_dev, ctx, v, assumptions)
    p.findings = advice(cfg, lm, gpu, p, ctx) + p.findings
    p.assumptions = list(dict.fromkeys(assumptions + p.assumptions))
    return p


def _kv_type(s: dict[str, Any], lm: M.LModel, gpu: GpuSpec, fa: bool, auto: bool = False,
             arch: str = "", v: tuple[int, ...] = (0, 0, 0)) -> str:
    """llm/server.go: the KV type applies only with flash attention on and a supported type; from v0.13.4
    a llama-runner model whose flash attention is left to llama.cpp ("auto") gets no quantized type
    ("OLLAMA_FLASH_ATTENTION must be enabled to use a quantized OLLAMA_KV_CACHE_TYPE")."""
    t = s["kv_cache_type"]
    if arch == "gptoss" and (0, 11, 5) <= v < (0, 12, 4):  # GGML.SupportsKVCacheType: "attention with sinks"
        return "f16"
    if t in ("q8_0", "q4_0") and fa and not auto:
        return t
    return "f16"


def _fa(s: dict[str, Any], lm: M.LModel, gpu: GpuSpec, v: tuple[int, ...], arch: str, auto: bool = False) -> bool:
    """llm/server.go NewLlamaServer: OLLAMA_FLASH_ATTENTION, or the model's wish (GGML.FlashAttention,
    versions.FA_WANTED: forced on v0.11.8 - v0.12.3, the default from v0.12.4); then GPU support and model
    support (GGML.SupportsFlashAttention: K == V head size, not an embedding model, not gpt-oss in v0.11.2 -
    v0.11.4)."""
    # GpuInfoList.FlashAttentionSupported (llm/server.go before v0.5.0): Metal; CUDA with DriverMajor >= 7 (the
    # driver's version, which every CUDA 11/12 driver passes: no compute-capability test), minus Jetson Xavier
    # (7.2) from v0.12.4; ROCm from v0.5.0
    if gpu.vendor == "nvidia":
        gpu_ok = not (v >= (0, 12, 4) and gpu.compute_capability == 72)
    else:
        gpu_ok = gpu.vendor == "apple" or (gpu.vendor == "amd" and v >= (0, 5, 0))
    lo, hi = V.GPTOSS_NO_FA
    model_ok = lm.head_k == lm.head_v and not lm.embedding and not (arch == "gptoss" and lo <= v <= hi)
    want = s.get("flash_attention")
    if want is None and auto:
        want = True  # FlashAttentionAuto: llama.cpp turns it on where the device runs it
    wanted = V.fa_wanted(v, arch)
    if want is None or (wanted and v < V.FA_ENV_DEFAULT):
        want = bool(want) or wanted
    return bool(want and gpu_ok and model_ok)


def _plan_estimate(cfg: EngineConfig, spec: ModelSpec, lm: M.LModel, gpu: GpuSpec, n_dev: int,
                   ctx: dict[str, Any], v: tuple[int, ...], assumptions: list[str]) -> MemoryPlan:
    s = cfg.settings
    eng = ctx["era"] == "layout" and ollama_engine(ctx["arch"], v, bool(s.get("OLLAMA_NEW_ENGINE")))
    ctx["eng"] = eng
    # v0.13.4 NewLlamaServer: a llama-runner model (no textProcessor) with OLLAMA_FLASH_ATTENTION unset
    # passes FlashAttentionAuto to llama.cpp
    auto = v >= V.FA_AUTO_LLAMA_RUNNER and not eng and s.get("flash_attention") is None
    fa = _fa(s, lm, gpu, v, ctx["arch"], auto)
    kvt = _kv_type(s, lm, gpu, fa, auto, ctx["arch"], v)
    overhead = int(s.get("OLLAMA_GPU_OVERHEAD") or 0)
    free = [gpu_free(gpu)] * n_dev
    num_gpu = int(s.get("num_gpu", -1))
    num_batch = int(s.get("num_batch", 512))
    minimum = minimum_memory(gpu)

    def est(np_: int, frees: list[int]) -> CL.Estimate:
        return CL.estimate(lm, ctx["arch"], frees, ctx["num_ctx"], num_batch, np_, kvt, num_gpu, overhead,
                           minimum, v=v, fa=fa, metal=gpu.vendor == "apple")

    def fits(e: CL.Estimate) -> bool:  # llm/memory.go::PredictServerFit
        return e.layers > 0 and e.layers >= (e.layers_model if num_gpu < 0 else num_gpu)

    # server/sched.go::pickBestFullFitByLibrary: with OLLAMA_NUM_PARALLEL unset, defaultParallel then 1;
    # each on one GPU first (unless OLLAMA_SCHED_SPREAD), then on all of them; if none fits
    # (pickBestPartialFitByLibrary) one slot on all the GPUs
    tries = [V.default_parallel(v), 1] if ctx["np_auto"] else [ctx["num_parallel"]]
    # v0.11.5 llm/memory.go::pickBestFullFitByLibrary: "pack into as few GPUs as possible", 1, 2, ... GPUs
    counts = range(1, len(free) + 1) if v >= V.LAYOUT else [1]
    choice = None
    if not s.get("OLLAMA_SCHED_SPREAD"):
        choice = next(((p, free[:k]) for p in tries for k in counts if fits(est(p, free[:k]))), None)
    if choice is None:
        choice = next(((p, free) for p in tries if fits(est(p, free))), (1 if ctx["np_auto"] else tries[0], free))
    np_, free = choice
    if ctx["np_auto"]:
        assumptions.append(f"OLLAMA_NUM_PARALLEL unset: Ollama {'.'.join(map(str, v))} picks {np_} "
                           f"({tries[0]} when the model fits fully with {tries[0]}, else 1)")
    ctx["num_parallel"] = np_
    e = est(np_, free)
    from servefit.engines.ollama.runner import runner_buffers

    runner, runner_msgs = runner_buffers(s, spec, gpu, len(free), v, ctx["num_ctx"], np_, num_batch, e.layers, fa, kvt,
                                         fa_auto=auto)
    if ollama_engine(ctx["arch"], v, bool(s.get("OLLAMA_NEW_ENGINE"))):
        # llm/server.go: OllamaEngineRequired models run on `ollama runner --ollama-engine` (runner/ollamarunner),
        # which allocates through Ollama's ggml backend: no llama.cpp context, so none of its buffer lines
        runner, runner_msgs = None, []
    # llm/server.go NewLlamaServer: "Don't bother loading into the GPU if no layers can fit" (not on
    # Metal): the CPU runner serves the model and the GPU holds none of it
    cpu_only = e.layers == 0 and num_gpu != 0 and gpu.vendor != "apple"
    if cpu_only:
        runner, runner_msgs = None, [f"load_tensors: offloaded 0/{e.layers_model} layers to GPU"]
    if ctx["era"] == "layout":
        from servefit.engines.ollama.layout import layout_plan

        p = layout_plan(cfg, lm, gpu, free, ctx, fa, kvt, e, overhead, minimum, assumptions)
        detail_of(p).runner = runner
        return p
    devices = []
    for i, a in enumerate(e.allocations):
        devices.append(DeviceMemory(total=gpu.memory_bytes, budget=free[i], weights=0, activation_peak=0,
                                    non_torch=0 if cpu_only else minimum + overhead, kv_cache=0, free_headroom=max(0, free[i] - a),
                                    label=f"GPU{i} ({gpu.name})"))
    frac = [c / max(1, e.layers) for c in e.split]
    gpu_layers_w = e.weights_repeating * min(e.layers, lm.n_layer) // max(1, lm.n_layer)
    for i, d in enumerate(devices):
        d.weights = int(gpu_layers_w * frac[i]) + (e.weights_output if e.fully_loaded and i == 0 else 0)
        d.kv_cache = int(e.kv * min(e.layers, lm.n_layer) / max(1, lm.n_layer) * frac[i])
        d.activation_peak = 0 if cpu_only else e.graph_full if e.fully_loaded else e.graph_partial
    forced = num_gpu >= 0 and num_gpu > e.layers
    outcome = "oom_at_load" if forced else "started"
    worst = max(range(len(devices)), key=lambda i: e.allocations[i] / max(1, free[i]))
    w_total, w_rep, w_out = weights_fields(e, v)
    detail = OllamaDetail(
        runner=runner,
        memory_required_gib=gib(e.total), memory_required_partial_gib=gib(e.vram),
        memory_required_kv_gib=gib(e.kv),
        memory_weights_total_gib=gib(w_total), memory_weights_repeating_gib=gib(w_rep),
        memory_weights_nonrepeating_gib=gib(w_out),
        memory_graph_full_gib=gib(e.graph_full), memory_graph_partial_gib=gib(e.graph_partial),
        memory_required_allocations_gib=[gib(a) for a in e.allocations],
        layers_offloaded=e.layers, layers_model=e.layers_model, num_ctx=ctx["num_ctx"],
        num_parallel=np_, kv_cache_type=kvt, flash_attention=fa, era="classic",
    )
    msgs = [offload_line(gpu, e, free, overhead, num_gpu, v)] + runner_msgs
    if s["kv_cache_type"] != "f16" and kvt == "f16":
        msgs.insert(0, "level=WARN msg=\"quantized kv cache requested but flash attention disabled\" type="
                    + s["kv_cache_type"])
    bpt = int(sum(CL.graph_size(lm, ctx["arch"], 1, 1, 1, kvt, v)[0]))
    return MemoryPlan(engine="ollama", engine_version=".".join(map(str, v)), outcome=outcome,
                      memory=devices[worst], kv_bytes_per_token=bpt, kv_cache_tokens=ctx["num_ctx"] * np_,
                      max_model_len=ctx["num_ctx"], max_concurrency=float(np_),
                      devices=devices if len(devices) > 1 else [], parallel={"tensor": 1, "pipeline": 1,
                                                                             "world": len(devices)},
                      messages=msgs, detail=detail)


__all__ = ["plan", "human_bytes"]
