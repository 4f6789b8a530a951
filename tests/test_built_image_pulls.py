"""An image the repository builds serves the models its Dockerfile pulls (`RUN ollama serve & sleep 5 &&
ollama pull MODEL`), whichever file runs it: a compose service with `build:`, a script's `docker run` of
the image a `docker build -t` beside it tags, or Cloud Run's `--source` (test_cloud_run.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

DOCKERFILE = """FROM ollama/ollama:0.6.2
ENV MODEL=qwen2.5:14b
RUN ollama serve & sleep 5 && ollama pull $MODEL
"""
COMPOSE = """services:
  ollama:
    build: .
    ports: ["127.0.0.1:11434:11434"]
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu]
"""
SCRIPT = """#!/bin/sh
docker build -t local-ollama .
docker run -d --gpus all -p 127.0.0.1:11434:11434 local-ollama
"""


@pytest.mark.parametrize("runner,text,server", [("compose.yaml", COMPOSE, "compose/ollama"),
                                                 ("run.sh", SCRIPT, "script:3")])
def test_the_model_a_built_image_pulls_is_the_one_its_server_loads(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], runner: str, text: str, server: str) -> None:
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    (tmp_path / runner).write_text(text)
    main(["estimate", str(tmp_path), "--gpu", "L4", "--format", "json"])
    [est] = json.loads(capsys.readouterr().out)
    assert (est["server"]["name"], est["model"]["resolved"], est["engine_version"]) == (
        server, "Qwen/Qwen2.5-14B-Instruct", "0.6.2")
    main(["lint", str(tmp_path), "--gpu", "L4", "--format", "json", "--fail-on", "never"])
    found = json.loads(capsys.readouterr().out)
    # sized, not "names no model" (SF115): the default context is checked against the pulled model's, at
    # the ENV line that names it
    assert [(f["code"], Path(f["location"]["file"]).name, f["location"]["line"], f["server"]) for f in found
            if f["code"] != "SEC004"] == [("OLLM008", "Dockerfile", 2, server)]
