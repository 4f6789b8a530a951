"""Compose interpolation as docker compose does it: `${VAR}` takes its value from the `.env` beside
the compose file, in every command. A `.env.example` is not read by compose, so its values are never
taken; a variable only it sets is said to be set there (SF001, and estimate's one-line error)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

COMPOSE = """services:
  llm:
    image: vllm/vllm-openai:${VLLM_TAG}
    command: ["--model", "${MODEL}", "--max-model-len", "${MAX_LEN:-4096}", "--host", "127.0.0.1"]
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu]
"""
VALUES = "VLLM_TAG=v0.8.5\nMODEL=Qwen/Qwen2.5-7B-Instruct\nMAX_LEN=16384\n"


def _repo(tmp_path: Path, **files: str) -> Path:
    (tmp_path / "compose.yaml").write_text(COMPOSE)
    for name, text in files.items():
        (tmp_path / name.replace("_", ".")).write_text(text)
    return tmp_path / "compose.yaml"


def test_values_come_from_dotenv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _repo(tmp_path, _env=VALUES, _env_example="MODEL=meta-llama/Llama-3.1-8B-Instruct\nMAX_LEN=2048\n")
    main(["lint", str(f), "--gpu", "L40S", "--format", "json", "--fail-on", "never"])
    assert json.loads(capsys.readouterr().out) == []
    main(["estimate", str(f), "--gpu", "L40S", "--format", "json"])
    plan = json.loads(capsys.readouterr().out)
    plan = plan[0] if isinstance(plan, list) else plan
    assert (plan["model"]["ref"], plan["engine_version"], plan["max_model_len"]) == ("Qwen/Qwen2.5-7B-Instruct", "0.8.5",
                                                                               16384)
    main(["tune", str(f), "--gpu", "L40S"])
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"compose/llm ({f}:4): vLLM 0.8.5 on 1 x NVIDIA L40S (44.39 GiB)"
    assert out.splitlines()[1].startswith("  now     context 16,384 x ")


def test_env_example_is_said_never_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _repo(tmp_path, _env_example=VALUES)
    main(["lint", str(f), "--gpu", "L40S", "--format", "json", "--fail-on", "never"])
    assert [(x["code"], x["message"]) for x in json.loads(capsys.readouterr().out)] == [
        ("SF001", "${MODEL} is not set in this repository (.env.example sets it, but docker compose reads only "
                  ".env: copy it to .env to use its values): the value it gives vLLM is not known, so it is not "
                  "checked")]
    assert main(["estimate", str(f), "--gpu", "L40S"]) == 2
    assert capsys.readouterr().err == (
        "servefit: error: the model is a variable (${MODEL}) (.env.example sets it, but docker compose reads only "
        ".env: copy it to .env to use its values): its value is not known here (pass --model REF)\n")


def test_no_sample_no_mention(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _repo(tmp_path, _env_example="OTHER=1\n")
    main(["lint", str(f), "--gpu", "L40S", "--format", "json", "--fail-on", "never"])
    assert [x["message"] for x in json.loads(capsys.readouterr().out)] == [
        "${MODEL} is not set in this repository: the value it gives vLLM is not known, so it is not checked"]
