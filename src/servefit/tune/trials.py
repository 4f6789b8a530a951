"""How tune's planned results live in an optuna study: the objective directions and values, the
constraints optuna reads, a result as a finished trial and back (study.py runs the search)."""

from __future__ import annotations

from typing import Any

from servefit.tune.objective import Needs, Result
from servefit.tune.space import Space

CONSTRAINT_KEYS = ("started", "min_context", "min_concurrency", "headroom")


def directions(needs: Needs) -> list[Any]:
    if needs.objective and needs.objective[0] == "measured":
        return ["maximize"]
    if needs.multi:
        names = [o for o in needs.objective if o != "balanced"] or ["context", "concurrency"]
        return ["minimize" if o == "memory" else "maximize" for o in names] + ["minimize"]
    return ["minimize" if needs.objective[0] == "memory" else "maximize"]


def values(r: Result, needs: Needs) -> list[float]:
    if needs.objective and needs.objective[0] == "measured":
        return [float(r.metric) if r.metric is not None else float("-inf")]
    names = ([o for o in needs.objective if o != "balanced"] or ["context", "concurrency"]) if needs.multi \
        else list(needs.objective[:1])
    out: list[float] = []
    for o in names:
        out.append(float(r.context if o == "context" else r.users if o == "concurrency" else r.used))
    if needs.multi:
        out.append(float(r.quality_rank))
    return out


def choices(space: Space) -> dict[str, Any]:
    from optuna.distributions import CategoricalDistribution

    return {d.name: CategoricalDistribution(list(d.values)) for d in space.dims}


def native_constraints() -> bool:
    """optuna >= 5 records constraints on the trial (Trial.set_constraint) and deprecates
    constraints_func; older releases need the function."""
    import optuna

    return hasattr(optuna.trial.Trial, "set_constraint")


def completed(r: Result, dists: dict[str, Any], needs: Needs) -> Any:
    """A finished trial holding a planned result (added to the study in one write)."""
    from optuna.trial import create_trial

    extra: dict[str, Any] = {"constraints": dict(zip(CONSTRAINT_KEYS, r.constraints, strict=True))} \
        if native_constraints() else {"system_attrs": {"constraints": list(r.constraints)}}
    return create_trial(params=r.point, distributions=dists, values=values(r, needs),
                        user_attrs={"r": r.attrs(), "constraints": list(r.constraints)}, **extra)


def holds(study: Any, space: Space, point: dict[str, Any]) -> bool:
    """Whether the study already has this point (finished or being evaluated)."""
    from optuna.trial import TrialState

    want = tuple(point[n] for n in space.names)
    return any(set(t.params) == set(space.names) and tuple(t.params[n] for n in space.names) == want
               for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING)))


def record(trial: Any, r: Any, needs: Needs) -> Any:
    """Keep a result on its trial (attributes and constraints, natively where optuna has
    Trial.set_constraint) and return the objective value(s) optuna expects."""
    trial.set_user_attr("r", r.attrs())
    trial.set_user_attr("constraints", list(r.constraints))
    if hasattr(trial, "set_constraint"):
        for key, c in zip(CONSTRAINT_KEYS, r.constraints, strict=True):
            trial.set_constraint(key, c)
    vals = values(r, needs)
    return vals[0] if len(vals) == 1 else vals


def collect(study: Any, space: Space) -> list[Result]:
    """Every completed trial of the study, this worker's and the others'."""
    from optuna.trial import TrialState

    out: list[Result] = []
    names = set(space.names)
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        a = t.user_attrs.get("r")
        if a is None or set(t.params) != names:
            continue
        out.append(Result.from_attrs(t.params, a))
    return out
