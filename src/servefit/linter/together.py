"""SF117: servers a proxy keeps running at the same time (a llama-swap group with `swap: false`), or compose
services that reserve the same GPU by id, share their GPUs, so the memory each plans on its own adds up. Each server's plan is the one it
makes on an idle GPU; the one that starts last finds only what the others left free (engines
read the free memory at start: llama.cpp ggml_backend_dev_memory, vLLM init_device)."""

from __future__ import annotations

from servefit.core import Finding, Together
from servefit.rules.catalog import finding
from servefit.rules.registry import rule
from servefit.sources.server_build import Server

GIB = 2**30


def _label(srv: Server) -> str:
    """The name the file gives the server (its llama-swap `models:` key)."""
    names = srv.site.workload.names
    return names[0][0] if names else srv.site.name


def _used(srv: Server) -> list[int]:
    """Bytes the server holds on each of its GPUs once started: all but the free headroom."""
    assert srv.plan is not None
    return [d.total - d.free_headroom for d in (srv.plan.devices or [srv.plan.memory])]


def _fits_itself(srv: Server) -> bool:
    """llama.cpp's --fit is on and has a value left to lower (common/fit.cpp changes only the context
    and layer count the command does not set): it sizes the server to the memory free at start."""
    cfg = srv.config
    return (cfg is not None and cfg.settings.get("fit") is True  # only llama.cpp's parse sets `fit`
            and not {"ctx_size", "n_gpu_layers"} <= cfg.explicit)


@rule("SF117")
def check(servers: list[Server]) -> list[Finding]:
    groups: dict[tuple[str, str], tuple[Together, list[Server]]] = {}
    for srv in servers:
        t = srv.site.workload.together
        if t is not None:
            groups.setdefault((srv.site.file, t.name), (t, []))[1].append(srv)
    out = []
    for t, members in groups.values():
        sized = [s for s in members if s.plan is not None and s.plan.outcome == "started"
                 and s.evaluation is not None]
        by_name = {s.site.name for s in sized}
        unsized = [m.split("/", 1)[-1] for m in t.members if m not in by_name]
        if len(sized) < 2:
            continue
        gpu = sized[0].evaluation.gpu  # type: ignore[union-attr]
        used = [_used(s) for s in sized]
        n = max(len(u) for u in used)
        sums = [sum(u[d] for u in used if d < len(u)) for d in range(n)]
        total = gpu.memory_bytes
        worst = max(range(n), key=lambda d: sums[d])
        parts = ", ".join(f"'{_label(s)}' {u[worst] / GIB:.2f} GiB" for s, u in zip(sized, used, strict=True) if worst < len(u))
        where = f"GPU {worst} ({gpu.name})" if n > 1 else f"the {gpu.name}"
        rest = (f"; {', '.join(repr(m) for m in unsized)} not counted (servefit does not size "
                f"{'it' if len(unsized) == 1 else 'them'})" if unsized else "")
        head = f"{t.name} {t.how} on {where}: {parts}"
        if sums[worst] > total:
            fit = any(_fits_itself(s) for s in sized)
            from servefit.engines import section

            beside = dict.fromkeys(b for s in sized if s.site.engine and (b := section(s.site.engine, "parallel")
                                                                          .get("beside")))
            tail = (": the member that starts last finds too little free memory and fails to load"
                    + (" (a llama.cpp member with --fit shrinks its context or puts layers on the CPU "
                       "instead)" if fit else "")
                    + "".join(f" ({b})" for b in beside))
            out.append(finding("SF117", f"{head}; {sums[worst] / GIB:.2f} GiB together, more than its "
                                        f"{total / GIB:.2f} GiB{rest}{tail}", span=t.span))
        elif unsized:
            out.append(finding("SF117", f"{head}; {sums[worst] / GIB:.2f} GiB together of its {total / GIB:.2f} "
                                        f"GiB{rest}, so the sum is not complete", span=t.span, severity="info"))
    return out
