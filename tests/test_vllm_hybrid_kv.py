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
    1 block a request, "none" mode); 0.26.0 - 0.27.1 support it but EngineArgs keeps it opt-in for hybrids
    (`is_prefix_caching_supported and not model_config.is_hybrid`); on from 0.28.0 ("align": 2). The 0.19.0
    LAMBO log (Qwen3.5-9B, TP4, 32k) logs 57.74x = its blocks / (63 + 3 x 1); 3 x 2 would give 54.7x."""
    from servefit.engines.vllm.kvcache import hybrid_state

    m = lookup(QWEN36_35B)
    assert hybrid_state({}, m, "bfloat16", 1, (0, 25, 1), 16, 1)[0] == 1
    assert hybrid_state({}, m, "bfloat16", 1, (0, 19, 0), 16, 1)[0] == 1
    assert hybrid_state({}, m, "bfloat16", 1, (0, 26, 0), 16, 1)[0] == 1
    assert hybrid_state({}, m, "bfloat16", 1, (0, 27, 1), 16, 1)[0] == 1
    assert hybrid_state({}, m, "bfloat16", 1, (0, 28, 0), 16, 1)[0] == 2
    assert hybrid_state({}, m, "bfloat16", 1, (0, 33, 0), 16, 1)[0] == 2
    assert hybrid_state({"enable_prefix_caching": True}, m, "bfloat16", 1, (0, 27, 1), 16, 1)[0] == 2
    assert hybrid_state({"enable_prefix_caching": True}, m, "bfloat16", 1, (0, 24, 0), 16, 1)[0] == 2
    assert hybrid_state({"enable_prefix_caching": False}, m, "bfloat16", 1, (0, 33, 0), 16, 1)[0] == 1


def test_qwen38_27b_pool_at_0271_reproduces_the_otel_line():
    """vLLM 0.27.1, Qwen3.8-27B-FP8 on one H100, --max-model-len 8192, prefix caching left at its default
    (off for a hybrid in 0.27.1): the OTel README logs "GPU KV cache size: 485,083 tokens" and 59.21x.
    By hand: bf16 KV is 2 x 4 x 256 x 2 = 4096 B a token a layer; the GatedDeltaNet state is conv
    (2 x 16 x 128 + 48 x 128) x 3 x 2 B + ssm 48 x 128 x 128 x 4 B (fp32) = 3,207,168 B, so the block is
    16 x cdiv(3207168, 16 x 4096) = 784 tokens (0.27.1 logs 784 for Qwen3.6-27B). 16 full + 48 linear
    layers: one full group and three state groups of 16. A request at 8192 takes cdiv(8192, 784) = 11
    blocks + 3 x 1 state blocks ("none" mode) = 14; 829 blocks / 14 = 59.2142..x, x 8192 = 485,083."""
    from servefit.engines.vllm.kvcache import hybrid_state

    m = lookup("Qwen/Qwen3.8-27B-FP8")
    e = era("0.27.1")
    state_blocks, block, page, _ = hybrid_state({}, m, "bfloat16", 1, (0, 27, 1), 16, 2)
    assert (state_blocks, block, page) == (1, 784, 3_207_168)
    kinds = layer_kinds(m, True, False, state_blocks)
    assert kinds.count(("mamba", 1)) == 48 and kinds.count(("full", 0)) == 16
    lay = layout(m, kinds, 2, 1, block, e, page)
    assert sorted(g.kind for g in lay.groups) == ["full", "mamba", "mamba", "mamba"]
    assert lay.bytes_per_block == 784 * 4096 * 16 == 51_380_224
    assert lay.blocks_per_request(8192, 8192) == 11 + 3
    tokens, conc = capacity(lay, 829, 8192, 8192, e)
    assert tokens == 485_083 and f"{conc:.2f}" == "59.21"
    # with --enable-prefix-caching ("align"): 11 + 3 x 2 = 17 blocks a request
    aligned = hybrid_state({"enable_prefix_caching": True}, m, "bfloat16", 1, (0, 27, 1), 16, 2)[0]
    assert layout(m, layer_kinds(m, True, False, aligned), 2, 1, block, e, page).blocks_per_request(8192, 8192) == 17
