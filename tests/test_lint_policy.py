"""servefit lint as a CI gate: config discovery and targets, suppressions in the file, baselines
that survive edits, several output formats in one run, fail-on and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema

SARIF_SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())

MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
spec:
  template:
    spec:
      nodeSelector:
        cloud.google.com/gke-accelerator: nvidia-l4
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          args:
            - meta-llama/Llama-3.1-8B-Instruct
            - --gpu-memory-utilization
            - "0.97"
          resources:
            limits:
              nvidia.com/gpu: 1
"""


def lint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "servefit", "lint", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def codes_at(stdout: str) -> list[tuple[str, int, str]]:
    out = []
    for f in json.loads(stdout):
        out.append((f["code"], f["location"]["line"] if f["location"] else 0, f["severity"]))
    return out


def test_findings_exit_codes_and_formats(tmp_path):
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "vllm.yaml").write_text(MANIFEST)
    out = lint("k8s", "--format", "json", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    found = codes_at(out.stdout)
    assert ("VLLM003", 14, "error") in found  # the model line: max-model-len defaults to 131072
    assert ("VLLM017", 16, "warning") in found  # utilization 0.97
    # several reports in one run; SARIF validates
    out = lint("k8s", "--format", "sarif", "-o", "r.sarif", "--format", "github", cwd=tmp_path)
    jsonschema.validate(json.loads((tmp_path / "r.sarif").read_text()), SARIF_SCHEMA)
    errors = [ln for ln in out.stdout.splitlines() if ln.startswith("::error")]
    assert errors[0].startswith("::error file=k8s/vllm.yaml,line=14")
    assert lint("k8s", "--exit-zero", cwd=tmp_path).returncode == 0
    assert lint("k8s", "--fail-on", "never", cwd=tmp_path).returncode == 0
    assert lint("nope", cwd=tmp_path).returncode == 2


def test_suppression_with_reason_silences_exactly_its_finding(tmp_path):
    text = MANIFEST.replace('- "0.97"', '- "0.97"  # servefit: ignore[VLLM017] dedicated node, measured')
    (tmp_path / "vllm.yaml").write_text(text)
    found = codes_at(lint("vllm.yaml", "--format", "json", cwd=tmp_path).stdout)
    assert not [c for c in found if c[0] == "VLLM017"]
    assert [c for c in found if c[0] == "VLLM003"]  # the other finding stays
    # without a reason the suppression is not applied and says so
    (tmp_path / "vllm.yaml").write_text(MANIFEST.replace('- "0.97"', '- "0.97"  # servefit: ignore[VLLM017]'))
    found = codes_at(lint("vllm.yaml", "--format", "json", cwd=tmp_path).stdout)
    assert ("VLLM017", 16, "warning") in found and ("SF011", 16, "warning") in found
    # an unused one is a finding
    (tmp_path / "vllm.yaml").write_text(MANIFEST.replace('- "0.97"', '- "0.90"  # servefit: ignore[VLLM017] old'))
    found = codes_at(lint("vllm.yaml", "--format", "json", cwd=tmp_path).stdout)
    assert ("SF010", 16, "warning") in found


def test_k8s_annotation_suppresses_for_the_object(tmp_path):
    text = MANIFEST.replace("  name: llm\n", "  name: llm\n  annotations:\n"
                            "    servefit.io/ignore-VLLM017: \"measured on this node pool\"\n")
    (tmp_path / "vllm.yaml").write_text(text)
    found = codes_at(lint("vllm.yaml", "--format", "json", cwd=tmp_path).stdout)
    assert not [c for c in found if c[0] == "VLLM017"] and [c for c in found if c[0] == "VLLM003"]


def test_baseline_hides_todays_findings_after_edits_and_reports_new(tmp_path):
    (tmp_path / "vllm.yaml").write_text(MANIFEST)
    out = lint("vllm.yaml", "--write-baseline", "baseline.json", cwd=tmp_path)
    assert out.returncode == 0 and "wrote" in out.stderr
    # an unrelated edit above moves every line down; then a new server with its own finding
    edited = "# deployed by CI\n# owner: ml-platform\n" + MANIFEST
    edited += "---\n" + MANIFEST.replace("name: llm", "name: llm-2")
    (tmp_path / "vllm.yaml").write_text(edited)
    out = lint("vllm.yaml", "--baseline", "baseline.json", "--format", "json", cwd=tmp_path)
    new = json.loads(out.stdout)
    assert {(f["code"], f["server"]) for f in new if not f["code"].startswith("SEC")} == {
        ("VLLM003", "Deployment/llm-2/vllm"), ("VLLM016", "Deployment/llm-2/vllm"),
        ("VLLM017", "Deployment/llm-2/vllm")}  # 0.97 on vLLM 0.11 also leaves no room for CUDA graphs
    assert out.returncode == 1


def test_config_targets_select_and_overrides(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.servefit]\ngpu = "L4"\nignore = ["VLLM017"]\n[tool.servefit.severity]\nVLLM003 = "warning"\n'
        '[[tool.servefit.targets]]\npaths = ["prod/**"]\ngpu = "H100"\n')
    bare = MANIFEST.replace("      nodeSelector:\n        cloud.google.com/gke-accelerator: nvidia-l4\n", "")
    (tmp_path / "prod").mkdir()
    (tmp_path / "prod" / "vllm.yaml").write_text(bare)
    (tmp_path / "dev.yaml").write_text(bare)
    out = lint(".", "--format", "json", cwd=tmp_path)
    found = json.loads(out.stdout)
    files = {(f["location"]["file"], f["code"], f["severity"]) for f in found}
    assert ("dev.yaml", "VLLM003", "warning") in files  # on the default L4, downgraded by config
    prod = [f for f in found if f["location"]["file"].startswith("prod") and not f["code"].startswith("SEC")]
    assert [f["code"] for f in prod] == ["VLLM018"]  # fits an H100; only the 128K default is worth a word
    assert "H100" in prod[0]["message"] and "config target prod/**" in prod[0]["message"]
    assert not [f for f in found if f["code"] == "VLLM017"]
    assert out.returncode == 0  # nothing at error any more
    out = lint(".", "--format", "json", "--config", 'severity.VLLM003="error"', cwd=tmp_path)
    assert out.returncode == 2 and "invalid configuration" in out.stderr  # dotted keys are not TOML tables
    out = lint(".", "--format", "json", "--config", 'fail-on="warning"', cwd=tmp_path)
    assert out.returncode == 1
    (tmp_path / "pyproject.toml").write_text('[tool.servefit]\nfail_on = "x"\n')
    out = lint(".", cwd=tmp_path)
    assert out.returncode == 2 and "tool.servefit.fail_on" in out.stderr


def test_html_report_for_lint(tmp_path):
    (tmp_path / "vllm.yaml").write_text(MANIFEST)
    lint("vllm.yaml", "--format", "html", "-o", "report.html", cwd=tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "vllm.yaml:14" in page
    assert "<script" not in page and "https://" not in page
