"""What llama.cpp's allocation failures mean and the flags that fix them (Engine.oom_cause /
oom_summary / oom_fixes; the log lines are data, the `logs` key of data/engines/llamacpp.yaml).

llama.cpp allocates at start, in this order, and names the buffer that failed: the model's
layers on each device (llama-model.cpp::load_tensors, "unable to allocate CUDA0 buffer"), the KV
cache for -c over -np slots (llama-kv-cache.cpp, "failed to allocate buffer for kv cache"), then
the compute buffer reserved for one -ub micro-batch (llama-context.cpp::graph_reserve, "failed to
allocate compute buffers"). Ollama's runner is llama.cpp and fails the same way (its settings are
num_ctx, OLLAMA_NUM_PARALLEL, num_batch, num_gpu).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from servefit.diagnose.fixes import Fixing
    from servefit.diagnose.model import Diagnosis, Event

LONG_CONTEXT = 32768  # a slot this long is a long context, not a batch of short ones


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _stage(primary: Event, related: list[Event]) -> str:
    for ev in [primary, *related]:
        if ev.stage:
            return ev.stage
    return {"load": "load", "context": "kv_alloc", "compute": "compute", "serving": "serving"}.get(
        primary.state.phase, "")


def slot_cause(primary: Event, related: list[Event], figs: dict[str, Any]) -> tuple[str, str, str]:
    """(root cause, timing, confidence) for an allocation failure of llama.cpp or Ollama's runner:
    the buffer that failed says which setting sized it; several short slots are a batch
    problem, one long slot a context problem."""
    st = primary.state
    s = st.settings
    stage = _stage(primary, related)
    n_seq = _int(s.get("n_seq_max")) or _int(s.get("num_parallel")) or _int(s.get("OLLAMA_NUM_PARALLEL")) or 1
    ctx = _int(s.get("n_ctx")) or _int(s.get("num_ctx")) or 0
    per_seq = _int(s.get("n_ctx_seq")) or _int(s.get("n_ctx_per_seq")) or (ctx // n_seq if ctx else 0)
    if n_seq > 1 and s.get("num_ctx") is not None and s.get("n_ctx") is None:
        per_seq = ctx // n_seq if ctx else 0
    if stage == "load":
        return "model_too_large", "load", "high"
    if stage == "serving" or (st.phase == "serving" and stage == "compute"):
        return "batch_misconfiguration", "serving", "medium"  # a compute buffer re-reserved while decoding
    if stage in ("kv_alloc", "compute"):
        if n_seq >= 2 and per_seq and per_seq < LONG_CONTEXT:
            return "batch_misconfiguration", "startup", "medium"
        if stage == "compute" and (_int(s.get("n_ubatch")) or 512) > 512:
            return "batch_misconfiguration", "startup", "medium"
        # Pipeline parallelism (llama-context.cpp: a layer split of a fully offloaded model on 2+ GPUs) makes
        # ggml-backend.cpp::ggml_backend_sched_new keep GGML_SCHED_MAX_COPIES (4) copies of the graph's inputs
        # on each GPU: the KV cache is already in place, the scheduler's copies are what did not fit
        if stage == "compute" and (_int(figs.get("pipeline_copies")) or 1) > 1:
            return "batch_misconfiguration", "startup", "medium"
        return "kv_cache_overflow", "startup", "high" if stage == "kv_alloc" else "medium"
    weights, avail = _int(figs.get("memory.weights.total")), _int(figs.get("memory.available"))
    kv = _int(figs.get("memory.required.kv"))
    if weights and avail and weights > avail:
        return "model_too_large", "load", "medium"
    if n_seq >= 2 and per_seq and per_seq < LONG_CONTEXT:
        return "batch_misconfiguration", "startup", "medium"
    if ctx >= LONG_CONTEXT or (kv and weights and kv >= weights // 2):
        return "kv_cache_overflow", "startup", "medium"
    return "model_too_large", "startup", "low"


def summary(diag: Diagnosis, primary: Event, who: str = "llama.cpp") -> str | None:
    from servefit.diagnose.wording import ROOT_TEXT, size_text

    figs = diag.figures
    if figs.get("alloc_size") is None:
        return None
    what = {"load": " for the model weights", "kv_alloc": " for the KV cache", "compute": " for the compute buffer",
            "serving": " for a compute buffer while serving"}.get(diag.stage, "")
    free = f" ({size_text(figs, 'device_free')} was free at start)" if figs.get("device_free") is not None else ""
    where = "in host memory (RAM)" if figs.get("alloc_backend") == "cpu" else "on the GPU"
    copies = _int(figs.get("pipeline_copies"))
    kept = (f" Pipeline parallelism keeps {copies} copies of that buffer on each GPU."
            if diag.stage == "compute" and copies and copies > 1 else "")
    lead = ROOT_TEXT[diag.root_cause]
    if diag.root_cause == "kv_cache_overflow" and figs.get("alloc_backend") == "cpu":
        lead = "KV cache overflow: the context length asks for more KV cache than the host memory (RAM) can hold"
    if diag.root_cause == "kv_cache_overflow" and diag.stage == "compute":  # the KV cache itself was allocated
        lead = ("KV cache overflow: the KV cache was allocated, but the compute buffer this context length needs "
                "next to it does not fit")
    return f"{lead}. {who} could not allocate {size_text(figs, 'alloc_size')}{what} {where}{free}.{kept}"


def layers_that_fit(fx: Fixing) -> int | None:
    """-ngl that fits when the model buffer failed: the offloaded layers scaled by the memory free
    at start over the buffer asked for (an estimate: the KV cache and compute buffer need room too)."""
    f = fx.figures
    layers, need, free = _int(f.get("layers_offloaded")), _int(f.get("alloc_size")), _int(f.get("device_free"))
    if not (layers and need and free) or need <= free:
        return None
    return max(0, int(layers * free / need) - 1)


def _ubatch(fx: Fixing) -> str:
    ub = fx.num(fx.current("ubatch_size"))
    return (f"Lower -ub/--ubatch-size{fx.was(ub and int(ub))} to {max(64, int(ub or 512) // 2)} (and -b/--batch-size "
            "with it): the compute buffer grows with the micro-batch")


def _pipeline(fx: Fixing) -> list[str]:
    """The compute buffer kept once per pipeline stage copy (llama-context.cpp, ggml_backend_sched_new
    with pipeline_parallel: n_copies of it on each GPU): one copy is what the buffer needs."""
    n = _int(fx.figures.get("pipeline_copies"))
    if fx.diag.stage != "compute" or not n or n < 2:
        return []
    return [f"Pipeline parallelism keeps {n} copies of the compute buffer on each GPU: build llama.cpp with "
            "-DGGML_SCHED_MAX_COPIES=1, or turn it off with --split-mode row (it runs only for a layer split of a "
            "fully offloaded model)"]


_FA_ON = ("1", "true", "on", "enabled")
_FA_OFF = ("0", "false", "off", "disabled")


def flash_attn_off(fx: Fixing, *names: str) -> bool | None:
    """Whether the log (or config) says flash attention is off: True off, False on or auto, None not said."""
    v = fx.current(*names)
    if v is None:
        return None
    text = str(v).strip().lower()
    return True if text in _FA_OFF else (False if text in _FA_ON or text == "auto" else None)


def fa_on(fx: Fixing) -> str:
    """Flash attention on, as the build writes it: a bare -fa switch until -fa took on|off|auto
    (common/arg.cpp; `arity` in llamacpp_history.yaml), "-fa on" after, and when the build is unknown."""
    from servefit.engines.option_data import flag_arity

    return "-fa" if flag_arity("llamacpp", "--flash-attn", fx.version) == "0" else "-fa on"  # "4600" sorts as b4600


def flash_attn_line(fx: Fixing, *names: str, how: str = "") -> list[str]:
    """A compute buffer sized by the context: without flash attention it holds the attention scores of
    the whole context for one micro-batch, n_kv x n_ubatch x n_head x 4 bytes per layer
    (llama-graph.cpp::build_attn_mha; research/llamacpp_ollama.md A3). With it on, that tensor is gone."""
    if fx.diag.stage != "compute":
        return []
    off = flash_attn_off(fx, *names)
    why = ("the compute buffer then no longer holds the attention scores for the whole context "
           "(context x micro-batch x heads x 4 bytes)")
    how = how or fa_on(fx)
    if off is True:
        return [f"Turn on flash attention ({how}): {why}"]
    if off is None:
        return [f"If flash attention is off, turn it on ({how}): {why}"]
    return []


def per_token(fx: Fixing, ctx: float | None) -> str:
    """What one token of context costs in the KV buffer that failed (llama-kv-cache.cpp sizes it as kv_size x
    the K and V rows of the layers on that device), and what it would take at a common context."""
    size = _int(fx.figures.get("alloc_size"))
    if fx.diag.stage != "kv_alloc" or not size or not ctx or ctx < 2:
        return ""
    each = size / ctx
    fits = next((c for c in (131072, 65536, 32768, 16384, 8192, 4096) if c < ctx / 2), None)
    need = f"; at {fits:,} tokens it would take {each * fits / 2**30:.2f} GiB" if fits else ""
    return f" (this KV buffer takes {each / 1024:,.0f} KiB per token of context{need})"


def _kv(fx: Fixing) -> list[str]:
    cur = fx.current("ctx_size")
    n = fx.num(cur)
    to = f" to {int(n) // 2} or less" if n else ""
    host = fx.figures.get("alloc_backend") == "cpu"  # the buffer was in RAM: the KV cache is already there
    more = ("Add RAM, or offload the layers (and their KV cache) to a GPU with -ngl" if host else
            "Add GPU memory: split across GPUs (--tensor-split) or keep the KV cache in RAM (--no-kv-offload, slower)")
    lines = [f"Lower the context -c/--ctx-size{fx.was(cur)}{to}{per_token(fx, n)}",
             f"Quantize the KV cache: --cache-type-k q8_0 --cache-type-v q8_0 with {fa_on(fx)} (half the KV memory)",
             more]
    if fx.diag.stage == "compute":  # the buffer reserved after the KV cache: context and micro-batch size it
        lines[1:1] = [_ubatch(fx) + " and the context"]
    return _pipeline(fx) + flash_attn_line(fx, "flash_attn") + lines


def _batch(fx: Fixing) -> list[str]:
    np_ = fx.current("parallel")
    ubatch = _ubatch(fx)
    n = fx.num(np_)
    if n is not None and n <= 1:  # one slot already: there is nothing to lower
        return _pipeline(fx) + [ubatch]
    slots = f"Lower -np/--parallel{fx.was(np_)}: every slot multiplies the KV cache"
    return _pipeline(fx) + ([ubatch, slots] if fx.diag.stage in ("compute", "serving") else [slots, ubatch])


# The same setting where llama.cpp runs as a library: llama-cpp-python's Llama(...) arguments and Ollama's
# Modelfile parameters (Ollama's runner is llama.cpp; engines/ollama names them when the log is Ollama's)
_EMBEDDED = {"-ngl": "n_gpu_layers in llama-cpp-python, num_gpu in Ollama"}


def embedded(fx: Fixing, flag: str) -> str:
    """`flag` and, when nothing says which program ran llama.cpp, its name in the programs that embed it: only
    llama.cpp's own tools print `build: N` (common.cpp), and a config names the program."""
    if fx.setting is not None or fx.figures.get("engine_version") or fx.site_version:
        return flag
    return f"{flag} ({_EMBEDDED[flag]})"


def _too_large(fx: Fixing) -> list[str]:
    ngl = layers_that_fit(fx)
    flag = embedded(fx, "-ngl")
    offload = (f"Offload fewer layers: {flag} {ngl} (of {fx.figures.get('layers_offloaded')}; the rest run on the "
               "CPU, slower)" if ngl is not None else f"Offload fewer layers: lower {flag} (the rest run on the CPU, "
               "slower)")
    return ["Use a smaller GGUF: a lower quantization (e.g. Q8_0 -> Q4_K_M, Q4_K_M -> IQ3_M) or a smaller model",
            offload, "Split over more GPUs (--tensor-split) or use a GPU with more memory"]


FIXES = {"kv_cache_overflow": _kv, "batch_misconfiguration": _batch, "profiling_peak": _batch,
         "fragmentation": lambda fx: fx.growth_or_restarts(), "model_too_large": _too_large}


def fixes(fx: Fixing) -> list[str] | None:
    return fx.by_cause(FIXES)
