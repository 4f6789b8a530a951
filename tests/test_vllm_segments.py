"""The free tails of the weights' segments (engines/vllm/segments.py) that vLLM 0.6.5 - 0.6.6 charge as
non-torch memory: PyTorch's caching-allocator rules worked by hand."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from servefit.engines.vllm.non_torch import CUDA_CONTEXT
from servefit.engines.vllm.segments import free_tail_bytes, weight_allocations, weight_tail_bytes

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import LLAMA8B, run  # noqa: E402

MiB = 2**20
# a two-layer model with Qwen2.5-1.5B's widths: embedding 151936 x 1536, fused qkv (12 + 2 x 2 heads of
# 128), MLP 8960, tied lm_head, rotary cache 32768 x 128
QWEN_2L = replace(LLAMA8B, model_type="qwen2", num_hidden_layers=2, hidden_size=1536, num_attention_heads=12,
                  num_key_value_heads=2, head_dim=128, intermediate_size=8960, vocab_size=151936,
                  tie_word_embeddings=True, max_position_embeddings=32768)


def test_a_large_request_keeps_the_tail_of_its_2_mib_rounded_segment():
    # 52.5 MiB opens a 54 MiB segment: the 1.5 MiB left is split off and stays reserved
    assert free_tail_bytes([int(52.5 * MiB)]) == int(1.5 * MiB)
    # 445.125 MiB opens 446 MiB: 0.875 MiB is not more than 1 MiB, so the block is not split (allocated)
    assert free_tail_bytes([int(445.125 * MiB)]) == 0


def test_mid_requests_share_a_20_mib_segment_best_fit():
    # 6 MiB opens a 20 MiB segment (14 left), 4.5 MiB takes the 14 (9.5 left), 8 MiB takes the 9.5 (1.5 left)
    assert free_tail_bytes([6 * MiB, int(4.5 * MiB), 8 * MiB]) == int(1.5 * MiB)
    # 10 MiB is a large request: a 10 MiB segment, nothing left
    assert free_tail_bytes([10 * MiB]) == 0
    # small requests (1 MiB or less) use the small pool, left out
    assert free_tail_bytes([MiB, 512 * 1024]) == 0


def test_two_layer_model_by_hand():
    db = 2
    assert weight_allocations(QWEN_2L, db, 1) == [
        151936 * 1536 * db,  # embedding, 445.125 MiB
        2048 * 1536 * db, 1536 * 1536 * db, 32768 * 128 * db, 17920 * 1536 * db, 1536 * 8960 * db,  # layer 0
        2048 * 1536 * db, 1536 * 1536 * db, 17920 * 1536 * db, 1536 * 8960 * db,  # layer 1
    ]
    # embedding 0; qkv 6 -> 14 left, o 4.5 -> 9.5, rotary 8 -> 1.5; gate_up 52.5 -> 1.5; down 26.25 -> 1.75;
    # layer 1: qkv opens a new 20 MiB (14), o -> 9.5; gate_up 1.5; down 1.75
    assert weight_tail_bytes(QWEN_2L, db, 1) == int((1.5 + 1.5 + 1.75 + 9.5 + 1.5 + 1.75) * MiB) == 18_350_080


def test_layouts_not_modelled_have_no_tails():
    assert weight_tail_bytes(replace(QWEN_2L, num_experts=8, moe_intermediate_size=768), 2, 1) == 0
    assert weight_tail_bytes(replace(QWEN_2L, quantization={"quant_method": "gptq"}), 2, 1) == 0
    assert weight_tail_bytes(replace(QWEN_2L, model_type="gemma2"), 2, 1) == 0


def test_only_0_6_5_to_0_6_6_charge_the_tails():
    argv = "vllm serve m --max-model-len 4096 --dtype float16"
    l4 = 58 * 1536 * 516  # the L4's own growth (non_torch.lmem_growth_bytes)
    _, v066 = run(argv, model=QWEN_2L, version="0.6.6")
    _, v065 = run(argv, model=QWEN_2L, version="0.6.5")
    _, v070 = run(argv, model=QWEN_2L, version="0.7.0")
    _, v064 = run(argv, model=QWEN_2L, version="0.6.4")
    assert v066.memory.non_torch == v065.memory.non_torch == l4 + 18_350_080
    assert v070.memory.non_torch == l4  # memory_reserved from 0.7.0 (vLLM PR #11809)
    assert v064.memory.non_torch == l4 + CUDA_CONTEXT  # device-wide: the flat context stands in
