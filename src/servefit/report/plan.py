"""A memory plan as the JSON contract (DESIGN.md) and as terminal bars."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from servefit.core import DeviceMemory
from servefit.pipeline import Evaluation
from servefit.redact import redact_text
from servefit.termsafe import one_line

LAYERS = [  # (field, label, colour)
    ("weights", "weights", "34"),
    ("activation_peak", "activation peak", "35"),
    ("non_torch", "non-torch", "33"),
    ("cuda_graphs", "CUDA graphs", "36"),
    ("kv_cache", "KV cache", "32"),
    ("free_headroom", "free headroom", "37"),
]

VERDICT = {
    "started": "starts",
    "refused_max_model_len": "refuses to start: max-model-len does not fit the KV cache",
    "no_kv_memory": "refuses to start: no memory left for the KV cache",
    "oom_at_load": "runs out of memory while loading",
    "rejected_config": "refuses the configuration",
    # tune's word for a llama.cpp plan that starts but keeps less free than --fit's margin (LCPP018)
    "little_headroom": "starts, but with less free than llama.cpp's --fit margin (LCPP018)",
    # tune's words for the other plans that start but do not count as serving (tune/space.py shortfall)
    "offloaded": "starts, but with layers on the CPU (slow)",
    "context_past_training": "starts, but a slot holds more than the model was trained for (LCPP011)",
    "slots_too_short": "starts, but each slot holds less than a request the file asks for (LCPP007)",
    "oom_under_load": "starts, but out of memory under the first long prefill or at CUDA-graph capture (SGL011)",
    "no_room_for_another_model": "starts, but leaves no room for another model (OLLAMA_MAX_LOADED_MODELS)",
}


def hider(ev: Evaluation) -> Callable[[str], str]:
    """Text as shown: credentials masked by shape (redact_text) and by the values this server's
    secret flags and variables hold, wherever the engine's words repeat them ("unrecognized
    arguments: <the key given twice>")."""
    from servefit.redact import site_secret_values

    secrets = site_secret_values([ev.site])
    if not secrets:
        return redact_text
    from servefit.redact import mask_values

    return lambda text: mask_values(redact_text(text), secrets)


def plan_dict(ev: Evaluation) -> dict[str, Any]:
    hide = hider(ev)
    p = ev.plan
    out: dict[str, Any] = {
        "engine": p.engine,
        "engine_version": p.engine_version,
        "server": {"name": ev.site.name, "file": ev.site.file, "line": ev.site.line},
        "model": {"ref": ev.config.model_ref or ev.model.name, "resolved": ev.model.name,
                  "resolved_from": ev.model.resolved_from, "params": ev.model.params},
        "gpu": {"name": ev.gpu.name, "count": ev.count, "memory_bytes": ev.gpu.memory_bytes,
                "source": ev.gpu_source},
        "parallel": dict(p.parallel),
        "memory": p.memory.as_dict(),
        "kv_bytes_per_token": p.kv_bytes_per_token,
        "kv_cache_tokens": p.kv_cache_tokens,
        "max_model_len": p.max_model_len,
        "max_concurrency": round(p.max_concurrency, 2),
        "outcome": p.outcome,
        "assumptions": [hide(a) for a in list(ev.model.assumptions) + list(ev.config.assumptions)
                        + list(p.assumptions)],
        "findings": [dict(f.as_dict(), message=hide(f.message)) for f in ev.config.findings + p.findings],
    }
    if p.fitting_max_model_len is not None:
        out["fitting_max_model_len"] = p.fitting_max_model_len
    if p.messages:
        out["messages"] = [hide(m) for m in p.messages]
    if len(p.devices) > 1:
        out["devices"] = [dict(d.as_dict(), label=d.label) for d in p.devices]
    out.update({k: v for k, v in p.detail.as_dict().items() if k not in out})
    return out


def _gib(n: int) -> str:
    return f"{n / 2**30:6.2f} GiB"


def stack_lines(mem: DeviceMemory, total: int, width: int = 40, color: bool = False) -> list[str]:
    """One bar per memory component, scaled to the GPU's total."""
    lines = []
    for key, label, code in LAYERS:
        val = getattr(mem, key)
        frac = val / total if total else 0.0
        n = max(0, min(width, round(frac * width)))
        bar = "█" * n + "·" * (width - n)
        if color:
            bar = f"\x1b[{code}m{bar}\x1b[0m"
        lines.append(f"  {label:<16}{_gib(val)} {frac * 100:5.1f}%  {bar}")
    return lines


def server_line(site: Any) -> str:
    """Which server a report is about, as lint names it: `Deployment/vllm (values-prod.yaml) (file:line)`."""
    where = f"{site.file}:{site.line}" if site.line else site.file
    return f"{site.name or where} ({where})"


def render_text(ev: Evaluation, color: bool = False, named: bool = False) -> str:
    """The memory stack of one server; `named` starts it with the server's name and place (a file
    with several servers, or a chart rendered once per values file, gives several reports)."""
    p = ev.plan
    m = ev.model
    head = [one_line(server_line(ev.site))] if named else []
    head += [
        one_line(f"{p.engine} {p.engine_version}  ·  {ev.config.model_ref or m.name}"
                 + (f" (→ {m.name})" if ev.config.model_ref and ev.config.model_ref != m.name else "")),
        f"{ev.count} × {ev.gpu.name} ({ev.gpu.memory_bytes / 2**30:.2f} GiB as the driver reports it; "
        f"{ev.gpu_source})  ·  TP {p.parallel.get('tensor', 1)} PP {p.parallel.get('pipeline', 1)}"
        + (f" DP {dp}" if (dp := int(p.parallel.get('data', 1) or 1)) > 1 else ""),
        "",
    ]
    each = f" in each of the {dp} data-parallel ranks" if dp > 1 else ""  # each rank plans its own KV cache
    devices = p.devices if len(p.devices) > 1 else [p.memory]
    body: list[str] = []
    for d in devices:
        label = d.label or "per GPU"
        body.append(f"{label}: budget {_gib(d.budget).strip()} of {_gib(d.total or ev.gpu.memory_bytes).strip()}")
        body.extend(stack_lines(d, d.total or ev.gpu.memory_bytes, color=color))
        body.append("")
    verdict = VERDICT.get(p.outcome, p.outcome)
    short = min(d.free_headroom for d in devices)
    if p.outcome == "started" and short < 0:  # a negative headroom never reads as a plain "starts"
        verdict = (f"starts, but the plan is {-short / 2**30:.2f} GiB short of what activations and CUDA graphs "
                   "need: out of memory under load is likely")
    tail = [f"verdict: {verdict}"]
    if p.kv_bytes_per_token:
        swa = getattr(p.detail, "kv_cache_cells_swa", None)  # llama.cpp's iSWA cache: the window's cells only
        # vLLM counts tokens as full-attention context: windowed and state layers hold less than that. The
        # cache of pipeline stages (vLLM PP, llama.cpp's layer split) is the sum over the GPUs, and llama.cpp
        # keeps the cache of the layers -ngl leaves on the CPU in system memory (llama-kv-cache.cpp: each
        # layer's buffer on its layer's device)
        host = max(0.0, getattr(p.detail, "kv_buffer_mib", 0.0) - getattr(p.detail, "kv_buffer_gpu_mib", 0.0))
        host *= 2**20
        held = sum(d.kv_cache for d in devices)
        fuller = p.kv_bytes_per_token * (p.kv_cache_tokens or 0) > 1.1 * (held + host) > 0
        tail.append(f"KV cache: {p.kv_bytes_per_token:,} bytes per token; {p.kv_cache_tokens:,} tokens{each}"
                    + (f"; {host / 2**30:.2f} GiB of it in system memory, with the layers -ngl leaves on the CPU"
                       if host >= 2**20 else "")
                    + (f"; the sliding-window layers keep {swa:,} of them (their window), so the cache is smaller "
                       "than bytes per token x tokens" if swa and swa < p.kv_cache_tokens else
                       "; layers with a sliding window or a state hold less than every token, so the cache is "
                       "smaller than bytes per token x tokens" if fuller else ""))
    if p.max_model_len and p.kv_bytes_per_token:  # attention-free (pooling) models have no KV cache
        tail.append(f"max concurrency at {p.max_model_len:,} tokens per request: {p.max_concurrency:.2f}x{each}")
    if p.fitting_max_model_len:
        tail.append(f"largest max-model-len that fits: {p.fitting_max_model_len:,}")
    hide = hider(ev)
    for msg in p.messages:
        tail.append(f"engine says: {one_line(hide(msg))}")
    findings = ev.config.findings + p.findings
    if findings:
        tail.append("")
        tail.append("findings:")
        for f in findings:
            loc = f"{one_line(f.span.file)}:{f.span.line}:{f.span.col}: " if f.span and f.span.line else ""
            tail.append(f"  {loc}{f.code} [{f.severity}] {one_line(hide(f.message))}")
    assumptions = list(m.assumptions) + list(ev.config.assumptions) + list(p.assumptions)
    if assumptions:
        tail.append("")
        tail.append("assumptions:")
        tail.extend(f"  - {one_line(hide(a))}" for a in assumptions)
    return "\n".join(head + body + tail) + "\n"
