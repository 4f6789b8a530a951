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
    assert found[1][3] == ("${{ matrix.quant }} is a ${{ }} expression GitHub Actions fills in when the job runs: "
                           "the value it gives vLLM is not known, so it is not checked")
    main(["models", str(tmp_path), "--format", "json"])
    rows = json.loads(capsys.readouterr().out)
    assert [(r["line"], r["server"], r["model"]) for r in rows] == \
        [(17, "workflow/serve/start server", "Qwen/Qwen2.5-7B-Instruct")]


def test_a_gguf_quant_from_the_matrix_is_said_not_a_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`-hf org/repo:${{ matrix.quant }}` (or `:${QUANT}` in a script) reached the GGUF sizing with the
    variable as its file type: SF112 "KeyError" in lint and "servefit: error: KeyError" from estimate."""
    d = tmp_path / ".github" / "workflows"
    d.mkdir(parents=True)
    (d / "e2e.yml").write_text("""jobs:
  test:
    runs-on: [self-hosted, gpu]
    strategy:
      matrix:
        quant: [Q4_K_M, Q8_0]
    steps:
      - run: |
          llama-server -hf unsloth/Qwen3-8B-GGUF:${{ matrix.quant }} -c 8192 --port 8080 &
""")
    main(["lint", str(tmp_path), "--gpu", "l4", "--format", "json", "--fail-on", "never"])
    found = [(f["code"], f["message"]) for f in json.loads(capsys.readouterr().out)]
    assert found == [("SF001", "${{ matrix.quant }} is a ${{ }} expression GitHub Actions fills in when the job runs: "
                               "the value it gives llama.cpp is not known, so it is not checked")]
    script = tmp_path / "serve.sh"
    script.write_text("#!/bin/sh\nllama-server -hf unsloth/Qwen3-8B-GGUF:${QUANT} -c 8192\n")
    assert main(["estimate", str(script), "--gpu", "l4"]) == 2
    assert capsys.readouterr().err == ("servefit: error: the model is a variable (unsloth/Qwen3-8B-GGUF:${QUANT}): its "
                                       "value is not known here (pass --model REF)\n")
