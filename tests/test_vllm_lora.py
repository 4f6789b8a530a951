"""--enable-lora: the stacked LoRA slots vLLM allocates with the model (weights.py lora_stage_bytes,
lora/layers/*.py create_lora_weights in the 0.22.0 wheel), by hand."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import run  # noqa: E402

R = 16  # LoRAConfig.max_lora_rank default


def llama8b_lora_bytes(tp: int, rank: int = R, slots: int = 1, full: bool = False) -> int:
    h, q, kv, inter, vocab = 4096, 4096 // tp, 1024 // tp, 14336 // tp, 128256
    a_rank = rank // tp if full else rank
    qkv = 3 * a_rank * h + (q + kv + kv) * rank            # column: rank x full input, output per rank x rank
    o = rank * (4096 // tp) + (h // tp if full else h) * rank  # row: rank x input per rank, full output x rank
    gate_up = 2 * a_rank * h + 2 * inter * rank
    down = rank * inter + (h // tp if full else h) * rank
    embed = vocab * rank + h * rank      # vocal_parallel_embedding.py: (slots, vocab, rank) + (slots, 1, h, rank)
    logits = rank * h + vocab * rank     # logits_processor.py: (slots, 1, rank, h) + (slots, 1, vocab, rank)
    return (32 * (qkv + o + gate_up + down) + embed + logits) * slots * 2


def test_enable_lora_adds_the_stacked_slots_to_the_weights():
    _, base = run("vllm serve m --max-model-len 4096", version="0.22.0")
    _, lora = run("vllm serve m --max-model-len 4096 --enable-lora --enforce-eager", version="0.22.0")
    assert lora.memory.weights - base.memory.weights == llama8b_lora_bytes(1) == 92_356_608


def test_lora_slots_by_rank_slots_tp_and_fully_sharded():
    cmd = "vllm serve m --max-model-len 4096 --tensor-parallel-size 2"
    _, base = run(cmd, count=2, version="0.22.0")
    _, lora = run(cmd + " --enable-lora --max-lora-rank 32 --max-loras 2", count=2, version="0.22.0")
    assert lora.memory.weights - base.memory.weights == llama8b_lora_bytes(2, 32, 2)
    _, sharded = run(cmd + " --enable-lora --fully-sharded-loras", count=2, version="0.22.0")
    assert sharded.memory.weights - base.memory.weights == llama8b_lora_bytes(2, full=True)
    assert llama8b_lora_bytes(2, full=True) < llama8b_lora_bytes(2)


def test_lora_slots_take_kv_cache():
    _, base = run("vllm serve m --max-model-len 4096 --enforce-eager", version="0.22.0")
    _, lora = run("vllm serve m --max-model-len 4096 --enable-lora --enforce-eager", version="0.22.0")
    assert base.detail.available_kv_cache_bytes - lora.detail.available_kv_cache_bytes == llama8b_lora_bytes(1)
