"""An image named after Ollama that talks to an Ollama server is not one: homeiac/home's
model-update Job runs ghcr.io/homeiac/ollama-scripts (it pulls a model over the server's HTTP
API), and servefit read it as an Ollama server started by the image, with SEC004 "the
ollama/ollama image sets OLLAMA_HOST=0.0.0.0" and SF110 on it. An image built to run Ollama
(ollama-nvidia, alpine/ollama, org/ollama-rocm) still is one."""

from __future__ import annotations

import pytest

from servefit.sources.detect import engine_of_image


@pytest.mark.parametrize(("image", "engine"), [
    ("ghcr.io/homeiac/ollama-scripts:0835164", None),
    ("myorg/ollama-exporter:1.2", None),
    ("ollama/ollama-exporter:0.1", None),  # the organisation's name is not the repository's
    ("docker.io/ollama/ollama:rocm", "ollama"),
    ("myorg/ollama-client", None),
    ("myorg/ollama-operator:v0.3", None),
    ("ghcr.io/ollama-webui/ollama-webui:main", None),
    ("ollama/ollama:0.20.2", "ollama"),
    ("ollama-nvidia:latest", "ollama"),
    ("alpine/ollama", "ollama"),
    ("org/ollama-rocm:0.9", "ollama"),
    ("myorg/ollama-clientele", "ollama"),
])
def test_engine_of_image(image: str, engine: str | None) -> None:
    assert engine_of_image(image) == engine


JOB = """apiVersion: batch/v1
kind: Job
metadata:
  name: ollama-model-update
spec:
  template:
    spec:
      restartPolicy: OnFailure
      containers:
        - name: model-update
          image: ghcr.io/homeiac/ollama-scripts:0835164
          env:
            - name: NEW_MODEL
              value: "gemma4:e2b"
            - name: OLLAMA_URL
              value: "http://ollama-gpu.ollama.svc:80"
"""


def test_a_job_of_ollama_scripts_is_no_server(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    from servefit.cli import main

    f = tmp_path / "job.yaml"
    f.write_text(JOB)
    main(["lint", str(f), "--fail-on", "never"])
    assert capsys.readouterr().out.splitlines() == ["0 errors, 0 warnings, 0 info in 1 file (0 servers)"]
