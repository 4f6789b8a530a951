"""The "engine says" lines quote the vLLM release in force: the V0 engine (before 0.8) words the
refusal per block (worker/worker.py::raise_if_cache_size_invalid) and logs "# GPU blocks: N, #
CPU blocks: M" (executor/gpu_executor.py; "# cuda blocks" from 0.7, executor_base.py with the
platform's device_name); V1 logs "GPU KV cache size" (v1/core/kv_cache_utils.py)."""

from __future__ import annotations

from test_vllm_engine import H100, L4, LLAMA8B, run

CMD = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len"


def test_v0_063_logs_gpu_blocks_and_concurrency():
    _, p = run(f"{CMD} 8192", LLAMA8B, H100, version="0.6.3")
    n = p.detail.num_gpu_blocks
    cpu = 4 * 2**30 // (32 * 8 * 128 * 2 * 2 * 16)  # swap_space 4 GiB over one 16-token block of all layers
    assert p.messages[-2:] == [f"# GPU blocks: {n}, # CPU blocks: {cpu}",
                               f"Maximum concurrency for 8192 tokens per request: {n * 16 / 8192:.2f}x"]
    assert not any("GPU KV cache size" in m for m in p.messages)


def test_v0_073_names_the_cuda_device_and_v1_logs_tokens():
    _, p = run(f"{CMD} 8192", LLAMA8B, H100, version="0.7.3")
    assert p.messages[-2].startswith("# cuda blocks: ")
    _, p = run(f"{CMD} 8192", LLAMA8B, H100, version="0.11.0")
    assert p.messages[-2].startswith("GPU KV cache size: ") and not any("blocks:" in m for m in p.messages)


def test_v0_refusal_quotes_the_per_block_wording():
    _, p = run(f"{CMD} 131072", LLAMA8B, L4, version="0.6.3")
    assert p.outcome == "refused_max_model_len"
    n = p.detail.num_gpu_blocks
    assert p.messages[-1] == (
        f"The model's max seq len (131072) is larger than the maximum number of tokens that can be stored in KV "
        f"cache ({16 * n}). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine.")
    _, p = run(f"{CMD} 131072", LLAMA8B, L4, version="0.11.0")
    assert p.messages[-1].startswith("To serve at least one request with the model's max seq len (131072)")
