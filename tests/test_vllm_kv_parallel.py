"""vLLM KV capacity under decode context parallelism and DeepSeek-V3.2's fp8_ds_mla rows, by hand
(kv_cache_interface.py FullAttentionSpec.max_memory_usage_bytes / MLAAttentionSpec.real_page_size_bytes)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import H100, run  # noqa: E402

CMD = "vllm serve m --max-model-len 32769 -tp 2"


def test_dcp_request_holds_cdiv_of_its_context_per_rank():
    # a request at 32769 tokens holds cdiv(32769, 16) = 2049 blocks; with -dcp 2 each rank keeps
    # cdiv(32769, 2) = 16385 tokens: cdiv(16385, 16) = 1025 blocks (before this fix servefit kept 2049)
    _, plain = run(CMD, gpu=H100, count=2, version="0.22.0")
    _, dcp = run(CMD + " -dcp 2", gpu=H100, count=2, version="0.22.0")
    blocks = plain.detail.num_gpu_blocks
    assert dcp.detail.num_gpu_blocks == blocks
    assert plain.max_concurrency == blocks / 2049
    assert dcp.max_concurrency == blocks / 1025
    # from 0.20.1 the logged tokens are int(concurrency x max_model_len)
    assert dcp.kv_cache_tokens == int(blocks / 1025 * 32769)


def test_dcp_before_0201_logs_blocks_times_dcp():
    # 0.11: num_blocks // groups x block_size, "Multiplying the GPU KV cache size by the dcp_world_size"
    _, dcp = run(CMD + " -dcp 2", gpu=H100, count=2, version="0.11.0")
    blocks = dcp.detail.num_gpu_blocks
    assert dcp.kv_cache_tokens == blocks * 16 * 2
    assert dcp.max_concurrency == blocks / 1025
