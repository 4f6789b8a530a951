"""The outcomes of a log that are not a memory root cause: the engine failed for another reason
(not_oom), or every out-of-memory line was one the engine retried another way and got past
(recovered). classify.py decides which applies."""

from __future__ import annotations

import re

from servefit.diagnose.classify import PHASE_STAGE, _engine, _engine_of
from servefit.diagnose.model import Diagnosis, Event
from servefit.diagnose.parse import ScanResult
from servefit.diagnose.wording import TIMING_TEXT, stage_text

# a process ended by SIGKILL, as the engines report it: Ollama's runner ("signal: killed", Go's os/exec), TGI's
# launcher ("signaled to shutdown with signal 9", launcher/src/main.rs::shard_manager), Python's multiprocessing
# (exit code -9) and shells / container runtimes (exit code 137 = 128 + 9)
_SIGKILL = re.compile(r"signal: killed|\bsignal 9\b|\bSIGKILL\b|exit(?:ed with)? (?:code|status)[:= ]*(?:-9|137)\b|exitcode=-9\b", re.I)


def not_oom(diag: Diagnosis, scan: ScanResult) -> None:
    """The log shows a failure, but no out-of-memory line: say so, with the line, instead of
    guessing a memory cause."""
    err = scan.errors[-1]
    first = next((e for e in scan.errors if e.pattern != "python.exception"), err)
    diag.root_cause, diag.timing, diag.confidence = "not_oom", "unknown", "medium"
    diag.signature = err.pattern
    diag.figures = {k: v for k, v in err.figures.items() if k in ("exception", "message")}
    diag.settings_in_log = dict(err.state.settings)
    lines = {ln.number: ln for ln in (first.line, err.line, err.state.start) if ln is not None}
    diag.evidence = [lines[k] for k in sorted(lines)]
    loading = err.state.start is not None or err.state.loading is not None  # a start, or a load in progress
    diag.timing = "load" if loading and err.state.weights_loaded is None \
        and err.state.serving is None else ("serving" if err.state.serving is not None else "unknown")
    diag.timing_text = TIMING_TEXT[diag.timing]
    what = err.figures.get("message") or err.line.text.strip()
    eng = _engine_of(diag.engine)
    title = (eng.title if eng is not None else None) or "The engine"
    diag.summary = (f"{title} failed, but not for lack of memory: {str(what).strip()[:200]}. No out-of-memory "
                    "line appears in this log, so servefit's memory fixes do not apply.")
    from servefit.diagnose.catalog import catalog

    killed = next((e for e in scan.errors if _SIGKILL.search(e.line.text)), None)
    if killed is not None:  # the likeliest sender is the OOM killer, but the log does not show it: say so
        diag.root_cause, diag.confidence = "killed", "low"
        diag.summary = (f"{title} was killed by SIGKILL (line {killed.line.number}). No out-of-memory line appears "
                        "in this log, but SIGKILL is what the kernel's OOM killer and a container's memory limit "
                        "send (a forced stop sends it too): the log alone cannot tell which.")
        diag.fix = ["Look for the kill where it is recorded: `dmesg -T | grep -i -e 'killed process' -e oom` on the "
                    "host, or `kubectl describe pod` (Last State: Terminated, Reason: OOMKilled); pass that output "
                    "to servefit diagnose with this log"]
        if killed.line not in diag.evidence:
            diag.evidence = sorted([*diag.evidence, killed.line], key=lambda ln: ln.number)
        return
    known = [(e, p) for e in scan.errors if (p := catalog().pattern(e.pattern)) is not None and p.means]
    if known:  # a failure whose cause the message itself names
        ev, pat = known[0]
        diag.signature = pat.name
        diag.summary += f" It looks like {pat.means} (line {ev.line.number})."
        if ev.line not in diag.evidence:
            diag.evidence = sorted([*diag.evidence, ev.line], key=lambda ln: ln.number)


def recovered_only(diag: Diagnosis, scan: ScanResult, ev: Event) -> None:
    """Every out-of-memory line was followed by the engine's own retry (llama.cpp: the compute buffer
    again without pipeline parallelism) and nothing failed after it: say so rather than name a cause."""
    assert ev.recovered is not None
    diag.root_cause, diag.confidence, diag.signature = "recovered", "high", ev.pattern
    diag.engine = _engine(scan, ev)
    diag.figures = {k: v for k, v in ev.figures.items() if k in ("alloc_size", "alloc_device", "device")}
    diag.settings_in_log = dict(ev.state.settings)
    diag.evidence = [ev.line, *ev.extra_lines[:4], ev.recovered]
    diag.stage = ev.stage or PHASE_STAGE.get(ev.state.phase, "")
    diag.stage_text = stage_text(diag.engine, diag.stage)
    diag.timing = "startup" if diag.stage in ("kv_alloc", "compute", "graphs", "profile", "compile") else "unknown"
    diag.timing_text = TIMING_TEXT[diag.timing]
    eng = _engine_of(diag.engine)
    title = (eng.title if eng is not None else None) or "The engine"
    diag.summary = (f"{title} ran out of memory at line {ev.line.number}, then {ev.recovered_how} "
                    f"(line {ev.recovered.number}: {ev.recovered.text.strip()[:160]}) and no failure follows: "
                    "this log shows no out-of-memory failure.")
    if scan.last_state.serving is None:
        diag.notes.append("the log ends before the server said it was ready: if it stopped later, pass the rest "
                          "of the log")
