"""A private image's tag is not the engine's version: `image: myorg/vllm-srv:1.0` in a compose
file or a k8s manifest was read as vLLM 1.0 by every command. Only the engine's own images (and
mirrors of them under the same name) give a version; another image's leaves it unknown, with the
usual assumption that the newest release runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

COMPOSE = """services:
  llm:
    image: {image}
    command: ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192", "--host", "127.0.0.1"]
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu]
"""
K8S = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: llm}}
spec:
  template:
    spec:
      containers:
      - name: server
        image: {image}
        args: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192", "--host", "127.0.0.1"]
        resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""
ASSUMED = ("WARNING: vLLM 0.33.0 assumed (no version given: the newest release modelled; older releases size "
           "memory differently, the tag of myorg/vllm-srv:1.0 counts that build's own releases, not vLLM's: "
           "pass --engine-version)")


def _estimate(capsys: pytest.CaptureFixture[str], f: Path) -> dict:
    main(["estimate", str(f), "--gpu", "L40S", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    return out[0] if isinstance(out, list) else out


@pytest.mark.parametrize("name, text", [("compose.yaml", COMPOSE), ("deploy.yaml", K8S)])
def test_a_custom_image_tag_names_no_vllm_version(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  name: str, text: str) -> None:
    f = tmp_path / name
    f.write_text(text.format(image="myorg/vllm-srv:1.0"))
    plan = _estimate(capsys, f)
    assert plan["engine_version"] == "0.33.0"
    assert plan["assumptions"][0] == ASSUMED
    main(["tune", str(f), "--gpu", "L40S"])
    assert " vLLM 0.33.0 on 1 x NVIDIA L40S " in capsys.readouterr().out.splitlines()[0]
    main(["explain", str(f), "--gpu", "L40S"])
    assert capsys.readouterr().out.startswith("vllm 0.33.0  ·  Qwen/Qwen2.5-7B-Instruct\n")


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.8.5", "harbor.corp.example/vllm/vllm-openai:v0.8.5"])
def test_the_engines_own_image_and_its_mirror_give_the_version(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               image: str) -> None:
    f = tmp_path / "compose.yaml"
    # the image's own entrypoint runs the server: the command is its arguments (`vllm serve ...` there would be
    # refused, SF106, and not estimated)
    f.write_text(COMPOSE.format(image=image).replace('"vllm", "serve", ', '"--model", '))
    plan = _estimate(capsys, f)
    assert plan["engine_version"] == "0.8.5"
    assert not any("assumed (no version given" in a for a in plan["assumptions"])


@pytest.mark.parametrize("image, version, said", [
    ("myorg/llama-server:b6000", "b10309",
     "WARNING: llama.cpp b10309 assumed (no version given: the newest release modelled; older releases size memory "
     "differently, the tag of myorg/llama-server:b6000 counts that build's own releases, not llama.cpp's: pass "
     "--engine-version bNNNN)"),
    ("ghcr.io/ggml-org/llama.cpp:server-cuda-b6000", "b6000", None),
])
def test_a_llamacpp_build_tag_counts_only_on_the_projects_image(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                image: str, version: str, said: str | None) -> None:
    f = tmp_path / "run.sh"
    f.write_text(f"docker run --gpus all {image} -m /m/Meta-Llama-3.1-8B-Instruct-Q6_K.gguf -c 8192\n")
    plan = _estimate(capsys, f)
    assert plan["engine_version"] == version
    assert [a for a in plan["assumptions"] if "assumed (no version given" in a] == ([said] if said else [])
