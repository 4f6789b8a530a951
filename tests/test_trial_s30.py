"""Found by running servefit as a new platform engineer on deployment files from public repositories it had
not been tried on (session 30 trial): each case is a minimal file written for the test, in the shape the
repository had.

Repositories tried (owner/name@commit):
  agents-x-project/PyVision-RL@62ca599d05ba81854afa39b435780785bcdf1b1a (srun / sbatch scripts)
  neuralmagic/helm-charts@e0c03d093474ad5bcde94fa5ae5644642e9c5fa6 (Helm charts with subchart dependencies)
  Lintasarta/vllm-helm@1a4ef6c5b766f3b593ebc5f9f424a64b914b4388 (Helm chart)
  canstralian/DeepSeek-Coder-V2@f628e256070a85977bf15269c7e3733f3c6b972d (SGLang launch script)
  lahlfors/cybernetic-governance-engine@2bcc2f2e64f749a27aad59a5ebb0033106c61656 (envsubst manifests, Cloud Build)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

# lahlfors/cybernetic-governance-engine's deployment/k8s/vllm-streaming.yaml is filled in by its deploy script
# before `kubectl apply` (`image: ${IMAGE_NAME}`): the container's env does not set MODEL_PATH, so SF107's advice
# "write $(MODEL_PATH)" would hand vLLM the literal `$(MODEL_PATH)` too. A name the container does not set is a
# value not known here (SF001); SF107 stays for a name its env sets.
ENVSUBST_MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-inference-streaming
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: ${IMAGE_NAME}
          resources:
            limits:
              nvidia.com/gpu: "1"
          env:
            - name: HUGGING_FACE_HUB_TOKEN
              valueFrom:
                secretKeyRef: {name: hf-token-secret, key: token}
          command:
            - "vllm"
            - "serve"
            - "${MODEL_PATH}"
            - "--port"
            - "8000"
      nodeSelector:
        cloud.google.com/gke-accelerator: nvidia-l4
"""


def test_envsubst_variable_the_container_does_not_set_is_unknown_not_literal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "vllm-streaming.yaml"
    f.write_text(ENVSUBST_MANIFEST)
    main(["lint", str(f), "--format", "json"])
    found = [(d["code"], d["location"]["line"], d["location"]["column"], d["message"])
             for d in json.loads(capsys.readouterr().out) if d["code"] in ("SF001", "SF107")]
    assert found == [("SF001", 21, 16, "${MODEL_PATH} is not set in this repository: the value it gives vLLM is "
                                       "not known, so it is not checked")]
    # the container's env sets it (from a Secret): $(MODEL_PATH) is what Kubernetes expands
    f.write_text(ENVSUBST_MANIFEST.replace("HUGGING_FACE_HUB_TOKEN", "MODEL_PATH"))
    main(["lint", str(f), "--format", "json"])
    found = [(d["code"], d["location"]["line"]) for d in json.loads(capsys.readouterr().out)
             if d["code"] in ("SF001", "SF107")]
    assert found == [("SF107", 21)]
