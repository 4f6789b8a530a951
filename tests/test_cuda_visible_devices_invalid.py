"""SF118: CUDA_VISIBLE_DEVICES=all (olafkfreund/SOW-generator's Ollama Deployment) hides every GPU:
CUDA stops reading the list at its first entry that is no index, GPU- UUID or MIG- instance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

COMPOSE = """services:
  vllm:
    image: vllm/vllm-openai:v0.11.2
    command: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--host", "127.0.0.1"]
    environment:
      - CUDA_VISIBLE_DEVICES={value}
"""


def _sf118(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str) -> list[tuple[int, int, str]]:
    f = tmp_path / "compose.yaml"
    f.write_text(COMPOSE.format(value=value))
    main(["lint", str(f), "--format", "json", "--fail-on", "never"])
    return [(x["location"]["line"], x["location"]["column"], x["message"])
            for x in json.loads(capsys.readouterr().out) if x["code"] == "SF118"]


def test_all_hides_every_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _sf118(tmp_path, capsys, "all") == [(6, 30, (
        "CUDA_VISIBLE_DEVICES=all: CUDA reads no GPU from 'all' and stops there, so the server sees no GPU (vLLM, "
        "SGLang and TGI fail at start; Ollama and llama.cpp run on the CPU); all is a value of NVIDIA_VISIBLE_DEVICES"))]


def test_an_entry_after_a_bad_one_is_hidden(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert [m for _, _, m in _sf118(tmp_path, capsys, "0,gpu1,2")] == [
        "CUDA_VISIBLE_DEVICES=0,gpu1,2: CUDA reads no GPU from 'gpu1' and stops there, so only 0 stays visible"]


@pytest.mark.parametrize("value", ["0", "0,1", "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6", "MIG-GPU-8932f937/1/0",
                                   "-1", "", "${GPUS}"])
def test_valid_or_deliberate_values_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    assert _sf118(tmp_path, capsys, value) == []
