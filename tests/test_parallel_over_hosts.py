"""Ranks placed over several hosts (`--nnodes N`, vLLM's Ray backend) need only one host's share
of the GPUs the file gives: no 'world size larger than the GPUs' error for a multi-node launch."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.linter.run import LintOptions, lint_paths


def codes(tmp_path: Path, script: str, gpu: str = "h100") -> list[tuple[str, str]]:
    f = tmp_path / "serve.sh"
    f.write_text(script)
    return [(x.code, x.message.split(" [GPU: ")[0]) for x in lint_paths([str(f)], LintOptions(gpu=gpu)).findings
            if x.code in ("SF101", "VLLM008", "SGL010")]


VLLM = "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 4096 --host 127.0.0.1 "
SGL = "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --host 127.0.0.1 "


@pytest.mark.parametrize("script", [
    f"export CUDA_VISIBLE_DEVICES=0\nray start --address=10.0.0.1:6379\n{VLLM}--distributed-executor-backend ray -pp 2\n",
    f"export CUDA_VISIBLE_DEVICES=0,1,2,3\n{VLLM}-tp 4 -pp 2 --nnodes 2 --node-rank 0\n",
    f"export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7\n{SGL}--tp 16 --nnodes 2 --node-rank 1 --dist-init-addr 10.0.0.1:5000\n",
])
def test_multi_node_launches_fit_one_hosts_gpus(tmp_path: Path, script: str) -> None:
    assert codes(tmp_path, script) == []


def test_a_host_short_of_its_share_is_still_an_error(tmp_path: Path) -> None:
    got = codes(tmp_path, "export CUDA_VISIBLE_DEVICES=0,1,2,3\n"
                          f"{SGL}--tp 16 --nnodes 2 --node-rank 0 --dist-init-addr 10.0.0.1:5000\n")
    assert got == [("SGL010", "tp_size x pp_size = 16 GPUs over 2 nodes, 8 on each, but only 4 are available")]
    got = codes(tmp_path, f"export CUDA_VISIBLE_DEVICES=0\n{VLLM}-pp 2\n")
    assert got == [("VLLM008", "World size (2) is larger than the number of available GPUs (1) in this node.")]
