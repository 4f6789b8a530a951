"""Prefix caching and the Mamba cache mode of hybrid models by vLLM release (engines/vllm/mamba_cache.py),
from engine/arg_utils.py (the prefix-caching default), model_executor/models/config.py::MambaModelConfig
(the mode) and config/cache.py (the modes --mamba-cache-mode accepts), read in the 0.15.0 - 0.33.0 wheels."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import H100, run  # noqa: E402

from servefit.engines.vllm.mamba_cache import all_mode_note, hybrid_prefix_caching, mamba_cache_mode  # noqa: E402
from servefit.models.catalog import lookup  # noqa: E402

NEMOTRON = "nvidia/NVIDIA-Nemotron-Nano-9B-v2"
QWEN36 = "Qwen/Qwen3.6-27B"
ON = {"enable_prefix_caching": True}


def test_prefix_caching_default_for_hybrids():
    assert not hybrid_prefix_caching({}, (0, 25, 1))
    assert not hybrid_prefix_caching({}, (0, 26, 0))  # supported, opt-in
    assert not hybrid_prefix_caching({}, (0, 27, 1))
    assert hybrid_prefix_caching({}, (0, 28, 0))
    assert hybrid_prefix_caching(ON, (0, 27, 1))
    assert not hybrid_prefix_caching({"enable_prefix_caching": False}, (0, 33, 0))


def test_mode_by_release_and_architecture():
    nem, qwen = lookup(NEMOTRON), lookup(QWEN36)
    assert mamba_cache_mode({}, nem, (0, 27, 1), False) == "none"
    assert mamba_cache_mode(ON, nem, (0, 14, 0), True) == "none"  # no mamba_cache_mode before 0.15
    assert mamba_cache_mode(ON, nem, (0, 15, 0), True) == "all"  # SupportsMambaPrefixCaching
    assert mamba_cache_mode(ON, nem, (0, 27, 1), True) == "all"
    assert mamba_cache_mode(ON, nem, (0, 28, 0), True) == "align"  # 0.28 picks align for everyone
    assert mamba_cache_mode({"mamba_cache_mode": "all"}, nem, (0, 31, 0), True) == "all"
    assert mamba_cache_mode({"mamba_cache_mode": "all"}, nem, (0, 32, 0), True) == "align"  # no "all" from 0.32
    assert mamba_cache_mode(ON, qwen, (0, 27, 1), True) == "align"  # Gated DeltaNet: no "all" support
    assert mamba_cache_mode({"mamba_cache_mode": "all"}, qwen, (0, 28, 0), True) == "align"  # falls back


def test_plan_says_when_it_plans_all_as_align():
    nem = lookup(NEMOTRON)
    cmd = "vllm serve nvidia/NVIDIA-Nemotron-Nano-9B-v2 --max-model-len 32768 --max-num-seqs 64"
    _, plan = run(cmd + " --enable-prefix-caching", model=nem, gpu=H100, version="0.27.1")
    assert any("'all' cache mode" in a for a in plan.assumptions)
    for extra, version in (("", "0.27.1"), (" --enable-prefix-caching", "0.28.0"),
                           (" --enable-prefix-caching --mamba-cache-mode align", "0.27.1")):
        _, plan = run(cmd + extra, model=nem, gpu=H100, version=version)
        assert not any("'all' cache mode" in a for a in plan.assumptions), (extra, version)
    assert all_mode_note({"mamba_cache_mode": "all"}, nem, (0, 30, 0)) is not None  # prefix caching on from 0.28
    assert all_mode_note({"mamba_cache_mode": "all"}, lookup(QWEN36), (0, 30, 0)) is None
