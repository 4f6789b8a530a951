"""Found by running servefit on public serving files (session 29, third set of trial findings): each case is
a minimal file written for the test, in the shape the repository had.

Repositories tried (owner/name@commit):
  vllm-project/aibrix@75e6e274c637c618796af098c79a1c39efc1652a (samples/distributed/fleet-two-node.yaml)
"""

from __future__ import annotations

from pathlib import Path

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
