"""SGLang's DeepSeek-V4 pools (engines/sglang/dsv4.py, plan_dsv4.py), computed here by hand from SGLang
0.5.23's formulas (model_executor/pool_configurator.py DSV4PoolConfigurator, kv_layout.py KVLayout.V4),
not from the module's sub-terms."""

from __future__ import annotations

import re

import pytest

from servefit.core import UsageError
from servefit.engines.sglang import dsv4
from servefit.models import catalog
from servefit.pipeline import Target, evaluate, site_from_argv

GiB = 2**30
FLASH = "deepseek-ai/DeepSeek-V4-Flash"
PRO = "deepseek-ai/DeepSeek-V4-Pro"
# Flash: 43 layers, compress_ratios [0, 0] + [4, 128] x 20 + [4] -> 21 rate-4, 20 rate-128 layers
# Pro: 61 layers, [128, 128] + [4, 128] x 29 + [4] -> 30 rate-4, 31 rate-128 layers
# KVLayout.V4 rows: 584 bytes, pages padded to a multiple of 576:
#   SWA page 256 rows: 149504 -> 260 x 576 = 149760 bytes, 585 a token
#   c4 page 64 rows: 37376 -> 65 x 576 = 37440, 585 a row; c128 page 2 rows: 1168 -> 3 x 576 = 1728, 864 a row
# indexer row 128 + 4 = 132; c4 states 2 x 2 x 512 x 4 + 2 x 2 x 128 x 4 = 10240 bytes, ring 8 per SWA page of 256
FLASH_SWA = 43 * 585 + 8 / 256 * 10240 * 21  # 31875
FLASH_FULL = 0.1 * FLASH_SWA + 21 * (585 + 132) / 4 + 20 * 864 / 128  # 7086.75 = 28347 / 4
PRO_SWA = 61 * 585 + 8 / 256 * 10240 * 30  # 45285
PRO_FULL = 0.1 * PRO_SWA + 30 * (585 + 132) / 4 + 31 * 864 / 128  # 10115.25 = 40461 / 4
# c128 states: (256 + 1) x 128 + 128 + 1 = 33025 rows -> 259 x 128 = 33152 rows of 2 x 512 fp32 per layer
FLASH_C128 = 33152 * 1024 * 4 * 20  # 2715811840
PRO_C128 = 33152 * 1024 * 4 * 31  # 4209508352


def _model(name):
    return catalog.lookup(name)


def _ratios(name):
    return dsv4.stage_ratios(_model(name), 1)


def test_bytes_per_token_by_hand():
    assert (FLASH_SWA, FLASH_FULL, PRO_SWA, PRO_FULL) == (31875, 7086.75, 45285, 10115.25)
    assert dsv4.per_token(_model(FLASH), _ratios(FLASH), 0.1, False) == (FLASH_SWA, FLASH_FULL)
    assert dsv4.per_token(_model(PRO), _ratios(PRO), 0.1, False) == (PRO_SWA, PRO_FULL)
    assert dsv4.c128_state_bytes(_model(FLASH), _ratios(FLASH), 256, False) == FLASH_C128 == 2715811840
    assert dsv4.c128_state_bytes(_model(PRO), _ratios(PRO), 256, False) == PRO_C128


def test_speculative_decoding_widens_the_rings_and_reserves_the_draft_layer():
    # rings 16 (c4) and 256 (c128); bytes x (43 + 1) / 43 for the draft worker
    swa = (43 * 585 + 16 / 256 * 10240 * 21) * 44 / 43
    full = (0.1 * (43 * 585 + 16 / 256 * 10240 * 21) + 21 * 717 / 4 + 20 * 6.75) * 44 / 43
    got = dsv4.per_token(_model(FLASH), _ratios(FLASH), 0.1, True)
    assert got == pytest.approx((swa, full), rel=1e-12)
    # 257 x 256 + 257 = 66049 rows -> 517 x 128
    assert dsv4.c128_state_bytes(_model(FLASH), _ratios(FLASH), 256, True) == 66176 * 4096 * 20


@pytest.mark.parametrize("name,available,fixed,quarter_bytes", [
    (FLASH, 40 * GiB, FLASH_C128, 28347), (PRO, 80 * GiB, PRO_C128, 40461)])
def test_pool_sizes_by_hand(name, available, fixed, quarter_bytes):
    p = dsv4.size(_model(name), _ratios(name), available)
    full = (available - fixed) * 4 // quarter_bytes // 256 * 256
    swa = int(full * 0.1) // 256 * 256
    assert (p.full, p.swa, p.c4, p.c128) == (full, swa, full // 4, full // 128)
    assert (p.c4_state, p.c128_state, p.max_running_requests) == (swa // 256 * 8, 257 * 128, 256)
    assert p.c128_state_fixed == fixed


def test_flash_pool_sizes_are_the_numbers_worked_out():
    p = dsv4.size(_model(FLASH), _ratios(FLASH), 40 * GiB)
    assert (p.full, p.swa, p.c4, p.c128, p.c4_state) == (5677312, 567552, 1419328, 44354, 17736)
    p = dsv4.size(_model(PRO), _ratios(PRO), 80 * GiB)
    assert (p.full, p.swa) == (8075776, 807424)


def test_fewer_requests_shrink_the_c128_rings_and_a_cap_rounds_to_a_page():
    p = dsv4.size(_model(FLASH), _ratios(FLASH), 40 * GiB, requests=64, cap=100_000)
    # 65 x 128 + 129 = 8449 rows -> 67 x 128
    assert p.c128_state_fixed == 8576 * 1024 * 4 * 20
    assert (p.full, p.swa, p.c128_state, p.max_running_requests) == (99840, 9984, 65 * 128, 64)


def _plan(argv, gpu="H100", gpus=8, version="0.5.23"):
    return evaluate(site_from_argv(argv), Target(gpu=gpu, gpus=gpus, engine_version=version)).plan


SGL = ["python", "-m", "sglang.launch_server", "--model-path"]


def test_flash_at_tp8_on_h100():
    p = _plan(SGL + [FLASH, "--tp", "8"])
    assert p.outcome == "started" and p.kv_bytes_per_token == 7087
    m = p.memory
    rest = m.budget - m.weights  # pre x mem_fraction_static - weights (int(pre x f) truncates: one page of slack)
    full = (rest - FLASH_C128) * 4 // 28347 // 256 * 256
    assert abs(p.kv_cache_tokens - full) <= 256 and p.kv_cache_tokens % 256 == 0
    x = p.detail
    assert (x.max_total_num_tokens, x.max_running_requests, x.page_size) == (p.kv_cache_tokens, 256, 256)
    assert x.swa_max_total_num_tokens == int(p.kv_cache_tokens * 0.1) // 256 * 256
    sizes = next(s for s in p.messages if s.startswith("DSV4 pool sizes"))
    t = p.kv_cache_tokens
    assert sizes == (f"DSV4 pool sizes: full={t}, swa={x.swa_max_total_num_tokens}, c4={t // 4}, c128={t // 128}, "
                     f"c4_state={x.swa_max_total_num_tokens // 256 * 8}, c128_state=32896")
    assert m.kv_cache == int(t * FLASH_FULL) + FLASH_C128
    calc = next(s for s in p.messages if s.startswith("DSV4 memory calculation"))  # SGLang's own fields
    assert calc.startswith("DSV4 memory calculation: bytes_per_full_token=7086.75, available_bytes=")
    assert f", full_token={t}, c128_state_fixed=2.53 GB" in calc
    assert any(s.startswith(f"max_total_num_tokens={t}, ") and "max_running_requests=256" in s for s in p.messages)
    assert any("follow SGLang 0.5.23's DSV4PoolConfigurator" in a for a in p.assumptions)


def test_pro_at_tp8_on_h200():
    p = _plan(SGL + [PRO, "--tp", "8"], gpu="H200")
    assert p.outcome == "started" and p.kv_bytes_per_token == 10115
    rest = p.memory.budget - p.memory.weights
    full = (rest - PRO_C128) * 4 // 40461 // 256 * 256
    assert abs(p.kv_cache_tokens - full) <= 256


def test_flags_that_feed_the_pools():
    argv = SGL + [FLASH, "--tp", "8", "--swa-full-tokens-ratio", "0.5", "--max-running-requests", "64",
                  "--page-size", "1"]
    p = _plan(argv)
    assert p.detail.page_size == 256 and p.detail.max_running_requests == 64
    assert p.detail.swa_max_total_num_tokens == int(p.kv_cache_tokens * 0.5) // 256 * 256
    assert p.kv_bytes_per_token == round(0.5 * FLASH_SWA + 21 * 717 / 4 + 20 * 6.75)
    assert any("page_size=256" in a for a in p.assumptions)


def test_a_pool_too_small_for_one_sliding_window_fails_as_sglang_does():
    # --max-total-tokens 3000 -> full 2816, swa int(281.6) -> 256 <= 128 + 256
    p = _plan(SGL + [FLASH, "--tp", "8", "--max-total-tokens", "3000"])
    assert p.outcome == "oom_at_load"
    f = next(f for f in p.findings if f.code == "SGL004")
    assert f.message.startswith("ValueError: SWA pool (256 tokens) cannot hold even one request")
    ok = _plan(SGL + [FLASH, "--tp", "8", "--max-total-tokens", "6000"])  # full 5888, swa 512
    assert ok.outcome == "started" and (ok.kv_cache_tokens, ok.detail.swa_max_total_num_tokens) == (5888, 512)


def test_releases_before_v4_support_are_refused_in_one_line():
    with pytest.raises(UsageError, match=r"SGLang 0\.5\.11 has no DeepSeek-V4 model") as e:
        _plan(SGL + [FLASH, "--tp", "8"], version="0.5.11")
    assert "\n" not in str(e.value)
    p = _plan(SGL + [FLASH, "--tp", "8"], version="0.5.12")
    assert p.outcome == "started" and any(re.search(r"SGLang 0\.5\.12's DSV4PoolConfigurator", a) for a in p.assumptions)
    p = _plan(SGL + [FLASH, "--tp", "8"], version="0.5.30")
    assert any("SGLang 0.5.23 (the newest release modelled)'s" in a for a in p.assumptions)


# Earlier releases, from their wheels' DSV4PoolConfigurator._get_bytes_per_full_token:
# rows of 584 bytes unpadded, c4 rings per window (128) of SWA tokens; until 0.5.14 the c128 states too
# (ring 128 x 2 x 512 x 4 bytes per 128 SWA tokens = 4096 a token per layer); 0.5.12 counts the MTP entry
LEGACY_SWA = 44 * 584 + 8 / 128 * 10240 * 21 + 128 / 128 * 4096 * 20  # 121056
LEGACY = 0.1 * LEGACY_SWA + 21 * (584 + 132) / 4 + 20 * 584 / 128  # 15955.85
SLICED_SWA = 43 * 584 + 8 / 128 * 10240 * 21 + 4096 * 20  # 120472 (0.5.13, 0.5.14)
SLICED = 0.1 * SLICED_SWA + 21 * 716 / 4 + 20 * 584 / 128  # 15897.45 = 317949 / 20
FIXED_SWA = 43 * 584 + 8 / 128 * 10240 * 21  # 38552 (0.5.15 - 0.5.20)
FIXED = 0.1 * FIXED_SWA + 21 * 716 / 4 + 20 * 584 / 128  # 7705.45


@pytest.mark.parametrize("v,swa,full,c128", [
    ((0, 5, 12), LEGACY_SWA, LEGACY, 0), ((0, 5, 14), SLICED_SWA, SLICED, 0),
    ((0, 5, 15), FIXED_SWA, FIXED, FLASH_C128), ((0, 5, 20), FIXED_SWA, FIXED, FLASH_C128),
    ((0, 5, 21), FLASH_SWA, FLASH_FULL, FLASH_C128)])
def test_each_release_prices_a_token_as_its_wheel_does(v, swa, full, c128):
    assert (LEGACY_SWA, LEGACY, SLICED, FIXED) == pytest.approx((121056, 15955.85, 15897.45, 7705.45), rel=1e-12)
    rel = dsv4.Release(v)
    m = _model(FLASH)
    ratios = dsv4.stage_ratios(m, 1, rel)
    assert len(ratios) == (44 if v == (0, 5, 12) else 43)
    assert dsv4.per_token(m, ratios, 0.1, False, rel=rel) == pytest.approx((swa, full), rel=1e-12)
    assert dsv4.c128_state_bytes(m, ratios, 256, False, rel=rel) == c128


def test_before_0_5_15_the_c128_rings_follow_the_swa_pool():
    rel = dsv4.Release((0, 5, 14))
    p = dsv4.size(_model(FLASH), _ratios(FLASH), 40 * GiB, rel=rel)
    # int(40 GiB / 15897.45) floored to 256: 2701568; swa 270080; c4 / c128 states per 128 SWA tokens
    assert (p.full, p.swa, p.c4_state, p.c128_state, p.c128_state_fixed) == (2701568, 270080, 16880, 270080, 0)


def test_older_releases_plan_with_their_own_sizing():
    p = _plan(SGL + [FLASH, "--tp", "8"], version="0.5.18")
    assert p.kv_bytes_per_token == 7705
    assert not any(s.startswith("DSV4 SWA sizing") for s in p.messages)
    # ServerArgs' 0.8 default given on the command line still became 0.1 before 0.5.20
    argv = SGL + [FLASH, "--tp", "8", "--swa-full-tokens-ratio", "0.8"]
    assert _plan(argv, version="0.5.19").kv_bytes_per_token == 7705
    assert _plan(argv, version="0.5.20").kv_bytes_per_token == round(0.8 * FIXED_SWA + 21 * 716 / 4 + 20 * 584 / 128)
    # no SWA floor before 0.5.20: full 2816, swa 256 starts
    small = _plan(SGL + [FLASH, "--tp", "8", "--max-total-tokens", "3000"], version="0.5.19")
    assert small.outcome == "started" and small.detail.swa_max_total_num_tokens == 256
