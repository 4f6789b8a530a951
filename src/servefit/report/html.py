"""One self-contained HTML page: inline SVG, inline CSS, no script, no external URL.

For every server: the stacked memory bar per GPU (the stack: weights, activations,
other, CUDA graphs, KV cache, free headroom), the context x concurrency feasibility heat map
(the OOM wall), the findings with file:line, and what `servefit tune` would change."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape
from typing import Any

from servefit.core import Finding
from servefit.pipeline import Evaluation
from servefit.redact import redact_text
from servefit.report.plan import VERDICT

COLORS = {"weights": "#4e79a7", "activation_peak": "#b07aa1", "non_torch": "#edc948", "cuda_graphs": "#76b7b2",
          "kv_cache": "#59a14f", "free_headroom": "#d9d9d9"}
LABELS = {"weights": "weights", "activation_peak": "activation peak", "non_torch": "non-torch",
          "cuda_graphs": "CUDA graphs", "kv_cache": "KV cache", "free_headroom": "free headroom"}
CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 6px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#555}.ok{color:#2e7d32;font-weight:600}.bad{color:#c62828;font-weight:600}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f5f5f5}td.l,th.l{text-align:left}.sev-error{color:#c62828}.sev-warning{color:#ef6c00}.sev-info{color:#1565c0}
.legend span{display:inline-block;margin-right:12px}.sw{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}
code{background:#f3f3f3;padding:1px 4px;border-radius:3px}
"""


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def stack_svg(ev: Evaluation, width: int = 760) -> str:
    """A horizontal stacked bar per GPU, scaled to the GPU's total memory."""
    devices = ev.plan.devices or [ev.plan.memory]
    total = ev.gpu.memory_bytes
    h, gap = 30, 12
    height = len(devices) * (h + gap) + 24
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="GPU memory stack">']
    for i, d in enumerate(devices):
        y = i * (h + gap)
        x = 0.0
        for key in COLORS:
            val = max(0, getattr(d, key))
            w = width * val / total if total else 0
            if w <= 0:
                continue
            title = f"{LABELS[key]}: {_gib(val)} ({val / total * 100:.1f}%)"
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{h}" fill="{COLORS[key]}">'
                         f'<title>{escape(title)}</title></rect>')
            if w > 70:
                parts.append(f'<text x="{x + 4:.1f}" y="{y + 19}" font-size="11" fill="#fff">{escape(LABELS[key])}</text>')
            x += w
        bx = width * d.budget / total if total else 0
        parts.append(f'<line x1="{bx:.1f}" x2="{bx:.1f}" y1="{y - 3}" y2="{y + h + 3}" stroke="#000" stroke-dasharray="3,2">'
                     f'<title>engine budget {_gib(d.budget)}</title></line>')
    parts.append(f'<text x="0" y="{height - 6}" font-size="11" fill="#555">0</text>'
                 f'<text x="{width - 70}" y="{height - 6}" font-size="11" fill="#555">{_gib(total)}</text></svg>')
    return "".join(parts)


def heatmap_svg(grid: list[list[Any]]) -> str:
    """Rows: context; columns: concurrent users; green fits, red does not."""
    if not grid:
        return ""
    cw, ch, left, top = 46, 22, 80, 22
    cols = [r.batch for r in grid[0]]
    width = left + cw * len(cols) + 4
    height = top + ch * len(grid) + 20
    p = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
         f'aria-label="context by concurrency feasibility">']
    for j, b in enumerate(cols):
        p.append(f'<text x="{left + j * cw + cw / 2:.0f}" y="15" font-size="11" text-anchor="middle">{b}</text>')
    for i, row in enumerate(grid):
        y = top + i * ch
        p.append(f'<text x="{left - 6}" y="{y + 15}" font-size="11" text-anchor="end">{row[0].context:,}</text>')
        for j, cell in enumerate(row):
            fill = "#66bb6a" if cell.ok else "#ef5350"
            tip = f"{cell.context:,} tokens x {cell.batch} users: {'fits' if cell.ok else 'does not fit'} " \
                  f"({cell.users:.1f} fit)"
            p.append(f'<rect x="{left + j * cw}" y="{y}" width="{cw - 2}" height="{ch - 2}" fill="{fill}">'
                     f'<title>{escape(tip)}</title></rect>')
    p.append(f'<text x="{left}" y="{height - 4}" font-size="11" fill="#555">concurrent users at each context →</text></svg>')
    return "".join(p)


def _legend() -> str:
    return '<p class="legend">' + "".join(
        f'<span><i class="sw" style="background:{c}"></i>{escape(LABELS[k])}</span>' for k, c in COLORS.items()) + "</p>"


def _findings_table(findings: list[Finding], hide: Callable[[str], str] = redact_text) -> str:
    if not findings:
        return "<p class=\"ok\">No findings.</p>"
    rows = []
    for f in findings:
        loc = f"{f.span.file}:{f.span.line}:{f.span.col}" if f.span is not None and f.span.line else ""
        rows.append(f'<tr><td class="l"><code>{escape(loc)}</code></td><td class="l">{escape(f.code)}</td>'
                    f'<td class="l sev-{f.severity}">{f.severity}</td><td class="l">{escape(hide(f.message))}</td></tr>')
    return ('<table><tr><th class="l">where</th><th class="l">rule</th><th class="l">severity</th>'
            '<th class="l">message</th></tr>' + "".join(rows) + "</table>")


def server_section(ev: Evaluation, findings: list[Finding] | None = None, tune_note: str | None = None,
                   with_grid: bool = True) -> str:
    from servefit import sweep

    p = ev.plan
    where = f"{ev.site.file}:{ev.site.line}" if ev.site.line else ev.site.file
    ok = p.outcome == "started"
    out = [f"<h2>{escape(ev.config.model_ref or ev.model.name)} <small class=\"meta\">{escape(p.engine)} "
           f"{escape(p.engine_version)} · {escape(where)}</small></h2>",
           f'<p>{ev.count} × {escape(ev.gpu.name)} ({_gib(ev.gpu.memory_bytes)}; {escape(ev.gpu_source)}) · '
           f'<span class="{"ok" if ok else "bad"}">{escape(VERDICT.get(p.outcome, p.outcome))}</span></p>',
           stack_svg(ev), _legend()]
    m = p.memory
    out.append("<table><tr>" + "".join(f"<th>{escape(LABELS[k])}</th>" for k in COLORS) + "<th>budget</th></tr><tr>"
               + "".join(f"<td>{_gib(getattr(m, k))}</td>" for k in COLORS) + f"<td>{_gib(m.budget)}</td></tr></table>")
    if p.max_model_len:
        out.append(f"<p>KV cache {p.kv_bytes_per_token:,} bytes per token · {p.kv_cache_tokens:,} tokens · "
                   f"max concurrency at {p.max_model_len:,} tokens: <b>{p.max_concurrency:.2f}x</b>"
                   + (f" · largest max-model-len that fits: <b>{p.fitting_max_model_len:,}</b>"
                      if p.fitting_max_model_len else "") + "</p>")
    if with_grid and sweep.context_setting(p.engine):
        try:
            grid = sweep.grid(ev)
        except Exception:  # noqa: BLE001 - a sweep that cannot be planned leaves the map out, not the page
            grid = []
        if grid:
            out += ["<h3>Context × concurrency</h3>", heatmap_svg(grid)]
    from servefit.report.plan import hider

    hide = hider(ev)
    out += ["<h3>Findings</h3>", _findings_table(findings if findings is not None else ev.config.findings + p.findings,
                                                  hide)]
    if tune_note:
        out += ["<h3>What tune would change</h3>", f"<pre>{escape(hide(tune_note))}</pre>"]
    return "\n".join(out)


def page(title: str, sections: list[str], summary: str = "") -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/><title>" + escape(title) + "</title>"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/><style>" + CSS + "</style></head>"
            "<body><h1>" + escape(title) + "</h1>" + (f"<p class=\"meta\">{escape(summary)}</p>" if summary else "")
            + "\n".join(sections) + "</body></html>\n")


def _rows_table(rows: list[Any], vary: str) -> str:
    """A context or batch sweep as the text view prints it (report/sweep.py), in GiB."""
    from servefit.report.sweep import _verdict

    head = "<tr><th>" + ("context" if vary == "context" else "users") + "</th><th>KV cache</th><th>total</th>" \
           "<th>of the GPU</th><th>users served</th><th>verdict</th></tr>"
    body = []
    for r in rows:
        key = f"{r.context:,}" if vary == "context" else str(r.batch)
        v = _verdict(r)
        body.append(f"<tr><td>{key}</td><td>{_gib(r.kv_bytes)}</td><td>{_gib(r.total_bytes)}</td>"
                    f"<td>{r.util * 100:.1f}%</td><td>{r.users:.2f}</td>"
                    f'<td class="{"ok" if r.ok else "bad"}">{v}</td></tr>')
    return "<table>" + head + "".join(body) + "</table>"


def _users_table(users: dict[str, list[tuple[int, int]]]) -> str:
    names = list(users)
    if not names:
        return ""
    head = "<tr><th>context</th>" + "".join(f"<th>{escape(n)}</th>" for n in names) + "</tr>"
    body = []
    for i, (c, _) in enumerate(users[names[0]]):
        body.append(f"<tr><td>{c:,}</td>" + "".join(f"<td>{users[n][i][1]}</td>" for n in names) + "</tr>")
    return "<table>" + head + "".join(body) + "</table>"


def sweep_sections(ev: Evaluation, kinds: Sequence[str] = (), batch: int = 8, context: int = 2048) -> str:
    """The tables explain's text view prints: the sweeps asked for and the max users per KV
    dtype and quantization."""
    from servefit import sweep

    out = []
    if "context" in kinds:
        out += [f"<h3>Context sweep at {batch} users</h3>", _rows_table(sweep.context_sweep(ev, batch), "context")]
    if "batch" in kinds:
        out += [f"<h3>Batch sweep at {context:,} tokens per user</h3>", _rows_table(sweep.batch_sweep(ev, context), "batch")]
    out += ["<h3>Max users at each context</h3>", _users_table(sweep.max_users(ev, sweep.variants(ev)))]
    return "\n".join(out)


def explain_page(evs: list[Evaluation], kinds: Sequence[str] = (), batch: int = 8, context: int = 2048) -> str:
    return page("servefit explain", [server_section(ev) + "\n" + sweep_sections(ev, kinds, batch, context)
                                     for ev in evs])


def lint_page(evs: Sequence[tuple[Evaluation | None, list[Finding], str | None, str]], other: list[Finding]) -> str:
    """evs: (evaluation or None when it could not be planned, its findings, tune note, label)."""
    sections = []
    for ev, findings, note, label in evs:
        if ev is None:
            sections.append(f"<h2>{escape(label)}</h2>" + _findings_table(findings))
        else:
            sections.append(server_section(ev, findings, note))
    if other:
        sections.append("<h2>Other findings</h2>" + _findings_table(other))
    n = sum(len(f) for _, f, _, _ in evs) + len(other)
    return page("servefit lint", sections, summary=f"{len(evs)} server(s), {n} finding(s)")
