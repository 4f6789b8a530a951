"""A chart that writes its flags as `--flag={{ .Values.x }}` (CAST AI's vLLM chart:
`"--max-num-seqs={{ .Values.maxNumSeqs }}"`): the rendered word maps to the template's literal,
so a finding on the value pointed at the template's `{{` and tune showed every change as one to
make by hand. The value is now traced to the values line it came from, as a separate word is."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from servefit.cli import main

TEMPLATE = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  template:
    spec:
      nodeSelector:
        cloud.google.com/gke-accelerator: nvidia-l4
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.2
          args:
            - "--model=Qwen/Qwen2.5-7B-Instruct"
            - "--max-model-len={{ .Values.maxModelLen }}"
            - "--max-num-seqs={{ .Values.maxNumSeqs }}"
            - "--served-model-name={{ .Values.servedName | default .Values.name }}"
          resources:
            limits:
              nvidia.com/gpu: 1
"""




def _chart(root: Path, values: str, prod: str) -> Path:
    d = root / "llm"
    (d / "templates").mkdir(parents=True)
    (d / "Chart.yaml").write_text("apiVersion: v2\nname: llm\nversion: 0.1.0\n")
    (d / "templates" / "deployment.yaml").write_text(TEMPLATE)
    (d / "values.yaml").write_text(values)
    (d / "values-prod.yaml").write_text(prod)
    return d


def test_a_finding_on_an_inline_value_points_at_the_values_line(helm_on_path: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    d = _chart(tmp_path, "name: qwen\nservedName:\nmaxModelLen: 8192\nmaxNumSeqs: 256\n",
               "maxModelLen: 65536\nmaxNumSeqs: 256\n")
    main(["lint", str(d), "--format", "json", "--fail-on", "never"])
    found = [(f["code"], os.path.basename(f["location"]["file"]), f["location"]["line"], f["location"]["column"],
              f["end_location"]["column"]) for f in json.loads(capsys.readouterr().out) if f["severity"] == "error"]
    assert found == [("VLLM006", "values-prod.yaml", 1, 14, 19)]


def test_tune_writes_an_inline_value_in_the_renders_own_values(helm_on_path: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    prod = "maxModelLen: 8192\nmaxNumSeqs: 256\n"
    d = _chart(tmp_path, "name: qwen\nservedName:\nmaxModelLen: 8192\nmaxNumSeqs: 256\n", prod)
    main(["tune", str(d), "--write"])
    out = capsys.readouterr().out
    assert "wrote " in out
    assert (d / "values-prod.yaml").read_text() == "maxModelLen: 8192\nmaxNumSeqs: 32\n"
    assert (d / "values.yaml").read_text().endswith("maxNumSeqs: 256\n")
    assert (d / "templates" / "deployment.yaml").read_text() == TEMPLATE
    main(["tune", str(d), "--diff"])
    assert "no changes to write" in capsys.readouterr().out
