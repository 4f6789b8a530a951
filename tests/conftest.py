"""Make `python -m servefit` work in subprocesses from any working directory, installed or not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")
os.environ["PYTHONPATH"] = SRC + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")

# Hypothesis profiles for the fuzz suite (tests/test_fuzz_*.py). "ci" (the default) keeps the
# whole fuzz suite near half a minute on two cores and draws the same examples every run (a CI
# failure is a real regression, never luck); HYPOTHESIS_PROFILE=nightly draws 20x as many, fresh
# ones each night. Fuzz tests size themselves with fuzzkit.fuzz(n), which scales n by the profile.
try:
    from hypothesis import HealthCheck
    from hypothesis import settings as _hsettings
except ImportError:  # pragma: no cover - hypothesis is a test dependency
    pass
else:
    _quiet = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]
    _hsettings.register_profile("ci", max_examples=100, deadline=None, suppress_health_check=_quiet,
                                print_blob=True, derandomize=True)
    _hsettings.register_profile("nightly", max_examples=2000, deadline=None, suppress_health_check=_quiet,
                                print_blob=True)
    _hsettings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def helm_on_path(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder of the real helm 3 (tests/k8stools.py fetches it once), put first on PATH; the test is
    skipped, saying why, where there is none."""
    import k8stools

    where, why = k8stools.tools_dir()
    if where is None:
        pytest.skip(f"no helm 3 here: {why}")
    monkeypatch.setenv("PATH", f"{where}{os.pathsep}{os.environ.get('PATH', '')}")
    return where
