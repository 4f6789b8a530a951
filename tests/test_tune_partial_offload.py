"""A llama-server whose -ngl keeps layers on the CPU (thr3a/llama-cpp-docker-compose's second
service: Qwen3-30B-A3B Q4_K_M with --n-gpu-layers 30 on a 24 GiB card): tune held -ngl where it
was, found no candidate that serves without offload, and said "nothing meets the needs ... relax
--min-context or --allow more" although the whole model fits. Every layer on the GPU is tried."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

COMPOSE = """services:
  sub:
    image: ghcr.io/ggml-org/llama.cpp:server-cuda
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              device_ids: ['1']
              capabilities: [ gpu ]
    command: >
      --host 127.0.0.1
      --hf-repo unsloth/Qwen3-30B-A3B-Instruct-2507-GGUF
      --hf-file Qwen3-30B-A3B-Instruct-2507-Q4_K_M.gguf
      --n-gpu-layers 30
      --ctx-size 4096
"""


def test_tune_puts_every_layer_on_the_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "docker-compose.yml"
    f.write_text(COMPOSE)
    main(["tune", str(f), "--gpu", "rtx-4090", "--write"])
    out = capsys.readouterr().out
    assert "nothing meets the needs" not in out
    # the context the tuner then picks follows the free memory servefit assumes (the 4090's ~399 MiB CUDA
    # context) and keeps llama.cpp's 1 GiB --fit margin: 65536 x 8 with -ub 256 left 17 MiB, which lint
    # reports (LCPP018)
    assert f.read_text() == COMPOSE.replace("      --n-gpu-layers 30\n      --ctx-size 4096\n",
                                            "      --n-gpu-layers 99\n      --ctx-size 32768\n      --parallel 8\n")
    main(["tune", str(f), "--gpu", "rtx-4090", "--diff"])
    assert "no changes to write" in capsys.readouterr().out


def test_allow_offload_keeps_the_files_layers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "docker-compose.yml"
    f.write_text(COMPOSE)
    main(["tune", str(f), "--gpu", "rtx-4090", "--allow", "offload", "--format", "json"])
    dims = json.loads(capsys.readouterr().out)["sites"][0]["search"]["dimensions"]
    assert dims["n_gpu_layers"] == [30]
