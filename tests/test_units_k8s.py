"""Kubernetes quantities: `m` is milli (1/1000), `M` is 10**6, `Mi` is 2**20."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from servefit.cli import main
from servefit.sources import scan_file
from servefit.units import k8s_quantity

FIX = Path(__file__).parent / "fixtures" / "sources" / "k8s"


@pytest.mark.parametrize(("text", "value"), [
    ("1000m", 1), ("2000m", 2), ("500m", Fraction(1, 2)), ("1", 1), ("1.5", Fraction(3, 2)),
    ("1k", 1000), ("1Ki", 1024), ("1M", 10**6), ("1Mi", 2**20), ("16Gi", 16 * 2**30), ("1G", 10**9),
    ("1e3", 1000), ("1E3", 1000), ("2E", 2 * 10**18), ("1Ti", 2**40), ("100u", Fraction(1, 10**4)),
    ("5n", Fraction(5, 10**9)), ("'2Gi'", 2 * 2**30), (" 64Mi ", 64 * 2**20), ("0.5Gi", 2**29),
])
def test_quantities(text: str, value) -> None:
    assert k8s_quantity(text) == value


@pytest.mark.parametrize("text", ["", "Gi", "1 Gi", "1gi", "1mi", "1GB", "1KB", "ten", "1.2.3", None])
def test_not_quantities(text) -> None:
    assert k8s_quantity(text) is None


def test_a_milli_size_limit_is_not_mebibytes() -> None:
    """`sizeLimit: 2000m` is 2 bytes of /dev/shm, which NCCL cannot work in; `2Gi` is enough."""
    small, ok = scan_file(str(FIX / "shm-size-limit.yaml")).sites
    assert small.workload.shm is False and small.workload.shm_limit == "sizeLimit 2000m (2 bytes)"
    assert ok.workload.shm is True and ok.workload.shm_limit is None


def test_lint_reports_the_size_limit(capsys) -> None:
    rc = main(["lint", str(FIX / "shm-size-limit.yaml"), "--select", "SF102", "--format", "json"])
    import json

    found = json.loads(capsys.readouterr().out)
    assert rc == 0 and [f["code"] for f in found] == ["SF102"]  # a warning: below the default fail-on
    assert "limited by its sizeLimit 2000m (2 bytes) in this pod" in found[0]["message"]
    assert found[0]["message"].endswith("Raise the sizeLimit (e.g. 16Gi).")
    assert found[0]["server"] == "Deployment/chat/vllm" and found[0]["location"]["line"] == 11
