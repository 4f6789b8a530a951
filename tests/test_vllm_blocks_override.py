"""--num-gpu-blocks-override: the block count vLLM allocates and logs, and what its max-model-len check
sees per release (engines/vllm/kvcache.py override_check)."""

from __future__ import annotations

from servefit.pipeline import Target, evaluate, site_from_argv

CMD = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768"


def plan(version: str, extra: str = ""):
    site = site_from_argv((CMD + extra).split())
    return evaluate(site, Target(gpu="H100", gpus=1, engine_version=version)).plan


def test_v1_before_021_checks_the_profiled_memory_and_logs_the_override():
    p = plan("0.11.0", " --num-gpu-blocks-override 1000")
    assert p.outcome == "started"
    assert p.detail.num_gpu_blocks == 1000
    # 1000 blocks of 16 tokens; a request of 32,768 tokens needs 2,048 blocks
    assert p.kv_cache_tokens == 16_000 and p.max_concurrency == 1000 / 2048
    assert "GPU KV cache size: 16,000 tokens" in p.messages
    # Llama-3.1-8B: 32 layers x 8 KV heads x 128 x (K, V) x 2 bytes = 128 KiB a token
    assert p.memory.kv_cache == 1000 * 16 * 131072
    assert plan("0.11.0").kv_cache_tokens > 100_000


def test_from_021_and_in_v0_the_check_sees_the_override():
    p = plan("0.21.0", " --num-gpu-blocks-override 1000")
    assert p.outcome == "refused_max_model_len" and p.fitting_max_model_len == 16_000
    v0 = plan("0.6.3", " --num-gpu-blocks-override 1000")
    assert v0.outcome == "refused_max_model_len"
    assert any("stored in KV cache (16000)" in m for m in v0.messages)
    assert plan("0.21.0", " --num-gpu-blocks-override 4096").outcome == "started"
