"""`servefit tune` output: per server, where it stands now, the tuned answer, the search that found
it, the changes with their applicability, the Pareto front of a multi-objective run; then the
diff and what was written. JSON carries the same facts."""

from __future__ import annotations

from typing import Any

from servefit.redact import redact_text

TABLE_COLUMNS = ("context", "users", "KV dtype", "quantization", "headroom")


def _n(x: int) -> str:
    return f"{x:,}"


def _title(engine: str) -> str:
    from servefit.engines import get

    try:
        return get(engine).title or engine
    except Exception:
        return engine


def describe(r: Any) -> str:
    # a plan that does not count as serving counts no users (tune/space.py): its verdict says why
    users = f" x {r.users} user{'s' if r.users != 1 else ''}" if r.users or r.outcome == "started" else ""
    s = f"context {_n(r.context)}{users}, KV {r.labels.get('kv', '?')}, " \
        f"weights {r.labels.get('weights', '?')}, headroom {r.headroom * 100:.1f}%"
    if r.metric is not None and r.message:
        s += f", measured {r.message}"
    return s


def pareto_table(front: list[Any]) -> list[str]:
    rows = [(_n(r.context), str(r.users), r.labels.get("kv", ""), r.labels.get("weights", ""),
             f"{r.headroom * 100:.1f}%") for r in front]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(TABLE_COLUMNS)]
    right = (True, True, False, False, True)

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right, strict=True)).rstrip()

    return [line(TABLE_COLUMNS), line(tuple("-" * w for w in widths))] + [line(row) for row in rows]


def render_site(t: Any, unsafe: bool) -> list[str]:
    from servefit.report.plan import server_line

    out = [server_line(t.site)]
    if t.error:
        return out + [f"  error: {t.error}"]
    run = t.run
    ev = run.space.ev
    out[0] += f": {_title(ev.config.engine)} {ev.plan.engine_version} on {ev.count or 1} x {ev.gpu.name} " \
              f"({ev.gpu.memory_bytes / 2**30:.2f} GiB)"
    cur = run.current
    from servefit.report.plan import VERDICT

    state = VERDICT.get(cur.outcome, cur.outcome) if cur.outcome != "started" else \
        ("meets the needs" if cur.feasible else "misses the needs")
    if cur.outcome == "offloaded":
        state += "; --allow offload counts it"
    out.append(f"  now     {describe(cur)}: {state}")
    if t.beside:
        out.append(f"  beside  {t.beside}")
    b = t.chosen if t.chosen is not None or t.beside else run.best  # beside others: the best that fits there
    proven = ", the proven optimum" if run.proven else ""
    if run.strategy == "measured":
        out.append(f"  search  measured, {run.bench_runs:,} benchmark run{'s' if run.bench_runs != 1 else ''}"
                   + (f" (+{run.resumed:,} found in the study)" if run.resumed else "")
                   + f", {run.rejected:,} of {run.space.size():,} candidates rejected by the memory model "
                     f"(not run), {run.elapsed:.2f} s" + (f", study {run.study_name}" if run.study_name else ""))
    else:
        out.append(f"  search  {run.strategy}, {run.trials:,} candidates of {run.space.size():,}{proven}, "
                   f"{run.elapsed:.2f} s" + (f", study {run.study_name}" if run.study_name else ""))
    if b is None or not b.feasible:
        miss = "no candidate"
        if b is not None:
            miss = f"the nearest: {describe(b)}: {VERDICT.get(b.outcome, b.outcome)}" + (f" ({b.message})" if b.message else "")
        out.append(f"  tuned   nothing meets the needs ({miss}); relax --min-context / --min-concurrency or "
                   "--allow more (quant=..., kv=...)")
        return out
    out.append(f"  tuned   {describe(b)}")
    if t.unsafe_best is not None and t.unsafe_best is not b:
        out.append(f"  unsafe  better, but it changes the checkpoint or its quantization: {describe(t.unsafe_best)}; "
                   f"apply it with: {t.unsafe_command}")
    if t.patch is None:
        out.append("  change  none: the config is already the best one")
    else:
        shown = ", ".join(p.shown for p in t.patch.placed)
        out.append(f"  change  {redact_text(shown)} [{t.patch.applicability}]")
        if t.held_back:
            out.append(f"          not applied: {t.held_back}")
        for m in t.patch.manual():
            out.append(f"          by hand: {redact_text(m)}")
    for step in run.space.by_hand:
        out.append(f"  by hand {redact_text(step)}")
    for note in run.space.notes:
        if note.split(":")[0] == b.labels.get("weights"):
            out.append(f"  note    {note}")
    if run.front and len(run.front) > 1:
        out.append("")
        out.append("  Pareto front (feasible, no candidate better on every objective):")
        out += ["    " + ln for ln in pareto_table(run.front)]
    elif len(run.by_quality) > 1:
        out.append("")
        out.append("  Best at each quality level (least loss first):")
        out += ["    " + ln for ln in pareto_table(run.by_quality)]
    return out


def render_session(s: Any) -> str:
    from servefit.termsafe import one_line

    blocks = ["\n".join(one_line(ln) for ln in render_site(t, bool(s.args.unsafe))) for t in s.tunes]
    text = "\n\n".join(blocks) + "\n"
    if s.command is not None:
        from servefit.redact import mask_values, site_secret_values

        shown = mask_values(redact_text(s.command), site_secret_values([t.site for t in s.tunes]))
        text += f"\ntuned command:\n  {one_line(shown)}\n"
    if s.args.diff:
        d = s.diffs()
        text += ("\n" + d) if d else "\nno changes to write\n"
    for fc in s.files:
        if fc.refused:
            text += f"not written: {one_line(fc.refused)}\n"
        elif fc.written:
            text += f"wrote {one_line(fc.path)}\n"
    if any(f.written for f in s.files) and any(f.refused for f in s.files):
        done = ", ".join(f.path for f in s.files if f.written)
        text += f"only part of the change was written ({done}); the files above marked 'not written' were not\n"
    if not s.args.diff and not s.args.write and s.files and any(f.new != f.old for f in s.files):
        text += "\n(--diff shows the patch, --write applies it)\n"
    return text


def result_dict(r: Any) -> dict[str, Any] | None:
    if r is None:
        return None
    return {"context": r.context, "users": r.users, "concurrency": round(r.concurrency, 4),
            "kv_cache_dtype": r.labels.get("kv"), "quantization": r.labels.get("weights"),
            "headroom": r.headroom, "memory_bytes": r.used, "kv_cache_tokens": r.kv_tokens,
            "outcome": r.outcome, "feasible": r.feasible, "settings": r.point,
            "quality": list(r.quality), **({"metric": r.metric} if r.metric is not None else {})}


def site_dict(t: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"site": t.site.name, "file": t.site.file, "line": t.site.line}
    if t.error:
        out["error"] = t.error
        return out
    run = t.run
    ev = run.space.ev
    out.update({
        "engine": ev.config.engine, "engine_version": ev.plan.engine_version,
        "gpu": {"name": ev.gpu.name, "count": ev.count, "memory_bytes": ev.gpu.memory_bytes},
        "search": {"strategy": run.strategy, "trials": run.trials, "space_size": run.space.size(),
                   "benchmark_runs": run.bench_runs, "rejected_by_memory_model": run.rejected,
                   "resumed_from_storage": run.resumed,
                   "proven_optimum": run.proven, "elapsed_s": round(run.elapsed, 3), "study": run.study_name,
                   "dimensions": {d.name: list(d.values) for d in run.space.dims}},
        "current": result_dict(run.current),
        "best": result_dict(t.chosen if t.chosen is not None or t.beside else run.best),
        "beside": t.beside or None,
        "changes": run.space.changed(t.chosen.point) if t.chosen is not None and t.chosen.feasible else {},
        "unsafe_better": ({**(result_dict(t.unsafe_best) or {}), "command": t.unsafe_command}
                          if t.unsafe_best is not None else None),
        "pareto": [result_dict(r) for r in run.front],
        "by_quality": [result_dict(r) for r in run.by_quality],
        "by_hand": [redact_text(s) for s in run.space.by_hand],
    })
    if t.patch is not None:
        out["fix"] = {"message": redact_text(t.patch.fix().message), "applicability": t.patch.applicability,
                      "applied": t.applied, "held_back": t.held_back or None, "by_hand": t.patch.manual(),
                      "edits": [{"location": e.span.as_dict(), "text": redact_text(e.text)} for e in t.patch.edits]}
    return out


def session_dict(s: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"sites": [site_dict(t) for t in s.tunes]}
    if s.command is not None:
        from servefit.redact import mask_values, site_secret_values

        out["command"] = mask_values(redact_text(s.command), site_secret_values([t.site for t in s.tunes]))
    if s.args.diff:
        out["diff"] = s.diffs()
    out["files"] = [{"path": f.path, "changed": f.new != f.old, "written": f.written,
                     "refused": f.refused or None} for f in s.files]
    return out
