"""Session 31's third real-file trial (vLLM on Kubernetes, Slurm, SkyPilot / dstack, Modal): shapes from
public deployment repositories (named with their commits) that servefit read wrongly or silently, each
reduced to the part that mattered.

- olcf/olcf_containers_examples@032b962 frontier/sample_apps/vllm/start_head_lustre.sh (`NNODES=$@`)
- abdshomad/learn-vllm-from-pavlo@111d99a scripts/06_launch_vllm_single_node.sh (`source "$REPO_ROOT/scripts/..."`)
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
