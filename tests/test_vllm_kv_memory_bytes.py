"""--kv-cache-memory-bytes: vLLM sizes the KV cache to the bytes given and skips the budget
(v1/worker/gpu_worker.py determine_available_memory); past what the GPU holds beside the weights,
the allocation fails at start (engines/vllm/outcome.py verdict)."""

from __future__ import annotations

from servefit.pipeline import Target, evaluate
from servefit.sources import scan_file

CMD = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --kv-cache-memory-bytes "
BLOCK = 16 * 131072  # Llama-3.1-8B: 32 layers x 8 KV heads x 128 x (K, V) x 2 bytes a token, 16 tokens a block


def run(kv_bytes: int):
    site = scan_file("serve.sh", CMD + str(kv_bytes) + "\n").sites[0]
    return evaluate(site, Target(gpu="H100", gpus=1, engine_version="0.11.0"))


def test_the_set_size_is_the_cache_whatever_the_utilization():
    p = run(20 * BLOCK * 1024).plan  # 40 GiB
    assert p.outcome == "started"
    assert p.memory.kv_cache == 20 * BLOCK * 1024
    assert p.kv_cache_tokens == 20 * 1024 * 16


def test_a_size_past_what_the_gpu_holds_beside_the_weights_fails_at_start():
    p = run(BLOCK).plan
    m = p.memory
    # what torch can still hand out: the H100's own CUDA context (28 MiB + 1980 B x 132 x 2048 threads) is not
    room = m.total - m.weights - m.non_torch - 564625408
    fits = room // BLOCK * BLOCK
    ok = run(fits)
    assert ok.plan.outcome == "started"
    assert not [f for f in ok.plan.findings if f.code == "VLLM005"]
    over = run(fits + BLOCK)
    assert over.plan.outcome == "oom_at_load"
    assert "CUDA out of memory allocating the KV cache (the size --kv-cache-memory-bytes sets)" in over.plan.messages
    f = next(f for f in over.plan.findings if f.code == "VLLM005")
    assert f.message.startswith(f"weights ({m.weights / 2**30:.2f} GiB), non-torch memory ({m.non_torch / 2**30:.2f} "
                                f"GiB) and the {(fits + BLOCK) / 2**30:.2f} GiB KV cache that --kv-cache-memory-bytes sets "
                                "exceed the NVIDIA H100 80GB HBM3's 79.19 GiB")
    assert f.span is not None and (f.span.line, f.span.col) == (1, len(CMD) + 1)  # the value
    assert f.span.end_col == len(CMD) + 1 + len(str(fits + BLOCK))
