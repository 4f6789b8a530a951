"""Session 31's third real-file trial (vLLM on Kubernetes, Slurm, SkyPilot / dstack, Modal): shapes from
public deployment repositories (named with their commits) that servefit read wrongly or silently, each
reduced to the part that mattered.

- olcf/olcf_containers_examples@032b962 frontier/sample_apps/vllm/start_head_lustre.sh (`NNODES=$@`)
- abdshomad/learn-vllm-from-pavlo@111d99a scripts/06_launch_vllm_single_node.sh (`source "$REPO_ROOT/scripts/..."`)
- modal-projects/open-source-av-ragbot@6575c02 server/llm/{vllm,sglang}_server.py (Modal apps: Python is not read)
- kwkoo/kserve-vllm@2d98251 yaml/base/inferenceservice (a ServingRuntime's bash script, built by kustomize)
- robertgshaw2-neuralmagic/vllm-k8s@d811b74 vllm-kserve-pvc/ (the runtime in the next file)
- umesh-khatiwada/skypilot-gpu-manage-k8s@2512793 nvidia-setup/skypilot/05_sglang_serve.yaml (SF129)
- nikocevicstefan/vllm-serve@b7357af vllm-serve.sh (`${PRESET_CONFIGS[${PRESET}_port]}`)

Also tried, with nothing fixed here (see the session report): aatchison/deploy-vllm-k8s@89212b9 (MIG resources:
the slice's memory is not taken from `nvidia.com/mig-4g.96gb`), crusoecloud/vllm-rayservice-model-serving-examples@880179b
(a RayService's `ray.serve.llm:build_openai_app` llm_configs are said not read, SF116),
PhenixForge/vllm-serving-kubernetes-platform@5916fc6, benhurjoel/vllm-deployment-ocp-helm@4cfff02.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

HEAD = """#!/bin/bash

NNODES=$@
export VLLM_HOST_IP=$(hostname -I | awk '{print $2}')
ray start --node-ip-address=$VLLM_HOST_IP --head --port=6379

vllm serve --chat-template "./chattemplate.jinja" --tensor-parallel-size 8 --pipeline-parallel-size $NNODES \
--distributed-executor-backend ray "./astrollama-2-7b-base_abstract" --host 127.0.0.1 --port 8000
"""


def test_a_variable_set_from_the_scripts_arguments_keeps_its_flags_place(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """OLCF's Frontier head-node script sets NNODES=$@ (the node count srun passes) and gives it to
    --pipeline-parallel-size. The value vanished as a bare "$@" word does, so the flag took the next word:
    VLLM002 "invalid int value: '--distributed-executor-backend'", the model read as `ray` and the model
    path called an unrecognized argument. The value is unknown, so it is said once, and nothing shifts."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "start_head.sh").write_text(HEAD)
    main(["lint", "start_head.sh", "--format", "json"])
    found = [(f["code"], f["location"]["line"], f["location"]["column"]) for f in json.loads(capsys.readouterr().out)]
    assert found == [("SF001", 3, 8), ("SF110", 7, 1)]
    main(["lint", "start_head.sh", "--list-sites", "--format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert site["model"] == "./astrollama-2-7b-base_abstract"
    assert site["settings"] == {"chat_template": "./chattemplate.jinja", "tensor_parallel_size": 8,
                                "distributed_executor_backend": "ray", "host": "127.0.0.1", "port": 8000}


COMMON = """#!/usr/bin/env bash
: "${SHARED_DIR:=/mnt/shared/cluster-llm}"
: "${MODEL_NAME:=TinyLlama-1.1B-Chat-v1.0}"
: "${MODEL_DIR:=$SHARED_DIR/$MODEL_NAME}"
: "${TENSOR_PARALLEL_SIZE:=2}"
"""
LAUNCH = """#!/usr/bin/env bash
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
COMMON_SETUP="$REPO_ROOT/scripts/00_setup_common.sh"

if [[ -f "$COMMON_SETUP" ]]; then
  # shellcheck source=/dev/null
  source "$COMMON_SETUP"
fi

uv run python -m vllm.entrypoints.openai.api_server \\
  --model "$MODEL_DIR" --port 8000 \\
  --tensor-parallel-size "$TENSOR_PARALLEL_SIZE" &
"""


def test_a_file_sourced_from_the_folder_above_the_scripts_own_is_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """learn-vllm-from-pavlo's launch scripts source "$REPO_ROOT/scripts/00_setup_common.sh", REPO_ROOT being
    `$(cd "$SCRIPT_DIR/.." && pwd)`: servefit read `"$SCRIPT_DIR/x.sh"` but not a folder taken from it, so the
    model, the parallelism and the port were all unknown. The common file is read, as bash would."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "00_setup_common.sh").write_text(COMMON)
    (tmp_path / "scripts" / "06_launch.sh").write_text(LAUNCH)
    main(["lint", "scripts/06_launch.sh", "--list-sites", "--format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert site["model"] == "/mnt/shared/cluster-llm/TinyLlama-1.1B-Chat-v1.0"
    assert site["settings"] == {"port": 8000, "tensor_parallel_size": 2}
    assert site["unresolved"] == []


MODAL_VLLM = """import modal

MODEL_NAME = "Qwen/Qwen3-4B-Instruct-2507"
N_GPU = 1
VLLM_PORT = 8000
app = modal.App("vllm-service")


@app.cls(gpu=f"H100:{N_GPU}")
class VLLMServer:
    @modal.enter()
    def start(self):
        import subprocess

        cmd = [
            "vllm",
            "serve",
            MODEL_NAME,
            "--port",
            str(VLLM_PORT),
        ]
        cmd += ["--tensor-parallel-size", str(N_GPU)]
        subprocess.Popen(cmd)
"""
MODAL_SGLANG = """import sys

from vllm import LLM

MODEL = "Qwen/Qwen3-4B"


def start(port):
    llm = LLM(MODEL)  # offline: no server
    cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", MODEL, "--port", str(port)]
    return cmd, llm
"""


def test_a_python_app_that_starts_a_server_is_named_as_not_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """open-source-av-ragbot's Modal apps start vLLM (`cmd = ["vllm", "serve", MODEL_NAME, ...]`) and SGLang
    (`python -m sglang.launch_server`) with subprocess.Popen: servefit said "0 errors, 0 warnings, 0 info
    (0 servers)", as if the repository had nothing to check. Python is not read, and now that is said, at the
    command; `from vllm import LLM` starts no server and is not named."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "vllm_server.py").write_text(MODAL_VLLM)
    (tmp_path / "sglang_server.py").write_text(MODAL_SGLANG)
    (tmp_path / "predict.py").write_text('import os\n\n\ndef setup(m):\n    os.system(f"python3 -m vllm.entrypoints.openai.api_server --model {m} &")\n')
    (tmp_path / "offline.py").write_text("from vllm import LLM\nllm = LLM('Qwen/Qwen3-4B')\nprint(['vllm', 'x'])\n")
    main(["lint", ".", "--format", "json"])
    found = [(f["code"], f["location"]["file"], f["location"]["line"], f["location"]["column"], f["message"])
             for f in json.loads(capsys.readouterr().out)]
    assert found == [
        ("SF108", "predict.py", 5, 15,
         "servefit does not read Python, and this file starts vLLM here: its settings were not checked. "
         "Lint the command it runs (`servefit estimate -- vllm serve ...`)"),
        ("SF108", "sglang_server.py", 10, 11,
         "servefit does not read Python, and this file starts SGLang here: its settings were not checked. "
         "Lint the command it runs (`servefit estimate -- sglang serve ...`)"),
        ("SF108", "vllm_server.py", 15, 15,
         "servefit does not read Python, and this file starts vLLM here: its settings were not checked. "
         "Lint the command it runs (`servefit estimate -- vllm serve ...`)")]


RUNTIME = """apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata:
  name: llm
spec:
  supportedModelFormats:
  - name: vllm
    autoSelect: true
  containers:
  - name: kserve-container
    image: docker.io/vllm/vllm-openai:v0.10.0
    command:
    - bash
    - "-c"
    - |
      GPU_COUNT="$(echo -n $NVIDIA_VISIBLE_DEVICES | awk -F, '{ print NF }')"
      exec python3 -m vllm.entrypoints.openai.api_server \\
        --port 8080 \\
        --model /mnt/models \\
        --tensor-parallel-size $GPU_COUNT $@
---
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llm
spec:
  predictor:
    model:
      modelFormat:
        name: vllm
      resources:
        limits:
          nvidia.com/gpu: "4"
      runtime: llm
      storage:
        key: aws-connection-models
        path: /vicuna/
"""


def test_a_built_server_whose_model_is_unknown_says_so_beside_an_unknown_value(
        helm_on_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """kwkoo/kserve-vllm's runtime counts the GPUs in its script (`$(echo -n $NVIDIA_VISIBLE_DEVICES | awk ...)`)
    and serves /mnt/models, which KServe fills from the InferenceService's storage. Built by kustomize, neither word
    is traced to its line, so both sit at the top of kustomization.yaml, and the unknown model's SF002 was taken for a
    finding about the unknown GPU count and dropped: the server was not checked and nothing said why."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "llm.yaml").write_text(RUNTIME)
    (tmp_path / "kustomization.yaml").write_text("resources:\n- llm.yaml\n")
    main(["lint", ".", "--gpu", "A10G", "--format", "json"])
    found = [(f["code"], f["location"]["file"], f["location"]["line"]) for f in json.loads(capsys.readouterr().out)]
    assert found == [("SEC004", "kustomization.yaml", 1), ("SF001", "kustomization.yaml", 1),
                     ("SF002", "kustomization.yaml", 1), ("SF001", "llm.yaml", 16)]


def test_an_inference_service_whose_runtime_the_build_reads_is_not_called_unchecked(
        helm_on_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """kwkoo/kserve-vllm keeps the ServingRuntime and the InferenceService in two files of one kustomization. Read
    alone, inference.yaml's runtime is elsewhere (SF114: "did not check it"), and that stayed beside the built server
    that was checked. The build's reading replaces it; an InferenceService whose runtime the build lacks too is
    still said, once, at its own line."""
    monkeypatch.chdir(tmp_path)
    runtime, isvc = RUNTIME.split("---\n")
    (tmp_path / "serving-runtime.yaml").write_text(runtime)
    (tmp_path / "inference.yaml").write_text(isvc)
    (tmp_path / "kustomization.yaml").write_text("resources:\n- serving-runtime.yaml\n- inference.yaml\n")
    main(["lint", ".", "--gpu", "A10G", "--format", "json"])
    assert [f["code"] for f in json.loads(capsys.readouterr().out) if f["code"].startswith("SF11")] == []
    (tmp_path / "kustomization.yaml").write_text("resources:\n- inference.yaml\n")
    main(["lint", ".", "--gpu", "A10G", "--format", "json"])
    found = [(f["code"], f["location"]["file"], f["location"]["line"]) for f in json.loads(capsys.readouterr().out)
             if f["code"] == "SF114"]
    assert found == [("SF114", "inference.yaml", 13)]


def test_an_inference_service_whose_runtime_is_in_the_next_file_names_that_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """robertgshaw2-neuralmagic/vllm-k8s@d811b74 vllm-kserve-pvc/ keeps the InferenceService (runtime: nm-vllm) and
    its ServingRuntime in two files of one folder, applied one after the other: servefit told the user to define
    the runtime ("put the ServingRuntime in this file"), which the folder already does. The file is named, with
    the two ways to have them read together."""
    monkeypatch.chdir(tmp_path)
    runtime, isvc = RUNTIME.split("---\n")
    (tmp_path / "serving-runtime.yml").write_text(runtime.replace("name: llm", "name: nm-vllm"))
    (tmp_path / "inference-service.yml").write_text(isvc.replace("runtime: llm", "runtime: nm-vllm"))
    (tmp_path / "other.yml").write_text(runtime.replace("name: llm", "name: nm-vllm-2"))
    main(["lint", "inference-service.yml", "--format", "json"])
    [f] = json.loads(capsys.readouterr().out)
    assert (f["code"], f["location"]["line"], f["location"]["column"]) == ("SF114", 13, 16)
    assert f["message"] == (
        "InferenceService llm: runtime 'nm-vllm' is in serving-runtime.yml, not in this file, and servefit reads an "
        "InferenceService with its runtime only when they are read together, so it did not check this server; put "
        "both in one file (another `---` document), or list both in a kustomization.yaml and lint its folder")
    (tmp_path / "serving-runtime.yml").unlink()
    main(["lint", "inference-service.yml", "--format", "json"])
    [f] = json.loads(capsys.readouterr().out)
    assert f["message"].startswith("InferenceService llm: runtime 'nm-vllm' is not in this file")


SKY_SGLANG = """envs:
  MODEL_NAME: Qwen/Qwen2.5-1.5B-Instruct

resources:
  infra: k8s/default
  accelerators: RTX4060:1
  ports: 30000

setup: |
  pip install "sglang[all]"

run: |
  python -m sglang.launch_server \\
    --model-path $MODEL_NAME \\
    --port 30000 \\
    --mem-fraction-static 0.85
"""


@pytest.mark.parametrize(("host", "found"), [
    ("", [("SF129", 7, 10, "SGLang listens on 127.0.0.1 only (its default without --host), so SkyPilot "
                           "resources.ports 30000 (opened to the internet) publishes a port that nothing outside this "
                           "machine can reach: every request on it fails; pass --host 0.0.0.0 (with --api-key)")]),
    (" --host localhost", [("SF129", 7, 10, "SGLang listens on 127.0.0.1 only (--host localhost), so SkyPilot "
                                            "resources.ports 30000 (opened to the internet) publishes a port that "
                                            "nothing outside this machine can reach: every request on it fails; pass "
                                            "--host 0.0.0.0 (with --api-key)")]),
    (" --host 0.0.0.0 --api-key $KEY", []),
])
def test_a_published_port_of_a_server_on_loopback_only_is_said(
        host: str, found: list[tuple[str, int, int, str]], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """umesh-khatiwada/skypilot-gpu-manage-k8s opens SkyPilot port 30000 for SGLang launched without --host: SGLang
    listens on 127.0.0.1 by default (sglang srt/server_args.py ServerArgs.host = "127.0.0.1"), so the opened port
    reaches nothing and servefit said nothing (0 findings). The port is named with the way to listen on it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sglang.yaml").write_text(SKY_SGLANG.replace("--port 30000", "--port 30000" + host))
    main(["lint", "sglang.yaml", "--gpu", "RTX4060", "--format", "json"])
    got = [(f["code"], f["location"]["line"], f["location"]["column"], f["message"])
           for f in json.loads(capsys.readouterr().out) if f["code"] in ("SF129", "SEC002")]
    assert got == found


PRESETS = """#!/bin/bash
declare -A PRESET_CONFIGS
PRESET_CONFIGS[Default_port]=8000
read -p "Preset: " PRESET
CONFIG_PORT="${PRESET_CONFIGS[${PRESET}_port]}"
vllm serve Qwen/Qwen2.5-7B-Instruct --host 127.0.0.1 --port "$CONFIG_PORT"
"""


def test_an_array_element_picked_by_a_computed_key_is_not_called_unset(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """nikocevicstefan/vllm-serve's wizard keeps its presets in an associative array and picks one by the preset
    the user types: servefit said "${PRESET_CONFIGS} is not set in this repository", untrue (the script fills it)
    and not what the value is. The element is named as written, and why its value is not known."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "vllm-serve.sh").write_text(PRESETS)
    main(["lint", "vllm-serve.sh", "--format", "json"])
    got = [(f["code"], f["location"]["line"], f["location"]["column"], f["message"])
           for f in json.loads(capsys.readouterr().out) if f["code"] == "SF001"]
    assert got == [("SF001", 5, 14, "${PRESET_CONFIGS[${PRESET}_port]} is the element of PRESET_CONFIGS that the "
                                    "script picks when it runs: the value it gives vLLM is not known here")]
