"""Sweep tables as context x users tables, with the OOM boundary marked."""

from __future__ import annotations

from servefit.sweep import Row

GIB = 2**30  # GiB, as everywhere else servefit prints memory


def _gb(n: float) -> str:
    return f"{n / GIB:7.2f} GiB"


# plans that start, but short of the server tune counts as serving (the adapter's shortfall())
SHORT = {"offloaded": "CPU", "little_headroom": "TIGHT"}


def _verdict(r: Row) -> str:
    """OK, OOM, CPU: the engine starts only by leaving layers on the CPU (llama.cpp --fit,
    Ollama), which is not the server configured; or TIGHT: it starts with less free than
    llama.cpp's --fit margin, which lint reports (LCPP018)."""
    return "OK" if r.ok else SHORT.get(r.outcome, "OOM")


def table(rows: list[Row], vary: str) -> str:
    """`vary` is "context" or "batch": the first column."""
    head = f"{'Context' if vary == 'context' else 'Batch':>9} {'KV-Cache':>11} {'Total':>11} {'Util':>7}  {'Users':>7}  Feasible"
    lines = [head, "─" * len(head)]
    marked = False
    for r in rows:
        key = f"{r.context:,}" if vary == "context" else str(r.batch)
        verdict = _verdict(r)
        mark = ""
        if not r.ok and not marked:
            mark = "  ◀ OOM boundary"
            marked = True
        lines.append(f"{key:>9} {_gb(r.kv_bytes)} {_gb(r.total_bytes)} {r.util * 100:6.1f}%  {r.users:7.2f}  {verdict}{mark}")
    return "\n".join(lines)


def grid_table(grid: list[list[Row]]) -> str:
    if not grid:
        return ""
    batches = [r.batch for r in grid[0]]
    head = f"{'context':>9} | " + " ".join(f"{b:>4}" for b in batches)
    lines = ["users →", head, "─" * len(head)]
    for row in grid:
        lines.append(f"{row[0].context:>9,} | " + " ".join(f"{_verdict(r):>4}" for r in row))
    return "\n".join(lines)


def users_table(users: dict[str, list[tuple[int, int]]], none_served: str = "") -> str:
    """`none_served`: the outcome that leaves the config as written with no user at any context."""
    from servefit.report.plan import VERDICT

    names = list(users)
    contexts = [c for c, _ in users[names[0]]] if names else []
    width = max(12, *(len(n) for n in names)) if names else 12
    head = f"{'context':>9} | " + " ".join(f"{n:>{width}}" for n in names)
    lines = ["max users at each context", head, "─" * len(head)]
    for i, c in enumerate(contexts):
        lines.append(f"{c:>9,} | " + " ".join(f"{users[n][i][1]:>{width}}" for n in names))
    if none_served:
        lines.append(f"as configured, no context serves a user; the server {VERDICT.get(none_served, none_served)}")
    return "\n".join(lines)


def paging_table(rows: list, context: int, batch: int) -> str:
    head = f"{'block':>6} {'blocks/request':>15} {'users at ' + format(context, ','):>16} {'expected waste, ' + str(batch) + ' users':>24}"
    lines = [f"Paged KV blocks at {context:,} tokens, {batch} users", head, "─" * len(head)]
    for r in rows:
        lines.append(f"{r.block_size:>6} {r.blocks_per_request:>15,} {r.users:>16.2f} {r.waste_bytes / 2**20:>20.1f} MiB")
    return "\n".join(lines)
