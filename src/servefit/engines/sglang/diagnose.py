"""What SGLang's out-of-memory failures mean and the flags that fix them, per stage
(Engine.oom_summary / oom_fixes; the log lines are data, the `logs` key of data/engines/sglang.yaml).

SGLang loads the weights ("Load weight begin/end"), then sizes the KV pool from mem_fraction_static
of the memory free before loading (model_runner.py::profile_max_num_token; none left is "Not
enough memory. Please try to increase --mem-fraction-static"), then captures CUDA graphs for decode
batches up to --cuda-graph-max-bs in what the pool left ("Capture cuda graph failed"). While
serving, prefill batches are bounded by --chunked-prefill-size and decode batches by
--max-running-requests; a full KV pool retracts decode requests ("Decode out of memory happened").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from servefit.diagnose.fixes import Fixing
    from servefit.diagnose.model import Diagnosis, Event

# model_runner.py::init_memory_pool's refusal, and the profiled value <= 0 it is raised on (logged just before)
REFUSALS = ("sglang.mem_fraction", "sglang.no_pool")


def summary(diag: Diagnosis, primary: Event) -> str | None:
    figs = diag.figures
    if primary.pattern in REFUSALS:
        frac = figs.get("mem_fraction_static", diag.settings_in_log.get("mem_fraction_static"))
        share = f"mem_fraction_static ({frac})" if frac is not None else "the share mem_fraction_static sets"
        return f"SGLang found no memory for the KV cache pool: the weights fill {share} of the GPU."
    if primary.pattern == "sglang.graph_capture":
        return ("SGLang ran out of memory capturing CUDA graphs: the KV cache pool took mem_fraction_static of the "
                "GPU first, and the graphs for the largest decode batches did not fit in the rest.")
    if primary.pattern == "sglang.decode_retract":
        n = figs.get("retracted_reqs")
        return (f"SGLang's KV cache pool ran full while decoding and it retracted {n} request(s) to the queue "
                "(they are re-run, not lost, but latency suffers); the server kept running.")
    if primary.pattern == "sglang.prefill_oom":
        n = figs.get("pool_tokens_tried")
        asked = f" of {n:,} tokens" if isinstance(n, int) else ""
        return (f"SGLang's KV cache pool could not hold a prefill{asked} while serving: the scheduler admitted more "
                "tokens than the pool had free, and the error stopped the scheduler.")
    if primary.pattern == "sglang.flashinfer_workspace":
        return (f"FlashInfer's fixed workspace buffer was too small for a batch's attention plan "
                f"({figs.get('workspace_buffer', 'a buffer')} needed {size_of(figs)}): the batch was too large for it, "
                "not the GPU's memory as a whole.")
    return None


def size_of(figs: dict[str, Any]) -> str:
    from servefit.diagnose.wording import size_text

    return size_text(figs, "alloc_size")


def _fraction(fx: Fixing, step: float) -> str:
    cur = fx.num(fx.figures.get("mem_fraction_static")) or fx.num(fx.current("mem_fraction_static"))
    return f" from {cur:g} to {min(0.95, max(0.5, cur + step)):.2f}" if cur else f" ({'+' if step > 0 else ''}{step:g})"


def _kv(fx: Fixing) -> list[str]:
    if fx.diag.signature == "sglang.decode_retract":
        running = fx.current("max_running_requests")
        return [f"Lower --max-running-requests{fx.was(running)}: fewer requests decoding at once need less KV cache",
                "Admit less at once: --schedule-conservativeness 1.3 (default 1.0) reserves more of the pool per request",
                "Grow the pool: --kv-cache-dtype fp8_e4m3 (half the KV memory per token), or raise "
                f"--mem-fraction-static{_fraction(fx, 0.05)} if activations leave room"]
    return [f"Lower --context-length{fx.was(fx.current('context_length'))}",
            "Store the KV cache in FP8: --kv-cache-dtype fp8_e4m3", "Add GPUs: --tp-size 2"]


def _batch(fx: Fixing) -> list[str]:
    chunk = fx.num(fx.current("chunked_prefill_size"))
    prefill = (f"OOM in prefill: lower --chunked-prefill-size{fx.was(chunk and int(chunk))} to "
               f"{max(512, int(chunk) // 2) if chunk and chunk > 0 else 4096}")
    decode = f"OOM in decode: lower --max-running-requests{fx.was(fx.current('max_running_requests'))}"
    room = f"Lower --mem-fraction-static{_fraction(fx, -0.05)} to leave more room for activations"
    sig = fx.diag.signature
    if sig == "sglang.prefill_oom":  # the token pool ran out, not the GPU: a smaller pool would make it worse
        return [prefill + " (fewer new tokens per prefill step)",
                f"Lower --max-running-requests{fx.was(fx.current('max_running_requests'))}: fewer requests hold "
                "KV slots at once", "Grow the pool: --kv-cache-dtype fp8_e4m3, or raise "
                f"--mem-fraction-static{_fraction(fx, 0.05)} if activations leave room"]
    if sig == "sglang.flashinfer_workspace":
        return [prefill if fx.diag.stage != "decode" else decode,
                "Or enlarge FlashInfer's workspace: SGLANG_FLASHINFER_WORKSPACE_SIZE=1073741824 (bytes; 384 MiB by "
                "default), or --attention-backend triton",
                f"Lower --max-running-requests{fx.was(fx.current('max_running_requests'))}"]
    if fx.diag.stage == "prefill":
        return [prefill, room]
    if fx.diag.stage == "decode":
        return [decode, room]
    return [prefill, decode, room]


def _graphs(fx: Fixing) -> list[str]:
    """The largest captured decode batch: --cuda-graph-max-bs (0.3.6 on), --cuda-graph-max-bs-decode from 0.5.16
    (the old spelling gone from 0.5.20, server_args.py of each release); 0.3.0 has neither, only the switch."""
    bs = fx.num(fx.current("cuda_graph_max_bs"))
    to = f" from {int(bs)} to {max(1, int(bs) // 2)}" if bs else " (e.g. 16)"
    smaller = ([f"Lower {fx.flag('--cuda-graph-max-bs-decode', '--cuda-graph-max-bs')}{to}: fewer, smaller decode graphs"]
               if fx.has("--cuda-graph-max-bs-decode") or fx.has("--cuda-graph-max-bs") else [])
    return smaller + [f"Lower --mem-fraction-static{_fraction(fx, -0.05)}: graphs are captured in what the KV pool leaves",
                      "Or skip graph capture: --disable-cuda-graph (slower decoding)"]


def _fragmentation(fx: Fixing) -> list[str]:
    if fx.host:
        return fx.host_growth()
    return [fx.alloc_conf(), f"Leave headroom: lower --mem-fraction-static{_fraction(fx, -0.05)}", fx.restarts()]


def _too_large(fx: Fixing) -> list[str]:
    out: list[str] = []
    if fx.diag.signature in REFUSALS:
        cur = fx.num(fx.figures.get("mem_fraction_static")) or fx.num(fx.current("mem_fraction_static"))
        to = f" from {cur:g} to {min(0.9, cur + 0.1):.2f}" if cur else ""
        out.append(f"Raise --mem-fraction-static{to} if the weights leave room; otherwise:")
    if fx.host:
        return ["Raise the host / container memory limit: loading the checkpoint goes through host RAM",
                "Load a smaller checkpoint: a quantized one (AWQ/GPTQ/FP8) needs about half the RAM to load"]
    return out + ["Quantize: --quantization fp8 (or an AWQ/GPTQ checkpoint)", "Shard over more GPUs: --tp-size 2",
                  "Use a GPU with more memory"]


FIXES = {"kv_cache_overflow": _kv, "batch_misconfiguration": _batch, "profiling_peak": _batch,
         "cuda_graph_capture": _graphs, "fragmentation": _fragmentation, "model_too_large": _too_large}


def fixes(fx: Fixing) -> list[str] | None:
    return fx.by_cause(FIXES)
