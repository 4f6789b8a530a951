"""SGLang predictions against the public start-up logs in benchmarks/accuracy/cases/sglang.yaml.

Target: median |error| of max_total_num_tokens <= 5% (weights_gib <= 2%) and every outcome right (the
`python benchmarks/accuracy/run.py --engine sglang` figures)."""

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


def test_sglang_cases_meet_the_target():
    cases, out = rows("sglang")
    assert len(cases) >= 6
    assert not [r for r in out if "failure" in r]
    assert all(r["outcome_ok"] for r in out if r["outcome_ok"] is not None)
    errs = [abs(r["errors"]["max_total_num_tokens"]) for r in out if "max_total_num_tokens" in r["errors"]]
    assert len(errs) >= 6
    assert statistics.median(errs) <= 0.05
    assert max(errs) <= 0.10
    w = [abs(r["errors"]["weights_gib"]) for r in out if "weights_gib" in r["errors"]]
    assert w and statistics.median(w) <= 0.02
