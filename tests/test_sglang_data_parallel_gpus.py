"""SGLang without DP attention gives each of --dp-size replicas its own tp x pp GPUs
(data_parallel_controller): the GPU count check and the tensor-parallel sizes tune tries count them."""

from __future__ import annotations

from servefit.pipeline import Target, evaluate, site_from_argv
from servefit.tune.objective import Needs
from servefit.tune.space import build_space
from tests.test_sglang_engine import LAUNCH, codes, run


def test_replicas_count_towards_the_gpus() -> None:
    cfg, plan = run(f"{LAUNCH} --tp-size 4 --dp-size 4", count=8)
    f = next(f for f in plan.findings if f.code == "SGL010")
    assert f.message == "tp_size x pp_size x dp_size = 16 GPUs, but only 8 are available"
    assert plan.outcome == "rejected_config"
    cfg, plan = run(f"{LAUNCH} --tp-size 2 --dp-size 4", count=8)
    assert "SGL010" not in codes(cfg, plan)
    # with DP attention the replicas share the tp ranks: tp 4 on 4 GPUs
    cfg, plan = run(f"{LAUNCH} --tp-size 4 --dp-size 4 --enable-dp-attention", count=4)
    assert "SGL010" not in codes(cfg, plan)


def test_tune_tries_only_shard_counts_the_replicas_leave_room_for() -> None:
    argv = f"{LAUNCH} --tp-size 2 --dp-size 4".split()
    ev = evaluate(site_from_argv(argv), Target(gpu="L4", gpus=8))
    dims = {d.name: d.values for d in build_space(ev, Needs()).dims}
    assert sorted(dims["tp_size"]) == [1, 2]
    ev = evaluate(site_from_argv(argv + ["--enable-dp-attention"]), Target(gpu="L4", gpus=8))
    assert sorted({d.name: d.values for d in build_space(ev, Needs()).dims}["tp_size"]) == [1, 2, 4, 8]
