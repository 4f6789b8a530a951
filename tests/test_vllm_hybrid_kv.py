"""vLLM's KV pool for GatedDeltaNet / Mamba2 hybrids, computed by hand from vLLM v0.24's code
(platforms/interface.py::_align_hybrid_block_size, kv_cache_interface.py::MambaSpec,
kv_cache_utils.py::_get_kv_cache_groups_uniform_page_size, get_max_concurrency_for_kv_cache_config)
and checked against the numbers a public log shows (club-3090 #652, a held-out case)."""

from __future__ import annotations

from servefit.engines.vllm.era import era
from servefit.engines.vllm.kvcache import (
    aligned_block_size,
    capacity,
    layer_kinds,
    layout,
    mamba_page_bytes,
    mamba_state_blocks,
)
from servefit.models.catalog import lookup

QWEN36_35B = "Qwen/Qwen3.6-35B-A3B"


def test_gdn_state_page_by_hand():
    m = lookup(QWEN36_35B)
    # conv: (2*16*128 + 32*128) x (4 - 1) in bf16; ssm: 32 x 128 x 128 in fp32 (config mamba_ssm_dtype)
    assert mamba_page_bytes(m, 1, 2, 4, 0) == 8192 * 3 * 2 + 32 * 128 * 128 * 4 == 2_146_304
    # TP2 halves both; 3 speculative tokens lengthen the conv window to 6
    assert mamba_page_bytes(m, 2, 2, 4, 3) == 4096 * 6 * 2 + 16 * 128 * 128 * 4


def test_block_size_alignment_by_hand():
    # fp8 KV: 2 KV heads x 256 x (K, V) x 1 B = 1024 B per token per layer -> 16 * cdiv(2146304, 16384)
    assert aligned_block_size(16, 2_146_304, 1024) == 2096
    assert aligned_block_size(4096, 2_146_304, 1024) == 4096  # a larger --block-size stays
    assert aligned_block_size(16, 0, 1024) == 16


def test_state_blocks_per_request_by_era():
    assert mamba_state_blocks((0, 11, 0), True, 0) == 1
    assert mamba_state_blocks((0, 24, 0), True, 0) == 2  # "align" with prefix caching
    assert mamba_state_blocks((0, 24, 0), False, 3) == 4  # "none": 1 + speculative blocks
    assert mamba_state_blocks((0, 24, 0), True, 3) == 5


def test_qwen36_pool_reproduces_the_logged_line():
    """club-3090 #652 logged 6.01 GiB, "GPU KV cache size: 569,878 tokens", 4.35x for 131,072."""
    m = lookup(QWEN36_35B)
    e = era("0.24.0")
    kinds = layer_kinds(m, True, False, mamba_state_blocks((0, 24, 0), True, 0))
    assert kinds.count(("mamba", 2)) == 30 and kinds.count(("full", 0)) == 10
    lay = layout(m, kinds, 1, 1, 2096, e)
    assert sorted(g.kind for g in lay.groups) == ["full", "mamba", "mamba", "mamba"]
    assert lay.bytes_per_block == 2096 * 1024 * 10
    assert lay.blocks_per_request(131072, 8192) == 63 + 3 * 2
    blocks = int(6.01 * 2**30) // lay.bytes_per_block
    assert blocks == 300
    tokens, conc = capacity(lay, blocks, 131072, 8192, e)
    assert tokens == 569_878 and round(conc, 2) == 4.35


def test_hybrid_prefix_caching_default_by_release():
    """ModelConfig.is_prefix_caching_supported: off for hybrids up to 0.25 (the recurrent state then takes
    1 block a request, "none" mode), on from 0.26 ("align": 2). The 0.19.0 LAMBO log (Qwen3.5-9B, TP4,
    32k) logs 57.74x = its blocks / (63 + 3 x 1); 3 x 2 would give 54.7x."""
    from servefit.engines.vllm.kvcache import hybrid_state

    m = lookup(QWEN36_35B)
    assert hybrid_state({}, m, "bfloat16", 1, (0, 25, 1), 16, 1)[0] == 1
    assert hybrid_state({}, m, "bfloat16", 1, (0, 19, 0), 16, 1)[0] == 1
    assert hybrid_state({}, m, "bfloat16", 1, (0, 26, 0), 16, 1)[0] == 2
    assert hybrid_state({"enable_prefix_caching": True}, m, "bfloat16", 1, (0, 24, 0), 16, 1)[0] == 2
    assert hybrid_state({"enable_prefix_caching": False}, m, "bfloat16", 1, (0, 33, 0), 16, 1)[0] == 1
