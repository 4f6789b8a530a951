"""What vLLM's out-of-memory failures mean and the flags that fix them, per stage and release
(Engine.oom_cause / oom_summary / oom_fixes; the log lines themselves are data, the `logs` key of
data/engines/vllm.yaml)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from servefit.diagnose.fixes import Fixing
    from servefit.diagnose.model import Diagnosis, Event


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def cause(primary: Event, figs: dict[str, Any]) -> tuple[str, str, str] | None:
    """No room for the KV cache while the profiled activation peak is half the weights or more:
    the batch the engine profiles (max-num-batched-tokens) took it, not the model."""
    if primary.pattern in ("vllm.no_kv_memory", "vllm.autofit_fail"):
        act, w = _int(figs.get("activation_peak")), _int(figs.get("weights"))
        if act and w and act >= w // 2:
            return "batch_misconfiguration", "startup", "medium"
    return None


def summary(diag: Diagnosis, primary: Event) -> str | None:
    from servefit.diagnose.wording import size_text as g

    figs = diag.figures
    if primary.pattern == "vllm.kv_refusal":
        est = figs.get("estimated_max_model_len")
        tail = f"; the longest that fits is {est:,}" if isinstance(est, int) else ""
        return (f"vLLM refused to start: one request at max_model_len {figs.get('max_model_len', 0):,} needs "
                f"{g(figs, 'kv_cache_needed')} of KV cache, but only {g(figs, 'kv_cache_available')} is left{tail}.")
    if diag.root_cause == "cuda_graph_capture" and figs.get("failed_in") == "profile_cudagraph_memory":
        return ("CUDA graph capture: vLLM ran out while measuring its CUDA graphs at start-up (before the KV cache "
                "is sized): the graphs do not fit next to the weights and the profiling peak.")
    if primary.pattern == "vllm.free_memory":
        return (f"vLLM refused to start: only {g(figs, 'device_free')} of {g(figs, 'total')} is free on the GPU, but "
                f"gpu_memory_utilization {figs.get('gpu_memory_utilization')} asks for {g(figs, 'requested')}; "
                "another process (or a previous instance) holds the rest.")
    return None


def _version(fx: Fixing) -> tuple[str | None, bool]:
    """(vLLM version the log names, whether it runs the V0 engine: before 0.8 or VLLM_USE_V1=0)."""
    from servefit.engines.vllm.era import era

    v = fx.version  # the log's release, else the config's
    return v, not era(v).v1 or (v is None and _v0_said(fx.figures))


# Lines only the V0 engine prints: its worker methods (worker/worker.py::determine_num_available_blocks,
# initialize_cache; V1 has determine_available_memory / initialize_from_config) and the multimodal profiling
# run's announcement (worker/model_runner.py and enc_dec_model_runner.py::profile_run; V1 logs its encoder
# cache budget instead). With no version in the log they say which engine ran.
V0_METHODS = ("determine_num_available_blocks", "initialize_cache")


def _v0_said(figs: dict[str, Any]) -> bool:
    return figs.get("worker_method") in V0_METHODS or figs.get("mm_profile") is not None


def _flag_in(version: str | None, *flags: str) -> str:
    """The first of `flags` the vLLM release `version` has (its own parser, vllm_history.yaml)."""
    from servefit.engines.options import load_table

    table = load_table("vllm")
    return next((f for f in flags if table.in_release(f, version)), flags[-1])


def _kv(fx: Fixing) -> list[str]:
    f = fx.figures
    est = f.get("estimated_max_model_len")
    long = f.get("long_request_tokens") if fx.diag.timing == "long_request" else None
    cur = fx.current("max_model_len")
    if isinstance(est, int) and est > 0:
        first = (f"Lower --max-model-len{fx.was(cur)} to {max(est // 1024 * 1024, min(est, 1024))} or less "
                 f"(vLLM's own estimate of the longest that fits is {est:,})")
    elif isinstance(long, int):
        first = (f"Cap the context at what you must serve: --max-model-len{fx.was(cur)}; a ~{long:,}-token request "
                 "ran out of memory, so reject or truncate prompts that long at the gateway")
    else:
        first = f"Lower --max-model-len{fx.was(cur)}"
    return [first, "Store the KV cache in FP8: --kv-cache-dtype fp8 (half the KV memory per token)",
            "Add GPUs: --tensor-parallel-size 2 splits the weights and the KV cache over two GPUs"]


def _chunked(fx: Fixing) -> bool:
    """Whether the log shows chunked prefill on (V0's config line prints chunked_prefill_enabled)."""
    return str(fx.diag.settings_in_log.get("enable_chunked_prefill", "")).lower() in ("true", "1")


def _batch(fx: Fixing) -> list[str]:
    cur = fx.num(fx.current("max_num_seqs")) or fx.num(fx.figures.get("dummy_requests"))
    seqs = (256 if cur > 256 else max(1, int(cur) // 2)) if cur else None
    to = f" from {int(cur)} to {seqs}" if cur and seqs else ""
    version, v0 = _version(fx)
    ml = fx.num(fx.current("max_model_len"))
    # the per-step token cap must stay >= max-num-seqs (config.py::SchedulerConfig._verify_args, lint VLLM011),
    # and below max-model-len V0 takes it only with chunked prefill (the same check, lint VLLM012)
    if v0 and not _chunked(fx) and (ml is None or ml > 8192):
        cap = ("Or cap the tokens processed per step: --enable-chunked-prefill --max-num-batched-tokens 8192 (the V0 "
               f"engine{_where(version)} accepts a value below --max-model-len only with chunked prefill)"
               if _has_chunked_prefill(version) else
               f"Or lower --max-model-len{fx.was(ml and int(ml))}: vLLM {version} has no chunked prefill, and each "
               "step may hold a whole max-model-len prompt")
    else:
        cap = "Lower --max-num-batched-tokens (e.g. 8192) to cap the tokens processed per step"
    return [f"Lower --max-num-seqs{to}", cap, "Cap concurrency in front of the server (gateway / load-balancer limit)"]


def _has_chunked_prefill(version: str | None) -> bool:
    return _flag_in(version, "--enable-chunked-prefill", "") != ""


def _where(version: str | None) -> str:
    return f" (vLLM {version})" if version else ""


def _profiling(fx: Fixing) -> list[str]:
    """The profiling run is a dummy forward pass over max_num_batched_tokens tokens; in V0 without
    chunked prefill that is max(max_model_len, 2048) tokens (config.py::SchedulerConfig), so the
    context length sets the activation peak, and a smaller max-num-batched-tokens is rejected
    ("max_num_batched_tokens ... is smaller than max_model_len") unless chunked prefill is on.
    gpu-memory-utilization does not shrink this peak: it only sizes the KV cache afterwards."""
    version, v0 = _version(fx)
    if fx.diag.stage == "compile":  # torch.compile (V1, vllm/compilation) ran out while compiling: skip it
        off = _flag_in(version, "-O") + "0" if _flag_in(version, "-O") == "-O" else "--enforce-eager"
        return [f"Skip torch.compile: {off} (no compilation) or --enforce-eager (neither compilation nor CUDA graphs; "
                "slower decoding)", *_profiling_batch(fx, version, v0)[:1],
                "Lowering --gpu-memory-utilization does not help here: compilation comes before the KV cache is sized"]
    return _profiling_batch(fx, version, v0)


def _profiling_batch(fx: Fixing, version: str | None, v0: bool) -> list[str]:
    st = fx.diag.settings_in_log
    ml = fx.num(fx.current("max_model_len"))
    chunked = str(st.get("enable_chunked_prefill", "")).lower() in ("true", "1")
    where = (f" (vLLM {version})" if version else " (no version in the log; its lines are the V0 engine's)" if v0
             else " (no version in the log; assuming the newest vLLM)")
    half = f" to {int(ml) // 2:,} or less" if ml and ml >= 4096 else ""
    if fx.figures.get("mm_profile") is not None and v0:
        return _multimodal_profile(fx, version, where, ml, half, chunked)
    if v0 and not chunked:
        batch = int(min(8192, ml // 2)) if ml and ml > 4096 else 2048
        chunk = (f"Or turn on chunked prefill and bound the profiled batch: --enable-chunked-prefill "
                 f"--max-num-batched-tokens {batch} (below max-model-len it is only accepted with chunked prefill)"
                 if _has_chunked_prefill(version) else
                 f"vLLM {version} has no chunked prefill (it arrives in 0.4.0): only a shorter "
                 "--max-model-len bounds the profiled batch")
        return [f"Lower --max-model-len{fx.was(ml and int(ml))}{half}: without chunked prefill the V0 engine{where} "
                f"profiles one prefill of max-model-len tokens", chunk,
                "Lowering --gpu-memory-utilization does not help here: the profiling peak comes before the KV cache "
                "is sized"]
    cur = fx.num(fx.current("max_num_batched_tokens"))
    seqs = int(fx.num(fx.current("max_num_seqs")) or 0)  # the cap may not go below max-num-seqs (lint VLLM011)
    to = f" from {int(cur):,} to {max(512, seqs, int(cur) // 2):,}" if cur and max(512, seqs) < cur else " (e.g. 2048)"
    return [f"Lower --max-num-batched-tokens{to}: the engine{where} profiles one step of that many tokens",
            f"Lower --max-model-len{fx.was(ml and int(ml))}{half} where long prompts set the profiled batch "
            "(multimodal inputs, or chunked prefill off)",
            "Lowering --gpu-memory-utilization does not help here: the profiling peak comes before the KV cache "
            "is sized"]


def _multimodal_profile(fx: Fixing, version: str | None, where: str, ml: float | None, half: str,
                        chunked: bool) -> list[str]:
    """V0's multimodal profiling run ("Starting profile run for multi-modal models"): profile_run builds
    max_num_seqs dummy requests and gives each the model's largest multimodal input (model_runner.py caps
    the count at max_num_batched_tokens // the image's tokens; enc_dec_model_runner.py does not), so the
    image inputs scale with --max-num-seqs. Encoder-decoder models (Llama-3.2-Vision) have no chunked
    prefill in V0 (worker/utils.py::assert_enc_dec_mr_supported_scenario refuses it)."""
    cur = fx.num(fx.current("max_num_seqs"))
    seqs = f" from {int(cur)} to {max(1, min(16, int(cur) // 2))}" if cur else " (e.g. to 16)"
    out = [f"Lower --max-num-seqs{seqs}: the multimodal profiling run of the V0 engine{where} gives each of "
           "max-num-seqs dummy requests the model's largest image input",
           f"Lower --max-model-len{fx.was(ml and int(ml))}{half}: without chunked prefill the dummy requests "
           "share max-num-batched-tokens of text, which is then max-model-len"]
    if fx.figures.get("mm_profile_encdec") is None and not chunked and _has_chunked_prefill(version):
        out.append("Or bound the text of the profiled batch: --enable-chunked-prefill --max-num-batched-tokens 8192")
    return out + ["Lowering --gpu-memory-utilization does not help here: the profiling peak comes before the KV "
                  "cache is sized"]


def _graphs(fx: Fixing) -> list[str]:
    """Graphs are captured after the KV cache took gpu_memory_utilization of the GPU (before 0.20
    the graph pool is not in the budget: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS), so a lower
    utilization leaves them room; fewer or smaller capture sizes and eager mode act too."""
    version, v0 = _version(fx)
    util = fx.num(fx.current("gpu_memory_utilization"))
    lower = f" from {util} to {round(util - 0.05, 2)}" if util else " (e.g. 0.85)"
    if fx.figures.get("failed_in") == "profile_cudagraph_memory":
        # the graphs ran out while being measured inside determine_available_memory: no KV cache yet, so a
        # lower utilization frees nothing; fewer / smaller graphs or none do
        flag = _flag_in(version, "--max-cudagraph-capture-size", "--cuda-graph-sizes")
        return [f"Capture fewer, smaller graphs: {flag} 128 (the graphs are measured before the KV cache is sized, "
                "next to the weights and the profiling peak)",
                "Or skip graph capture: --enforce-eager (slower decoding, no graph memory)",
                "Lowering --gpu-memory-utilization does not help here: the KV cache is not allocated yet"]
    if v0:  # V0 captures decode graphs up to this context length (0.4.3 renamed --max-context-len-to-capture)
        size = _flag_in(version, "--max-seq-len-to-capture", "--max-context-len-to-capture") + " 2048"
    else:  # V1 before 0.9 has neither flag: the sizes are CompilationConfig.cudagraph_capture_sizes
        flag = _flag_in(version, "--max-cudagraph-capture-size", "--cuda-graph-sizes", "--compilation-config")
        size = (flag + " '{\"cudagraph_capture_sizes\": [1, 2, 4, 8, 16, 32, 64, 128]}'" if flag == "--compilation-config"
                else flag + " 128") + " (capture fewer, smaller graphs)"
    return [f"Lower --gpu-memory-utilization{lower}: CUDA graphs are captured after the KV cache took its share",
            f"Capture smaller graphs: {size}",
            "Or skip graph capture: --enforce-eager (slower decoding, no graph memory)"]


def _fragmentation(fx: Fixing) -> list[str]:
    if fx.host:
        return fx.host_growth()
    cur = fx.num(fx.current("gpu_memory_utilization"))
    to = f" from {cur:g} to {cur - 0.05:.2f}" if cur else " (e.g. 0.85)"
    return [fx.alloc_conf(), f"Leave headroom: lower --gpu-memory-utilization{to}", fx.restarts()]


def _too_large(fx: Fixing) -> list[str]:
    f, sig = fx.figures, fx.diag.signature or ""
    out: list[str] = []
    if sig == "vllm.free_memory":
        free, total = fx.num(f.get("device_free")), fx.num(f.get("total"))
        util = f" to {int((free / total - 0.02) * 100) / 100:.2f} or less" if free and total else ""
        out += ["Free the GPU: another process (or a previous vLLM) holds memory; `nvidia-smi` shows it",
                f"Or lower --gpu-memory-utilization{fx.was(f.get('gpu_memory_utilization'))}{util}"]
    if sig in ("vllm.no_kv_memory", "vllm.autofit_fail"):
        out.append(f"Raise --gpu-memory-utilization{fx.was(fx.current('gpu_memory_utilization'))} "
                   "if the GPU is not shared")
    if fx.host:
        swap = fx.current("swap_space")
        return ["Raise the host / container memory limit: loading the checkpoint goes through host RAM",
                f"Lower host-memory extras: --swap-space{fx.was(swap)} is pinned per GPU worker, and "
                "--cpu-offload-gb lives in RAM",
                "Load a smaller checkpoint: a quantized one (AWQ/GPTQ/FP8) needs about half the RAM to load"]
    return out + ["Quantize: an AWQ or GPTQ checkpoint, or --quantization fp8 on Ada/Hopper (about half the weights)",
                  "Shard over more GPUs: --tensor-parallel-size 2", "Use a GPU with more memory"]


FIXES = {"kv_cache_overflow": _kv, "batch_misconfiguration": _batch, "profiling_peak": _profiling,
         "cuda_graph_capture": _graphs, "fragmentation": _fragmentation, "model_too_large": _too_large}


def fixes(fx: Fixing) -> list[str] | None:
    return fx.by_cause(FIXES)
