"""Where llama.cpp puts the Gemma 3n / 4 per-layer embedding tensors (placement.py): the
projection with layer 0, the embedding table on the CPU except on Metal with mmap."""

from __future__ import annotations

from dataclasses import replace

from servefit.engines.llamacpp import placement as P
from servefit.engines.llamacpp.model import LModel
from servefit.models.gguf import TensorInfo

MIB = 2**20
TENSORS = (
    TensorInfo("token_embd.weight", (8, 16), "Q4_K", 100 * MIB),
    TensorInfo("per_layer_token_embd.weight", (8, 16), "Q6_K", 700 * MIB),
    TensorInfo("per_layer_model_proj.weight", (8, 8), "F16", 20 * MIB),
    TensorInfo("per_layer_proj_norm.weight", (8,), "F32", 1 * MIB),
    TensorInfo("blk.0.attn_q.weight", (8, 8), "Q4_K", 10 * MIB),
    TensorInfo("blk.1.attn_q.weight", (8, 8), "Q4_K", 10 * MIB),
    TensorInfo("output_norm.weight", (8,), "F32", 2 * MIB),
)
LM = LModel(arch="gemma4", name="t", n_layer=2, n_embd=8, n_vocab=16, n_ctx_train=4096, n_head=[1, 1],
            n_head_kv=[1, 1], head_k=8, head_v=8, head_k_swa=8, head_v_swa=8, swa=[False, False], n_swa=0)


def _weights(ngl: int, metal_mapped: bool) -> dict[int, int]:
    lm = replace(LM, tensors=TENSORS)
    pl = P.place(lm, ngl, 1, "layer", [1.0], 0, [], 9000, metal_mapped)
    return {d: v // MIB for d, v in pl.weights.items()}


def test_projection_goes_with_layer_zero_and_the_table_stays_on_the_cpu():
    # CPU: token_embd + table; GPU: proj, its norm, blocks, output_norm and the tied output copy (100)
    assert _weights(3, metal_mapped=False) == {P.CPU: 800, 0: 143}
    # layer 0 left on the CPU (-ngl 2 offloads the output layer and block 1): the projection follows it
    assert _weights(2, metal_mapped=False) == {P.CPU: 831, 0: 112}


def test_metal_with_mmap_counts_the_table_in_the_gpu_buffer():
    assert _weights(3, metal_mapped=True) == {P.CPU: 100, 0: 843}
    assert _weights(0, metal_mapped=True) == {P.CPU: 943}  # nothing offloaded: all on the CPU
