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


# The same server in the three kinds of file servefit reads it from: every command says that its
# GPU memory is not planned (the server sees no GPU), none plans it on the GPU.
HIDDEN = ("CUDA_VISIBLE_DEVICES=all hides every GPU from this server (CUDA reads no GPU from 'all'), so its GPU "
          "memory is not planned: remove it (all belongs to NVIDIA_VISIBLE_DEVICES)")
K8S = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: chat
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.11.2
        args: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--host", "127.0.0.1"]
        env:
        - name: CUDA_VISIBLE_DEVICES
          value: "{value}"
        resources:
          limits:
            nvidia.com/gpu: 1
"""
SCRIPT = """#!/bin/sh
export CUDA_VISIBLE_DEVICES={value}
exec vllm serve Qwen/Qwen2.5-7B-Instruct --host 127.0.0.1
"""
FILES = {"deploy.yaml": (K8S, "Deployment/chat/vllm", 11), "compose.yaml": (COMPOSE, "compose/vllm", 4),
         "serve.sh": (SCRIPT, "script:3", 3)}


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_command_says_the_memory_is_not_planned(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      name: str) -> None:
    text, server, line = FILES[name]
    f = tmp_path / name
    f.write_text(text.format(value="all"))
    assert main(["lint", str(f), "--gpu", "L4", "--format", "json", "--fail-on", "never"]) == 0
    assert [x["code"] for x in json.loads(capsys.readouterr().out) if x["severity"] != "info"] == ["SF118"]
    for cmd in ("estimate", "explain"):
        assert main([cmd, str(f), "--gpu", "L4"]) == 2
        out = capsys.readouterr()
        assert (out.out, out.err) == ("", f"servefit: error: {HIDDEN}\n")
    assert main(["tune", str(f), "--gpu", "L4", "--diff"]) == 2
    assert capsys.readouterr().out == f"{server} ({f}:{line})\n  error: {HIDDEN}\n\nno changes to write\n"
    f.write_text(text.format(value="0"))  # a GPU it sees: planned, and tune has its answer
    assert main(["estimate", str(f), "--gpu", "L4"]) == 0
    assert "budget" in capsys.readouterr().out


def test_only_the_hidden_server_of_a_file_is_left_unplanned(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "compose.yaml"
    f.write_text(COMPOSE.format(value="all") + COMPOSE.format(value="0,gpu1").replace("services:\n", "")
                 .replace("  vllm:", "  second:"))
    assert main(["estimate", str(f), "--gpu", "L4", "--format", "json"]) == 1
    out = capsys.readouterr()
    assert [s["server"]["name"] for s in json.loads(out.out)] == ["compose/second"]
    assert out.err == f"servefit: {f}:4 (compose/vllm) not estimated: {HIDDEN}\n"
    assert main(["tune", str(f), "--gpu", "L4", "--format", "json"]) == 1
    res = json.loads(capsys.readouterr().out)
    assert [(s["site"], s.get("error")) for s in res["sites"]] == [("compose/vllm", HIDDEN), ("compose/second", None)]
    assert res["sites"][1]["best"]["context"] == 32768
