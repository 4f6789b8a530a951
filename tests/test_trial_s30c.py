"""Found by running servefit as a new platform engineer on Kubernetes deployment files from public
repositories (session 30, third trial): each case is a minimal file written for the test, in the shape
the repository had.

Repositories tried (owner/name@commit):
  ray-project/kuberay@feeaf72facab4881ba2b179248bb67315634e229
  sgl-project/ome@17b77edad23bae262e0c9adb7f12039397a5d33d
  opea-project/GenAIInfra@9200b371d3eb08a33607b23e6f66b7ae5afc4346
  kserve/kserve@aaac4e294dae2c7b1aa1886447793f3aa1c30912
  sgl-project/sglang@622284e36e92c9b331ed8945e2e78cda6539e5fd (docker/k8s-sglang-distributed-sts.yaml)
  yuekaizhang/dynamo@28546bad2602e67eb9436de6198776855ba08040 (components/backends/*/deploy, a fork of ai-dynamo/dynamo)
  InftyAI/llmaz@3c13ff343e28cdbe842fd3c659e3daf0d1e27e91
  substratusai/kubeai@2f32ef498da629f96fd417ddfaaf22c28d40787e (manifests/models)
  jharmison-redhat/openshift-setup@a7c329ed8c104eca215595ce5df9c5dc0c7f61c5
  llm-d/llm-d@f458af2e7b1f088cbcc399d1c0337b191ff71101 (its snapshot holds no deployment files)
  4by4inc-pixell/Infra-Deploy-Automation@4f059b5222e33b11b11f58d729e42797eca19857 (no engine in it)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.cli import main

# ray-project/kuberay's ray-operator/config/samples/ray-service.high-throughput-llm.yaml runs Ray Serve LLM
# (`ray.serve.llm:build_openai_app`), whose llm_configs run vLLM, with no engine word and no engine_kwargs: the
# file was read as holding nothing (0 servers, no finding) while its sibling with engine_kwargs got SF116.
RAY_SERVE_LLM = """apiVersion: ray.io/v1
kind: RayService
metadata:
  name: qwen-35-4b
spec:
  serveConfigV2: |
    applications:
    - name: llm_app
      import_path: ray.serve.llm:build_openai_app
      args:
        llm_configs:
            - model_loading_config:
                model_id: qwen-3.5-4b
                model_source: Qwen/Qwen3.5-4b
              accelerator_type: L4
  rayClusterConfig:
    headGroupSpec:
      template:
        spec:
          containers:
          - name: ray-head
            image: rayproject/ray-llm:2.56.0-py312-cu130
"""


def test_ray_serve_llm_app_without_engine_words_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "ray-service.high-throughput-llm.yaml"
    f.write_text(RAY_SERVE_LLM)
    assert main(["lint", str(f)]) == 0
    assert capsys.readouterr().out == (
        f"{f}:6:3: SF116 RayService qwen-35-4b runs vLLM in a Ray Serve application (import_path "
        "ray.serve.llm:build_openai_app), whose Python code sets the engine's arguments: servefit does not read Ray "
        "Serve applications, so this server's settings were not checked\n0 errors, 1 warning, 0 info in 1 file "
        "(0 servers)\n")
    assert main(["estimate", str(f), "--gpu", "L4"]) == 2
    assert "RayService qwen-35-4b runs vLLM in a Ray Serve application" in capsys.readouterr().err
    # an application of one's own that names no engine stays unsaid
    f.write_text(RAY_SERVE_LLM.replace("ray.serve.llm:build_openai_app", "fruit.deployment:graph"))
    assert main(["lint", str(f)]) == 0
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (0 servers)\n"


# sgl-project/sglang's docker/k8s-sglang-distributed-sts.yaml serves the weights mounted at `/llm-folder`:
# the unknown-model finding suggested llm-jp/llm-jp-4-8b-base, llm-jp-3-150m and llm-jp-3-1.8b, as `llm` was
# read as the llm-jp family's word (and `llm-jp-3-7b` got deepseek-llm-7b-chat).
SGLANG_STS = """apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: distributed-sglang
spec:
  replicas: 2
  template:
    spec:
      containers:
      - name: sglang-container
        image: docker.io/lmsysorg/sglang:v0.5.2
        command:
        - /bin/bash
        - -c
        args:
        - |
          python3 -m sglang.launch_server \\
          --model /llm-folder \\
          --tensor-parallel-size 8 \\
          --port 8000
        resources:
          limits:
            nvidia.com/gpu: "8"
"""


def test_llm_in_a_mount_path_suggests_no_llm_jp_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from servefit.models import catalog

    f = tmp_path / "k8s-sglang-distributed-sts.yaml"
    f.write_text(SGLANG_STS)
    assert main(["lint", str(f), "--gpu", "H100"]) == 0
    assert f"{f}:18:19: SF002 unknown model '/llm-folder'; no catalogued model has a similar family and size. Pass " \
        "--model-config PATH/config.json or a local model directory\n" in capsys.readouterr().out
    assert catalog.nearest("llm-jp-3-7b") == []
    # llm-jp's own names still resolve, by their family words and size
    spec = catalog.lookup("llm-jp-3-1.8b-instruct")
    assert spec is not None and spec.name == "llm-jp/llm-jp-3-1.8b"


# NVIDIA Dynamo's components/backends/sglang/deploy/disagg-multinode.yaml (as in the yuekaizhang/dynamo fork)
# gives its Frontend service only the runtime image: the operator starts it as `python3 -m dynamo.frontend`
# (deploy/cloud/operator/internal/dynamo/component_frontend.go), yet it was read as an SGLang server started
# by its image, with the error SGL002 "the following arguments are required: --model-path".
DYNAMO_DISAGG = """apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata:
  name: sglang-disagg-multinode
spec:
  backendFramework: sglang
  services:
    Frontend:
      componentType: main
      replicas: 1
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.4.1
    decode:
      componentType: worker
      resources:
        limits:
          gpu: "8"
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.4.1
          command: ["sh", "-c"]
          args:
            - >-
              python3 -m dynamo.sglang.decode_worker
              --model-path meta-llama/Llama-3.3-70B-Instruct
              --tp-size 8
              --disaggregation-mode decode
              --mem-fraction-static 0.82
"""


def test_dynamo_frontend_without_command_is_no_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "disagg-multinode.yaml"
    f.write_text(DYNAMO_DISAGG)
    assert main(["models", str(f)]) == 0
    assert capsys.readouterr().out == (
        f"{f}:25  sglang  meta-llama/Llama-3.3-70B-Instruct  -> meta-llama/Llama-3.3-70B-Instruct (70.55B) "
        "from catalog\n")
    assert main(["lint", str(f), "--gpu", "H100"]) == 0
    out = capsys.readouterr().out
    assert "SGL002" not in out and "SF116" not in out and out.endswith("(1 server)\n")
    # a frontend that writes its own command is read as written; so is a worker's image with no command
    f.write_text(DYNAMO_DISAGG.replace("componentType: main", "componentType: frontend").replace(
        "image: nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.4.1\n    decode:",
        "image: nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.4.1\n          command: [python3, -m, sglang.launch_server, "
        "--model-path, Qwen/Qwen3-8B]\n    decode:"))
    assert main(["models", str(f)]) == 0
    assert capsys.readouterr().out.startswith(f"{f}:14  sglang  Qwen/Qwen3-8B  -> Qwen/Qwen3-8B")


# InftyAI/llmaz's docs/examples/multi-nodes/service.yaml: llmaz's inference Service runs `spec.workloadTemplate`
# as a LeaderWorkerSet (api/inference/v1alpha1/service_types.go: lws.LeaderWorkerTemplate), so a TP 2 server over
# `size: 2` pods of one GPU each has 2 GPUs; its pods were read alone, and SGL010 said only 1 was available.
LLMAZ_SERVICE = """apiVersion: inference.llmaz.io/v1alpha1
kind: Service
metadata:
  name: llama3-8b-instruct
spec:
  replicas: 2
  workloadTemplate:
    size: 2
    leaderTemplate:
      spec:
        containers:
          - name: model-runner
            image: lmsysorg/sglang:v0.4.6
            command:
              - python3
              - -m
              - sglang.launch_server
              - --model-path
              - meta-llama/Llama-3.1-8B-Instruct
              - --tp
              - "2"
              - --nnodes
              - "2"
              - --context-length
              - "8192"
            resources:
              limits:
                nvidia.com/gpu: "1"
    workerTemplate:
      spec:
        containers:
          - name: model-runner
            image: lmsysorg/sglang:v0.4.6
            command:
              - python3
              - -m
              - sglang.launch_server
              - --model-path
              - meta-llama/Llama-3.1-8B-Instruct
              - --tp
              - "2"
              - --nnodes
              - "2"
              - --context-length
              - "8192"
            resources:
              limits:
                nvidia.com/gpu: "1"
"""


def test_llmaz_service_workload_template_is_a_leader_worker_group(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "service.yaml"
    f.write_text(LLMAZ_SERVICE)
    assert main(["lint", str(f), "--gpu", "L4"]) == 0
    out = capsys.readouterr().out
    assert "SGL010" not in out and out.endswith("0 errors, 0 warnings, 0 info in 1 file (2 servers)\n"), out
    assert main(["estimate", str(f), "--gpu", "L4"]) == 0
    assert ("2 × NVIDIA L4 (22.03 GiB as the driver reports it; --gpu; count from nvidia.com/gpu limit + 1 worker "
            "pod(s) × 1 (LeaderWorkerSet size 2))  ·  TP 2 PP 1") in capsys.readouterr().out


# InftyAI/llmaz's config/samples and docs/examples/*/playground.yaml: a Playground (with its OpenModel) was read as
# holding nothing, 0 servers and no finding, though llmaz runs the BackendRuntime it names (vLLM by default).
LLMAZ_PLAYGROUND = """apiVersion: llmaz.io/v1alpha1
kind: OpenModel
metadata:
  name: opt-125m
spec:
  familyName: opt
  source:
    modelHub:
      modelID: facebook/opt-125m
---
apiVersion: inference.llmaz.io/v1alpha1
kind: Playground
metadata:
  name: opt-125m
spec:
  replicas: 1
  modelClaim:
    modelName: opt-125m
"""


def test_llmaz_playground_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "playground.yaml"
    f.write_text(LLMAZ_PLAYGROUND)
    assert main(["lint", str(f)]) == 0
    assert capsys.readouterr().out == (
        f"{f}:18:16: SF116 llmaz Playground opt-125m serves model opt-125m with vLLM (llmaz's default BackendRuntime), in a "
        "pod llmaz's controller writes from that BackendRuntime's command and recommended arguments, which are not "
        "in this file: servefit does not read BackendRuntimes, so this server's settings were not checked\n"
        "0 errors, 1 warning, 0 info in 1 file (0 servers)\n")
    f.write_text(LLMAZ_PLAYGROUND + "  backendRuntimeConfig:\n    backendName: llamacpp\n")
    assert main(["lint", str(f)]) == 0
    assert "serves model opt-125m with llama.cpp (BackendRuntime llamacpp)" in capsys.readouterr().out
    f.write_text(LLMAZ_PLAYGROUND + "  backendRuntimeConfig:\n    backendName: tensorrt-llm\n")
    assert main(["lint", str(f)]) == 0
    assert "serves model opt-125m with TensorRT-LLM (BackendRuntime tensorrt-llm)" in capsys.readouterr().out


# substratusai/kubeai's manifests/models/*-cpu.yaml and *-tpu.yaml: a Model on the `cpu` or `google-tpu-*`
# resourceProfile got SF110 "no GPU is known for this server ... pass --gpu NAME", and --gpu L4 planned it on an L4,
# though KubeAI gives those pods no GPU (its chart runs vLLM's CPU and TPU builds there).
KUBEAI_MODEL = """apiVersion: kubeai.org/v1
kind: Model
metadata:
  name: gemma-2b-it-tpu
spec:
  features: [TextGeneration]
  url: hf://google/gemma-2b-it
  engine: VLLM
  args:
    - --max-model-len=8192
  resourceProfile: google-tpu-v5e-1x1:1
"""


def test_kubeai_cpu_and_tpu_profiles_run_off_the_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "gemma-2b-it-tpu.yaml"
    f.write_text(KUBEAI_MODEL)
    for gpu in ([], ["--gpu", "L4"]):
        assert main(["lint", str(f), *gpu]) == 0
        out = capsys.readouterr().out
        assert (f"{f}:11:20: SF120 KubeAI resourceProfile google-tpu-v5e-1x1:1 asks for a Google TPU: the server runs on "
                "a TPU, and servefit plans GPU memory, so its memory is not checked\n") in out, out
        assert "SF110" not in out
    f.write_text(KUBEAI_MODEL.replace("google-tpu-v5e-1x1:1", "cpu:6"))
    assert main(["estimate", str(f), "--gpu", "L4"]) == 2
    assert "KubeAI resourceProfile cpu:6 asks for CPUs only: the server runs on the CPU" in capsys.readouterr().err
    # a GPU profile is planned on its GPU
    f.write_text(KUBEAI_MODEL.replace("google-tpu-v5e-1x1:1", "nvidia-gpu-l4:1"))
    assert main(["estimate", str(f)]) == 0
    assert "NVIDIA L4" in capsys.readouterr().out


# A Terraform kubectl_manifest whose `yaml_body` heredoc holds a vLLM Deployment (the shape of the KubeRay
# RayService in awslabs' and others' Terraform, `yaml_body = <<YAML ... YAML`): only quoted strings were looked
# at, so the unquoted `image:` in the heredoc went unseen and the file was reported clean with 0 findings.
TF_HEREDOC = """resource "kubectl_manifest" "vllm" {
  yaml_body = <<-YAML
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: vllm
    spec:
      template:
        spec:
          containers:
          - name: vllm
            image: vllm/vllm-openai:v0.9.0
  YAML
}
"""


def test_terraform_heredoc_manifest_is_said_unread(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "main.tf"
    f.write_text(TF_HEREDOC)
    assert main(["lint", str(f)]) == 0
    assert capsys.readouterr().out == (
        f"{f}:12:20: SF108 servefit does not read Terraform, and this file starts vLLM here: its settings "
        "were not checked. Lint the manifests it applies (`kubectl get deploy NAME -o yaml > deploy.yaml`) or the "
        "launch command (`servefit estimate -- vllm serve ...`)\n0 errors, 0 warnings, 1 info in 1 file (0 servers)\n")
    # a heredoc that starts no engine says nothing
    f.write_text(TF_HEREDOC.replace("vllm/vllm-openai:v0.9.0", "nginx:1.27"))
    assert main(["lint", str(f)]) == 0
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (0 servers)\n"


# ai-dynamo's agg.yaml gives its container one string of args (`python3 -m dynamo.vllm --model Qwen/Qwen3-0.6B ...
# | tee ...`); in a plain Deployment of an engine image the image's entrypoint gets that whole line as one argument
# (vLLM takes it as the model name and refuses it): estimate said "unknown model '<the whole line>'" and lint
# said nothing about it.
ONE_STRING_ARGS = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-agg
spec:
  template:
    spec:
      containers:
        - name: main
          image: vllm/vllm-openai:v0.11.0
          args:
            - "vllm serve Qwen/Qwen3-0.6B --max-model-len 8192 2>&1 | tee /tmp/vllm.log"
          resources:
            limits:
              nvidia.com/gpu: 1
"""


def test_one_string_command_line_in_args_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "deploy.yaml"
    f.write_text(ONE_STRING_ARGS)
    assert main(["lint", str(f)]) == 0  # a warning
    out = capsys.readouterr().out
    assert f"{f}:12:16: SF106 vllm/vllm-openai:v0.11.0 already runs `vllm serve`, and this command is one string " \
        "holding a command line: the engine gets `vllm serve 'vllm serve Qwen/Qwen3-0.6B --max-model-len 81...'`, " \
        "the whole line as one argument, and rejects it. Write each word as its own list item, or run the line " \
        "through a shell (k8s `command: [sh, -c]`, compose `entrypoint: [sh, -c]`)\n" in out
    assert out.endswith("0 errors, 1 warning, 1 info in 1 file (1 server)\n")
    assert main(["estimate", str(f), "--gpu", "L4"]) == 2
    assert "the whole line as one argument, and rejects it: write each word as its own list item" in \
        capsys.readouterr().err
    # the same words as list items, or the line run through a shell, start the server: no SF106
    for fixed in (ONE_STRING_ARGS.replace(
            '- "vllm serve Qwen/Qwen3-0.6B --max-model-len 8192 2>&1 | tee /tmp/vllm.log"',
            '- "Qwen/Qwen3-0.6B"\n            - "--max-model-len"\n            - "8192"'),
            ONE_STRING_ARGS.replace("          args:\n", "          command: [sh, -c]\n          args:\n"),
            # a rebuilt image whose entrypoint servefit only assumes: the line is read as the server meant
            ONE_STRING_ARGS.replace("vllm/vllm-openai:v0.11.0", "registry.example.com/ml/vllm-custom:2025.1")):
        f.write_text(fixed)
        main(["lint", str(f)])
        assert "SF106" not in capsys.readouterr().out
        assert main(["estimate", str(f), "--gpu", "L4"]) in (0, 1)
        out = capsys.readouterr().out
        assert "verdict: starts" in out and "Qwen/Qwen3-0.6B" in out
