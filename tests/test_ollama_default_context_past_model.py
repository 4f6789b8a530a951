"""Ollama's own default context past the model's length is no OLLM009 warning: on a 24 GiB GPU
Ollama's VRAM-based default is 32,768 tokens and Llama 3 8B holds 8,192, so Ollama serves 8,192;
servefit warned "requested context size too large for model: num_ctx 32768 > 8192" (with no place
in the file, in a k8s Deployment that sets no context: olafkfreund/SOW-generator) beside OLLM008's
"num_ctx not set: ... gives 8192 tokens". A num_ctx the user sets past the length still warns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

DEPLOY = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: ollama
spec:
  template:
    spec:
      containers:
      - name: ollama
        image: ollama/ollama
        env:
        - name: OLLAMA_NUM_PARALLEL
          value: "4"
        resources:
          limits:
            nvidia.com/gpu: 1
        lifecycle:
          postStart:
            exec:
              command: ["/bin/sh", "-c", "ollama pull llama3"]
"""


def _codes(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> list[tuple[str, str, int | None]]:
    f = tmp_path / "ollama.yaml"
    f.write_text(text)
    main(["lint", str(f), "--gpu", "rtx-4090", "--format", "json", "--fail-on", "never"])
    return [(x["code"], x["severity"], (x.get("location") or {}).get("line"))
            for x in json.loads(capsys.readouterr().out) if x["code"].startswith("OLLM")]


def test_the_default_past_the_model_is_not_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _codes(tmp_path, capsys, DEPLOY) == [("OLLM008", "info", 20)]


def test_a_set_context_past_the_model_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = DEPLOY.replace('          value: "4"\n', '          value: "4"\n        - name: OLLAMA_CONTEXT_LENGTH\n'
                                                   '          value: "32768"\n')
    assert _codes(tmp_path, capsys, text) == [("OLLM009", "warning", 15)]
