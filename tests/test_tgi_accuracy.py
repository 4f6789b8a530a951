"""TGI predictions against the public start-up logs in benchmarks/accuracy/cases/tgi.yaml.

Target: median |error| of max_batch_total_tokens <= 5% and every outcome right (the
`python benchmarks/accuracy/run.py --engine tgi` figures)."""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path

RUNNER = Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy" / "run.py"


def load_runner():
    spec = importlib.util.spec_from_file_location("accuracy_run", RUNNER)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def rows(engine: str):
    run = load_runner()
    cases = run.load_cases(engine)
    return cases, [run.compare(c) for c in cases]


def test_tgi_cases_meet_the_target():
    cases, out = rows("tgi")
    assert len(cases) >= 6
    assert not [r for r in out if "failure" in r]
    assert all(r["outcome_ok"] for r in out if r["outcome_ok"] is not None)
    errs = [abs(r["errors"]["max_batch_total_tokens"]) for r in out if "max_batch_total_tokens" in r["errors"]]
    assert len(errs) >= 3
    assert statistics.median(errs) <= 0.05
    assert max(errs) <= 0.10
