"""A kustomization whose Deployment runs ollama/ollama with no command (the image starts the
server; homeiac/home's gitops Ollama app): the built server has no argv words to map back, so it
was placed at kustomization.yaml:1:1 (beside --no-render's deployment.yaml:11), and the
`# servefit: model=` directive above it was lost (kustomize drops comments), so SF115 said no
model was named and tune refused the server. Now it is placed on its image line and the
directives of that file apply, as without rendering."""

from __future__ import annotations

import json
import os
from pathlib import Path

import k8stools
import pytest

from servefit.cli import main

KUSTOMIZATION = """apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - deployment.yaml
"""
DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: ollama
spec:
  template:
    spec:
      containers:
        - name: ollama
      # servefit: model=qwen2.5:7b
          image: ollama/ollama:0.12.3
          env:
            - name: OLLAMA_CONTEXT_LENGTH
              value: "8192"
          resources:
            limits:
              nvidia.com/gpu: 1
"""


@pytest.fixture
def kubectl(monkeypatch: pytest.MonkeyPatch) -> Path:
    where, why = k8stools.tools_dir()
    if where is None:
        pytest.skip(f"no kubectl here: {why}")
    monkeypatch.setenv("PATH", f"{where}{os.pathsep}{os.environ.get('PATH', '')}")
    return where


def _app(tmp_path: Path) -> Path:
    d = tmp_path / "ollama"
    d.mkdir()
    (d / "kustomization.yaml").write_text(KUSTOMIZATION)
    (d / "deployment.yaml").write_text(DEPLOYMENT)
    return d


@pytest.mark.parametrize("render", [True, False])
def test_placed_on_its_image_with_its_directives(kubectl: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 render: bool) -> None:
    d = _app(tmp_path)
    main(["lint", str(d), "--gpu", "l4", "--format", "json", "--fail-on", "never", *([] if render else ["--no-render"])])
    found = {(f["code"], os.path.basename(f["location"]["file"]), f["location"]["line"])
             for f in json.loads(capsys.readouterr().out)}
    assert ("SEC004", "deployment.yaml", 11) in found
    assert not [f for f in found if f[0] in ("SF115", "SF110")]
    main(["models", str(d), "--format", "json"])
    rows = json.loads(capsys.readouterr().out)
    assert [(os.path.basename(r["file"]), r["line"], r["model"]) for r in rows] == \
        [("deployment.yaml", 11, "Qwen/Qwen2.5-7B-Instruct")]


def test_tune_writes_the_resource_file(kubectl: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _app(tmp_path)
    main(["tune", str(d), "--gpu", "l4", "--write"])
    capsys.readouterr()
    assert (d / "deployment.yaml").read_text() == DEPLOYMENT.replace('value: "8192"\n', 'value: "32768"\n'
                                                                     '            - name: OLLAMA_NUM_PARALLEL\n'
                                                                     '              value: "4"\n')
    assert (d / "kustomization.yaml").read_text() == KUSTOMIZATION
    main(["tune", str(d), "--gpu", "l4", "--diff"])
    assert "no changes to write" in capsys.readouterr().out
