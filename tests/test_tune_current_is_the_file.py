"""tune's "now" row is the file's own server: a llama-server without -np runs llama-server's
automatic slots (4 sharing one unified cache), and tune judged it as one split slot (-np 1), which
for a sliding-window model sizes a smaller SWA cache: tune said 35.2% headroom where estimate said
31.2% for the same compose file (thr3a/llama-cpp-docker-compose, gemma-4-31B on an RTX 5090)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

COMPOSE = """services:
  main:
    image: ghcr.io/ggml-org/llama.cpp:server-cuda
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              device_ids: ['0']
              capabilities: [ gpu ]
    command: >
      --host 127.0.0.1
      --model /root/.cache/llama.cpp/gemma-4-31B-it-Q4_K_M.gguf
      --n-gpu-layers 99
      --ctx-size 40000
      --flash-attn on
      --cache-type-k q8_0 --cache-type-v q8_0
"""


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    main(list(argv))
    return json.loads(capsys.readouterr().out)


def test_now_is_what_estimate_plans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "docker-compose.yml"
    f.write_text(COMPOSE)
    est = _json(capsys, "estimate", str(f), "--gpu", "rtx-5090", "--output-format", "json")
    assert isinstance(est, list)
    plan = est[0]
    assert (plan["n_parallel"], plan["kv_unified"], plan["kv_cache_cells_swa"]) == (4, True, 4608)
    tuned = _json(capsys, "tune", str(f), "--gpu", "rtx-5090", "--format", "json")
    assert isinstance(tuned, dict)
    now = tuned["sites"][0]["current"]
    used = plan["memory"]["budget"] + plan["memory"]["non_torch"] - plan["memory"]["free_headroom"]  # non_torch: the CUDA context
    assert (now["context"], now["users"], now["memory_bytes"]) == (40192, 1, used)
    total = plan["memory"]["budget"] + plan["memory"]["non_torch"]
    assert now["headroom"] == pytest.approx(plan["memory"]["free_headroom"] / total, abs=1e-6)  # 0.311991
