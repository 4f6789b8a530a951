"""`servefit models` on a server that names no model says what lint says: a vLLM server with an
empty --model (CAST AI's chart before its model.name is set) is not a server that "loads models on
request", as models said while lint said SF002 "no model given in the command"; an Ollama server
does load what requests name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

COMPOSE = """services:
  vllm:
    image: vllm/vllm-openai:v0.11.2
    command: ["--model=", "--max-model-len=8192"]
  ollama:
    image: ollama/ollama:0.12.3
"""


# vLLM's --model defaults to Qwen/Qwen3-0.6B from 0.10.0 (config/model.py ModelConfig.model): the server starts it
NO_MODEL = ("no model given in the command: vLLM 0.11.2 would load its default, Qwen/Qwen3-0.6B (pass --model REF to "
            "check the model you mean)")


def test_models_says_why_no_model_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "compose.yaml"
    f.write_text(COMPOSE)
    assert main(["models", str(f)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{f}:4  vllm  (none)  -> not resolved: {NO_MODEL}",
        f"{f}:6  ollama  (none)  -> no model named here (the server loads models on request)"]
    main(["lint", str(f), "--gpu", "l4", "--format", "json", "--fail-on", "never"])
    sf002 = [x["message"] for x in json.loads(capsys.readouterr().out) if x["code"] == "SF002"]
    assert sf002 == [f"vLLM: {NO_MODEL}"]
