"""Found by running servefit on public serving files (session 29, third set of trial findings): each case is
a minimal file written for the test, in the shape the repository had.

Repositories tried (owner/name@commit):
  vllm-project/aibrix@75e6e274c637c618796af098c79a1c39efc1652a (samples/distributed/fleet-two-node.yaml)
  huggingface/text-generation-inference at v2.0.4, v2.1.0 and v3.3.6 (server/text_generation_server/models/
    custom_modeling/flash_gemma_modeling.py::_load_gqa, flash_llama_modeling.py::FlashLlamaAttention)
"""

from __future__ import annotations

import os
from pathlib import Path

import k8stools
import pytest

from servefit.cli import main

# aibrix's samples/distributed/fleet-two-node.yaml: a RayClusterFleet whose head pod (1 GPU) runs `vllm serve
# ... --tensor-parallel-size 2 --distributed-executor-backend ray` and whose one worker pod (1 GPU) only joins
# the Ray cluster. The estimate said "1 × NVIDIA L4 ... TP 2": the second rank's GPU is the worker pod's.
FLEET = """apiVersion: orchestration.aibrix.ai/v1alpha1
kind: RayClusterFleet
metadata:
  name: qwen-coder-7b-instruct
spec:
  replicas: 1
  template:
    metadata:
      annotations:
        ray.io/overwrite-container-cmd: "true"
    spec:
      rayVersion: "2.10.0"
      headGroupSpec:
        rayStartParams:
          dashboard-host: "0.0.0.0"
        template:
          spec:
            containers:
              - name: ray-head
                image: vllm/vllm-openai:v0.7.1
                command: ["/bin/bash", "-c"]
                args:
                  - >
                    ulimit -n 65536 &&
                    eval "$KUBERAY_GEN_RAY_START_CMD" &

                    vllm serve Qwen/Qwen2.5-Coder-7B-Instruct \\
                      --tensor-parallel-size 2 \\
                      --distributed-executor-backend ray \\
                      --port 8000 \\
                      --dtype half
                resources:
                  limits:
                    nvidia.com/gpu: 1
      workerGroupSpecs:
        - groupName: small-group
          replicas: 1
          minReplicas: 1
          maxReplicas: 5
          rayStartParams: {}
          template:
            spec:
              containers:
                - name: ray-worker
                  image: vllm/vllm-openai:v0.7.1
                  command: [ "/bin/bash", "-c" ]
                  args:
                    - >
                      ulimit -n 65536 &&
                      eval "$KUBERAY_GEN_RAY_START_CMD" &&
                      tail -f /dev/null
                  resources:
                    limits:
                      nvidia.com/gpu: 1
"""


def test_ray_cluster_fleet_counts_worker_pods_gpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "fleet-two-node.yaml"
    f.write_text(FLEET)
    assert main(["estimate", str(f), "--gpu", "L4"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1] == (
        "2 × NVIDIA L4 (22.03 GiB as the driver reports it; --gpu; count from nvidia.com/gpu limit + 1 pod(s) × 1 "
        "of Ray worker group small-group (the server's Ray ranks run there too))  ·  TP 2 PP 1")
    # minReplicas over a smaller replicas; numOfHosts multiplies the pods; a group without replicas has none
    text = FLEET.replace("          replicas: 1\n          minReplicas: 1\n", "          replicas: 0\n          minReplicas: 1\n"
                         "          numOfHosts: 2\n") + """        - groupName: idle
          template:
            spec:
              containers:
                - name: ray-worker
                  image: vllm/vllm-openai:v0.7.1
                  command: ["/bin/bash", "-c", "ray start --block"]
                  resources:
                    limits:
                      nvidia.com/gpu: 4
"""
    f.write_text(text)
    assert main(["estimate", str(f), "--gpu", "L4"]) == 0
    assert "3 × NVIDIA L4" in capsys.readouterr().out.splitlines()[1]


# TGI012 quoted flash_llama_modeling.py's ValueError for every model whose KV heads do not divide among the
# shards. Gemma (1 KV head) over 8 shards loads through flash_gemma_modeling.py::_load_gqa, which asserts the
# fused q/k/v weight's shape: each shard holds 256 query rows and 32 rows each of K and V (320), where the
# assertion wants (1 + 2 × 1) × 256. Llama's ValueError exists from v2.1.0 only.
def _tgi012(capsys: pytest.CaptureFixture[str], model: str, shards: int, version: str, *more: str) -> str:
    main(["estimate", "--gpu", "L4", "--gpus", str(shards), "--engine-version", version, "--",
          "text-generation-launcher", "--model-id", model, "--num-shard", str(shards), *more])
    return next(line for line in capsys.readouterr().out.splitlines() if "TGI012" in line).strip()


def test_tgi012_quotes_the_model_familys_own_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert _tgi012(capsys, "google/gemma-2b", 8, "3.3.6") == "TGI012 [error] AssertionError: [320, 2048] != [768, 2048]"
    assert _tgi012(capsys, "google/gemma-2b", 8, "2.0.4") == "TGI012 [error] AssertionError: [320, 2048] != [768, 2048]"
    # a bitsandbytes weight is no UnquantizedWeight: the shape is not asserted there
    assert _tgi012(capsys, "google/gemma-2b", 8, "3.3.6", "--quantize", "bitsandbytes") == (
        "TGI012 [error] num_key_value_heads 1 does not divide among num_shard=8: TGI's gemma code splits K and V by "
        "head, so the shards fail while loading the model")
    assert _tgi012(capsys, "meta-llama/Meta-Llama-3-8B", 16, "3.3.6") == (
        "TGI012 [error] ValueError: `num_key_value_heads` must be divisible by `num_shards` (got "
        "`num_key_value_heads`: 8 and `num_shards`: 16")
    assert _tgi012(capsys, "meta-llama/Meta-Llama-3-8B", 16, "2.0.4").startswith(
        "TGI012 [error] num_key_value_heads 8 does not divide among num_shard=16: TGI's llama code")


def test_tgi_kv_rows_that_do_not_split_fail_in_get_sharded() -> None:
    from dataclasses import replace

    from servefit.engines.tgi.kv_shards import kv_heads_error
    from servefit.models.catalog import lookup

    gemma = lookup("google/gemma-2b")
    assert gemma is not None
    # utils/weights.py::Weights.get_sharded: k_proj's 1 × 20 rows over 8 shards
    assert kv_heads_error(replace(gemma, head_dim=20), 8, (3, 3, 6), False) == (
        "AssertionError: The choosen size 20 is not compatible with sharding on 8 shards")


# A Deployment running vLLM's CUDA image whose container asks for no GPU (only memory) was planned on
# whatever --gpu named, silently: the NVIDIA device plugin gives a container only the GPUs its
# `nvidia.com/gpu` resource counts, so vLLM sees none. Ollama and llama.cpp run on the CPU there.
NO_GPU = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.10.1
          args: ["--model", "Qwen/Qwen2.5-1.5B-Instruct"]
          resources:
            limits:
              memory: 16Gi
"""
ASKS_NONE = ("the container asks Kubernetes for no GPU (no nvidia.com/gpu or amd.com/gpu in its resources, no GPU "
             "node selector or runtimeClassName)")


def test_a_pod_that_asks_for_no_gpu_is_not_planned_on_the_gpu_flag(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "deployment.yaml"
    f.write_text(NO_GPU)
    said = (f"{ASKS_NONE}: vLLM sees no GPU (it needs one unless it is a CPU build), so its memory is not checked (for "
            "a GPU add a `nvidia.com/gpu` limit in the container's resources)")
    assert main(["lint", str(f), "--gpu", "L4"]) == 0
    assert f"{f}:11:19: SF120 {said}\n" in capsys.readouterr().out
    for command in ("estimate", "explain"):
        assert main([command, str(f), "--gpu", "L4"]) == 2
        assert capsys.readouterr().err == f"servefit: error: {said}\n"
    ollama = NO_GPU.replace("vllm/vllm-openai:v0.10.1", "ollama/ollama:0.11.4").replace(
        'args: ["--model", "Qwen/Qwen2.5-1.5B-Instruct"]', 'env: [{name: OLLAMA_CONTEXT_LENGTH, value: "8192"}]')
    f.write_text(ollama)
    main(["lint", str(f), "--gpu", "L4"])
    assert (f"{f}:10:1: SF120 {ASKS_NONE}: the server runs on the CPU, and servefit plans GPU memory, so its memory "
            "is not checked\n") in capsys.readouterr().out
    # any way of asking for a GPU or device: a GPU count, a GPU node label, the NVIDIA runtime, another device
    for asks in (NO_GPU.replace("memory: 16Gi", "nvidia.com/gpu: 1"),
                 NO_GPU.replace("      containers:", "      nodeSelector: {cloud.google.com/gke-accelerator: nvidia-l4}\n"
                                "      containers:"),
                 NO_GPU.replace("      containers:", "      runtimeClassName: nvidia\n      containers:"),
                 NO_GPU.replace("memory: 16Gi", "aws.amazon.com/neuron: 1")):
        f.write_text(asks)
        main(["lint", str(f), "--gpu", "L4"])
        assert "SF120" not in capsys.readouterr().out
    # an operator's kind may give its pods GPUs from its own fields: not said there
    f.write_text(NO_GPU.replace("apiVersion: apps/v1\nkind: Deployment", "apiVersion: example.com/v1\nkind: Server"))
    main(["lint", str(f), "--gpu", "L4"])
    assert "SF120" not in capsys.readouterr().out


# `servefit estimate overlay/kustomization.yaml` said "no serving engine found in this file" while `lint` built
# the kustomization and found the server. And tune wrote `--max-num-seqs 32` into the base's args list before
# `--port 8000`, where the overlay's JSON patch replaces args/5 (the port's value) by position: after the
# insertion args/5 is "32", and the overlay would have replaced that instead.
BASE = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.10.1
          args:
            - --model
            - Qwen/Qwen2.5-1.5B-Instruct
            - --max-model-len
            - "8192"
            - --port
            - "8000"
          resources:
            limits:
              nvidia.com/gpu: 1
"""
OVERLAY = """resources:
  - ../base
patches:
  - target:
      kind: Deployment
      name: vllm
    patch: |-
      - op: replace
        path: /spec/template/spec/containers/0/args/5
        value: "8080"
"""


@pytest.fixture
def kubectl(monkeypatch: pytest.MonkeyPatch) -> Path:
    where, why = k8stools.tools_dir()
    if where is None:
        pytest.skip(f"no kubectl here: {why}")
    monkeypatch.setenv("PATH", f"{where}{os.pathsep}{os.environ.get('PATH', '')}")
    return where


def _overlay(tmp_path: Path, overlay: str = OVERLAY) -> Path:
    (tmp_path / "base").mkdir(parents=True)
    (tmp_path / "overlay").mkdir()
    (tmp_path / "base" / "deployment.yaml").write_text(BASE)
    (tmp_path / "base" / "kustomization.yaml").write_text("resources:\n  - deployment.yaml\n")
    k = tmp_path / "overlay" / "kustomization.yaml"
    k.write_text(overlay)
    return k


def test_estimate_and_tune_take_a_kustomization(tmp_path: Path, kubectl: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    k = _overlay(tmp_path)
    for command in ("estimate", "explain"):
        assert main([command, str(k), "--gpu", "L4"]) == 0
        assert capsys.readouterr().out.startswith("vllm 0.10.1  ·  Qwen/Qwen2.5-1.5B-Instruct\n")
    assert main(["tune", str(k), "--gpu", "L4", "--write"]) == 1  # a change not written
    out = capsys.readouterr().out
    assert (f"  change  --max-model-len 32768, --max-num-seqs 32 (not written: the JSON patch in {k} indexes "
            "/spec/template/spec/containers/0/args/5 by position, and an item inserted into that list would move "
            "what it patches) [display-only]\n") in out
    assert (tmp_path / "base" / "deployment.yaml").read_text() == BASE
    # a patch that appends (`args/-`) makes its value the list's last item: that is the overlay's, so the
    # insertion after it is shown too, not written as a key of the kustomization
    k = _overlay(tmp_path / "b", OVERLAY.replace("args/5", "args/-").replace("op: replace", "op: add")
                 .replace('"8080"', "--disable-log-requests"))
    assert main(["tune", str(k), "--gpu", "L4", "--write"]) == 1
    assert (f"--max-num-seqs 32 (not written: the last item of that list is a patch's value in {k}; add it there)"
            in capsys.readouterr().out)
    assert "max-num-seqs" not in k.read_text()
    # a strategic merge patch matches by name and moves nothing: tune writes into the base
    k = _overlay(tmp_path / "c", """resources:
  - ../base
patches:
  - patch: |-
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: vllm
      spec:
        template:
          spec:
            containers:
              - name: vllm
                image: vllm/vllm-openai:v0.10.1
""")
    monkeypatch.chdir(tmp_path / "c")
    assert main(["tune", str(k), "--gpu", "L4", "--write"]) == 0
    assert "display-only" not in capsys.readouterr().out
    assert '- "8000"\n            - --max-num-seqs\n            - "32"\n' in (tmp_path / "c" / "base" / "deployment.yaml").read_text()
