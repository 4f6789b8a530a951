"""A variable the file gives no value but does name says where its value comes from: a k8s env
entry filled from a fieldRef or Secret when the pod starts (a multi-node SGLang StatefulSet's
--node-rank $POD_INDEX from the pod-index label), a compose environment entry passed through from
the shell, Slurm's own SLURM_NODEID in a batch script (SGLang's multi-node Slurm example). SF001
said "is not set in this repository" for all of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.cli import main

STATEFULSET = """apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: sgl
spec:
  replicas: 2
  template:
    spec:
      containers:
      - name: sglang
        image: lmsysorg/sglang:v0.5.3
        command: ["/bin/bash", "-c"]
        args:
        - |
          python3 -m sglang.launch_server --model Qwen/Qwen2.5-7B-Instruct --tp 4 --nnodes 2 \\
              --node-rank $POD_INDEX --dist-init-addr head:5000 --mem-fraction-static $FRAC --port $PORT
        env:
        - name: POD_INDEX
          valueFrom:
            fieldRef:
              fieldPath: metadata.labels['apps.kubernetes.io/pod-index']
        - name: FRAC
          valueFrom:
            secretKeyRef: {name: s, key: frac}
        resources:
          limits:
            nvidia.com/gpu: "4"
"""

COMPOSE = """services:
  vllm:
    image: vllm/vllm-openai:v0.9.2
    environment:
      - MAX_LEN
    entrypoint: ["/bin/sh", "-c", "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len $$MAX_LEN --port $$PORT"]
"""

POD = "is filled in when the pod starts (its env entry takes it from valueFrom)"


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, *argv: str) -> list[str]:
    f = tmp_path / name
    f.write_text(text)
    main([*argv[:1], str(f), *argv[1:]])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return [line[len(str(f)) + 1:] if line.startswith(str(f)) else line for line in out.splitlines()]


def test_k8s_value_from_variables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    got = [g for g in _run(tmp_path, capsys, "sts.yaml", STATEFULSET, "lint", "--gpu", "H100") if " SF001 " in g]
    assert got == [
        f"16:27: SF001 ${{POD_INDEX}} {POD}: the value it gives SGLang is not known, so it is not checked",
        f"16:87: SF001 ${{FRAC}} {POD}: the value it gives SGLang is not known, so it is not checked",
        "16:100: SF001 ${PORT} is not set in this repository: the value it gives SGLang is not known, so it is "
        "not checked"]
    out = _run(tmp_path, capsys, "sts.yaml", STATEFULSET, "estimate", "--gpu", "H100")
    assert (f"  - --mem-fraction-static is ${{FRAC}}, which {POD}: planned with the engine's default (pass the value, "
            "or set the variable in the file)") in out
    assert f"  - --node-rank is ${{POD_INDEX}}, which {POD}: planned with the engine's default (pass the value, " \
           "or set the variable in the file)" in out


def test_compose_pass_through_variable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    got = [g for g in _run(tmp_path, capsys, "compose.yaml", COMPOSE, "lint", "--gpu", "L4") if " SF001 " in g]
    assert got == [
        "6:89: SF001 ${MAX_LEN} is passed through from the shell that runs compose: the value it gives vLLM is not "
        "known, so it is not checked",
        "6:106: SF001 ${PORT} is not set in this repository: the value it gives vLLM is not known, so it is not "
        "checked"]


SBATCH = """#!/bin/bash -l
#SBATCH --nodes=2
#SBATCH --gres=gpu:8

model=meta-llama/Meta-Llama-3.1-405B-Instruct
srun --ntasks=2 --nodes=2 python3 -m sglang.launch_server --model-path "$model" --tp 16 \\
    --dist-init-addr head:8000 --nnodes 2 --node-rank "$SLURM_NODEID" --port "$SLURM_PORT" --chunked-prefill-size "$CHUNK"
"""


def test_slurm_variables_in_a_batch_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    got = [g for g in _run(tmp_path, capsys, "serve.sbatch", SBATCH, "lint", "--gpu", "H100") if " SF001 " in g]
    assert [g.split(" SF001 ")[1].split(":")[0] for g in got] == [
        "${SLURM_NODEID} is set by Slurm for each task", "${SLURM_PORT} is not set in this repository",
        "${CHUNK} is not set in this repository"]
    plain = [g for g in _run(tmp_path, capsys, "serve.sh", SBATCH.replace("#SBATCH", "# no"), "lint", "--gpu", "H100")
             if " SF001 " in g]
    assert plain[0].split(" SF001 ")[1].startswith("${SLURM_NODEID} is not set in this repository")


def test_k8s_hostname_is_the_pods_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """CAST AI's multi-node SGLang StatefulSet takes the node rank from the pod's name
    (`ORDINAL="${HOSTNAME##*-}"`): Kubernetes sets HOSTNAME in every container."""
    text = STATEFULSET.replace("--node-rank $POD_INDEX", "--node-rank ${HOSTNAME##*-}")
    got = [g for g in _run(tmp_path, capsys, "sts.yaml", text, "lint", "--gpu", "H100") if " SF001 " in g]
    assert got[0] == ("16:27: SF001 ${HOSTNAME} is the pod's name, set by Kubernetes (a StatefulSet's pods end in their "
                      "ordinal): the value it gives SGLang is not known, so it is not checked")
