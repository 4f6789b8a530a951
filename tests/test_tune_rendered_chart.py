"""tune on a Helm chart rendered once per values file writes only into the files that configure
that render alone. A real chart (four values files, one template whose optional flags sit in an
`{{- if }}`) had `--max-num-seqs 32 --max-num-seqs 8 --max-num-seqs 32` written into the template,
inside the condition, one insertion per render, and one render's --max-model-len written into
the chart's values.yaml that every render reads."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import k8stools
import pytest

from servefit.cli import main

TEMPLATE = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.10.2
        args:
          - --model
          - {{ .Values.model | quote }}
          - --max-model-len
          - {{ .Values.maxModelLen | quote }}
          {{- if .Values.trust }}
          - --trust-remote-code
          {{- end }}
        resources:
          limits:
            nvidia.com/gpu: 1
      nodeSelector:
        cloud.google.com/gke-accelerator: nvidia-l4
"""
SEQS = """          - {{ .Values.maxModelLen | quote }}
          - --max-num-seqs
          - {{ .Values.maxNumSeqs | quote }}
"""


@pytest.fixture
def helm(monkeypatch: pytest.MonkeyPatch) -> Path:
    where, why = k8stools.tools_dir()
    if where is None:
        pytest.skip(f"no helm 3 here: {why}")
    monkeypatch.setenv("PATH", f"{where}{os.pathsep}{os.environ.get('PATH', '')}")
    return where / "helm"


def _chart(tmp_path: Path, template: str, values: str) -> Path:
    d = tmp_path / "llm"
    (d / "templates").mkdir(parents=True)
    (d / "Chart.yaml").write_text("apiVersion: v2\nname: llm\nversion: 0.1.0\n")
    (d / "templates" / "deployment.yaml").write_text(template)
    (d / "values.yaml").write_text(values)
    return d


def _files(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): p.read_text() for p in sorted(d.rglob("*")) if p.is_file()}


def _written_by_hand(d: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """`tune --write` on the chart: it must leave every file as it was; the changes it shows by hand."""
    before = _files(d)
    main(["tune", str(d), "--write"])
    out = capsys.readouterr().out
    assert _files(d) == before
    return [line.strip() for line in out.splitlines() if "by hand:" in line]


def test_shared_lines_are_shown_not_written(tmp_path: Path, helm: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _chart(tmp_path, TEMPLATE, "model: Qwen/Qwen2.5-1.5B-Instruct\nmaxModelLen: 2048\ntrust: true\n")
    (d / "values-a.yaml").write_text("model: Qwen/Qwen2.5-3B-Instruct\n")
    assert _written_by_hand(d, capsys) == [
        "by hand: --max-model-len 8192 (in values-a.yaml: values.yaml sets it for every values file)",
        "by hand: --max-num-seqs 64 (the chart's template deployment.yaml writes this command for every values file)"]


def test_the_renders_own_values_are_written(tmp_path: Path, helm: Path, capsys: pytest.CaptureFixture[str]) -> None:
    values = "model: Qwen/Qwen2.5-1.5B-Instruct\nmaxModelLen: 2048\ntrust: true\nmaxNumSeqs: 256\n"
    d = _chart(tmp_path, TEMPLATE.replace("          - {{ .Values.maxModelLen | quote }}\n", SEQS), values)
    main(["tune", str(d), "--write"])
    capsys.readouterr()
    after = _files(d)
    assert after["values.yaml"] == values.replace("2048", "32768").replace("256", "32")
    assert after["templates/deployment.yaml"] == TEMPLATE.replace("          - {{ .Values.maxModelLen | quote }}\n", SEQS)
    main(["tune", str(d), "--write"])  # idempotent: the written chart is the best already
    assert "change  none: the config is already the best one" in capsys.readouterr().out
    assert _files(d) == after
    rendered = subprocess.run([str(helm), "template", "x", str(d)], capture_output=True, text=True, check=True).stdout
    assert '- --max-num-seqs\n          - "32"' in rendered


# public vLLM charts pass extra flags as a values list that the template writes with toYaml
LISTED = TEMPLATE.replace("""          - --max-model-len
          - {{ .Values.maxModelLen | quote }}
          {{- if .Values.trust }}
          - --trust-remote-code
          {{- end }}
""", """          {{- with .Values.extraArgs }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
""")


@pytest.mark.parametrize(("extra", "tuned", "rendered"), [
    ('extraArgs: [--max-model-len, "2048"]\n', 'extraArgs: [--max-model-len, "32768", --max-num-seqs, "32"]\n',
     '- --max-model-len\n          - "32768"\n          - --max-num-seqs\n          - "32"\n'),
    ('extraArgs: ["--max-model-len", "2048"]\n', 'extraArgs: ["--max-model-len", "32768", "--max-num-seqs", "32"]\n',
     '- --max-model-len\n          - "32768"\n          - --max-num-seqs\n          - "32"\n'),
    ("extraArgs:\n  - --max-model-len=2048\n  - --enable-prefix-caching\n",
     "extraArgs:\n  - --max-model-len=32768\n  - --enable-prefix-caching\n  - --max-num-seqs=32\n",
     "- --max-model-len=32768\n          - --enable-prefix-caching\n          - --max-num-seqs=32\n"),
])
def test_new_flags_are_items_of_the_values_list(tmp_path: Path, helm: Path, capsys: pytest.CaptureFixture[str],
                                                extra: str, tuned: str, rendered: str) -> None:
    """The values file's own list gets the new flag in its own idiom (a flow list's items, or block
    items written `--flag=value` as its other flags are); the template is not touched."""
    model = "model: Qwen/Qwen2.5-1.5B-Instruct\n"
    d = _chart(tmp_path, LISTED, model + extra)
    assert main(["tune", str(d), "--write"]) == 0
    assert "--max-model-len 32768, --max-num-seqs 32 [safe]" in capsys.readouterr().out
    after = _files(d)
    assert after["values.yaml"] == model + tuned
    assert after["templates/deployment.yaml"] == LISTED
    assert main(["tune", str(d), "--write"]) == 0  # a second --write writes nothing
    assert "change  none: the config is already the best one" in capsys.readouterr().out
    assert _files(d) == after
    out = subprocess.run([str(helm), "template", "x", str(d)], capture_output=True, text=True, check=True).stdout
    assert rendered in out


def test_a_list_every_render_reads_is_not_written(tmp_path: Path, helm: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """values.yaml's list is every render's: under a render with its own values file, the new flag is
    shown, not added there."""
    d = _chart(tmp_path, LISTED, 'model: Qwen/Qwen2.5-1.5B-Instruct\nextraArgs: [--max-model-len, "2048"]\n')
    (d / "values-a.yaml").write_text("model: Qwen/Qwen2.5-3B-Instruct\n")
    assert _written_by_hand(d, capsys) == [
        "by hand: --max-model-len 8192 (in values-a.yaml: values.yaml sets it for every values file)",
        "by hand: --max-num-seqs 64"]
