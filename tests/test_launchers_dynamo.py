"""NVIDIA Dynamo: a DynamoGraphDeployment's services keep their container under
`extraPodSpec.mainContainer`, and its workers (`python3 -m dynamo.sglang`, `python3 -m
dynamo.vllm`) take the engine's options plus Dynamo's own, which change from release to release.
No server was read (SF116 on each image); now each worker is the engine's server, Dynamo's options
named in an assumption, and the runtime image's tag (Dynamo's release) is not taken as the
engine's version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

DGD = """apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: llm
spec:
  services:
    Frontend:
      componentType: frontend
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.6.1
          command: ["python3", "-m", "dynamo.frontend", "--http-port=8000"]
    SglWorker:
      componentType: worker
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.6.1
          command: ["python3", "-m", "dynamo.sglang"]
          args: ["--model-path", "Qwen/Qwen3-0.6B", "--page-size", "16", "--tp", "1",
                 "--migration-limit=3", "--endpoint", "dyn://llm.backend.generate", "--context-length", "8192"]
    VllmWorker:
      componentType: worker
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1
          command: ["python3", "-m", "dynamo.vllm", "--model", "Qwen/Qwen3-0.6B", "--is-prefill-worker",
                    "--max-model-len", "8192", "--gpu-memory-utilization", "0.85"]
"""


@pytest.fixture
def dgd(tmp_path: Path) -> Path:
    p = tmp_path / "dgd.yaml"
    p.write_text(DGD)
    return p


def test_each_worker_is_the_engines_server(dgd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["lint", str(dgd), "--gpu", "H100", "--list-sites", "--output-format", "json"])
    sites = {s["name"]: s for s in json.loads(capsys.readouterr().out)}
    assert sorted(sites) == ["DynamoGraphDeployment/llm/SglWorker/container", "DynamoGraphDeployment/llm/VllmWorker/container"]
    sgl, vllm = sites["DynamoGraphDeployment/llm/SglWorker/container"], sites["DynamoGraphDeployment/llm/VllmWorker/container"]
    assert (sgl["engine"], sgl["engine_version"] == "0.6.1", sgl["settings"]) == ("sglang", False, {
        "model_path": "Qwen/Qwen3-0.6B", "page_size": 16, "tp_size": 1, "context_length": 8192})
    assert (vllm["engine"], vllm["engine_version"] == "0.6.1", vllm["settings"]) == ("vllm", False, {
        "max_model_len": 8192, "gpu_memory_utilization": 0.85})
    assert sgl["model"] == vllm["model"] == "Qwen/Qwen3-0.6B"


def test_dynamos_options_are_named_not_errors(dgd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["lint", str(dgd), "--gpu", "H100", "--output-format", "json"])
    # no SEC004 either: a worker runs no HTTP server of the engine's (Dynamo's frontend is the one)
    assert [f["code"] for f in json.loads(capsys.readouterr().out)] == []
    main(["estimate", str(dgd), "--gpu", "H100", "--format", "json"])
    plans = {p["engine"]: p for p in json.loads(capsys.readouterr().out)}
    assert "--migration-limit --endpoint: options of NVIDIA Dynamo, not of SGLang's server (not checked)" \
        in plans["sglang"]["assumptions"]
    assert "--is-prefill-worker: options of NVIDIA Dynamo, not of vLLM's server (not checked)" in plans["vllm"]["assumptions"]
    assert any("counts that build's own releases" in a for a in plans["vllm"]["assumptions"])


def test_a_misspelt_engine_option_is_taken_as_dynamos_and_said(dgd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The price of a launcher whose own options are not listed: a typo is not an error, but it is
    named, and its value is not used."""
    dgd.write_text(DGD.replace('"--max-model-len", "8192"', '"--max-model-lenght", "8192"'))
    main(["estimate", str(dgd), "--gpu", "H100", "--format", "json"])
    plans = {p["engine"]: p for p in json.loads(capsys.readouterr().out)}
    assert "--is-prefill-worker --max-model-lenght: options of NVIDIA Dynamo, not of vLLM's server (not checked)" \
        in plans["vllm"]["assumptions"]
    assert plans["vllm"]["max_model_len"] == 40960
