"""A container whose command is a script mounted from a ConfigMap of the same manifest (CAST AI's
vLLM chart: `command: ["/scripts/startup.sh"]`, the ConfigMap's startup.sh runs `exec vllm serve
--model="..." "$@"` with the container's args): servefit read no server there and said nothing
("0 servers"). Now the script is read with the args as its "$@"; an engine image whose script is
not in the file is said (SF116)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

MANIFEST = """apiVersion: v1
kind: ConfigMap
metadata:
  name: qwen-startup-script
data:
  startup.sh: |
    #!/bin/bash
    set -e
    exec vllm serve --model="Qwen/Qwen2.5-7B-Instruct" "$@"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: qwen
spec:
  template:
    spec:
      nodeSelector:
        cloud.google.com/gke-accelerator: nvidia-l4
      volumes:
        - name: startup-script
          configMap:
            name: qwen-startup-script
            defaultMode: 0755
      containers:
        - name: "vllm"
          image: "vllm/vllm-openai:v0.11.2"
          command: ["/scripts/startup.sh"]
          args:
            - "--max-model-len=65536"
            - "--kv-cache-dtype=auto"
          resources:
            limits:
              nvidia.com/gpu: 1
          volumeMounts:
            - name: startup-script
              mountPath: /scripts
              readOnly: true
"""


def _lint(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> list[dict]:
    f = tmp_path / "deploy.yaml"
    f.write_text(text)
    main(["lint", str(f), "--format", "json", "--fail-on", "never"])
    return json.loads(capsys.readouterr().out)


def _at(f: dict) -> tuple[str, int, int]:
    loc = f["location"]
    return f["code"], loc["line"], loc["column"]


def test_script_from_configmap_is_read_with_the_args(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = _lint(tmp_path, capsys, MANIFEST)
    # 65,536 tokens is over Qwen2.5-7B's 32,768: the args reached the server the script starts,
    # and the finding points at the arg; the server is where the script starts it
    assert [_at(f) for f in found] == [("SEC004", 9, 10), ("VLLM006", 30, 32)]
    f = tmp_path / "deploy.yaml"
    main(["models", str(f), "--format", "json"])
    rows = json.loads(capsys.readouterr().out)
    assert [(r["line"], r["ref"], r["model"]) for r in rows] == [(9, "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct")]


def test_script_args_go_where_the_script_writes_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The script's own --max-model-len after "$@" wins over the one in args (the last one does)."""
    text = MANIFEST.replace('exec vllm serve --model="Qwen/Qwen2.5-7B-Instruct" "$@"',
                            'exec vllm serve Qwen/Qwen2.5-7B-Instruct "$@" --max-model-len 8192')
    f = tmp_path / "deploy.yaml"
    f.write_text(text)
    main(["estimate", str(f), "--output-format", "json"])
    plan = json.loads(capsys.readouterr().out)[0]
    assert (plan["model"]["resolved"], plan["max_model_len"]) == ("Qwen/Qwen2.5-7B-Instruct", 8192)


def test_engine_image_script_not_in_the_file_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = MANIFEST.split("---\n", 1)[1]
    found = _lint(tmp_path, capsys, text)
    assert [_at(f) for f in found] == [("SF116", 18, 22)]
    assert "through the script /scripts/startup.sh" in found[0]["message"]
