"""The buffers a quantized GEMM holds beside its output while TGI's warm-up prefill runs, by kernel and release:
ExLlamaV2's scratch (allocated at Warmup, before the free-memory reading), GPTQ-Marlin's a_tmp / fp32 c_tmp and
llm-awq's split-K partial sums (alive inside one layer's working set)."""

from __future__ import annotations

import math

from servefit.engines.tgi.era import Era
from servefit.memory.params import is_gated
from servefit.models.spec import ModelSpec


def exllama_scratch(model: ModelSpec, e: Era, quantize: str | None, compute_capability: int, shards: int,
                    prefill: int) -> int:
    """The ExLlamaV2 scratch buffer a GPTQ (4-bit, no act-order) or EXL2 model allocates at warm-up,
    before the shard measures free memory (server.py::Warmup -> create_exllama_buffers; layers/gptq/
    exllamav2.py): one buffer of the largest QuantLinear.scratch_space_fixed = in x out x 2 + 128 +
    out x tokens x 4 + 128 over the shard's fused qkv / o / gate_up / down projections, with tokens
    = 4096 x 16 (the default max_input_len x max_batch_size, 1.2.0 - 2.1.0) or the warm-up's
    max_prefill_tokens x 1 (from 2.1.1). From 2.1.1 GPTQ on compute capability >= 8.0 (symmetric,
    4 / 8 bits, groups -1 / 32 / 64 / 128) is repacked for Marlin (uses_marlin) and has no ExLlama layers,
    so create_exllama_buffers returns without allocating (`if len(LAYERS) == 0: return`)."""
    if quantize not in ("gptq", "exl2") or e.v < (1, 2, 0):
        return 0
    q = model.quantization or {}
    if quantize == "gptq":
        bits = int(q.get("bits") or 4)
        if bits != 4 or q.get("desc_act") or uses_marlin(model, e, quantize, compute_capability):
            return 0
    tokens = prefill if e.v >= (2, 1, 1) else 4096 * 16
    return max(i * o * 2 + 128 + o * tokens * 4 + 128 for i, o in _linear_shapes(model, shards))


def _linear_shapes(model: ModelSpec, shards: int) -> list[tuple[int, int]]:
    """(in, out) features of a decoder layer's linear layers on one shard: the fused qkv and the output
    projection, and (dense models) the fused gate_up and the down projection."""
    s = max(shards, 1)
    h, hd = model.hidden_size, model.head_dim
    shapes = [(h, (model.num_attention_heads + 2 * model.num_key_value_heads) * hd // s),
              (model.num_attention_heads * hd // s, h)]
    if not model.is_moe:
        inter = model.intermediate_size // s
        shapes += [(h, (2 if is_gated(model) else 1) * inter), (inter, h)]
    return shapes


def uses_marlin(model: ModelSpec, e: Era, quantize: str | None, compute_capability: int) -> bool:
    """Whether TGI repacks a GPTQ / AWQ checkpoint for the GPTQ-Marlin kernel: layers/marlin.py::
    can_use_gptq_marlin from 2.1.1 (GPTQ only, symmetric), layers/gptq/__init__.py (2.2.0) and
    layers/marlin/gptq.py (2.3.0 on) for AWQ too (asymmetric allowed): compute capability >= 8.0,
    4 or 8 bits, groups -1 / 32 / 64 / 128."""
    if quantize not in ("gptq", "awq") or compute_capability < 80:
        return False
    if e.v < ((2, 1, 1) if quantize == "gptq" else (2, 2, 0)):
        return False
    q = model.quantization or {}
    bits, group = int(q.get("bits") or 4), int(q.get("group_size") or 128)
    sym = q.get("sym", True) is not False
    return bits in (4, 8) and group in (-1, 32, 64, 128) and (sym or quantize == "awq")


def marlin_scratch(model: ModelSpec, e: Era, quantize: str | None, compute_capability: int, shards: int,
                   tokens: int) -> int:
    """What one GPTQ-Marlin GEMM allocates beside its output while a prefill of `tokens` runs through a
    layer (gptq_marlin.cu::gptq_marlin_gemm, TGI's in-tree server/marlin 2.1.1 - 2.2.0, danieldk/marlin-kernels
    0.2.0 in 2.3.x, 0.3.1 - 0.3.7 in 2.4.0 - 3.1.0, kernels-community/quantization after): `a_tmp =
    torch::empty({size_m, size_k})` in the activation dtype for the act-order permutation (always allocated),
    and from marlin-kernels 0.3.1 (TGI 2.4.0) the fp32 global-reduce buffer `c_tmp = torch::empty({reduce_max_m,
    size_n}, float)` (layers/marlin/gptq.py::GPTQMarlinLinear.forward passes use_fp32_reduce=True), reduce_max_m
    = determine_reduce_max_m(size_m, max_par = 16): 16, 32, 48 or 64 up to 64 rows, else 64 x min(ceil(m / 64),
    16). The largest over the layer's linear layers (one GEMM runs at a time)."""
    if not uses_marlin(model, e, quantize, compute_capability) or tokens <= 0:
        return 0
    m = tokens
    reduce_m = 16 * math.ceil(m / 16) if m <= 64 else 64 * min(math.ceil(m / 64), 16)
    fp32_reduce = e.v >= (2, 4, 0)
    return max(m * i * 2 + (reduce_m * o * 4 if fp32_reduce else 0) for i, o in _linear_shapes(model, shards))


# server/Makefile-awq (1.1.0 on): TGI's AWQ kernel is llm-awq's gemm_forward_cuda, called with split_k_iters = 8
AWQ_SPLIT_K = 8


def awq_split_k_scratch(model: ModelSpec, e: Era, quantize: str | None, compute_capability: int, shards: int,
                        tokens: int) -> int:
    """The split-K partial sums an AWQ GEMM allocates beside its output while a prefill of `tokens` runs through a
    layer, where TGI keeps llm-awq's kernel (AWQ from 1.1.0; from 2.2.0 only where Marlin does not take it, e.g.
    compute capability < 8.0): WQLinear.forward (utils/awq/quantize/qmodule.py, layers/awq/quantize/cuda.py from
    2.4) calls awq_inference_engine.gemm_forward_cuda(x, ..., 8), whose gemm_cuda_gen.cu (huggingface/llm-awq
    bd1dc2d, mit-han-lab f084f40 in 1.1.0) allocates `_out_feats = torch::empty({split_k_iters, num_in_feats,
    out})` in fp16 and returns `_out_feats.sum(0)`: 8 x tokens x out x 2 bytes besides the summed output, for the
    largest of the layer's linear layers."""
    if quantize != "awq" or e.v < (1, 1, 0) or tokens <= 0 or uses_marlin(model, e, quantize, compute_capability):
        return 0
    return max(AWQ_SPLIT_K * tokens * o * 2 for _, o in _linear_shapes(model, shards))
