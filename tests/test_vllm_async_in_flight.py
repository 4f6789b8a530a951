"""Sliding-window KV groups reserve blocks for the batches still in flight (engines/vllm/async_sched.py):
from 0.26 VllmConfig.max_in_flight_tokens = max_concurrent_batches x max_num_batched_tokens, two batches
under async scheduling (the default unless pooling, a non-EAGLE-kind drafter or Ray turns it off)."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from servefit.engines.vllm.async_sched import async_scheduling, in_flight_tokens

ROOT = Path(__file__).resolve().parents[1]


def test_async_scheduling_default_and_what_turns_it_off():
    v = (0, 30, 0)
    assert async_scheduling({}, v, pooling=False)
    assert not async_scheduling({}, v, pooling=True)  # "Disabling asynchronous scheduling by default for pooling"
    assert not async_scheduling({"distributed_executor_backend": "ray"}, v, pooling=False)  # no supports_async_scheduling
    assert not async_scheduling({"async_scheduling": False}, v, pooling=False)
    assert async_scheduling({"async_scheduling": True}, v, pooling=True)  # asked for: vLLM keeps it (or refuses)
    spec = lambda m, **kw: {"speculative_config": {"method": m, "num_speculative_tokens": 2, **kw}}  # noqa: E731
    assert async_scheduling(spec("qwen3_next_mtp"), v, False) and async_scheduling(spec("eagle3"), v, False)
    assert not async_scheduling(spec("ngram"), v, False) and not async_scheduling(spec("suffix"), v, False)
    assert not async_scheduling(spec("eagle", disable_padded_drafter_batch=True), v, False)
    # draft_model joins the async kinds in 0.27 (the 0.26.0 default path lists EAGLE / ngram_gpu / DSpark only)
    assert not async_scheduling(spec("draft_model"), (0, 26, 0), False)
    assert async_scheduling(spec("draft_model"), (0, 27, 0), False)


def test_in_flight_tokens_per_release_runner_and_pipeline():
    # before 0.26 SlidingWindowSpec adds max_num_batched_tokens once (kept: x pp with pipeline stages)
    assert in_flight_tokens({}, (0, 25, 1), 2048, 1, False, False) == 2048
    assert in_flight_tokens({}, (0, 25, 1), 2048, 2, False, False) == 4096
    # 0.26+: async with one stage -> 2 batches; V2 runner -> pp + 1; V1 runner with PP -> pp; sync -> pp
    assert in_flight_tokens({}, (0, 26, 0), 2048, 1, False, False) == 4096
    assert in_flight_tokens({}, (0, 30, 0), 8192, 2, False, True) == 3 * 8192
    assert in_flight_tokens({}, (0, 30, 0), 8192, 2, False, False) == 2 * 8192
    assert in_flight_tokens({"async_scheduling": False}, (0, 30, 0), 2048, 1, False, True) == 2048
    assert in_flight_tokens({}, (0, 30, 0), 2048, 1, True, False) == 2048  # pooling: sync


def test_gemma4_e2b_sliding_groups_reserve_two_batches_on_0300():
    # the gemma4dev calibration log (0.30.0, V2 runner, L4, max-model-len 8192, 2048 batched tokens): "kv cache
    # group sizes [32, 32, 32, 32, 16]", four sliding-window groups (window 512, 32-token blocks) and one full
    # group (16-token blocks). A request at 8192 tokens holds cdiv(8192, 16) = 512 full blocks and, per sliding
    # group, cdiv(min(512 - 1 + 2 x 2048, 8192), 32) + 1 = 145 blocks (kv_cache_interface.py::SlidingWindowSpec.
    # max_admission_blocks_per_request with max_in_flight_tokens 4096): 512 + 4 x 145 = 1092 blocks a request;
    # with one batch in flight it would be cdiv(2559, 32) + 1 = 81 a group, 836 a request (the +44% the plan had)
    sys.path.insert(0, str(ROOT / "benchmarks" / "accuracy"))
    import run  # noqa: PLC0415

    cases = yaml.safe_load((ROOT / "benchmarks" / "accuracy" / "cases" / "vllm.yaml").read_text())
    case = next(c for c in cases if c["id"] == "gemma4dev-l4-gemma4-e2b-qat-w4a16-8k-0300")
    plan = run.predict(case)
    blocks = plan.detail.num_gpu_blocks
    assert (plan.detail.kv_groups, plan.detail.max_num_batched_tokens) == (5, 2048)
    assert plan.max_concurrency == blocks / (512 + 4 * 145) == blocks / 1092
    # the log: 106.61x from 10.66 GiB; the plan's +10% is its KV memory's, from the weights 0.81 GiB under
    assert abs(plan.max_concurrency / 106.61 - 1) < 0.11
