"""The search space: the engine's knobs (valid values only, from its plugin), the weight
choices, and how one point becomes an EngineConfig the engine's own `plan` can judge.

A point maps each dimension name to one of its values. Dimensions whose value equals what the
user's config already resolves to, and which the user did not write, stay unset when a point
is applied, so the engine defaults them exactly as it will after the patch.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from servefit.core import EngineConfig, MemoryPlan, UsageError
from servefit.tune.objective import (
    KV_4BIT,
    KV_8BIT,
    KV_NONE,
    W_FP8,
    W_INT4,
    W_INT8,
    Needs,
    Result,
    constraint_values,
)
from servefit.tune.variants import Variant, level_of

# the width of the quantizations an engine applies at load whose names say it (others: the checkpoint's level)
ONLINE_LEVEL = {"fp8": W_FP8, "fbgemm_fp8": W_FP8, "ptpc_fp8": W_FP8, "eetq": W_INT8, "experts_int8": W_INT8}

if TYPE_CHECKING:
    from servefit.pipeline import Evaluation

WEIGHTS = "weights"


@dataclass(frozen=True)
class Dim:
    """One tuning knob: the values tune may try, and the user's current one."""

    name: str
    values: tuple[Any, ...]
    current: Any


class Adapter:
    """How tune sees one engine. Subclasses fill the knobs and the engine's own semantics."""

    engine = ""
    always: frozenset[str] = frozenset()  # dimensions written into the settings even when unchanged
    # a GPU several servers share (tune/split.py): the setting that sizes the engine by a fraction of the GPU,
    # whether that is of the memory free when it starts (not of the total), why a server started last has
    # less (said where no split fits), and what the split line says of the engine ({tokens}: its KV tokens
    # started last)
    fraction_name = ""
    fraction_of_free = False
    started_last = ""
    split_note = ""

    def dims(self, ev: Evaluation, needs: Needs) -> list[Dim]:
        raise NotImplementedError

    def variants(self, ev: Evaluation, needs: Needs) -> list[Variant]:
        return []

    # what an engine's own names mean where engines differ: vLLM's and SGLang's in-flight bitsandbytes loads
    # 4-bit weights (vLLM model_loader/bitsandbytes_loader.py: load_in_4bit unless the checkpoint says 8-bit)
    online_levels: dict[str, int] = {"bitsandbytes": W_INT4}

    def current_level(self, ev: Evaluation) -> int:
        online = runtime_quant(ev)
        levels = {**ONLINE_LEVEL, **self.online_levels}
        if not ev.model.quantization and online in levels:
            return levels[online]
        return level_of(ev.model.quantization)

    def apply(self, settings: dict[str, Any], name: str, value: Any) -> None:
        settings[name] = value

    def finish(self, settings: dict[str, Any], explicit: set[str], applied: dict[str, Any]) -> None:
        """Settings that follow from several dimensions (llama.cpp's ctx_size); `applied` holds
        the dimension values this candidate sets, by dimension name."""

    def writes(self, changed: dict[str, Any], point: dict[str, Any], current: dict[str, Any],
               cfg: EngineConfig) -> dict[str, Any]:
        """The settings to write for the changed dimensions (the same names, for most engines)."""
        return dict(changed)

    def kv_level(self, point: dict[str, Any]) -> int:
        return KV_NONE

    def kv_label(self, point: dict[str, Any], plan: MemoryPlan) -> str:
        return ""

    def users(self, plan: MemoryPlan, point: dict[str, Any]) -> int:
        return int(math.floor(plan.max_concurrency + 1e-9))

    def penalty(self, point: dict[str, Any], plan: MemoryPlan) -> int:
        return 0

    def started(self, plan: MemoryPlan, needs: Needs) -> bool:
        return plan.outcome == "started"

    def shortfall(self, plan: MemoryPlan) -> str:
        """The outcome tune reports for a plan that starts but fails started()."""
        return self.short_of_started

    def by_hand(self, ev: Evaluation) -> list[str]:
        """Changes tune leaves to the user (a setting it cannot judge safely), shown with its answer."""
        return []

    # what tune and explain call a plan that starts but fails started() (layers left on the CPU)
    short_of_started = "offloaded"

    # -- explain's sweep cells (sweep.py): the engine's own terms for N users at C tokens
    slot_users = False  # the users are slots the command sets (llama.cpp -np, OLLAMA_NUM_PARALLEL)
    request_cap = ""  # the setting that caps the requests served at once, for token-pool engines

    def cell_settings(self, ev: Evaluation, context: int, users: int) -> tuple[dict[str, Any], dict[str, str]]:
        """(settings, environment) that ask the engine for `users` requests of `context` tokens."""
        raise NotImplementedError


def kv_level_of(dtype: str) -> int:
    d = str(dtype).lower()
    if d in ("auto", "bfloat16", "float16", "f16", "bf16", "f32", "float32", "", "none"):
        return KV_NONE
    if d.startswith(("fp8", "q8", "int8")) or "k8v" in d:
        return KV_8BIT
    return KV_4BIT


def kv_allowed(dtype: str, needs: Needs) -> bool:
    """Unquantized KV is always allowed; `--allow kv=fp8` opens fp8* (and q8_0 in GGUF engines),
    `kv=q4_0` / `kv=4bit` the 4-bit caches, `kv=any` everything the engine has."""
    if kv_level_of(dtype) == KV_NONE:
        return True
    allow = {a.lower() for a in needs.allow_kv}
    d = str(dtype).lower()
    if "any" in allow or d in allow:
        return True
    if kv_level_of(d) == KV_8BIT and allow & {"8bit", "int8", "fp8", "q8_0"}:
        return True
    return kv_level_of(d) == KV_4BIT and bool(allow & {"4bit", "q4_0", "int4"})


def shared(fractions: list[Any], needs: Needs) -> list[Any]:
    """A memory fraction's candidates beside servers that run at once on the same GPU (needs.share):
    those within the share, and the share itself (to the hundredth below), which leaves them room, and the hundredth
    below that: what the engine holds beyond its fraction (vLLM's CUDA context) can take the share itself past the
    room, and the session then picks the best candidate that fits (session.py)."""
    if needs.share is None:
        return fractions
    top = int(needs.share * 100) / 100
    near = {round(top - 0.01, 2)} if top > 0.01 else set()
    return sorted({f for f in fractions if f <= top} | ({top} if top > 0 else set()) | near)


def admitted(values: Iterable[int], ev: Evaluation, needs: Needs) -> list[int]:
    """Slot / sequence counts worth offering: at least --min-concurrency, and no more than a proxy
    in front lets through at once (llama-swap's concurrencyLimit): slots past it never fill."""
    vals = [int(v) for v in values if int(v) >= needs.min_concurrency]
    cap = ev.site.workload.admit_limit
    if not cap:
        return vals
    top = max(cap, needs.min_concurrency)
    kept = [v for v in vals if v <= top]
    return sorted({*kept, top}) if len(kept) < len(vals) or not kept else kept  # the limit itself where it cut


def ladder(values: tuple[Any, ...] | list[Any], current: Any) -> tuple[Any, ...]:
    """The knob's values with the current one included, in ascending order."""
    vals = list(dict.fromkeys(list(values) + [current]))
    try:
        return tuple(sorted(vals))
    except TypeError:
        return tuple(vals)


def contexts(ladder_values: tuple[int, ...], limit: int, needs: Needs, current: int) -> tuple[int, ...]:
    """Context lengths at least --min-context and at most the model's limit (the minimum itself
    included, so the answer can sit exactly on it)."""
    vals = set(ladder_values) | {current}
    if needs.min_context:
        vals.add(needs.min_context)
        vals = {v for v in vals if v >= needs.min_context}
    return tuple(sorted(v for v in vals if 0 < v <= limit))


def adapter_for(engine: str) -> Adapter:
    """The engine plugin's tune adapter (engines/<name>/tune.py for the built-ins)."""
    from servefit.engines import get

    adapter = get(engine).tune_adapter()
    if adapter is None:
        raise UsageError(f"tune does not know the {engine} engine's knobs yet")
    return adapter  # type: ignore[no-any-return]


@dataclass
class Space:
    """The points tune searches for one server (the engine's knobs and the weight choices), and how a point
    becomes a config the engine's plan can judge."""

    ev: Evaluation
    adapter: Adapter
    dims: list[Dim]
    variants: dict[str, Variant] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    by_hand: list[str] = field(default_factory=list)  # the adapter's changes left to the user
    _base: tuple[int, ...] | None = field(default=None, repr=False)

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.dims]

    def size(self) -> int:
        return math.prod(len(d.values) for d in self.dims)

    def current(self) -> dict[str, Any]:
        return {d.name: d.current for d in self.dims}

    def start(self) -> dict[str, Any]:
        """The user's config as a point of the space (a current value outside the space, such as a
        context below --min-context, becomes the nearest allowed one)."""
        out = {}
        for d in self.dims:
            if d.current in d.values:
                out[d.name] = d.current
            else:
                try:
                    out[d.name] = min(d.values, key=lambda v: abs(v - d.current))
                except TypeError:
                    out[d.name] = d.values[0]
        return out

    def points(self) -> Iterator[dict[str, Any]]:
        names = self.names
        for combo in itertools.product(*(d.values for d in self.dims)):
            yield dict(zip(names, combo, strict=True))

    def index(self, point: dict[str, Any]) -> tuple[int, ...]:
        return tuple(d.values.index(point[d.name]) if point[d.name] in d.values else len(d.values)
                     for d in self.dims)

    def distance(self, point: dict[str, Any]) -> int:
        base = self._base
        if base is None:
            base = self._base = self.index(self.start())
        return sum(abs(a - b) for a, b in zip(self.index(point), base, strict=True))

    def changed(self, point: dict[str, Any]) -> dict[str, Any]:
        return {d.name: point[d.name] for d in self.dims if point.get(d.name, d.current) != d.current}

    def apply(self, point: dict[str, Any]) -> tuple[EngineConfig, Any]:
        """The EngineConfig (and ModelSpec) the patched file will produce."""
        cfg = self.ev.config
        settings = dict(cfg.settings)
        explicit = set(cfg.explicit)
        model = self.ev.model
        applied: dict[str, Any] = {}
        for d in self.dims:
            if d.name == WEIGHTS:
                continue
            val = point[d.name]
            if val == d.current and d.name not in explicit and d.name not in self.adapter.always:
                continue
            self.adapter.apply(settings, d.name, val)
            applied[d.name] = val
            explicit.add(d.name)
        self.adapter.finish(settings, explicit, applied)
        var = self.variants.get(point.get(WEIGHTS, "none"))
        if var is not None and var.changes_checkpoint:
            for k, v in var.settings.items():
                self.adapter.apply(settings, k, v)
                explicit.add(k)
            if var.model is not None:
                model = var.model
            if var.ref:
                settings["model"] = var.ref
        new = replace(cfg, settings=settings, explicit=explicit, findings=list(cfg.findings),
                      assumptions=list(cfg.assumptions), model_ref=settings.get("model", cfg.model_ref))
        return new, model

    def evaluate(self, point: dict[str, Any], needs: Needs) -> Result:
        from servefit.engines import get

        cfg, model = self.apply(point)
        plan = get(self.adapter.engine).plan(cfg, model, self.ev.gpu, self.ev.count)
        var = self.variants.get(point.get(WEIGHTS, "none"))
        level = var.level if var is not None and var.changes_checkpoint else self.adapter.current_level(self.ev)
        started = self.adapter.started(plan, needs)
        outcome = plan.outcome if plan.outcome != "started" or started else self.adapter.shortfall(plan)
        users = self.adapter.users(plan, point) if outcome == "started" else 0
        total = self.ev.gpu.memory_bytes or plan.memory.total or 1
        headroom = plan.memory.free_headroom / total
        context = int(plan.max_model_len or 0)
        return Result(point=dict(point), outcome=outcome, context=context, concurrency=float(plan.max_concurrency),
                      users=users, quality=(level, self.adapter.kv_level(point)), headroom=round(headroom, 6),
                      used=int(total - plan.memory.free_headroom), kv_tokens=int(plan.kv_cache_tokens),
                      penalty=self.adapter.penalty(point, plan), changes=len(self.changed(point)),
                      distance=self.distance(point), index=self.index(point),
                      labels={"kv": self.adapter.kv_label(point, plan),
                              "weights": var.label if var is not None else "checkpoint"},
                      constraints=constraint_values(needs, outcome, context, users, headroom),
                      message=_why_not(plan, outcome))


def _why_not(plan: MemoryPlan, outcome: str) -> str:
    """Why a candidate does not serve: the engine's last word when it refuses, else (it starts
    short of what was asked) the finding that says so."""
    if outcome == "started":
        return ""
    refusal = next((f.message for f in plan.findings if f.severity == "error"), "")
    if plan.outcome == "rejected_config" and refusal:  # a check refused it before anything loaded: say which
        return refusal
    if plan.outcome != "started":
        return plan.messages[-1] if plan.messages else ""
    return next((f.message for f in plan.findings if f.severity in ("error", "warning")), "")


def released(ev: Evaluation, name: str) -> bool:
    """Whether the engine's release takes the setting tune writes for the dimension `name` (its flag or
    variable, by the option table's since / until and the release history read from the engine's own
    parser): a knob the release lacks is left as it is, never written."""
    from servefit.engines import get
    from servefit.engines.options import version_in
    from servefit.tune.occurrences import option_table

    engine, version = ev.config.engine, ev.config.version
    how = get(engine).written_as(name, ev.site)
    if how is not None and how[0] == "parameter":  # a Modelfile PARAMETER: every release reads them
        return True
    table = option_table(engine)
    opt = table.by_name.get(how[1] if how is not None else name) if table is not None else None
    if opt is None:
        return True
    if not version_in(version, opt.since, opt.until):
        return False
    flag = next((f for f in opt.flags if f.startswith("--")), opt.flags[0] if opt.flags else None)
    if flag is not None:
        return bool(table.in_release(flag, version))
    hist = table.env_history.get(opt.env[0]) if opt.env else None
    return hist is None or bool(hist.present(version))


def build_space(ev: Evaluation, needs: Needs) -> Space:
    engine = ev.config.engine
    adapter = adapter_for(engine)
    dims = [d if released(ev, d.name) else Dim(d.name, (d.current,), d.current) for d in adapter.dims(ev, needs)]
    base = Variant(key="none", label=_checkpoint_label(ev), level=adapter.current_level(ev))
    variants = {"none": base}
    for v in adapter.variants(ev, needs):
        variants.setdefault(v.key, v)
    dims.append(Dim(WEIGHTS, tuple(variants), "none"))
    notes = [f"{v.label}: {v.note}" for v in variants.values() if v.note]
    return Space(ev=ev, adapter=adapter, dims=dims, variants=variants, notes=notes, by_hand=adapter.by_hand(ev))


def _checkpoint_label(ev: Evaluation) -> str:
    q = ev.model.quantization or {}
    gq = ev.config.settings.get("gguf_quant") or ev.config.settings.get("quant")
    if gq:
        return str(gq)
    if q:
        return f"{q.get('quant_method')} (checkpoint)"
    online = runtime_quant(ev)
    return f"online {online}" if online else "none"


def runtime_quant(ev: Evaluation) -> str:
    """The quantization the command asks the engine to apply as it loads a full-precision checkpoint (vLLM's and
    SGLang's --quantization fp8, TGI's --quantize eetq); "" for none."""
    s = ev.config.settings
    return str(s.get("quantization") or s.get("quantize") or "").lower()
