"""An umbrella chart whose subchart is a folder of the repository (`repository:
file://child-charts/vllm`, CAST AI's castai-hosted-model): helm marks the subchart's documents
`# Source: <umbrella>/charts/vllm/templates/...`, and servefit looked for that file in the
umbrella's charts/, found nothing and placed the server in a file that does not exist
(`.rendered-values.yaml.yaml`). The spans now land in the subchart's folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from servefit.cli import main

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-vllm
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
            - "--max-model-len"
            - "{{ .Values.maxModelLen }}"
          resources:
            limits:
              nvidia.com/gpu: 1
"""




def _umbrella(root: Path) -> Path:
    top = root / "hosted"
    sub = top / "child-charts" / "vllm"
    (sub / "templates").mkdir(parents=True)
    (sub / "Chart.yaml").write_text("apiVersion: v2\nname: vllm\nversion: 0.1.0\n")
    (sub / "values.yaml").write_text("maxModelLen: 8192\n")
    (sub / "templates" / "deployment.yaml").write_text(DEPLOYMENT)
    (top / "Chart.yaml").write_text("apiVersion: v2\nname: hosted\nversion: 0.1.0\ndependencies:\n"
                                    "  - name: vllm\n    version: 0.1.0\n    repository: file://child-charts/vllm\n")
    (top / "values.yaml").write_text("vllm:\n  maxModelLen: 65536\n")
    return top


def _lint(top: Path, capsys: pytest.CaptureFixture[str]) -> list[tuple[str, str, int, int]]:
    main(["lint", str(top), "--format", "json", "--fail-on", "never"])
    return [(f["code"], os.path.relpath(f["location"]["file"], top), f["location"]["line"], f["location"]["column"])
            for f in json.loads(capsys.readouterr().out) if f["severity"] in ("error", "warning")]


@pytest.mark.parametrize("own_templates", [False, True])
def test_subchart_servers_are_placed_in_its_folder(helm_on_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    own_templates: bool) -> None:
    """An umbrella with no templates of its own is rendered too (it was skipped, and the subchart
    rendered alone with its defaults); the subchart is rendered with its umbrella, not alone."""
    top = _umbrella(tmp_path)
    if own_templates:
        (top / "templates").mkdir()
        (top / "templates" / "configmap.yaml").write_text(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-settings\ndata:\n  team: serving\n")
    # the umbrella's value reaches the subchart and is reported where the user set it
    assert _lint(top, capsys) == [("VLLM006", "values.yaml", 2, 16)]
    main(["models", str(top), "--format", "json"])
    rows = json.loads(capsys.readouterr().out)
    assert [(os.path.relpath(r["file"], top), r["line"]) for r in rows] == \
        [("child-charts/vllm/templates/deployment.yaml", 14)]


def test_a_value_the_umbrella_leaves_is_the_subcharts_own(helm_on_path: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    top = _umbrella(tmp_path)
    (top / "values.yaml").write_text("vllm:\n  other: 1\n")
    (top / "child-charts" / "vllm" / "values.yaml").write_text("maxModelLen: 65536\n")
    assert _lint(top, capsys) == [("VLLM006", "child-charts/vllm/values.yaml", 1, 14)]
