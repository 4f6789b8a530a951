"""vLLM's "GPU KV cache size" tokens and KV-group sizes per release, computed by hand from each
wheel's vllm/v1/core/kv_cache_utils.py:
- _report_kv_cache_config: `num_blocks // len(kv_cache_groups) * min_block_size` up to 0.20.0,
  `int(max_concurrency * max_model_len)` from 0.20.1 (0.20.0 and 0.20.1 read side by side).
- _get_kv_cache_groups_uniform_page_size: group size = the smallest layer kind's count in 0.11;
  the largest kind's when `max < min * 1.25` in 0.12-0.17, `max < min * 1.5` from 0.18."""

from __future__ import annotations

import pytest

from servefit.engines.vllm.era import era
from servefit.engines.vllm.kvcache import capacity, layer_kinds, layout
from servefit.models.spec import ModelSpec


def _model(sliding: int, full: int) -> ModelSpec:
    """A small synthetic model: 8 KV heads x 64, a 128-token window (gpt-oss's shapes)."""
    return ModelSpec(name="synthetic", architecture="GptOssForCausalLM", model_type="gpt_oss",
                     num_hidden_layers=sliding + full, hidden_size=512, num_attention_heads=8,
                     num_key_value_heads=8, head_dim=64, intermediate_size=1024, vocab_size=1000,
                     max_position_embeddings=131072, sliding_window=128,
                     layer_types=["sliding"] * sliding + ["full"] * full)


@pytest.mark.parametrize("version,tokens", [
    # 1000 blocks over 2 groups: 1000 // 2 * 16 = 8000
    ("0.11.0", 8000), ("0.19.0", 8000), ("0.20.0", 8000),
    # per request: full cdiv(8192, 16) = 512, sliding cdiv(127 + 2048, 16) + 1 = 137 -> 649 blocks;
    # int(1000 / 649 * 8192) = int(12622.49...) = 12622
    ("0.20.1", 12622), ("0.20.2", 12622), ("0.21.0", 12622), ("0.33.0", 12622),
])
def test_kv_tokens_of_two_groups_by_era(version, tokens):
    m = _model(12, 12)
    e = era(version)
    lay = layout(m, layer_kinds(m, True, False), 2, 1, 16, e)
    assert len(lay.groups) == 2
    got, conc = capacity(lay, 1000, 8192, 2048, e)
    assert conc == pytest.approx(1000 / 649)
    assert got == tokens


def test_kv_tokens_one_group_is_the_same_in_every_era():
    m = _model(0, 24)
    for version in ("0.11.0", "0.20.0", "0.21.0"):
        e = era(version)
        lay = layout(m, layer_kinds(m, True, False), 2, 1, 16, e)
        # 1000 blocks of 16 tokens; 8192 tokens per request -> 512 blocks: int(1000 / 512 * 8192) = 16000
        assert capacity(lay, 1000, 8192, 2048, e) == (16000, 1000 / 512)


@pytest.mark.parametrize("sliding,full,version,groups,padding", [
    # 12 sliding + 14 full (14 < 12 x 1.25): 0.11 takes 12 -> 1 sliding + 2 full groups, 10 padding
    (12, 14, "0.11.0", 3, 10), (12, 14, "0.12.0", 2, 2), (12, 14, "0.17.1", 2, 2), (12, 14, "0.18.0", 2, 2),
    # 10 sliding + 14 full (14 >= 10 x 1.25 but < 10 x 1.5): merged from 0.18 only
    (10, 14, "0.11.0", 3, 6), (10, 14, "0.17.1", 3, 6), (10, 14, "0.18.0", 2, 4), (10, 14, "0.21.0", 2, 4),
    # 10 sliding + 15 full (15 = 10 x 1.5): never merged
    (10, 15, "0.21.0", 3, 5),
])
def test_group_size_by_era(sliding, full, version, groups, padding):
    m = _model(sliding, full)
    lay = layout(m, layer_kinds(m, True, False), 2, 1, 16, era(version))
    assert (len(lay.groups), lay.padding_layers) == (groups, padding)
    assert lay.bytes_per_block == lay.groups[0].layers * 16 * 2 * 8 * 64 * 2


def test_sliding_layers_are_full_attention_before_091():
    """Up to 0.9.0 V1 has no hybrid KV-cache manager: kv_cache_utils.py::get_kv_cache_config checks one
    request against the sliding-window specs (check_enough_kv_cache_memory), then
    unify_hybrid_kv_cache_specs makes every layer full attention: one group, `num_blocks x block_size`
    tokens and `tokens / max_model_len` concurrency. 0.9.1 keeps the sliding layers' own groups."""
    from servefit.engines.vllm import ENGINE
    from servefit.hardware.spec import GpuSpec
    from servefit.pipeline import site_from_argv

    m = _model(5, 1)
    m.max_position_embeddings = 8_388_608
    h100 = GpuSpec(key="h100-sxm", name="NVIDIA H100 80GB HBM3", vendor="nvidia", memory_bytes=85_520_809_984,
                   compute_capability=90, fp8=True)
    page = 16 * 2 * 8 * 64 * 2
    argv = ["vllm", "serve", "synthetic", "--max-model-len", "8388608"]
    old = ENGINE.plan(cfg := ENGINE.parse(site_from_argv(argv), "0.9.0"), m, h100, 1)
    assert cfg.version == "0.9.0"
    blocks = old.detail.num_gpu_blocks
    assert old.detail.kv_groups == 1 and old.memory.kv_cache == blocks * 6 * page
    # six full layers need 8388608 / 16 blocks of 6 pages, more than the pool holds; the check
    # sees one full layer and five 128-token windows, which fit: it starts below one request
    assert blocks < 8_388_608 // 16
    assert old.outcome == "started"
    assert old.kv_cache_tokens == blocks * 16 and old.max_concurrency == pytest.approx(blocks / (8_388_608 // 16))
    new = ENGINE.plan(ENGINE.parse(site_from_argv(argv), "0.9.1"), m, h100, 1)
    assert new.detail.kv_groups == 6 and new.outcome == "started" and new.max_concurrency > 1


@pytest.mark.parametrize("version,fixed", [
    ("0.20.0", False), ("0.20.1rc1.dev16+g7a1eb8ac2", False), ("0.20.1rc0", False), ("0.20.1.dev3", False),
    ("0.20.1", True), ("0.20.2rc1.dev9+g01d4d1ad3", True), ("0.21.0rc1", True), ("0.33.0", True),
])
def test_kv_tokens_fix_is_not_in_the_020_1_prereleases(version, fixed):
    """era.TOKENS_FIX: the 0.20.1rc1.dev16 nightly logs 0.20.0's count (its lines at kv_cache_utils.py:1713 /
    :1718 are 0.20.0's layout), the 0.20.1 release and the 0.20.2rc1.dev9 builds the new one."""
    e = era(version)
    assert e.tokens_from_concurrency is fixed
    m = _model(12, 12)
    lay = layout(m, layer_kinds(m, True, False), 2, 1, 16, e)
    assert capacity(lay, 1000, 8192, 2048, e)[0] == (12622 if fixed else 8000)


def test_club3090_nightly_logs_blocks_over_fifteen_groups():
    """The club-3090 2x4090 run (0.20.1rc1.dev16, Qwen3.6-27B + the 5-layer DFlash drafter, TP2): 15 KV
    groups (4 full + 1 drafter + 10 GatedDeltaNet) of 816-token blocks, so the log's 67,728 tokens are
    1251 // 15 x 816 = 83 x 816 (the logged 9.74 GiB / (816 x 2048 x 5) = 1251.6 blocks); servefit's pool
    (1321 blocks) is counted the same way: 1321 // 15 x 816."""
    import importlib.util
    from pathlib import Path

    run = Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy" / "run.py"
    spec = importlib.util.spec_from_file_location("accuracy_run_tokens", run)
    assert spec is not None and spec.loader is not None
    acc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(acc)
    case = next(c for c in acc.load_cases("vllm") if c["id"] == "club3090-37-2x4090-qwen36-27b-int4-dflash-180k")
    plan = acc.predict(case)
    d = plan.detail
    assert (d.kv_groups, d.block_size) == (15, 816)
    assert 1251 // 15 * 816 == 67728 == case["expected"]["kv_tokens"]
    assert d.num_gpu_blocks == 1321
    assert plan.kv_cache_tokens == 1321 // 15 * 816 == 71808
    assert sum("before the 0.20.1 release" in a for a in plan.assumptions) == 1


def test_the_plan_says_a_020_1_prerelease_is_counted_the_0200_way():
    from servefit.engines.vllm.era import tokens_fix_note

    assert tokens_fix_note("0.20.1") is None and tokens_fix_note("0.20.2rc1.dev9+g01d4d1ad3") is None
    note = tokens_fix_note("0.20.1rc1.dev16+g7a1eb8ac2")
    assert note is not None and "0.20.1rc1.dev16+g7a1eb8ac2" in note and "evenly over the KV-cache groups" in note
