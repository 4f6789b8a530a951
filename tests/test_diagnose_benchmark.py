"""benchmarks/diagnose: every case is well formed and split by the rule; the calibration half keeps what it
scores (the held-out half is not looked at here: its totals are the lead's, run.py prints them)."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest

RUN = Path(__file__).resolve().parents[1] / "benchmarks" / "diagnose" / "run.py"
spec = importlib.util.spec_from_file_location("diagnose_bench_run", RUN)
assert spec is not None and spec.loader is not None
run = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run)

OUTCOMES = {"oom", "not_oom", "killed", "no_failure", "recovered"}
ROOTS = {"kv_cache_overflow", "batch_misconfiguration", "fragmentation", "model_too_large", "profiling_peak",
         "cuda_graph_capture"}


def test_cases_are_well_formed_and_split_by_the_rule() -> None:
    cases = run.load()
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids)) and len(cases) >= 30
    for c in cases:
        assert c["url"].startswith("https://github.com/"), c["id"]
        assert c["engine"] in ("vllm", "llamacpp", "ollama", "tgi", "sglang"), c["id"]
        assert 0 < len(c["log"].splitlines()) <= 12, c["id"]  # a short excerpt, never a whole log
        exp = c["expect"]
        assert set(run._listed(exp["outcome"])) <= OUTCOMES, c["id"]
        assert set(exp.get("root", [])) <= ROOTS, c["id"]
        assert set(exp.get("timing", [])) <= {"load", "startup", "serving"}, c["id"]
        first = hashlib.sha256(c["id"].encode()).hexdigest()[0]
        assert c["split"] == ("heldout" if first in "0123456789" else "calibration")


def test_score_marks_each_question() -> None:
    case = {"expect": {"outcome": "oom", "timing": ["startup"], "stage": ["graphs"], "root": ["cuda_graph_capture"],
                       "fix": ["enforce-eager"]}}
    got = {"outcome": "oom", "timing": "startup", "stage": "profile", "root": "cuda_graph_capture",
           "fix": ["Or skip graph capture: --enforce-eager"]}
    assert run.score(case, got) == {"outcome": True, "timing": True, "stage": False, "root": True, "fix": True}
    assert run.score({"expect": {"outcome": ["not_oom", "no_failure"]}}, {**got, "outcome": "no_failure"}) == {
        "outcome": True}


@pytest.mark.parametrize("question", run.QUESTIONS)
def test_calibration_half_keeps_its_score(question: str) -> None:
    rows = run.run([c for c in run.load() if c["split"] == "calibration" and not c.get("seen_before")])
    asked = [r["marks"][question] for r in rows if question in r["marks"]]
    wrong = [r["id"] for r in rows if not r["marks"].get(question, True)]
    # Ollama 8964 quotes only llama.cpp's lines: the -ngl fix names the setting where llama.cpp is embedded
    # (num_gpu in Ollama) because nothing in the log says which program ran it
    assert wrong == [], wrong
    assert asked
