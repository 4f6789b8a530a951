"""A diagnosis as JSON (the `servefit diagnose --format json` contract) and as a short report."""

from __future__ import annotations

import json
import re
from typing import Any

from servefit.diagnose.collectors import strip_colour
from servefit.diagnose.model import Diagnosis
from servefit.diagnose.patterns import is_size
from servefit.diagnose.timestamps import human
from servefit.redact import redact_text as _redact_text
from servefit.termsafe import one_line

TITLE = {
    "kv_cache_overflow": "KV cache overflow",
    "batch_misconfiguration": "Batch misconfiguration",
    "fragmentation": "Memory fragmentation",
    "model_too_large": "Model too large for the GPU",
    "profiling_peak": "Start-up profiling peak",
    "cuda_graph_capture": "CUDA graph capture",
    "not_oom": "Not an out-of-memory failure",
    "killed": "Killed (SIGKILL); no out-of-memory line in this log",
    "recovered": "Out of memory, recovered by the engine",
    "none": "No OOM signature found",
}
HOST_TITLE = {
    "kv_cache_overflow": "KV cache overflow (host memory)",
    "batch_misconfiguration": "Batch misconfiguration (host memory)",
    "fragmentation": "Host memory growth over uptime",
    "model_too_large": "Model too large for the host memory",
}
# figures shown first in the text report, in this order
ORDER = ("tried_to_allocate", "total", "allocated", "reserved", "free", "fragmentation_gap", "weights",
         "kv_cache_needed", "kv_cache_available", "max_model_len", "estimated_max_model_len", "uptime_seconds",
         "requests_served", "long_request_tokens", "longest_request_tokens")


_COUNT_NAME = re.compile(r"token(?=s|izer)", re.I)


def redact_text(text: str) -> str:
    """servefit.redact.redact_text, except that token *counts* and tokenizer settings
    (max_num_batched_tokens=2048, "prompt_tokens": 120345, skip_tokenizer_init=False) are not
    mistaken for secrets."""
    if "oken" not in text:
        return _redact_text(text)
    marked = _COUNT_NAME.sub(lambda m: m.group(0)[0] + "\x00" + m.group(0)[1:], text.replace("\x00", ""))
    return _redact_text(marked).replace("\x00", "")


def to_dict(diag: Diagnosis) -> dict[str, Any]:
    out = diag.as_dict()
    out["evidence"] = [{"line": e["line"], "text": redact_text(e["text"])} for e in out["evidence"]]
    out["fix"] = [redact_text(f) for f in out["fix"]]
    return out


def to_json(diags: list[Diagnosis]) -> str:
    objs = [to_dict(d) for d in diags]
    return json.dumps(objs[0] if len(objs) == 1 else objs, indent=2) + "\n"


def _fmt(key: str, val: Any) -> str:
    if isinstance(val, bool) or not isinstance(val, int | float):
        return str(val)
    if is_size(key):
        if abs(val) >= 2**30:
            return f"{val / 2**30:.2f} GiB"
        return f"{val / 2**20:.2f} MiB"
    if key.endswith("_seconds"):
        return human(val)
    if isinstance(val, float):
        return f"{val:g}"
    return f"{val:,}"


def _c(text: str, code: str, color: bool) -> str:
    return f"\033[{code}m{text}\033[0m" if color else text


def _engine_title(name: str | None) -> str:
    from servefit import engines

    if name == "torch":
        return "PyTorch"
    return engines.title(name) or name or "engine unknown"


def _host_line(signature: str | None) -> bool:
    """The failure line is about host memory (its pattern says so: Ollama's system-memory refusal)."""
    from servefit.diagnose.catalog import catalog

    pat = catalog().pattern(signature) if signature else None
    return bool(pat is not None and pat.host)


def render_text(diag: Diagnosis, color: bool = False) -> str:
    out: list[str] = []
    engine = _engine_title(diag.engine)
    host = (diag.signature or "").startswith(("kernel", "k8s")) or _host_line(diag.signature)
    head = f"{one_line(diag.source)}: {(HOST_TITLE if host else TITLE).get(diag.root_cause, TITLE[diag.root_cause])}"
    if diag.root_cause == "none":
        from servefit import engines

        known = ", ".join(["PyTorch"] + [_engine_title(e) for e in engines.available()] + ["the kernel's OOM killer"])
        out.append(_c(head, "1", color) + f" ({engine}, {diag.lines_read:,} lines read)")
        out.append(f"  none of the OOM messages servefit knows ({known}) appear in this log")
        return "\n".join(out) + "\n"
    red = "1;33" if diag.root_cause == "recovered" else "1;31"
    out.append(_c(head, red, color) + f"  [{diag.root_cause}; {engine}; {diag.confidence} confidence]")
    out.append(f"  {diag.summary}")
    out.append(f"  When: {diag.timing_text or diag.timing}")
    if diag.stage_text:
        out.append(f"  Stage: {diag.stage_text}")
    if diag.server is not None:
        out.append(one_line(f"  Server: {diag.server['file']}:{diag.server['line']} ({diag.server['name']})"))
    out.append("")
    out.append(_c("Evidence", "1", color))
    width = len(str(max((e.number for e in diag.evidence), default=1)))
    for e in diag.evidence:
        out.append(f"  {e.number:>{width}} | {one_line(redact_text(strip_colour(e.text)))}")
    figs = diag.figures
    keys = [k for k in ORDER if k in figs] + sorted(k for k in figs if k not in ORDER)
    if keys:
        out.append("")
        out.append(_c("Figures", "1", color))
        w = max(len(k) for k in keys)
        out.extend(f"  {k:<{w}}  {_fmt(k, figs[k])}" for k in keys)
    if diag.settings_in_log:
        out.append(one_line("  settings in log: " + ", ".join(f"{k}={v}" for k, v in sorted(diag.settings_in_log.items()))))
    if diag.fix:
        out.append("")
        out.append(_c("Fix", "1", color))
        out.extend(f"  {i}. {one_line(redact_text(f))}" for i, f in enumerate(diag.fix, 1))
    for note in diag.notes:
        out.append(f"  note: {one_line(note)}")
    return "\n".join(out) + "\n"
