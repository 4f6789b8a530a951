"""GitHub Actions workflows that start a server in a step's `run:` (an end-to-end test in CI):
servefit read no server there ("0 servers", nothing said). The script is read like a shell script
with the workflow's, job's and step's env; a `${{ }}` expression is said to be GitHub's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

WORKFLOW = """name: e2e
on: [push]
env:
  PORT: "8000"
jobs:
  serve:
    runs-on: [self-hosted, gpu-l4]
    strategy:
      matrix:
        quant: [fp8]
    steps:
      - uses: actions/checkout@v4
      - name: start server
        env:
          CTX: "65536"
        run: |
          vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len $CTX --port $PORT --host 127.0.0.1 \\
            --quantization ${{ matrix.quant }} &
          sleep 60
"""


def test_a_server_started_in_a_step_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / ".github" / "workflows"
    d.mkdir(parents=True)
    (d / "e2e.yml").write_text(WORKFLOW)
    main(["lint", str(tmp_path), "--gpu", "l4", "--format", "json", "--fail-on", "never"])
    found = [(f["code"], f["location"]["line"], f["location"]["column"], f["message"])
             for f in json.loads(capsys.readouterr().out)]
    assert [f[:3] for f in found] == [("VLLM006", 15, 17), ("SF001", 18, 28)]
    assert found[1][3] == ("${GH_matrix_quant_} is a ${{ }} expression GitHub Actions fills in when the job runs: "
                           "the value it gives vLLM is not known, so it is not checked")
    main(["models", str(tmp_path), "--format", "json"])
    rows = json.loads(capsys.readouterr().out)
    assert [(r["line"], r["server"], r["model"]) for r in rows] == \
        [(17, "workflow/serve/start server", "Qwen/Qwen2.5-7B-Instruct")]
