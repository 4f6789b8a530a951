"""Root cause -> what to change, following the standard fixes, and where it is written.

  kv_cache_overflow       lower the context length, FP8/q8 KV cache, more GPUs
  batch_misconfiguration  lower max_num_seqs / max-num-batched-tokens / prefill tokens / parallel slots
  fragmentation           PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, more headroom, scheduled restarts
  model_too_large         quantize (AWQ/GPTQ/FP8), tensor parallelism, a GPU with more memory

With a config (a LaunchSite from servefit.sources.scan_file) the setting is located: first
through the engine's own parser (engines.<e>.parse gives each setting's span), then by
looking for the flag or environment variable among the site's tokens.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from servefit.diagnose.model import Diagnosis, Setting

if TYPE_CHECKING:
    from servefit.core import LaunchSite, Span

# engine -> canonical setting -> (flags..., then environment variables in capitals)
FLAGS: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {
        "max_model_len": ("--max-model-len", "--max_model_len"),
        "max_num_seqs": ("--max-num-seqs", "--max_num_seqs"),
        "max_num_batched_tokens": ("--max-num-batched-tokens", "--max_num_batched_tokens"),
        "gpu_memory_utilization": ("--gpu-memory-utilization", "--gpu_memory_utilization"),
        "kv_cache_dtype": ("--kv-cache-dtype",), "quantization": ("--quantization", "-q"),
        "tensor_parallel_size": ("--tensor-parallel-size", "-tp"), "model": ("--model",),
        "PYTORCH_CUDA_ALLOC_CONF": ("PYTORCH_CUDA_ALLOC_CONF",),
        "enable_chunked_prefill": ("--enable-chunked-prefill",), "enforce_eager": ("--enforce-eager",),
    },
    "llamacpp": {
        "ctx_size": ("--ctx-size", "-c", "LLAMA_ARG_CTX_SIZE"), "parallel": ("--parallel", "-np", "LLAMA_ARG_N_PARALLEL"),
        "ubatch_size": ("--ubatch-size", "-ub", "LLAMA_ARG_UBATCH"), "batch_size": ("--batch-size", "-b", "LLAMA_ARG_BATCH"),
        "n_gpu_layers": ("--n-gpu-layers", "-ngl", "--gpu-layers", "LLAMA_ARG_N_GPU_LAYERS"),
        "model": ("--model", "-m", "LLAMA_ARG_MODEL"),
    },
    "ollama": {
        "OLLAMA_CONTEXT_LENGTH": ("OLLAMA_CONTEXT_LENGTH",), "OLLAMA_NUM_PARALLEL": ("OLLAMA_NUM_PARALLEL",),
        "OLLAMA_KV_CACHE_TYPE": ("OLLAMA_KV_CACHE_TYPE",),
    },
    "tgi": {
        "max_total_tokens": ("--max-total-tokens", "MAX_TOTAL_TOKENS"),
        "max_input_tokens": ("--max-input-tokens", "--max-input-length", "MAX_INPUT_TOKENS"),
        "max_batch_prefill_tokens": ("--max-batch-prefill-tokens", "MAX_BATCH_PREFILL_TOKENS"),
        "max_concurrent_requests": ("--max-concurrent-requests", "MAX_CONCURRENT_REQUESTS"),
        "quantize": ("--quantize", "QUANTIZE"), "num_shard": ("--num-shard", "NUM_SHARD"),
        "cuda_memory_fraction": ("--cuda-memory-fraction", "CUDA_MEMORY_FRACTION"),
        "PYTORCH_CUDA_ALLOC_CONF": ("PYTORCH_CUDA_ALLOC_CONF",),
    },
    "sglang": {
        "context_length": ("--context-length",), "chunked_prefill_size": ("--chunked-prefill-size",),
        "max_running_requests": ("--max-running-requests",), "mem_fraction_static": ("--mem-fraction-static",),
        "quantization": ("--quantization",), "tp_size": ("--tp-size", "--tp", "--tensor-parallel-size"),
        "PYTORCH_CUDA_ALLOC_CONF": ("PYTORCH_CUDA_ALLOC_CONF",),
    },
}

# engine -> root cause -> settings to change, most direct first
TARGETS: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {"kv_cache_overflow": ("max_model_len",), "batch_misconfiguration": ("max_num_seqs", "max_num_batched_tokens"),
             "profiling_peak": ("max_model_len", "max_num_batched_tokens"),
             "cuda_graph_capture": ("gpu_memory_utilization",),
             "fragmentation": ("PYTORCH_CUDA_ALLOC_CONF", "gpu_memory_utilization"),
             "model_too_large": ("quantization", "tensor_parallel_size", "model")},
    "llamacpp": {"kv_cache_overflow": ("ctx_size",), "batch_misconfiguration": ("parallel", "ubatch_size", "batch_size"),
                 "fragmentation": ("ctx_size",), "model_too_large": ("n_gpu_layers", "model")},
    "ollama": {"kv_cache_overflow": ("OLLAMA_CONTEXT_LENGTH",), "batch_misconfiguration": ("OLLAMA_NUM_PARALLEL",),
               "fragmentation": (), "model_too_large": ()},
    "tgi": {"kv_cache_overflow": ("max_total_tokens", "max_input_tokens"),
            "batch_misconfiguration": ("max_batch_prefill_tokens", "max_concurrent_requests"),
            "fragmentation": ("PYTORCH_CUDA_ALLOC_CONF", "cuda_memory_fraction"),
            "model_too_large": ("quantize", "num_shard")},
    "sglang": {"kv_cache_overflow": ("context_length",), "batch_misconfiguration": ("chunked_prefill_size",
                                                                                   "max_running_requests"),
               "fragmentation": ("PYTORCH_CUDA_ALLOC_CONF", "mem_fraction_static"),
               "model_too_large": ("quantization", "tp_size")},
}
SIGNATURE_TARGETS = {
    "vllm.free_memory": ("gpu_memory_utilization",), "vllm.no_kv_memory": ("gpu_memory_utilization",),
    "vllm.sampler_oom": ("max_num_seqs",), "tgi.prefill": ("max_batch_prefill_tokens",),
    "sglang.mem_fraction": ("mem_fraction_static",),
}
# settings as the engines print them in their logs, by canonical name here
LOG_NAMES = {"ctx_size": ("n_ctx", "num_ctx"), "parallel": ("n_seq_max", "num_parallel"),
             "ubatch_size": ("n_ubatch",), "tp_size": ("tensor_parallel_size",),
             "OLLAMA_NUM_PARALLEL": ("OLLAMA_NUM_PARALLEL", "num_parallel"),
             "OLLAMA_CONTEXT_LENGTH": ("OLLAMA_CONTEXT_LENGTH", "num_ctx")}


def _display(engine: str, name: str) -> str:
    flags = FLAGS.get(engine, {}).get(name)
    return flags[0] if flags else name


def _span_value(site: LaunchSite, flags: tuple[str, ...]) -> tuple[str, Span | None] | None:
    argv = site.argv
    for i, tok in enumerate(argv):
        for flag in (f for f in flags if f.startswith("-")):
            if tok.text == flag and i + 1 < len(argv):
                return argv[i + 1].text, argv[i + 1].span or tok.span
            if tok.text.startswith(flag + "="):
                return tok.text[len(flag) + 1:], tok.span
    for env in (f for f in flags if not f.startswith("-")):
        if env in site.env:
            return site.env[env].text, site.env[env].span
    return None


def _parsed(site: LaunchSite) -> Any:
    """The engine's own EngineConfig for the site, or None if its parser is not available."""
    try:
        from servefit.pipeline import engine_for

        eng = engine_for(site)
        return eng.parse(site, site.engine_version)
    except Exception:  # engine plugins are optional; fall back to reading the tokens
        return None


def locate(site: LaunchSite, engine: str, names: tuple[str, ...]) -> Setting | None:
    """The first of `names` the site sets explicitly, else the first one, unset."""
    cfg = _parsed(site)
    for name in names:
        flags = FLAGS.get(engine, {}).get(name, (name,))
        span = cfg.spans.get(name) if cfg is not None else None
        if span is not None and name in cfg.explicit:
            val = cfg.settings.get(name)
            return Setting(name, _display(engine, name), None if val is None else str(val), span.file, span.line,
                           span.col)
        found = _span_value(site, flags)
        if found is not None:
            text, sp = found
            return Setting(name, _display(engine, name), text, sp.file if sp else site.file,
                           sp.line if sp else site.line, sp.col if sp else None)
    return Setting(names[0], _display(engine, names[0]), None, site.file, site.line or None, None, explicit=False)


def _current(diag: Diagnosis, setting: Setting | None, *log_names: str) -> Any:
    if setting is not None and setting.value is not None and setting.name in log_names:
        return setting.value
    for n in log_names:
        for key in (n, *LOG_NAMES.get(n, ())):
            if diag.settings_in_log.get(key) is not None:
                return diag.settings_in_log[key]
            if diag.figures.get(key) is not None and not isinstance(diag.figures[key], dict):
                return diag.figures[key]
    return None


def _num(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _was(v: Any) -> str:
    return f" (now {v})" if v is not None else ""


def _kv(engine: str, diag: Diagnosis, setting: Setting | None) -> list[str]:
    f = diag.figures
    est = f.get("estimated_max_model_len")
    long = f.get("long_request_tokens") if diag.timing == "long_request" else None
    if engine == "llamacpp":
        cur = _num(_current(diag, setting, "ctx_size"))
        to = f" to {int(cur) // 2} or less" if cur else ""
        return [f"Lower the context -c/--ctx-size{_was(_current(diag, setting, 'ctx_size'))}{to}",
                "Quantize the KV cache: --cache-type-k q8_0 --cache-type-v q8_0 with -fa on (half the KV memory)",
                "Add GPU memory: split across GPUs (--tensor-split) or keep the KV cache in RAM (--no-kv-offload, slower)"]
    if engine == "ollama":
        return [f"Lower the context: OLLAMA_CONTEXT_LENGTH or PARAMETER num_ctx{_was(_current(diag, setting, 'num_ctx'))}",
                "Quantize the KV cache: OLLAMA_KV_CACHE_TYPE=q8_0 with OLLAMA_FLASH_ATTENTION=1",
                "Use a GPU with more memory, or spread the model over more GPUs (OLLAMA_SCHED_SPREAD=1)"]
    if engine == "tgi":
        cap = f.get("max_batch_total_tokens")
        limit = f" to at most {cap:,} (the KV pool TGI found room for)" if isinstance(cap, int) else ""
        return [f"Lower --max-total-tokens{limit}, and --max-input-tokens below it",
                "Store the KV cache in FP8: --kv-cache-dtype fp8_e4m3fn",
                "Add GPUs: --num-shard 2 splits the weights and the KV cache"]
    if engine == "sglang":
        return ["Lower --context-length", "Store the KV cache in FP8: --kv-cache-dtype fp8_e4m3",
                "Add GPUs: --tp-size 2"]
    cur = _current(diag, setting, "max_model_len")
    if isinstance(est, int) and est > 0:
        first = (f"Lower --max-model-len{_was(cur)} to {max(est // 1024 * 1024, min(est, 1024))} or less "
                 f"(vLLM's own estimate of the longest that fits is {est:,})")
    elif isinstance(long, int):
        first = (f"Cap the context at what you must serve: --max-model-len{_was(cur)}; a ~{long:,}-token request "
                 "ran out of memory, so reject or truncate prompts that long at the gateway")
    else:
        first = f"Lower --max-model-len{_was(cur)}"
    if engine == "torch":
        first = "Shorten the maximum sequence length"
    return [first, "Store the KV cache in FP8: --kv-cache-dtype fp8 (half the KV memory per token)",
            "Add GPUs: --tensor-parallel-size 2 splits the weights and the KV cache over two GPUs"]


def _batch(engine: str, diag: Diagnosis, setting: Setting | None) -> list[str]:
    f = diag.figures
    if engine == "tgi":
        n = f.get("prefill_tokens") or _num(_current(diag, setting, "max_batch_prefill_tokens"))
        to = f" from {int(n)} to {int(n) // 2}" if n else ""
        return [f"Lower --max-batch-prefill-tokens{to} (keep it >= --max-input-tokens unless prefill chunking is on)",
                "Lower --max-concurrent-requests / --max-batch-size to what the GPU can hold"]
    if engine == "sglang":
        return ["OOM in prefill: --chunked-prefill-size 4096 (or 2048)",
                "OOM in decode: lower --max-running-requests",
                "Lower --mem-fraction-static (0.8, then 0.7) to leave more room for activations"]
    if engine == "llamacpp":
        np_ = _current(diag, setting, "parallel")
        return [f"Lower -np/--parallel{_was(np_)}: every slot multiplies the KV cache",
                "Lower -ub/--ubatch-size and -b/--batch-size: the compute buffer grows with the micro-batch"]
    if engine == "ollama":
        np_ = _current(diag, setting, "OLLAMA_NUM_PARALLEL")
        return [f"Set OLLAMA_NUM_PARALLEL=1{_was(np_)}: every parallel slot multiplies the KV cache",
                "Lower num_batch (PARAMETER num_batch 256)"]
    if engine == "torch":
        return ["Lower the batch size / number of concurrent sequences"]
    cur = _num(_current(diag, setting, "max_num_seqs")) or _num(f.get("dummy_requests"))
    to = f" from {int(cur)} to {256 if cur > 256 else max(1, int(cur) // 2)}" if cur else ""
    return [f"Lower --max-num-seqs{to}",
            "Lower --max-num-batched-tokens (e.g. 8192) to cap the tokens processed per step",
            "Cap concurrency in front of the server (gateway / load-balancer limit)"]


def _version(diag: Diagnosis) -> tuple[str | None, bool]:
    """(vLLM version the log names, whether it runs the V0 engine: before 0.8 or VLLM_USE_V1=0)."""
    from servefit.engines.vllm.era import era

    f = diag.figures
    v = f.get("engine_version") or f.get("engine_version2")
    v = str(v).lstrip("v") if v else None
    return v, not era(v).v1


def _flag_in(version: str | None, *flags: str) -> str:
    """The first of `flags` the vLLM release `version` has (its own parser, vllm_history.yaml)."""
    from servefit.engines.options import load_table

    table = load_table("vllm")
    return next((f for f in flags if table.in_release(f, version)), flags[-1])


def _profiling(engine: str, diag: Diagnosis, setting: Setting | None) -> list[str]:
    """The profiling run is a dummy forward pass over max_num_batched_tokens tokens; in V0 without
    chunked prefill that is max(max_model_len, 2048) tokens (config.py::SchedulerConfig), so the
    context length sets the activation peak, and a smaller max-num-batched-tokens is rejected
    ("max_num_batched_tokens ... is smaller than max_model_len") unless chunked prefill is on.
    gpu-memory-utilization does not shrink this peak: it only sizes the KV cache afterwards."""
    if engine not in ("vllm", "torch"):
        return _batch(engine, diag, setting)
    version, v0 = _version(diag)
    st = diag.settings_in_log
    ml = _num(_current(diag, setting, "max_model_len"))
    chunked = str(st.get("enable_chunked_prefill", "")).lower() in ("true", "1")
    where = f" (vLLM {version})" if version else " (no version in the log; assuming the newest vLLM)"
    half = f" to {int(ml) // 2:,} or less" if ml and ml >= 4096 else ""
    if v0 and not chunked:
        batch = int(min(8192, ml // 2)) if ml and ml > 4096 else 2048
        return [f"Lower --max-model-len{_was(ml and int(ml))}{half}: without chunked prefill the V0 engine{where} "
                f"profiles one prefill of max-model-len tokens",
                f"Or turn on chunked prefill and bound the profiled batch: --enable-chunked-prefill "
                f"--max-num-batched-tokens {batch} (below max-model-len it is only accepted with chunked prefill)",
                "Lowering --gpu-memory-utilization does not help here: the profiling peak comes before the KV cache "
                "is sized"]
    cur = _num(_current(diag, setting, "max_num_batched_tokens"))
    to = f" from {int(cur):,} to {max(512, int(cur) // 2):,}" if cur else " (e.g. 2048)"
    return [f"Lower --max-num-batched-tokens{to}: the engine{where} profiles one step of that many tokens",
            f"Lower --max-model-len{_was(ml and int(ml))}{half} where long prompts set the profiled batch "
            "(multimodal inputs, or chunked prefill off)",
            "Lowering --gpu-memory-utilization does not help here: the profiling peak comes before the KV cache "
            "is sized"]


def _graphs(engine: str, diag: Diagnosis, setting: Setting | None) -> list[str]:
    """Graphs are captured after the KV cache took gpu_memory_utilization of the GPU (before 0.20
    the graph pool is not in the budget: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS), so a lower
    utilization leaves them room; fewer or smaller capture sizes and eager mode act too."""
    version, v0 = _version(diag)
    util = _num(_current(diag, setting, "gpu_memory_utilization"))
    lower = f" from {util} to {round(util - 0.05, 2)}" if util else " (e.g. 0.85)"
    if v0:
        size = "--max-seq-len-to-capture 2048"
    else:
        size = _flag_in(version, "--max-cudagraph-capture-size", "--cuda-graph-sizes") + " 128 (capture fewer, smaller graphs)"
    return [f"Lower --gpu-memory-utilization{lower}: CUDA graphs are captured after the KV cache took its share",
            f"Capture smaller graphs: {size}",
            "Or skip graph capture: --enforce-eager (slower decoding, no graph memory)"]


def _fragmentation(engine: str, diag: Diagnosis, setting: Setting | None, env_set: bool) -> list[str]:
    out = []
    if diag.signature and diag.signature.startswith(("kernel", "k8s")):
        return ["Host memory grew until the kernel killed the process: restart on a schedule and look for a leak",
                "Give the container a memory limit with headroom above its steady-state use"]
    if engine in ("vllm", "tgi", "sglang", "torch"):
        if env_set:
            out.append("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True is already set; keep it")
        else:
            out.append("Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the server's environment")
        if engine == "vllm":
            cur = _num(_current(diag, setting, "gpu_memory_utilization"))
            to = f" from {cur:g} to {cur - 0.05:.2f}" if cur else " (e.g. 0.85)"
            out.append(f"Leave headroom: lower --gpu-memory-utilization{to}")
        elif engine == "tgi":
            out.append("Leave headroom: lower --cuda-memory-fraction (e.g. 0.9)")
        elif engine == "sglang":
            out.append("Leave headroom: lower --mem-fraction-static by 0.05")
        else:
            out.append("Call torch.cuda.empty_cache() between large batches")
    out.append("Schedule restarts in a low-traffic window (e.g. a daily `kubectl rollout restart`)")
    return out


def _too_large(engine: str, diag: Diagnosis, setting: Setting | None) -> list[str]:
    f, sig = diag.figures, diag.signature or ""
    out: list[str] = []
    if sig == "vllm.free_memory":
        free, total = _num(f.get("device_free")), _num(f.get("total"))
        util = f" to {int((free / total - 0.02) * 100) / 100:.2f} or less" if free and total else ""
        out += ["Free the GPU: another process (or a previous vLLM) holds memory; `nvidia-smi` shows it",
                f"Or lower --gpu-memory-utilization{_was(f.get('gpu_memory_utilization'))}{util}"]
    if sig in ("vllm.no_kv_memory", "vllm.autofit_fail"):
        out.append(f"Raise --gpu-memory-utilization{_was(_current(diag, setting, 'gpu_memory_utilization'))} "
                   "if the GPU is not shared")
    if sig == "sglang.mem_fraction":
        cur = _num(f.get("mem_fraction_static"))
        to = f" from {cur:g} to {min(0.9, cur + 0.1):.2f}" if cur else ""
        out.append(f"Raise --mem-fraction-static{to} if the weights leave room; otherwise:")
    if sig.startswith(("kernel", "k8s")):
        swap = _current(diag, setting, "swap_space")
        return ["Raise the host / container memory limit: loading the checkpoint goes through host RAM",
                f"Lower host-memory extras: --swap-space{_was(swap)} is pinned per GPU worker, and "
                "--cpu-offload-gb lives in RAM",
                "Load a smaller checkpoint: a quantized one (AWQ/GPTQ/FP8) needs about half the RAM to load"]
    if sig == "ollama.sysmem":
        out.append("Free or add system RAM (or swap); the model is loaded through host memory first")
    if engine == "llamacpp":
        return out + ["Use a smaller GGUF: a lower quantization (e.g. Q8_0 -> Q4_K_M, Q4_K_M -> IQ3_M) or a smaller model",
                      "Offload fewer layers: lower -ngl (the rest run on the CPU, slower)",
                      "Split over more GPUs (--tensor-split) or use a GPU with more memory"]
    if engine == "ollama":
        return out + ["Pull a smaller quantization (e.g. a :q4_K_M tag) or a smaller model",
                      "Offload fewer layers (PARAMETER num_gpu) or use a GPU with more memory"]
    if engine == "tgi":
        return out + ["Quantize: --quantize awq | gptq | fp8, or serve a pre-quantized checkpoint",
                      "Shard over more GPUs: --num-shard 2", "Use a GPU with more memory"]
    if engine == "sglang":
        return out + ["Quantize: --quantization fp8 (or an AWQ/GPTQ checkpoint)", "Shard over more GPUs: --tp-size 2",
                      "Use a GPU with more memory"]
    return out + ["Quantize: an AWQ or GPTQ checkpoint, or --quantization fp8 on Ada/Hopper (about half the weights)",
                  "Shard over more GPUs: --tensor-parallel-size 2", "Use a GPU with more memory"]


def tune_command(site: LaunchSite, diag: Diagnosis, gpu: str | None) -> str:
    words = ["servefit", "tune", site.file]
    if gpu:
        words += ["--gpu", gpu]
    need = diag.figures.get("long_request_tokens") if diag.timing == "long_request" else None
    if diag.root_cause == "kv_cache_overflow" and isinstance(need, int):
        words += ["--min-context", f"{-(-need // 1024)}k"]
    words.append("--diff")
    return " ".join(shlex.quote(w) for w in words)


def apply(diag: Diagnosis, site: LaunchSite | None = None) -> None:
    """Fill diag.fix (and, with a site, diag.setting and diag.tune)."""
    root = diag.root_cause
    if root == "none":
        return
    engine = diag.engine or "torch"
    if site is not None and site.engine and engine in ("torch", None):
        engine = site.engine
    setting: Setting | None = None
    env_set = False
    if site is not None:
        names = SIGNATURE_TARGETS.get(diag.signature or "") or TARGETS.get(engine, TARGETS["vllm"]).get(root, ())
        if names:
            setting = locate(site, engine if engine in FLAGS else "vllm", names)
        pcac = site.env.get("PYTORCH_CUDA_ALLOC_CONF")
        env_set = pcac is not None and "expandable_segments:True" in pcac.text
        if setting is not None and setting.name == "PYTORCH_CUDA_ALLOC_CONF" and env_set:
            setting = locate(site, engine, names[1:]) if len(names) > 1 else setting
    if root == "kv_cache_overflow":
        lines = _kv(engine, diag, setting)
    elif root == "batch_misconfiguration":
        lines = _batch(engine, diag, setting)
    elif root == "fragmentation":
        lines = _fragmentation(engine, diag, setting, env_set)
    elif root == "profiling_peak":
        lines = _profiling(engine, diag, setting)
    elif root == "cuda_graph_capture":
        lines = _graphs(engine, diag, setting)
    else:
        lines = _too_large(engine, diag, setting)
    if site is not None:
        if setting is not None and setting.explicit and setting.line:
            lines[0] = f"{setting.file}:{setting.line}: {lines[0]}"
        elif setting is not None:
            lines[0] = f"{site.file}:{site.line}: {lines[0]} ({setting.flag} is not set for this server yet)"
        gpu = site.gpu.name if site.gpu is not None and site.gpu.name else diag.figures.get("gpu_name")
        diag.tune = tune_command(site, diag, gpu if isinstance(gpu, str) else None)
        lines.append(f"Or let servefit search the settings: {diag.tune}")
    diag.setting = setting
    diag.fix = lines
