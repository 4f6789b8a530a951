"""The tuner's answer equals a plain brute-force enumeration of the same space (the same
feasibility function: the engine's own plan) on a grid of models x GPUs x needs."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from servefit.pipeline import Target, evaluate, site_from_argv
from servefit.tune import study
from servefit.tune.objective import Needs, Result, objective_vector, rank_key
from servefit.tune.space import build_space

MODELS = {
    "llama8b": ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"],
    "qwen7b-len": ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "16384"],
    "mixtral": ["vllm", "serve", "mistralai/Mixtral-8x7B-Instruct-v0.1", "--tensor-parallel-size", "2"],
    "gemma3": ["vllm", "serve", "google/gemma-3-12b-it", "--gpu-memory-utilization", "0.9"],
    "llama70b": ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4"],
}
GPUS = {"L4": 1, "A100-80GB": 2, "H100": 4, "H200": 1}
NEEDS = {
    "default": Needs(),
    "ctx32k": Needs(min_context=32768),
    "ctx32k-fp8kv": Needs(min_context=32768, allow_kv=frozenset({"fp8"})),
    "users16": Needs(min_context=8192, min_concurrency=16, allow_kv=frozenset({"fp8"}), headroom=0.1),
    "concurrency-quant": Needs(min_context=16384, allow_kv=frozenset({"fp8"}), allow_quant=frozenset({"fp8", "awq"}),
                               objective=("concurrency",)),
    "context-eager": Needs(allow_eager=True, objective=("context",)),
    "memory": Needs(min_context=8192, min_concurrency=4, objective=("memory",)),
}
# every model on every GPU under two needs, and every need on three model x GPU pairs
SCENARIOS = sorted({(m, g, n) for m in MODELS for g in GPUS for n in ("ctx32k-fp8kv", "users16")
                    if not (m in ("llama70b", "mixtral") and g == "L4")}
                   | {(m, g, n) for m, g in (("llama8b", "L4"), ("gemma3", "A100-80GB"), ("mixtral", "H100"))
                      for n in NEEDS})


def _space(model: str, gpu: str, needs_name: str):
    ev = evaluate(site_from_argv(MODELS[model]), Target(gpu=gpu, gpus=GPUS[gpu]))
    needs = replace(NEEDS[needs_name], target_context=int(ev.plan.max_model_len or 0))
    try:
        return build_space(ev, needs), needs
    except Exception as exc:  # a min-context over the model's limit is a usage error, not a search
        pytest.skip(str(exc))


def brute_force(space, needs) -> tuple[Result | None, list[Result]]:
    """Every combination of every dimension, planned, and the best by the documented order."""
    names = [d.name for d in space.dims]
    results = [space.evaluate(dict(zip(names, combo, strict=True)), needs)
               for combo in itertools.product(*(d.values for d in space.dims))]
    target = needs.min_context or needs.target_context
    best = min(results, key=lambda r: rank_key(r, needs.objective, target)) if results else None
    return best, results


def naive_front(results: list[Result], objective) -> set[tuple[float, ...]]:
    vecs = {objective_vector(r, objective) for r in results if r.feasible}
    return {v for v in vecs if not any(w != v and all(a >= b for a, b in zip(w, v, strict=True)) for w in vecs)}


@pytest.mark.parametrize(("model", "gpu", "needs_name"), SCENARIOS)
def test_tuner_equals_brute_force(model: str, gpu: str, needs_name: str) -> None:
    space, needs = _space(model, gpu, needs_name)
    run = study.run(space, needs, progress=False)
    expected, results = brute_force(space, needs)
    assert run.strategy == "exhaustive" and run.proven
    assert run.trials == space.size() == len(results)
    assert expected is not None and run.best is not None
    assert run.best.point == expected.point
    assert run.best.feasible == expected.feasible
    if needs.multi:
        assert {objective_vector(r, needs.objective) for r in run.front} == naive_front(results, needs.objective)
    for r in run.front:
        assert r.feasible


@pytest.mark.parametrize(("model", "gpu", "needs_name"), [
    ("llama8b", "L4", "ctx32k-fp8kv"), ("qwen7b-len", "H200", "users16"), ("gemma3", "A100-80GB", "memory"),
    ("mixtral", "H100", "concurrency-quant"),
])
def test_optuna_bruteforce_sampler_equals_brute_force(model: str, gpu: str, needs_name: str) -> None:
    """optuna's own BruteForceSampler, run to the end of the space, reaches the same answer."""
    space, needs = _space(model, gpu, needs_name)
    if space.size() > 600:
        pytest.skip("kept small: BruteForceSampler costs ~3 ms per trial")
    run = study.run(space, needs, strategy="bruteforce", trials=space.size() + 10, progress=False)
    expected, _ = brute_force(space, needs)
    assert run.proven
    assert expected is not None and run.best is not None
    assert run.best.point == expected.point


def test_sampled_search_records_the_current_config_first_without_queueing_it(tmp_path) -> None:
    """The current config is the first trial, written finished in one go: a trial left waiting
    in the queue (study.enqueue_trial) is what two workers on one SQLite study could both pop
    (the storage reads WAITING in each before either writes RUNNING), and the second `tell`
    then failed on a finished trial."""
    space, needs = _space("llama8b", "L4", "ctx32k-fp8kv")
    run = study.run(space, needs, strategy="tpe", trials=12, progress=False,
                    storage=f"sqlite:///{tmp_path / 's.db'}", study_name="s")
    trials = run.study.trials
    assert trials[0].params == space.start() and trials[0].state.name == "COMPLETE"
    assert len(trials) == 12 and run.trials == 12
    assert not [t.number for t in trials if "fixed_params" in t.system_attrs]  # nothing went through the queue


@pytest.mark.parametrize("strategy", ["tpe", "nsga2"])
def test_model_based_samplers_find_feasible_answers(strategy: str) -> None:
    space, needs = _space("llama8b", "H200", "ctx32k-fp8kv")
    if strategy == "tpe":
        needs = replace(needs, objective=("concurrency",))
    run = study.run(space, needs, strategy=strategy, trials=60, seed=1, progress=False)
    expected, _ = brute_force(space, needs)
    assert run.best is not None and run.best.feasible and expected is not None
    # a model-based search is not a proof; it must still land near the optimum of its objective
    if strategy == "tpe":
        assert run.best.users >= expected.users * 0.8
    else:
        assert run.best.product >= expected.product * 0.8
    assert not run.proven


def test_infeasible_needs_report_nothing_feasible() -> None:
    space, needs = _space("llama8b", "L4", "default")
    needs = replace(needs, min_context=131072, min_concurrency=64)
    run = study.run(replace(space), needs, progress=False)
    assert run.best is not None and not run.best.feasible
    assert run.front == []
