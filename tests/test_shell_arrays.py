"""A launch script that builds the command in a bash array (`ARGS=( ... )`, `"${ARGS[@]}"`) is read
as bash runs it: lint points into the array, and tune writes its change there."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.cli import main

SCRIPT = """#!/bin/bash
MODEL=Qwen/Qwen2.5-7B-Instruct
ARGS=(
  --model "$MODEL"
  --max-model-len 32768
  --gpu-memory-utilization 0.95
)
ARGS+=(--max-num-seqs 512)
vllm serve "${ARGS[@]}" --host 127.0.0.1 --port 8000
"""


def test_lint_points_into_the_array(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "serve.sh"
    f.write_text(SCRIPT)
    main(["lint", str(f), "--gpu", "L4", "--exit-zero"])
    out = capsys.readouterr().out
    assert f"{f}:6:28: VLLM017" in out
    assert "SF002" not in out and "no model" not in out


def test_tune_writes_into_the_array(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "serve.sh"
    f.write_text(SCRIPT)
    main(["tune", str(f), "--gpu", "L4", "--write"])
    capsys.readouterr()
    new = f.read_text()
    assert new.splitlines()[7] == "ARGS+=(--max-num-seqs 256)"
    assert new.replace("ARGS+=(--max-num-seqs 256)", "ARGS+=(--max-num-seqs 512)") == SCRIPT
