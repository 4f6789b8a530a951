"""An Ollama container whose models are pulled by a postStart hook (otwld's ollama-helm renders
`ollama.models.pull` so): the hook was not read, so the server named no model and estimate refused
it ("none is named here") although the chart's values name one."""

from __future__ import annotations

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
      nodeSelector:
        cloud.google.com/gke-accelerator: nvidia-l4
      containers:
        - name: ollama
          image: "ollama/ollama:0.12.3"
          env:
            - name: OLLAMA_CONTEXT_LENGTH
              value: "8192"
          resources:
            limits:
              nvidia.com/gpu: 1
          lifecycle:
            postStart:
              exec:
                command:
                  - /bin/sh
                  - -c
                  - |
                    while ! /bin/ollama ps > /dev/null 2>&1; do
                      sleep 5
                    done

                    /bin/ollama pull  qwen2.5:14b
"""


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, *argv: str) -> str:
    f = tmp_path / "deploy.yaml"
    f.write_text(text)
    main([argv[0], str(f), *argv[1:]])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return out.replace(str(f), "F")


def test_the_hook_names_the_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(tmp_path, capsys, DEPLOY, "models").splitlines() == [
        "F:12  ollama  qwen2.5:14b  -> Qwen/Qwen2.5-14B-Instruct (14.77B) from catalog"]
    out = _run(tmp_path, capsys, DEPLOY, "estimate")
    assert out.startswith("ollama ") and "  ·  Qwen/Qwen2.5-14B-Instruct\n1 × NVIDIA L4 " in out


def test_a_hook_without_a_pull_adds_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = DEPLOY.replace("/bin/ollama pull  qwen2.5:14b", "echo ready")
    assert _run(tmp_path, capsys, text, "models").splitlines() == [
        "F:12  ollama  (none)  -> no model named here (the server loads models on request)"]
