"""The free tails of the weights' segments (engines/vllm/segments.py) that vLLM 0.6.5 - 0.6.6 charge as
non-torch memory: PyTorch's caching-allocator rules worked by hand."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from servefit.engines.vllm.non_torch import CUDA_CONTEXT
from servefit.engines.vllm.segments import (
    CachingAllocator,
    free_tail_bytes,
    gptq_marlin_free_bytes,
    weight_allocations,
    weight_tail_bytes,
)
from servefit.hardware.catalog import resolve_gpu
from servefit.models.spec import ModelSpec

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import LLAMA8B, run  # noqa: E402

MiB = 2**20
H100, T4 = resolve_gpu("H100"), resolve_gpu("T4")
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


# --- frees: the allocator with frees, and what gptq_marlin's repack leaves reserved (0.6.5 - 0.6.6) -------

def test_freed_blocks_merge_and_are_reused_best_fit():
    a = CachingAllocator()
    x, y, z = a.malloc(4 * MiB), a.malloc(3 * MiB), a.malloc(5 * MiB)  # one 20 MiB segment: 4 | 3 | 5 | 8 free
    a.free(x)
    a.free(y)  # merges with the freed 4 MiB before it: 7 | 5 | 8
    assert [b[0] for b in a.segments[0][1]] == [7 * MiB, 5 * MiB, 8 * MiB]
    a.malloc(int(6.5 * MiB))  # best fit: the 7 MiB block (not the 8); 0.5 MiB is not split off
    assert a.free_bytes() == 8 * MiB
    a.free(z)
    a.release()  # one live block keeps the segment: nothing released
    assert a.free_bytes() == 13 * MiB and len(a.segments) == 1
    # the small pool: 2 MiB segments, split down to 512 B; a segment with nothing live is released
    s = a.malloc(100)
    assert a.segments[1] == (True, [[512, s], [2 * MiB - 512, -1]])
    a.free(s)
    a.release()
    assert len(a.segments) == 1
    assert a.malloc(0) == -1  # an empty tensor takes no memory


GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128}
# one Llama-3-8B layer, 4-bit GPTQ, rotary cache 8192 x 128
LLAMA_1L_GPTQ = replace(LLAMA8B, num_hidden_layers=1, max_position_embeddings=8192, rope_scaling=None,
                        quantization=GPTQ)


def test_marlin_repack_pins_freed_segments_by_hand():
    # large pool, construction: embedding and lm_head 1002 MiB each; qkv qweight 12 MiB (its own segment);
    # o qweight 8 MiB opens a 20 MiB segment B (12 free); the 2 MiB rotary cache takes B (10 free); gate_up
    # qweight 56 MiB; its scales (32 x 28672 x 2 = 1.75 MiB) take B (8.25 free); down qweight 28 MiB.
    # process_weights_after_loading: the new qkv (12) fits no free block: a new segment, the old one freed
    # whole; the new o (8) takes B's 8.25 (0.25 not split off), the old o's 8 MiB is freed; the new gate_up
    # (56) opens a segment, the old one is freed whole; its new scales (1.75) take the old o's 8 in B (6.25
    # left) and the old scales' 1.75 are freed; the new down (28) takes the old gate_up's 56 (28 left), the
    # old down's segment is freed whole. empty_cache releases the old qkv and down segments: B keeps 6.25 +
    # 1.75 and the old gate_up segment 28 free, 36 MiB; the small pool (scales of qkv, o and down, zeros,
    # g_idx, norms, workspaces in 2 MiB segments) keeps 2,553,856 B
    assert gptq_marlin_free_bytes(LLAMA_1L_GPTQ, 2, 1) == 36 * MiB + 2_553_856
    assert weight_tail_bytes(LLAMA_1L_GPTQ, 2, 1, marlin=True) == 36 * MiB + 2_553_856
    assert weight_tail_bytes(LLAMA_1L_GPTQ, 2, 1) == 0  # plain gptq (exllama) is not modelled


def test_marlin_cases_not_modelled():
    for q in ({**GPTQ, "desc_act": True}, {**GPTQ, "sym": False}, {**GPTQ, "bits": 3}, {**GPTQ, "group_size": -1},
              {"quant_method": "awq", "bits": 4, "group_size": 128}):
        assert gptq_marlin_free_bytes(replace(LLAMA_1L_GPTQ, quantization=q), 2, 1) is None
    assert gptq_marlin_free_bytes(replace(LLAMA_1L_GPTQ, num_experts=8, moe_intermediate_size=768), 2, 1) is None


PHI4_GPTQ = ModelSpec(name="kaitchup/Phi-4-AutoRound-GPTQ-4bit", architecture="Phi3ForCausalLM", model_type="phi3",
                      num_hidden_layers=40, hidden_size=5120, num_attention_heads=40, num_key_value_heads=10,
                      head_dim=128, intermediate_size=17920, vocab_size=100352, max_position_embeddings=16384,
                      params=14_659_507_200, quantization=GPTQ)


def test_phi4_gptq_marlin_on_0_6_5_charges_what_the_repack_pins():
    # calibration log davidshare-h100-phi4-gptq-util015 (0.6.5, H100): non_torch_memory 0.26 GiB; the H100's
    # own growth (132 x 2048 x 516 B) plus the 0.149 GiB the repack of 40 layers leaves pinned: 0.279
    pinned = gptq_marlin_free_bytes(PHI4_GPTQ, 2, 1)
    assert pinned == 159_516_672
    argv = "vllm serve m --max-model-len 2048 --gpu-memory-utilization 0.15"
    own = 132 * 2048 * 516
    assert run(argv, model=PHI4_GPTQ, gpu=H100, version="0.6.5")[1].memory.non_torch == own + pinned
    assert run(argv, model=PHI4_GPTQ, gpu=H100, version="0.7.0")[1].memory.non_torch == own  # reserved, PR #11809
    # --quantization gptq forces the plain kernel (no repack modelled); a T4 has no gptq_marlin
    assert run(argv + " --quantization gptq", model=PHI4_GPTQ, gpu=H100, version="0.6.5")[1].memory.non_torch == own
    assert run(argv, model=PHI4_GPTQ, gpu=T4, version="0.6.5")[1].memory.non_torch == 40 * 1024 * 516


def test_device_wide_releases_charge_the_repack_but_not_a_plain_models_tails():
    # 0.6.4 (V0) and V1 up to 0.9.0 take used - allocated: the repack's pinned blocks are in it, on top of
    # the flat context that stands in for the context and a plain model's tails (non_torch.device_wide)
    argv = "vllm serve m --max-model-len 2048 --gpu-memory-utilization 0.15"
    own = 132 * 2048 * 516
    for version in ("0.6.4", "0.8.5"):
        assert run(argv, model=PHI4_GPTQ, gpu=H100, version=version)[1].memory.non_torch == \
            own + CUDA_CONTEXT + 159_516_672
    # 0.9.0's Marlin workspace is one int32 per SM (marlin_make_workspace_new), which packs the small pool
    # differently: 2,207,744 B less stays pinned
    assert gptq_marlin_free_bytes(PHI4_GPTQ, 2, 1, workspace_sms=132) == 157_308_928
    assert run(argv, model=PHI4_GPTQ, gpu=H100, version="0.9.0")[1].memory.non_torch == \
        own + CUDA_CONTEXT + 157_308_928
    assert run(argv, model=PHI4_GPTQ, gpu=H100, version="0.9.1")[1].memory.non_torch == own  # reserved
    # a plain model's tails stay out of the device-wide figure
    plain = replace(PHI4_GPTQ, quantization=None)
    assert run(argv, model=plain, gpu=H100, version="0.6.4")[1].memory.non_torch == own + CUDA_CONTEXT
