"""What tune optimises: the user's needs (constraints), one candidate's scores from the engine's
own memory plan, the documented quality order, and the ranking that picks one answer.

Quality order (least loss first), as documented in `servefit tune --help`:

    no quantization  >  fp8 KV  >  fp8 weights  >  8-bit  >  4-bit

A candidate's quality is the pair (weight level, KV level) compared lexicographically, so an
8-bit KV cache on unquantized weights ranks before fp8 weights with an unquantized KV cache.

Objectives (`--objective`). Weight and KV quantization are permissions (`--allow`): without
them tune keeps the checkpoint's weights and an unquantized KV cache. Within what is allowed:

- ``balanced`` (default): the largest context x users (users = whole requests of that context
  the KV cache holds at once, at most max_num_seqs / the slot count), then the least quality
  loss, then more users, then the longer context.
- ``context``: the longest context, then the least quality loss, then more users.
- ``concurrency``: the most users at the context, then the least quality loss, then the longer
  context.
- ``memory``: the smallest planned GPU memory, then the least quality loss.

Without `--min-context`, every objective but ``context`` first keeps as much as it can of the
context the config already asks for (the model's own limit when it does not say), so tune does
not trade a long context for many short ones unless told to. Every objective then prefers fewer
throughput penalties (eager mode, layers left on the CPU), fewer changed settings, and more free
memory; the last tie-break is the order of the values in the search space, so the answer is
deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

OBJECTIVES = ("balanced", "context", "concurrency", "memory")

# weight levels (tune/space.py maps each checkpoint / quantization onto one)
W_NONE, W_FP8, W_INT8, W_MID, W_INT4, W_LOW = 0, 1, 2, 3, 4, 5
# KV levels
KV_NONE, KV_8BIT, KV_4BIT = 0, 1, 2
WEIGHT_LEVEL_NAMES = {W_NONE: "none", W_FP8: "fp8", W_INT8: "8-bit", W_MID: "5/6-bit", W_INT4: "4-bit",
                      W_LOW: "<4-bit"}


@dataclass
class Needs:
    """The constraints and permissions the user states on the command line."""

    min_context: int | None = None
    min_concurrency: int = 1
    headroom: float | None = None  # fraction of the GPU's memory left free, e.g. 0.10
    allow_kv: frozenset[str] = frozenset()  # quantized KV dtypes allowed ("any": all the engine has)
    allow_quant: frozenset[str] = frozenset()  # weight quantizations tune may switch to
    allow_eager: bool = False
    allow_offload: bool = False
    objective: tuple[str, ...] = ("balanced",)
    variants: tuple[str, ...] = ()  # extra checkpoint refs the user names (--variant)
    target_context: int = 0  # soft target without --min-context: the context the config asks for
    share: float | None = None  # the GPU's memory left to this server beside those that run with it at once

    @property
    def multi(self) -> bool:
        return len(self.objective) > 1 or self.objective == ("balanced",)


@dataclass
class Result:
    """One candidate, planned."""

    point: dict[str, Any]
    outcome: str
    context: int
    concurrency: float
    users: int
    quality: tuple[int, int]
    headroom: float  # fraction of the GPU's memory left free
    used: int  # bytes planned on the GPU that runs out first
    kv_tokens: int = 0
    penalty: int = 0
    changes: int = 0
    distance: int = 0  # steps away from the user's values along each dimension's ladder
    index: tuple[int, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)  # kv / weights as shown to users
    constraints: tuple[float, ...] = ()
    metric: float | None = None  # measured mode
    message: str = ""

    @property
    def feasible(self) -> bool:
        return self.outcome == "started" and all(c <= 0 for c in self.constraints)

    @property
    def quality_rank(self) -> int:
        return self.quality[0] * 10 + self.quality[1]

    @property
    def product(self) -> int:
        return self.context * self.users

    def attrs(self) -> list[Any]:
        """The JSON-safe, flat form kept on the optuna trial (user_attrs["r"]; flat because optuna
        deep-copies every trial it stores)."""
        return [self.outcome, self.context, self.concurrency, self.users, self.quality[0], self.quality[1],
                self.headroom, self.used, self.kv_tokens, self.penalty, self.changes, self.distance,
                list(self.index), self.labels.get("kv", ""), self.labels.get("weights", ""),
                list(self.constraints), self.metric, self.message]

    @classmethod
    def from_attrs(cls, point: dict[str, Any], a: list[Any]) -> Result:
        return cls(point=dict(point), outcome=a[0], context=int(a[1]), concurrency=float(a[2]), users=int(a[3]),
                   quality=(int(a[4]), int(a[5])), headroom=float(a[6]), used=int(a[7]), kv_tokens=int(a[8]),
                   penalty=int(a[9]), changes=int(a[10]), distance=int(a[11]), index=tuple(a[12]),
                   labels={"kv": a[13], "weights": a[14]}, constraints=tuple(a[15]), metric=a[16], message=a[17])


def constraint_values(needs: Needs, outcome: str, context: int, users: int, headroom: float) -> tuple[float, ...]:
    """optuna's convention: a value > 0 violates. (started, context, users, headroom)."""
    return (0.0 if outcome == "started" else 1.0,
            float((needs.min_context or 0) - context),
            float(max(needs.min_concurrency, 1) - users),
            float((needs.headroom or 0.0) - headroom) if needs.headroom is not None else 0.0)


def _tail(r: Result) -> tuple[Any, ...]:
    return (r.penalty, r.changes, r.distance, -r.headroom, r.index)


def rank_key(r: Result, objective: Sequence[str], target: int = 0) -> tuple[Any, ...]:
    """Smaller is better. Infeasible candidates sort after every feasible one. `target`: the
    context to keep when the user gave no --min-context (see the module docstring)."""
    head: tuple[Any, ...] = (0 if r.feasible else 1,)
    if not r.feasible:  # nearest miss first: the smallest total violation
        return head + (sum(max(0.0, c) for c in r.constraints[1:]), r.constraints[0]) + _tail(r)
    primary = objective[0] if objective else "balanced"
    keep = -min(r.context, target) if target else 0
    if primary == "measured":
        key: tuple[Any, ...] = (-(r.metric or 0.0), r.quality)
    elif primary == "context":
        key = (-r.context, r.quality, -r.users)
    elif primary == "concurrency":
        key = (keep, -r.users, r.quality, -r.context)
    elif primary == "memory":
        key = (keep, r.used, r.quality, -r.product)
    else:
        key = (keep, -r.product, r.quality, -r.users, -r.context)
    for extra in objective[1:]:  # multi-objective picks: the later objectives break ties in order
        if extra == "context":
            key += (-r.context,)
        elif extra == "concurrency":
            key += (-r.users,)
        elif extra == "memory":
            key += (r.used,)
    return head + key + _tail(r)


def best(results: Sequence[Result], objective: Sequence[str], target: int = 0) -> Result | None:
    if not results:
        return None
    return min(results, key=lambda r: rank_key(r, objective, target))


def objective_vector(r: Result, objective: Sequence[str]) -> tuple[float, ...]:
    """The objectives of a multi-objective run, each to maximise (quality loss negated)."""
    names = [o for o in objective if o != "balanced"] or ["context", "concurrency"]
    out: list[float] = []
    for o in names:
        if o == "context":
            out.append(float(r.context))
        elif o == "concurrency":
            out.append(float(r.users))
        elif o == "memory":
            out.append(-float(r.used))
    out.append(-float(r.quality_rank))
    return tuple(out)


def pareto(results: Sequence[Result], objective: Sequence[str], target: int = 0) -> list[Result]:
    """The feasible candidates no other feasible candidate beats on every objective (one per
    objective vector: the best-ranked), ordered by context then users."""
    feas = sorted((r for r in results if r.feasible), key=lambda r: rank_key(r, objective, target))
    reps: dict[tuple[float, ...], Result] = {}
    for r in feas:
        reps.setdefault(objective_vector(r, objective), r)
    vecs = list(reps)
    front = []
    for v in vecs:
        dominated = any(all(a >= b for a, b in zip(w, v, strict=True)) and w != v for w in vecs)
        if not dominated:
            front.append(reps[v])
    front.sort(key=lambda r: (-r.context, -r.users, r.quality))
    return front
