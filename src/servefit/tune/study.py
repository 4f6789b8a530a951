"""The optuna study over an engine's memory model (optuna is imported here and in trials.py only, and only when
tune runs: lint and estimate never load it).

Strategies:

- ``exhaustive`` (analytic runs whose space has at most EXHAUSTIVE_LIMIT points, the usual
  case): every point is planned, in the order of the space with the user's config first, and
  recorded in the study as completed trials (`study.add_trials`), so the answer is the proven
  optimum of the space and `--storage` keeps every trial. optuna's own GridSampler costs about
  25 ms and BruteForceSampler about 3 ms per trial in optuna 5 against 0.1 ms for the memory
  model, which would break the 3 s budget of an analytic tune; both end with the same trials.
- ``bruteforce``: optuna's BruteForceSampler through `study.optimize` (used with `--trials`,
  `--storage` shared by several workers, or `--bench-cmd`, when the space is small enough).
- ``tpe`` / ``nsga2``: TPESampler (one objective) or NSGAIISampler (several) with
  `constraints_func`, where the space is too large to enumerate.

The user's current config is the first trial. No strategy leaves a trial waiting in the study's
queue (`study.enqueue_trial`): on SQLite two workers could both pop the same waiting trial (the
storage reads its state before either writes it) and the second one's `tell` then fails on a
finished trial. The sampled strategies record the current config as a completed trial instead,
and measured mode asks for each candidate through a sampler that returns exactly that point.
"""

from __future__ import annotations

import random
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from servefit.tune.objective import Needs, Result, best, pareto
from servefit.tune.space import Space
from servefit.tune.trials import (
    choices,
    collect,
    completed,
    directions,
    holds,
    native_constraints,
    record,
)

EXHAUSTIVE_LIMIT = 20000
DEFAULT_TRIALS = 300
DEFAULT_BENCH_TRIALS = 20  # measured mode: benchmark runs when --trials is not given


@dataclass
class TuneRun:
    """A finished search over one server's space: every result, the current config's, the best and the trade-
    off front, and how the search ran (strategy, trials, whether the best is proven)."""

    space: Space
    needs: Needs
    results: list[Result]
    current: Result
    best: Result | None
    front: list[Result] = field(default_factory=list)
    strategy: str = "exhaustive"
    trials: int = 0
    proven: bool = False
    elapsed: float = 0.0
    study_name: str | None = None
    by_quality: list[Result] = field(default_factory=list)  # the best answer at each quality level
    study: Any = None  # the optuna study (in memory, or in --storage)
    bench_runs: int = 0  # measured mode: benchmarks run by this worker
    rejected: int = 0  # measured mode: candidates the memory model rejected (never run, no GPU time)
    resumed: int = 0  # measured mode: benchmarks found in --storage from an earlier run or another worker


class Evaluator:
    """Plans each point once (workers of one process share the cache)."""

    def __init__(self, space: Space, needs: Needs, bench: Callable[[Result], Result] | None = None) -> None:
        self.space, self.needs, self.bench = space, needs, bench
        self.cache: dict[tuple[Any, ...], Result] = {}

    def __call__(self, point: dict[str, Any]) -> Result:
        key = tuple(point[n] for n in self.space.names)
        r = self.cache.get(key)
        if r is None:
            r = self.space.evaluate(point, self.needs)
            if self.bench is not None:
                r = self.bench(r)
            self.cache[key] = r
        return r


def storage_for(url: str | None) -> Any:
    """None: in memory. `sqlite:///x.db`, `postgresql://...` and other RDB URLs; a path ending in
    .log / .journal / .jsonl: an optuna journal file (works over NFS); any other path: SQLite."""
    if not url:
        return None
    import optuna

    if "://" not in url:
        if url.endswith((".log", ".journal", ".jsonl")):
            from optuna.storages.journal import JournalFileBackend, JournalStorage

            return JournalStorage(JournalFileBackend(url))
        import os

        url = "sqlite:///" + os.path.abspath(url)
    kwargs: dict[str, Any] = {}
    if url.startswith("sqlite"):
        kwargs["engine_kwargs"] = {"connect_args": {"timeout": 120}}
    last: Exception | None = None
    for attempt in range(20):  # workers starting together race to create the schema: retry
        try:
            return optuna.storages.RDBStorage(url, **kwargs)
        except Exception as exc:  # sqlalchemy IntegrityError / OperationalError
            last = exc
            time.sleep(0.05 * (attempt + 1) + random.random() * 0.1)
    raise RuntimeError(f"cannot open storage {url}: {last}")


def default_study_name(space: Space) -> str:
    ev = space.ev
    raw = f"servefit-{ev.site.name or ev.site.file}-{ev.gpu.key}x{ev.count}"
    return re.sub(r"[^A-Za-z0-9_.#/-]+", "_", raw)


def _open_study(storage: Any, name: str | None, dirs: list[Any], sampler: Any) -> Any:
    import optuna

    last: Exception | None = None
    for attempt in range(20):  # two workers creating one study at once: one of them retries
        try:
            return optuna.create_study(storage=storage, study_name=name, directions=dirs, sampler=sampler,
                                       load_if_exists=True)
        except Exception as exc:  # DuplicatedStudyError / IntegrityError during the race
            last = exc
            time.sleep(0.1 * (attempt + 1) + random.random() * 0.1)
    raise RuntimeError(f"cannot open study {name!r}: {last}")


def run(space: Space, needs: Needs, *, strategy: str = "auto", trials: int | None = None,
        storage: str | None = None, study_name: str | None = None, seed: int = 0,
        bench: Callable[[Result], Result] | None = None, progress: bool | None = None) -> TuneRun:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    t0 = time.perf_counter()
    ev = Evaluator(space, needs, bench)
    size = space.size()
    if strategy == "auto":
        if bench is None and trials is None and size <= EXHAUSTIVE_LIMIT:
            strategy = "exhaustive"
        elif size <= EXHAUSTIVE_LIMIT:
            strategy = "bruteforce"
        else:
            strategy = "nsga2" if needs.multi else "tpe"
    if storage and not study_name:
        study_name = default_study_name(space)
    store = storage_for(storage)
    dirs = directions(needs)
    if progress is None:
        progress = sys.stderr.isatty()
    current = space.evaluate(space.current(), needs)
    measured: dict[str, int] = {}
    if bench is not None and size <= EXHAUSTIVE_LIMIT and strategy in ("auto", "bruteforce", "exhaustive"):
        strategy = "measured"
        study = _open_study(store, study_name, dirs, None)
        results, measured = _measured(space, needs, ev, study, trials or DEFAULT_BENCH_TRIALS,
                                      progress if progress is not None else sys.stderr.isatty())
        n = measured["runs"]
    elif strategy == "exhaustive":
        study = _open_study(store, study_name, dirs, None)
        results = _exhaustive(space, needs, ev, study, progress)
        n = len(results)
    else:
        sampler = _sampler(strategy, needs, seed, trials)
        study = _open_study(store, study_name, dirs, sampler)
        budget = trials or DEFAULT_TRIALS
        if not holds(study, space, space.start()):  # the current config first, as a finished trial
            study.add_trial(completed(ev(space.start()), choices(space), needs))
            budget -= 1
        _optimize(space, needs, ev, study, budget, progress)
        results = collect(study, space)
        n = len(results)
    objective = needs.objective if bench is None else ("measured",) + tuple(needs.objective)
    target = needs.min_context or needs.target_context
    levels: dict[tuple[int, int], list[Result]] = {}
    for r in results:
        if r.feasible:
            levels.setdefault(r.quality, []).append(r)
    by_quality = [b for q in sorted(levels) if (b := best(levels[q], objective, target)) is not None]
    return TuneRun(space=space, needs=needs, results=results, current=current,
                   best=best(results, objective, target), front=pareto(results, needs.objective, target)
                   if needs.multi else [], strategy=strategy, trials=n,
                   proven=strategy == "exhaustive" or (strategy == "bruteforce" and n >= size),
                   elapsed=time.perf_counter() - t0, study_name=study_name, by_quality=by_quality, study=study,
                   bench_runs=measured.get("runs", 0), rejected=measured.get("rejected", 0),
                   resumed=measured.get("resumed", 0))


def _sampler(strategy: str, needs: Needs, seed: int, trials: int | None) -> Any:
    import optuna

    def constraints(ft: Any) -> list[float]:
        return list(ft.user_attrs.get("constraints") or [1.0])

    kw: dict[str, Any] = {} if native_constraints() else {"constraints_func": constraints}
    if strategy == "bruteforce":
        import warnings

        with warnings.catch_warnings():  # experimental since optuna 3.1, stable enough for a finite space
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.BruteForceSampler(seed=seed)
    if strategy == "nsga2":
        pop = max(8, min(50, (trials or DEFAULT_TRIALS) // 6))
        return optuna.samplers.NSGAIISampler(population_size=pop, seed=seed, **kw)
    if strategy == "tpe":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=10, **kw)
    raise ValueError(f"unknown strategy {strategy!r} (auto, exhaustive, bruteforce, tpe, nsga2)")


def _exhaustive(space: Space, needs: Needs, ev: Evaluator, study: Any, progress: bool) -> list[Result]:
    dists = choices(space)
    start = space.start()
    results = [ev(start)]
    size = space.size()
    shown = progress and size > 5000
    for k, point in enumerate(space.points()):
        if point != start:
            results.append(ev(point))
        if shown and k % 2000 == 0:
            sys.stderr.write(f"\rtune: {k:,}/{size:,} candidates planned")
    if shown:
        sys.stderr.write("\n")
    study.add_trials([completed(r, dists, needs) for r in results])
    return results


def _chosen_sampler() -> Any:
    """A sampler that returns the point it was given: measured mode asks for exactly the
    candidate it picked, without putting a trial in the queue for any worker to take."""
    from optuna.samplers import BaseSampler

    class Chosen(BaseSampler):
        def __init__(self) -> None:
            self.point: dict[str, Any] = {}

        def infer_relative_search_space(self, study: Any, trial: Any) -> dict[str, Any]:
            return {}

        def sample_relative(self, study: Any, trial: Any, search_space: dict[str, Any]) -> dict[str, Any]:
            return {}

        def sample_independent(self, study: Any, trial: Any, name: str, dist: Any) -> Any:
            return self.point[name]

    return Chosen()


def _optimize(space: Space, needs: Needs, ev: Evaluator, study: Any, n_trials: int, progress: bool) -> None:
    def objective(trial: Any) -> Any:
        point = {d.name: trial.suggest_categorical(d.name, list(d.values)) for d in space.dims}
        return record(trial, ev(point), needs)

    study.optimize(objective, n_trials=n_trials, show_progress_bar=progress and n_trials >= 20)


def _measured(space: Space, needs: Needs, ev: Evaluator, study: Any, budget: int,
              progress: bool) -> tuple[list[Result], dict[str, int]]:
    """Measured mode: `budget` counts benchmark runs. Every candidate is planned first (free);
    those the memory model rejects are recorded as infeasible trials and never run. The rest are
    benchmarked best-first by the memory model's own ranking, the user's config first, skipping
    any candidate the study already holds (an earlier run resumed from --storage, or another
    worker on the same study, which marks its candidate as running before benchmarking it)."""
    from optuna.trial import TrialState

    from servefit.tune.objective import rank_key

    dists = choices(space)
    names = space.names
    planned = [space.evaluate(p, needs) for p in space.points()]
    key = lambda point: tuple(point[n] for n in names)  # noqa: E731
    start = key(space.start())

    def held() -> dict[tuple[Any, ...], Any]:
        out: dict[tuple[Any, ...], Any] = {}
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING)):
            if set(t.params) == set(names):
                out.setdefault(key(t.params), t)  # trials come in number order: the first one holds it
        return out

    seen = held()
    rejected = [r for r in planned if not r.feasible]
    fresh = [completed(replace(r, message=r.message or "rejected by the memory model; not benchmarked"), dists, needs)
             for r in rejected if key(r.point) not in seen]
    if fresh:
        study.add_trials(fresh)
    target = needs.min_context or needs.target_context
    order = sorted((r for r in planned if r.feasible),
                   key=lambda r: (key(r.point) != start, rank_key(r, needs.objective, target)))
    resumed = sum(1 for r in order if key(r.point) in seen)
    chosen = _chosen_sampler()
    study.sampler = chosen
    runs, t_run, best_metric = 0, 0.0, None
    for r in order:
        if runs >= budget:
            break
        if key(r.point) in held():  # benchmarked before, or being benchmarked by another worker
            continue
        chosen.point = dict(r.point)
        trial = study.ask()  # RUNNING from here: other workers skip this candidate
        point = {n: trial.suggest_categorical(n, list(dists[n].choices)) for n in names}
        first = held().get(key(point))
        if key(point) != key(r.point) or (first is not None and first.number < trial.number):
            study.tell(trial, state=TrialState.FAIL)  # a queued trial of another worker, or one started first
            continue
        t1 = time.perf_counter()
        res = ev(point)
        t_run += time.perf_counter() - t1
        runs += 1
        study.tell(trial, record(trial, res, needs))
        if res.metric is not None and (best_metric is None or res.metric > best_metric):
            best_metric = res.metric
        if progress:
            shown = "-" if best_metric is None else f"{abs(best_metric):g}"
            sys.stderr.write(f"\rtune: benchmark {runs}/{min(budget, len(order) - resumed)}  best {shown}  "
                             f"{t_run / runs:.1f} s/run ")
            sys.stderr.flush()
    if progress and runs:
        sys.stderr.write("\n")
    return collect(study, space), {"runs": runs, "rejected": len(rejected), "resumed": resumed}


