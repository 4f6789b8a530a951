"""Failure events -> the root cause (the OOM root-cause procedure).

Step 1, *when* it failed: at model load, during start-up (profiling, KV cache, CUDA graphs),
on the first batch after start-up completed, on a long request, or after hours of uptime.
Step 2, *what the message says*: an engine refusal names its cause outright (vLLM's "To serve
at least one request...", TGI's "Not enough memory to handle N prefill tokens", ...); torch's
figures give the fragmentation gap, reserved − allocated.

    at model load          -> model_too_large
    on first batch         -> batch_misconfiguration
    on long requests only  -> kv_cache_overflow
    after hours of uptime  -> fragmentation   (a large reserved − allocated gap decides it at once)
"""

from __future__ import annotations

from typing import Any

from servefit.diagnose import model as M
from servefit.diagnose.model import Diagnosis, Event, Line, RunState
from servefit.diagnose.parse import ScanResult
from servefit.diagnose.timestamps import duration, human

GiB = 2**30
MAX_EVIDENCE = 12
RELATED_LINES = 400

# Refusals and errors that name their cause: pattern -> (root cause, timing, confidence)
DECISIVE = {
    "vllm.kv_refusal": ("kv_cache_overflow", "startup", "high"),
    "vllm.kv_refusal_v0": ("kv_cache_overflow", "startup", "high"),
    "tgi.max_total": ("kv_cache_overflow", "startup", "high"),
    "vllm.sampler_oom": ("batch_misconfiguration", "startup", "high"),
    "tgi.prefill": ("batch_misconfiguration", "startup", "high"),
    "vllm.no_kv_memory": ("model_too_large", "startup", "medium"),
    "vllm.autofit_fail": ("model_too_large", "startup", "medium"),
    "vllm.free_memory": ("model_too_large", "load", "medium"),
    "sglang.mem_fraction": ("model_too_large", "startup", "high"),
    "ollama.sysmem": ("model_too_large", "load", "high"),
}

# settings whose start-up line is evidence for a root cause (first one printed wins)
BLAMED = {
    "kv_cache_overflow": ("max_model_len", "OLLAMA_CONTEXT_LENGTH", "num_ctx", "n_ctx", "max_total_tokens",
                          "max_input_tokens", "context_length"),
    "batch_misconfiguration": ("max_num_seqs", "max_num_batched_tokens", "OLLAMA_NUM_PARALLEL", "num_parallel",
                               "n_seq_max", "max_batch_prefill_tokens", "chunked_prefill_size",
                               "max_running_requests", "n_ubatch"),
    "fragmentation": ("gpu_memory_utilization", "mem_fraction_static", "cuda_memory_fraction"),
    "model_too_large": ("quantization", "quantize", "tensor_parallel_size", "num_shard", "mem_fraction_static"),
    "profiling_peak": ("max_model_len", "max_num_batched_tokens", "enable_chunked_prefill"),
    "cuda_graph_capture": ("gpu_memory_utilization", "enforce_eager"),
}

TIMING_TEXT = {
    "load": "during model load, before the weights finished loading",
    "startup": "during start-up, after the weights loaded (profiling, KV cache allocation, CUDA graphs, warm-up)",
    "first_batch": "on the first batch, right after start-up completed",
    "long_request": "while serving a long request",
    "after_uptime": "after a long uptime",
    "serving": "while serving requests (or during an inference call)",
    "unknown": "timing unknown (no start-up or request lines around the failure)",
}

ROOT_TEXT = {
    "kv_cache_overflow": "KV cache overflow: the context length asks for more KV cache than the GPU has left",
    "batch_misconfiguration": "batch misconfiguration: the batch / concurrency settings need more memory than is left",
    "fragmentation": "memory fragmentation: enough memory is cached by the allocator, but not in one piece",
    "model_too_large": "model too large: the weights (plus the engine's fixed overhead) do not fit this GPU",
    "profiling_peak": "start-up profiling peak: the engine's dummy forward pass over the largest batch it must "
                      "accept (its activation peak) did not fit next to the weights",
    "cuda_graph_capture": "CUDA graph capture: capturing the decode graphs needed more memory than was left after "
                          "the KV cache took its share",
    "none": "no OOM signature found",
}


HOST_TEXT = {
    "kv_cache_overflow": "KV cache overflow on the host: long requests grew host-side buffers until RAM ran out",
    "batch_misconfiguration": "batch misconfiguration: the first batches needed more host memory than is available",
    "fragmentation": "memory growth over time: host memory climbed over hours until the limit (a leak or "
                     "fragmentation)",
    "model_too_large": "model too large for the host: loading needed more RAM than the machine or container allows",
    "profiling_peak": "host memory ran out during start-up profiling",
    "cuda_graph_capture": "host memory ran out while capturing CUDA graphs",
}


def _engine(scan: ScanResult, primary: Event | None) -> str | None:
    if scan.engines:
        return scan.engines[0]
    if primary is not None and primary.engine:
        return primary.engine
    if any(ev.pattern == "torch.oom" for ev in scan.events):
        return "torch"
    return None


def _primary(events: list[Event]) -> Event:
    return sorted(events, key=lambda ev: (-ev.rank, ev.line.number))[0]


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _figures(primary: Event, related: list[Event]) -> dict[str, Any]:
    figs: dict[str, Any] = {}
    st = primary.state
    for k, v in st.info.items():
        figs[k] = v
    figs.update(primary.figures)
    for ev in related:
        for k, v in ev.figures.items():
            figs.setdefault(k, v)
    alloc, reserved = _int(figs.get("allocated")), _int(figs.get("reserved"))
    unalloc = _int(figs.get("reserved_unallocated"))
    if reserved is None and alloc is not None and unalloc is not None:
        figs["reserved"] = reserved = alloc + unalloc
    if alloc is not None and reserved is not None:
        figs["fragmentation_gap"] = max(0, reserved - alloc)
    if "uptime_seconds" not in figs:
        up = duration(st.start_time, primary.time)
        if up is not None:
            figs["uptime_seconds"] = int(up)
    since = duration(st.serving_time, primary.time)
    if st.serving is not None:
        figs["requests_served"] = st.requests
        if since is not None:
            figs["since_startup_seconds"] = int(since)
    if st.max_prompt:
        figs["longest_request_tokens"] = st.max_prompt
    if st.max_running:
        figs["max_running_requests"] = st.max_running
    if primary.repeats:
        figs["repeats"] = primary.repeats
    if st.gpu_name:
        figs["gpu_name"] = st.gpu_name
    return figs


def _long_prompt(st: RunState) -> tuple[int, Line] | None:
    if not st.recent_prompts:
        return None
    tokens, line = max(st.recent_prompts, key=lambda tl: tl[0])
    limit = _int(st.settings.get("max_model_len")) or _int(st.info.get("max_model_len"))
    if tokens >= M.LONG_PROMPT_TOKENS or (limit and limit >= 8192 and tokens >= 0.75 * limit):
        return tokens, line
    return None


def _timing(primary: Event, figs: dict[str, Any]) -> str:
    st, stage = primary.state, primary.stage
    if primary.pattern in DECISIVE:
        return DECISIVE[primary.pattern][1]
    uptime = _int(figs.get("uptime_seconds"))
    if st.serving is None:
        if stage == "load":
            return "load"
        if stage in ("profile", "sampler", "graphs", "kv_alloc", "kv", "compute"):
            return "startup"
        if stage == "serving":
            return "serving"
        if st.weights_loaded or st.kv_ready or st.llama_phase in ("context", "compute"):
            return "startup"
        if st.start is not None or st.llama_phase == "load":
            return "load"
        if uptime is not None and uptime >= M.LONG_UPTIME_SECONDS and primary.pattern.startswith(("k8s", "kernel")):
            return "after_uptime"
        return "unknown"
    since = _int(figs.get("since_startup_seconds"))
    if _long_prompt(st):
        return "long_request"
    if (uptime or 0) >= M.LONG_UPTIME_SECONDS or (since or 0) >= M.LONG_UPTIME_SECONDS \
            or st.requests >= M.MANY_REQUESTS:
        return "after_uptime"
    if st.requests <= M.FIRST_BATCH_REQUESTS or (since is not None and since <= M.FIRST_BATCH_SECONDS):
        return "first_batch"
    return "serving"


def _fragmented(figs: dict[str, Any]) -> bool:
    gap, tried = _int(figs.get("fragmentation_gap")), _int(figs.get("tried_to_allocate"))
    reserved, free = _int(figs.get("reserved")), _int(figs.get("free")) or 0
    if gap is None or tried is None or not reserved:
        return False
    return gap >= 512 * 2**20 and gap + free >= tried and gap >= 0.05 * reserved


def _weights_share(figs: dict[str, Any]) -> float | None:
    weights = _int(figs.get("weights")) or _int(figs.get("model_buffer"))
    total = _int(figs.get("total"))
    return weights / total if weights and total else None


def _llama_stage(primary: Event, related: list[Event]) -> str:
    for ev in [primary, *related]:
        if ev.stage:
            return ev.stage
    return {"load": "load", "context": "kv", "compute": "compute", "serving": "serving"}.get(
        primary.state.llama_phase, "")


def _llama_cause(primary: Event, related: list[Event], figs: dict[str, Any]) -> tuple[str, str, str]:
    """(root cause, timing, confidence) for a llama.cpp / Ollama allocation failure."""
    st = primary.state
    s = st.settings
    stage = _llama_stage(primary, related)
    n_seq = _int(s.get("n_seq_max")) or _int(s.get("num_parallel")) or _int(s.get("OLLAMA_NUM_PARALLEL")) or 1
    ctx = _int(s.get("n_ctx")) or _int(s.get("num_ctx")) or 0
    per_seq = _int(s.get("n_ctx_seq")) or _int(s.get("n_ctx_per_seq")) or (ctx // n_seq if ctx else 0)
    if n_seq > 1 and s.get("num_ctx") is not None and s.get("n_ctx") is None:
        per_seq = ctx // n_seq if ctx else 0
    if stage == "load":
        return "model_too_large", "load", "high"
    if stage in ("kv", "compute"):
        if n_seq >= 2 and per_seq and per_seq < M.LONG_PROMPT_TOKENS:
            return "batch_misconfiguration", "startup", "medium"
        if stage == "compute" and (_int(s.get("n_ubatch")) or 512) > 512:
            return "batch_misconfiguration", "startup", "medium"
        return "kv_cache_overflow", "startup", "high" if stage == "kv" else "medium"
    weights, avail = _int(figs.get("memory.weights.total")), _int(figs.get("memory.available"))
    kv = _int(figs.get("memory.required.kv"))
    if weights and avail and weights > avail:
        return "model_too_large", "load", "medium"
    if n_seq >= 2 and per_seq and per_seq < M.LONG_PROMPT_TOKENS:
        return "batch_misconfiguration", "startup", "medium"
    if ctx >= M.LONG_PROMPT_TOKENS or (kv and weights and kv >= weights // 2):
        return "kv_cache_overflow", "startup", "medium"
    return "model_too_large", "startup", "low"


def _by_timing(primary: Event, timing: str, figs: dict[str, Any]) -> tuple[str, str]:
    """(root cause, confidence) for a torch / kernel OOM from when it happened."""
    st = primary.state
    host = primary.pattern.startswith(("kernel", "k8s"))
    share = _weights_share(figs)
    if not host and _fragmented(figs):
        return "fragmentation", "high" if timing in ("after_uptime", "serving") else "medium"
    if timing == "load":
        return "model_too_large", "high" if not host else "medium"
    if timing == "startup":
        if primary.stage == "sampler":
            return "batch_misconfiguration", "high"
        if share is not None and share >= 0.85:
            return "model_too_large", "medium"
        # The stage the traceback names decides what acts: the profiling run (V0
        # worker.py::determine_num_available_blocks -> profile_run, V1 gpu_worker.py::
        # determine_available_memory -> profile_run / _dummy_run) or graph capture (capture_model).
        if not host and primary.stage == "profile":
            return "profiling_peak", "high"
        if not host and primary.stage == "graphs":
            return "cuda_graph_capture", "high"
        return "batch_misconfiguration", "low"
    if timing == "first_batch":
        if share is not None and share >= 0.9:
            return "model_too_large", "medium"
        busy = st.max_running >= 64 or (_int(st.settings.get("max_num_seqs")) or 0) >= 256
        return "batch_misconfiguration", "high" if busy else "medium"
    if timing == "long_request":
        return "kv_cache_overflow", "high"
    if timing == "after_uptime":
        return "fragmentation", "low" if figs.get("fragmentation_gap") is not None else "medium"
    tried, total = _int(figs.get("tried_to_allocate")), _int(figs.get("total"))
    alloc = _int(figs.get("allocated")) or _int(figs.get("process_in_use"))
    if timing == "serving" and st.serving is None and alloc and total and alloc >= 0.85 * total:
        return "model_too_large", "medium"  # an inference call in a script: weights fill the GPU
    if timing == "serving" and tried and total and tried >= 0.25 * total:
        return "kv_cache_overflow", "medium"
    if timing == "serving":
        return "batch_misconfiguration", "low"
    return "model_too_large", "low"


def _evidence(primary: Event, related: list[Event], root: str, timing: str) -> list[Line]:
    st = primary.state
    lines: list[Line] = [primary.line, *primary.extra_lines[:6]]
    for ev in related[:2]:
        lines.append(ev.line)
    ctx: list[Line | None] = []
    if timing in ("first_batch", "after_uptime", "serving", "long_request"):
        ctx += [st.start if timing == "after_uptime" else None, st.serving]
    if timing == "first_batch":
        ctx.append(st.max_running_line)
    if timing == "long_request":
        found = _long_prompt(st)
        ctx.append(found[1] if found else None)
    if timing == "startup" or root == "model_too_large":
        ctx.append(st.weights_loaded)
    if timing == "load":
        ctx.append(st.loading)
    for key in BLAMED.get(root, ()):
        if key in st.settings_lines:
            ctx.append(st.settings_lines[key])
            break
    for key in ("kv_cache_available", "kv_buffer", "memory.required.full", "weights", "model_file"):
        if root in ("kv_cache_overflow", "model_too_large") and key in st.info_lines:
            ctx.append(st.info_lines[key])
    seen: set[int] = set()
    out: list[Line] = []
    for ln in lines + [c for c in ctx if c is not None]:
        if ln.number not in seen:
            seen.add(ln.number)
            out.append(ln)
    return sorted(out[:MAX_EVIDENCE], key=lambda ln: ln.number)


def _summary(root: str, primary: Event, figs: dict[str, Any], stage: str) -> str:
    def g(key: str) -> str:
        v = _int(figs.get(key))
        if v is None:
            return "?"
        return f"{v / GiB:.2f} GiB" if v >= GiB else f"{v / 2**20:.0f} MiB"

    pat = primary.pattern
    if pat == "vllm.kv_refusal":
        est = figs.get("estimated_max_model_len")
        tail = f"; the longest that fits is {est:,}" if isinstance(est, int) else ""
        return (f"vLLM refused to start: one request at max_model_len {figs.get('max_model_len', 0):,} needs "
                f"{g('kv_cache_needed')} of KV cache, but only {g('kv_cache_available')} is left{tail}.")
    if pat == "vllm.free_memory":
        return (f"vLLM refused to start: only {g('device_free')} of {g('total')} is free on the GPU, but "
                f"gpu_memory_utilization {figs.get('gpu_memory_utilization')} asks for {g('requested')}; "
                "another process (or a previous instance) holds the rest.")
    if pat == "tgi.prefill":
        return (f"TGI could not run its warm-up batch of {figs.get('prefill_tokens', 0):,} prefill tokens "
                "(--max-batch-prefill-tokens): the batch does not fit next to the weights.")
    if pat == "sglang.mem_fraction":
        return (f"SGLang found no memory for the KV cache pool: the weights fill mem_fraction_static "
                f"{figs.get('mem_fraction_static', '?')} of the GPU.")
    host = pat.startswith(("kernel", "k8s"))
    text = (HOST_TEXT if host else ROOT_TEXT)[root] + "."
    if primary.pattern.startswith("llamacpp") and figs.get("alloc_size") is not None:
        what = {"load": " for the model weights", "kv": " for the KV cache",
                "compute": " for the compute buffer"}.get(stage, "")
        free = f" ({g('device_free')} was free at start)" if figs.get("device_free") is not None else ""
        text += f" llama.cpp could not allocate {g('alloc_size')}{what} on the GPU{free}."
    if pat == "torch.oom" and root != "fragmentation" and figs.get("tried_to_allocate") is not None \
            and figs.get("total") is not None:
        text += (f" PyTorch asked for {g('tried_to_allocate')} more with {g('free')} free of {g('total')} "
                 f"({g('allocated')} allocated by PyTorch).")
    if root == "fragmentation" and figs.get("fragmentation_gap") is not None:
        text += (f" The allocator held {g('fragmentation_gap')} reserved but unallocated when "
                 f"{g('tried_to_allocate')} was requested.")
    if host:
        text += " The kernel's OOM killer ended the process: host memory ran out, not GPU memory."
    return text


def _timing_text(timing: str, figs: dict[str, Any]) -> str:
    text = TIMING_TEXT[timing]
    up, reqs = _int(figs.get("uptime_seconds")), _int(figs.get("requests_served"))
    if timing == "after_uptime" and up is not None:
        text = f"after {human(up)} of uptime"
    if timing == "first_batch" and figs.get("since_startup_seconds") is not None:
        text += f" ({human(figs['since_startup_seconds'])} later)"
    if timing == "long_request" and figs.get("long_request_tokens"):
        text += f" (~{figs['long_request_tokens']:,} tokens)"
    if timing in ("after_uptime", "serving", "first_batch") and reqs:
        text += f", {reqs:,} requests served"
    return text


def classify(scan: ScanResult) -> Diagnosis:
    diag = Diagnosis(lines_read=scan.lines, oom_events=scan.oom_events)
    if not scan.events:
        diag.engine = _engine(scan, None)
        diag.settings_in_log = dict(scan.last_state.settings)
        return diag
    primary = _primary(scan.events)
    lo, hi = primary.line.number - RELATED_LINES, primary.line.number + RELATED_LINES
    related = [ev for ev in scan.events if ev is not primary and lo <= ev.line.number <= hi]
    figs = _figures(primary, related)
    diag.engine = _engine(scan, primary)
    if primary.pattern in DECISIVE:
        root, timing, conf = DECISIVE[primary.pattern]
        if primary.pattern in ("vllm.no_kv_memory", "vllm.autofit_fail"):
            act, w = _int(figs.get("activation_peak")), _int(figs.get("weights"))
            if act and w and act >= w // 2:
                root = "batch_misconfiguration"
    elif primary.pattern.startswith("llamacpp") or primary.pattern == "ollama.runner_oom":
        root, timing, conf = _llama_cause(primary, related, figs)
    else:
        timing = _timing(primary, figs)
        root, conf = _by_timing(primary, timing, figs)
        long = _long_prompt(primary.state) if timing == "long_request" else None
        if long:
            figs["long_request_tokens"] = long[0]
    diag.root_cause, diag.timing, diag.confidence = root, timing, conf
    diag.signature = primary.pattern
    diag.figures = figs
    diag.settings_in_log = dict(primary.state.settings)
    diag.evidence = _evidence(primary, related, root, timing)
    diag.summary = _summary(root, primary, figs, _llama_stage(primary, related))
    diag.timing_text = _timing_text(timing, figs)
    if conf == "low":
        diag.notes.append("low confidence: the log says little about when the failure happened; "
                          "pass the whole log from start-up on for a firmer answer")
    if len(scan.events) > 1 + len(related):
        diag.notes.append(f"{len(scan.events)} failures in this log; diagnosed the most specific one "
                          f"(line {primary.line.number})")
    return diag
