"""Cloud Run: a script's `gcloud [beta] run deploy SERVICE --image IMAGE --args=a,b --gpu-type nvidia-l4` is the
container it runs (sources/cloud_run.py), and a service YAML (Knative with run.googleapis.com/ keys) names its
GPU with the run.googleapis.com/accelerator node selector. A Cloud Run service answers only callers with IAM
permission unless --allow-unauthenticated opens it. (Google's "Run LLM inference on Cloud Run GPUs" guides
deploy vLLM and Ollama this way.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main
from servefit.sources import scan_file

DEPLOY = """#!/bin/bash
gcloud run deploy vllm-gemma \\
  --image=vllm/vllm-openai:v0.10.0 \\
  --region=us-central1 \\
  --gpu=1 --gpu-type=nvidia-l4 \\
  --no-cpu-throttling{extra} \\
  --args="--model=meta-llama/Llama-3.1-8B-Instruct,--max-model-len=65536,--gpu-memory-utilization=0.9"
"""


def _write(tmp_path: Path, text: str, name: str = "deploy.sh") -> Path:
    f = tmp_path / name
    f.write_text(text)
    return f


def test_the_service_is_read_as_its_container(tmp_path: Path) -> None:
    f = _write(tmp_path, DEPLOY.format(extra=""))
    [site] = scan_file(str(f)).sites
    text = f.read_text()
    assert [t.text for t in site.argv] == ["vllm", "serve", "--model=meta-llama/Llama-3.1-8B-Instruct",
                                           "--max-model-len=65536", "--gpu-memory-utilization=0.9"]
    assert [(t.span.line, t.span.col, text[t.span.start:t.span.end]) for t in site.argv[2:] if t.span] == [
        (7, 11, "--model=meta-llama/Llama-3.1-8B-Instruct"), (7, 52, "--max-model-len=65536"),
        (7, 74, "--gpu-memory-utilization=0.9")]
    assert site.image == "vllm/vllm-openai:v0.10.0" and site.engine_version == "0.10.0"
    assert (site.gpu.name, site.gpu.count, site.gpu.source) == ("nvidia-l4", 1, "gcloud run deploy --gpu-type")
    assert site.workload.runtime == "Cloud Run"


def test_lint_estimate_and_tune_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _write(tmp_path, DEPLOY.format(extra=""))
    assert main(["lint", str(f), "--format", "json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert [(x["code"], x["location"]["line"], x["location"]["column"]) for x in found] == [("VLLM003", 7, 68)]
    assert "on the NVIDIA L4" in found[0]["message"]  # the GPU from --gpu-type; IAM guards it: no SEC finding
    assert main(["tune", str(f), "--write"]) == 0
    out = capsys.readouterr().out
    assert "  change  --max-model-len 32768, --max-num-seqs 128 [safe]\n" in out
    assert f.read_text() == DEPLOY.format(extra="").replace(
        "--max-model-len=65536,--gpu-memory-utilization=0.9\"",
        "--max-model-len=32768,--gpu-memory-utilization=0.9,--max-num-seqs=128\"")  # the list's own items
    assert main(["tune", str(f), "--write"]) == 0
    assert "change  none: the config is already the best one" in capsys.readouterr().out
    assert main(["lint", str(f), "--format", "json"]) == 0
    assert [x["code"] for x in json.loads(capsys.readouterr().out)] == ["VLLM019"]  # info: 1 request at 32,768


@pytest.mark.parametrize(("extra", "public"), [(" --allow-unauthenticated", True),
                                               (" --allow-unauthenticated --ingress=internal", False),
                                               (" --no-allow-unauthenticated", False)])
def test_allow_unauthenticated_publishes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str,
                                            public: bool) -> None:
    f = _write(tmp_path, DEPLOY.format(extra=extra))
    main(["lint", str(f), "--format", "json", "--fail-on", "never", "--select", "SEC"])
    got = [(x["code"], x["message"]) for x in json.loads(capsys.readouterr().out)]
    assert got == ([("SEC002", "vLLM has no API key and listens on all interfaces (its default without --host); "
                               "Cloud Run service with --allow-unauthenticated (public on the internet) publishes "
                               "it: anyone who can reach that address can run prompts on this server")]
                   if public else [])


OLLAMA = """gcloud beta run deploy ollama --image ollama/ollama:0.12.0 --set-env-vars OLLAMA_NUM_PARALLEL=4 \\
  --gpu 1 --gpu-type nvidia-l4 --no-allow-unauthenticated
"""


def test_an_environment_variable_joins_the_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _write(tmp_path, "# servefit: model=gemma3:4b\n" + OLLAMA)
    [site] = scan_file(str(f)).sites
    assert site.env["OLLAMA_NUM_PARALLEL"].text == "4"
    assert main(["tune", str(f), "--write", "--min-context", "8192"]) == 0
    assert "  change  OLLAMA_CONTEXT_LENGTH=65536 [safe]\n" in capsys.readouterr().out
    assert f.read_text() == "# servefit: model=gemma3:4b\n" + OLLAMA.replace(
        "OLLAMA_NUM_PARALLEL=4 ", "OLLAMA_NUM_PARALLEL=4,OLLAMA_CONTEXT_LENGTH=65536 ")
    assert main(["tune", str(f), "--write", "--min-context", "8192"]) == 0
    assert "change  none" in capsys.readouterr().out


def test_a_custom_delimiter_and_gpu_default(tmp_path: Path) -> None:
    f = _write(tmp_path, 'gcloud run deploy s --image vllm/vllm-openai:v0.10.0 --gpu 2 '
                         '--args="^;^--model=Qwen/Qwen2.5-7B-Instruct;--max-model-len=8192"\n')
    [site] = scan_file(str(f)).sites
    assert [t.text for t in site.argv][2:] == ["--model=Qwen/Qwen2.5-7B-Instruct", "--max-model-len=8192"]
    assert (site.gpu.name, site.gpu.count) == ("nvidia-l4", 2)  # Cloud Run's default GPU type
    _write(tmp_path, "gcloud run deploy web --source . --region us-central1\n")  # no image: no server read
    assert scan_file(str(tmp_path / "deploy.sh")).sites == []


SERVICE = """apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: vllm
{annotations}spec:
  template:
    spec:
      containers:
      - image: vllm/vllm-openai:v0.10.0
        args: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"]
        resources:
          limits:
            nvidia.com/gpu: '1'
      nodeSelector:
        run.googleapis.com/accelerator: nvidia-l4
"""


def test_a_cloud_run_service_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _write(tmp_path, SERVICE.format(annotations="  annotations:\n    run.googleapis.com/launch-stage: BETA\n"),
               "service.yaml")
    [site] = scan_file(str(f)).sites
    assert (site.gpu.name, site.gpu.count) == ("nvidia-l4", 1) and site.workload.runtime == "Cloud Run"
    main(["lint", str(f), "--format", "json", "--fail-on", "never", "--select", "SEC,SF110"])
    assert json.loads(capsys.readouterr().out) == []  # its GPU is known; IAM guards it
    knative = _write(tmp_path, SERVICE.format(annotations="").replace("run.googleapis.com/accelerator",
                                                                      "cloud.google.com/gke-accelerator"), "kn.yaml")
    main(["lint", str(knative), "--format", "json", "--fail-on", "never", "--select", "SEC"])
    assert [x["code"] for x in json.loads(capsys.readouterr().out)] == ["SEC002"]  # Knative: public by default


SOURCE_DOCKERFILE = """FROM ollama/ollama:0.12.3
ENV OLLAMA_HOST 0.0.0.0:8080
ENV MODEL gemma3:4b
RUN ollama serve & sleep 5 && ollama pull $MODEL
ENTRYPOINT ["ollama", "serve"]
"""
SOURCE_DEPLOY = """gcloud run deploy ollama-gemma \\
  --source ./ollama \\
  --set-env-vars OLLAMA_NUM_PARALLEL=4 \\
  --gpu 1 --gpu-type nvidia-l4 \\
  --no-allow-unauthenticated
"""


def test_source_builds_the_folders_dockerfile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--source DIR` (Google's Ollama-on-Cloud-Run guide): Cloud Build builds DIR's Dockerfile and the service
    runs it; the model its build pulls is the one it serves, and the Dockerfile is not a second server."""
    (tmp_path / "ollama").mkdir()
    (tmp_path / "ollama" / "Dockerfile").write_text(SOURCE_DOCKERFILE)
    f = _write(tmp_path, SOURCE_DEPLOY)
    main(["estimate", str(tmp_path), "--format", "json"])
    [est] = json.loads(capsys.readouterr().out)
    assert (est["server"]["name"], est["model"]["resolved"], est["engine_version"]) == (
        "script:2", "google/gemma-3-4b-it", "0.12.3")
    assert est["gpu"]["name"] == "NVIDIA L4"
    main(["lint", str(tmp_path), "--format", "json", "--fail-on", "never", "--select", "SEC,SF115"])
    assert json.loads(capsys.readouterr().out) == []  # IAM guards it; the model is known
    assert main(["tune", str(tmp_path), "--write", "--min-context", "16384"]) == 0
    assert "  change  OLLAMA_CONTEXT_LENGTH=65536 [safe]\n" in capsys.readouterr().out
    assert f.read_text() == SOURCE_DEPLOY.replace("OLLAMA_NUM_PARALLEL=4 ", "OLLAMA_NUM_PARALLEL=4,"
                                                  "OLLAMA_CONTEXT_LENGTH=65536 ")
