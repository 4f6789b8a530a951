"""How a diagnosis is put into words: the texts for root causes, timings and stages, and the
summary lines. Kept apart from classify.py (which decides the cause) so that engine plugins can
reuse the wording without the decision procedure."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from servefit.diagnose.catalog import catalog
from servefit.diagnose.model import Diagnosis, Event
from servefit.diagnose.timestamps import human

if TYPE_CHECKING:
    from servefit.engines.base import Engine

GiB = 2**30

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
    "not_oom": "not an out-of-memory failure: the engine stopped for another reason",
    "killed": "killed by SIGKILL, with no out-of-memory line: the kernel's OOM killer and a container's memory limit "
              "send SIGKILL, and so does a forced stop - this log alone cannot tell which",
    "recovered": "an allocation failed, but the engine retried it another way and went on",
    "none": "no OOM signature found",
}
# how each stage is called when the engine's table does not name it (catalog.stage_names)
STAGE_TEXT = {
    "load": "loading the weights",
    "profile": "the start-up profiling run",
    "compile": "compiling the model (torch.compile) at start-up",
    "sampler": "warming up the sampler",
    "kv_alloc": "allocating the KV cache",
    "compute": "reserving the compute buffer",
    "graphs": "capturing CUDA graphs",
    "prefill": "serving, a prefill step",
    "decode": "serving, a decode step",
    "serving": "serving requests",
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


def figure_int(v: Any) -> int | None:
    """A figure the log gave as a whole number (a bool is not one)."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def size_text(figs: dict[str, Any], key: str) -> str:
    """A size figure as the summaries print it ("16.00 GiB", "448 MiB", "?")."""
    v = figure_int(figs.get(key))
    if v is None:
        return "?"
    return f"{v / GiB:.2f} GiB" if v >= GiB else f"{v / 2**20:.0f} MiB"


def summary(diag: Diagnosis, primary: Event, eng: Engine | None) -> str:
    """The one-paragraph cause: the engine's own words when its plugin has them, else the root
    cause's text with the allocator's figures."""
    root, figs = diag.root_cause, diag.figures

    def g(key: str) -> str:
        return size_text(figs, key)

    said = eng.oom_summary(diag, primary) if eng is not None else None
    if said:
        return said
    pat = primary.pattern
    host = pat.startswith(("kernel", "k8s"))
    text = (HOST_TEXT if host else ROOT_TEXT)[root] + "."
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


def timing_text(timing: str, figs: dict[str, Any]) -> str:
    """When it failed, in words, with the uptime / requests / prompt length the log gave."""
    text = TIMING_TEXT[timing]
    up, reqs = figure_int(figs.get("uptime_seconds")), figure_int(figs.get("requests_served"))
    if timing == "after_uptime" and up is not None:
        text = f"after {human(up)} of uptime"
    if timing == "first_batch" and figs.get("since_startup_seconds") is not None:
        text += f" ({human(figs['since_startup_seconds'])} later)"
    if timing == "long_request" and figs.get("long_request_tokens"):
        text += f" (~{figs['long_request_tokens']:,} tokens)"
    if timing in ("after_uptime", "serving", "first_batch") and reqs:
        text += f", {reqs:,} requests served"
    return text


def stage_text(engine: str | None, stage: str) -> str:
    """How the engine calls a stage (its logs table), else the common name."""
    named = catalog().stage_names.get(engine or "", {})
    return named.get(stage) or STAGE_TEXT.get(stage, "")
