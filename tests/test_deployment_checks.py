"""SF101 / SF102 read each engine's parallelism from the `parallel` key of its data file, with
the engine's parse or, without a plugin, from the raw flags."""

from __future__ import annotations

import pytest

from servefit import engines
from servefit.core import GpuHint
from servefit.linter.checks import check, parallel
from servefit.pipeline import site_from_argv


@pytest.mark.parametrize("argv, env, engine, expected", [
    (["vllm", "serve", "m", "-tp", "4", "--pipeline-parallel-size=2"], {}, "vllm", (4, 2)),
    (["python3", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "2"], {}, "sglang", (2, 1)),
    (["text-generation-launcher", "--model-id", "m", "--num-shard", "4"], {}, "tgi", (4, 1)),
    (["text-generation-launcher", "--model-id", "m"], {"NUM_SHARD": "2"}, "tgi", (2, 1)),
    (["llama-server", "-m", "x.gguf"], {}, "llamacpp", (1, 1)),
])
@pytest.mark.parametrize("parsed", [False, True])
def test_parallel(argv: list[str], env: dict[str, str], engine: str, expected: tuple[int, int], parsed: bool) -> None:
    site = site_from_argv(argv, env)
    site.engine = engine
    cfg = engines.get(engine).parse(site, None) if parsed else None
    assert parallel(site, cfg)[:2] == expected


def test_tgi_num_shard_left_unset_is_not_checked() -> None:
    site = site_from_argv(["text-generation-launcher", "--model-id", "m"])
    site.engine = "tgi"
    site.gpu = GpuHint(None, 1, "count from nvidia.com/gpu limit")
    assert check(site, engines.get("tgi").parse(site, None)) == []


def test_world_size_and_shm_findings() -> None:
    site = site_from_argv(["text-generation-launcher", "--model-id", "m", "--num-shard", "4"])
    site.engine = "tgi"
    site.gpu = GpuHint(None, 2, "count from nvidia.com/gpu limit")
    site.workload.shm = False
    site.workload.kind = "Deployment"
    codes = {f.code: f for f in check(site, None)}
    assert codes["SF101"].message.startswith("num_shard 4 needs 4 GPUs, but the file requests 2")
    assert codes["SF101"].setting == "num_shard"
    assert "only 64 MiB in this pod" in codes["SF102"].message
    site = site_from_argv(["vllm", "serve", "m", "-tp", "2", "-pp", "2"])
    site.engine = "vllm"
    site.gpu = GpuHint(None, 2, "count from --gpus")
    [f] = check(site, None)
    assert f.message.startswith("tensor parallel 2 × pipeline parallel 2 needs 4 GPUs")
    site = site_from_argv(["llama-server", "-m", "x.gguf"])
    site.engine = "llamacpp"
    site.workload.shm = False
    assert check(site, None) == []  # llama.cpp does not use NCCL


@pytest.mark.parametrize("gpus, expected", [(1, None), (2, "2 GPU workers share tensors through /dev/shm")])
def test_ranks_spread_over_hosts_share_memory_only_with_those_on_this_host(gpus: int, expected: str | None) -> None:
    """vLLM's Ray backend (aibrix RayClusterFleet: TP 2 over two one-GPU pods): the pod's one rank shares
    no /dev/shm with the other, which NCCL reaches over the network; two GPUs in the pod do share it."""
    site = site_from_argv(["vllm", "serve", "m", "--tensor-parallel-size", "4",
                           "--distributed-executor-backend", "ray"])
    site.engine = "vllm"
    site.gpu = GpuHint(None, gpus, "count from nvidia.com/gpu limit")
    site.workload.shm = False
    site.workload.kind = "RayCluster"
    found = [f.message for f in check(site, engines.get("vllm").parse(site, None))]
    assert [m[:len(expected)] for m in found] == ([expected] if expected else [])
