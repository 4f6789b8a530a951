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

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from servefit.diagnose import model as M
from servefit.diagnose.catalog import catalog
from servefit.diagnose.model import Diagnosis, Event, Line, RunState
from servefit.diagnose.parse import ScanResult
from servefit.diagnose.timestamps import duration
from servefit.diagnose.wording import figure_int, stage_text, summary, timing_text

if TYPE_CHECKING:
    from servefit.diagnose.patterns import Pattern
    from servefit.engines.base import Engine

MAX_EVIDENCE = 12
RELATED_LINES = 400

# settings whose start-up line is evidence for a root cause (first one printed wins)
BLAMED = {
    "kv_cache_overflow": ("max_model_len", "OLLAMA_CONTEXT_LENGTH", "num_ctx", "n_ctx", "max_total_tokens",
                          "max_input_tokens", "context_length"),
    "batch_misconfiguration": ("max_num_seqs", "max_num_batched_tokens", "OLLAMA_NUM_PARALLEL", "num_parallel",
                               "n_seq_max", "max_batch_prefill_tokens", "chunked_prefill_size",
                               "max_running_requests", "n_ubatch"),
    "fragmentation": ("gpu_memory_utilization", "mem_fraction_static", "cuda_memory_fraction"),
    "model_too_large": ("quantization", "quantize", "tensor_parallel_size", "num_shard", "mem_fraction_static"),
    "profiling_peak": ("max_model_len", "max_num_batched_tokens", "max_batch_prefill_tokens", "enable_chunked_prefill"),
    "cuda_graph_capture": ("gpu_memory_utilization", "cuda_graph_max_bs", "mem_fraction_static", "enforce_eager"),
}

# the start-up phase a slot engine (llama.cpp, Ollama's runner) had reached -> the stage that failed; a CUDA
# graph capture that began and did not end (vLLM, SGLang) is the stage of any OOM in between
PHASE_STAGE = {"load": "load", "context": "kv_alloc", "compute": "compute", "graphs": "graphs", "serving": "serving"}


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


def _figures(primary: Event, related: list[Event]) -> dict[str, Any]:
    figs: dict[str, Any] = {}
    st = primary.state
    for k, v in st.info.items():
        figs[k] = v
    figs.update(primary.figures)
    for ev in related:
        for k, v in ev.figures.items():
            figs.setdefault(k, v)
    alloc, reserved = figure_int(figs.get("allocated")), figure_int(figs.get("reserved"))
    unalloc = figure_int(figs.get("reserved_unallocated"))
    if reserved is None and alloc is not None and unalloc is not None:
        figs["reserved"] = reserved = alloc + unalloc
    if alloc is not None and reserved is not None:
        figs["fragmentation_gap"] = max(0, reserved - alloc)
    if "uptime_seconds" not in figs:
        up = duration(st.start_time, primary.time)
        # 0 s with no start-up line: the failure is the log's first timestamp, not a server that died at once
        if up is not None and (up > 0 or st.start is not None):
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
    limit = figure_int(st.settings.get("max_model_len")) or figure_int(st.info.get("max_model_len"))
    if tokens >= M.LONG_PROMPT_TOKENS or (limit and limit >= 8192 and tokens >= 0.75 * limit):
        return tokens, line
    return None


def _answered(st: RunState) -> bool:
    """A request reached the server after its last start-up step the log shows, with no "serving" line
    quoted: the server was serving. The OpenAI-compatible servers take requests only once start-up is done
    (vLLM entrypoints/openai/api_server.py builds the engine before uvicorn listens; SGLang's and TGI's
    routers after warm-up); Ollama's on-demand load restarts the run (a start marker resets the count)."""
    if not st.requests or st.first_request is None:
        return False
    ready = max((ln.number for ln in (st.weights_loaded, st.kv_ready) if ln is not None), default=0)
    return st.first_request.number > ready


def _timing(primary: Event, figs: dict[str, Any]) -> str:
    st, stage = primary.state, primary.stage
    uptime = figure_int(figs.get("uptime_seconds"))
    if st.serving is None:
        if stage == "load":
            return "load"
        if stage in ("profile", "compile", "sampler", "graphs", "kv_alloc", "compute"):
            return "startup"
        if stage in ("serving", "prefill", "decode"):
            return "serving"
        if _answered(st):
            return "long_request" if _long_prompt(st) else "serving"
        if st.weights_loaded or st.kv_ready or st.phase in ("context", "compute"):
            return "startup"
        if st.start is not None or st.phase == "load":
            return "load"
        if uptime is not None and uptime >= M.LONG_UPTIME_SECONDS and primary.pattern.startswith(("k8s", "kernel")):
            return "after_uptime"
        return "unknown"
    since = figure_int(figs.get("since_startup_seconds"))
    if _long_prompt(st):
        return "long_request"
    if (uptime or 0) >= M.LONG_UPTIME_SECONDS or (since or 0) >= M.LONG_UPTIME_SECONDS \
            or st.requests >= M.MANY_REQUESTS:
        return "after_uptime"
    if st.requests <= M.FIRST_BATCH_REQUESTS or (since is not None and since <= M.FIRST_BATCH_SECONDS):
        return "first_batch"
    return "serving"


def _fragmented(figs: dict[str, Any]) -> bool:
    gap, tried = figure_int(figs.get("fragmentation_gap")), figure_int(figs.get("tried_to_allocate"))
    reserved, free = figure_int(figs.get("reserved")), figure_int(figs.get("free")) or 0
    if gap is None or tried is None or not reserved:
        return False
    return gap >= 512 * 2**20 and gap + free >= tried and gap >= 0.05 * reserved


def _weights_share(figs: dict[str, Any]) -> float | None:
    weights = figure_int(figs.get("weights")) or figure_int(figs.get("model_buffer"))
    total = figure_int(figs.get("total"))
    return weights / total if weights and total else None


def _by_timing(primary: Event, timing: str, figs: dict[str, Any], engine: str | None = None) -> tuple[str, str]:
    """(root cause, confidence) for a torch / kernel OOM from when it happened; `engine` is the serving
    engine the log names (None / "torch" for a script)."""
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
        if not host and primary.stage in ("profile", "compile"):
            return "profiling_peak", "high"
        if not host and primary.stage == "graphs":
            return "cuda_graph_capture", "high"
        return "batch_misconfiguration", "low"
    if timing == "first_batch":
        if share is not None and share >= 0.9:
            return "model_too_large", "medium"
        busy = st.max_running >= 64 or (figure_int(st.settings.get("max_num_seqs")) or 0) >= 256
        return "batch_misconfiguration", "high" if busy else "medium"
    if timing == "long_request":
        return "kv_cache_overflow", "high"
    if timing == "after_uptime":
        return "fragmentation", "low" if figs.get("fragmentation_gap") is not None else "medium"
    tried, total = figure_int(figs.get("tried_to_allocate")), figure_int(figs.get("total"))
    alloc = figure_int(figs.get("allocated")) or figure_int(figs.get("process_in_use"))
    # An inference call in a script: the weights fill the GPU. Not for a serving engine: vLLM
    # (gpu_memory_utilization), SGLang (mem_fraction_static) and TGI (cuda_memory_fraction, flash_causal_lm.py::
    # warmup) reserve their KV cache up front, so a nearly full GPU is their normal state while serving.
    if timing == "serving" and engine in (None, "torch") and st.serving is None and not st.requests \
            and st.start is None and alloc and total and alloc >= 0.85 * total:
        return "model_too_large", "medium"
    if timing == "serving" and tried and total and tried >= 0.25 * total:
        return "kv_cache_overflow", "medium"
    if timing == "serving":  # a server's step: which one (prefill / decode) firms it up
        return "batch_misconfiguration", "medium" if primary.stage in ("prefill", "decode") else "low"
    return "model_too_large", "low"


def _blamed(engine: str | None, root: str) -> tuple[str, ...]:
    """The settings whose start-up line is evidence for a root cause: the engine's own fix targets
    (and the names its log prints them under), then the common ones."""
    fix = catalog().fix.get(engine or "", {})
    names: list[str] = []
    for name in (fix.get("targets") or {}).get(root) or ():
        names += [name, *(fix.get("log_names") or {}).get(name, ())]
    return tuple(names) + BLAMED.get(root, ())


def _evidence(primary: Event, related: list[Event], root: str, timing: str, engine: str | None = None) -> list[Line]:
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
    for key in _blamed(engine, root):
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


def _engine_of(name: str | None) -> Engine | None:
    """The engine plugin that wrote a line (None for torch / kernel lines or an engine not installed)."""
    if not name:
        return None
    from servefit import engines
    from servefit.core import UsageError

    try:
        return engines.get(name)
    except (UsageError, ImportError, AttributeError):
        return None


def _stage(primary: Event, related: list[Event], timing: str) -> str:
    """The stage that ran out of memory: the one a failure line or traceback names, else the
    phase a slot engine had reached, else what the timing implies."""
    for ev in [primary, *related]:
        if ev.stage:
            return ev.stage
    phase = PHASE_STAGE.get(primary.state.phase)
    if phase and primary.pattern.split(".", 1)[0] not in ("torch", "kernel", "k8s"):
        return phase
    if timing == "load":
        return "load"
    if timing in ("first_batch", "long_request", "after_uptime", "serving"):
        return "serving"
    return ""


def classify(scan: ScanResult) -> Diagnosis:
    from servefit.diagnose.outcomes import not_oom, recovered_only

    diag = Diagnosis(lines_read=scan.lines, oom_events=scan.oom_events)
    recovered = [ev for ev in scan.events if ev.recovered is not None]
    if recovered:  # a failure the engine retried is not a failure: diagnose what came after it
        scan = replace(scan, events=[ev for ev in scan.events if ev.recovered is None])
        last = recovered[-1]
        if not scan.events and not any(e.line.number > last.line.number for e in scan.errors):
            recovered_only(diag, scan, last)
            return diag
        diag.notes.append(f"line {last.line.number}: an out-of-memory the engine retried another way (line "
                          f"{last.recovered.number if last.recovered else '?'}); what is diagnosed here came after it")
    if not scan.events:
        diag.engine = _engine(scan, scan.errors[-1] if scan.errors else None)
        diag.settings_in_log = dict(scan.last_state.settings)
        if scan.errors:
            not_oom(diag, scan)
        return diag
    primary = _primary(scan.events)
    if not primary.stage and primary.state.phase == "graphs" and not primary.pattern.startswith(("kernel", "k8s")):
        primary.stage = "graphs"  # no traceback says where: the capture had begun and not finished
    lo, hi = primary.line.number - RELATED_LINES, primary.line.number + RELATED_LINES
    related = [ev for ev in scan.events if ev is not primary and lo <= ev.line.number <= hi]
    figs = _figures(primary, related)
    diag.engine = _engine(scan, primary)
    pat: Pattern | None = catalog().pattern(primary.pattern)
    own = _engine_of(primary.engine)  # the engine whose line this is (llama.cpp's lines in an Ollama log)
    said = own.oom_cause(primary, related, figs) if own is not None else None
    if said is not None:
        root, timing, conf = said
    elif pat is not None and pat.cause is not None:
        root, timing, conf = pat.cause
    else:
        timing = _timing(primary, figs)
        root, conf = _by_timing(primary, timing, figs, _engine(scan, primary))
        long = _long_prompt(primary.state) if timing == "long_request" else None
        if long:
            figs["long_request_tokens"] = long[0]
    diag.root_cause, diag.timing, diag.confidence = root, timing, conf
    diag.signature = primary.pattern
    diag.figures = figs
    diag.settings_in_log = dict(primary.state.settings)
    diag.names_in_log = frozenset(primary.state.names)
    diag.stage = _stage(primary, related, timing)
    diag.stage_text = stage_text(diag.engine, diag.stage)
    diag.evidence = _evidence(primary, related, root, timing, diag.engine)
    diag.summary = summary(diag, primary, own or _engine_of(diag.engine))  # a torch line in an engine's log
    diag.timing_text = timing_text(timing, figs)
    if conf == "low":
        diag.notes.append("low confidence: the log says little about when the failure happened; "
                          "pass the whole log from start-up on for a firmer answer")
    if len(scan.events) > 1 + len(related):
        diag.notes.append(f"{len(scan.events)} failures in this log; diagnosed the most specific one "
                          f"(line {primary.line.number})")
    return diag
