"""What quantized linear kernels add to vLLM's captured CUDA graphs (graphs.graph_memory puts it with
the rest): dynamic activation quantization's extra kernel nodes, the AWQ kernel's dequantized weights
and the Marlin GEMM's scratch in the graph pool."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.engines.vllm.era import Era
from servefit.hardware.spec import GpuSpec
from servefit.memory.dtypes import dtype_bytes
from servefit.memory.weights import float8_compressed_tensors
from servefit.models.spec import ModelSpec

if TYPE_CHECKING:
    from servefit.engines.vllm.plan import Resolved

# Dynamic activation quantization adds a quant kernel before each of a decoder layer's four linear
# inputs (qkv, o_proj, gate_up, down; a fused-MoE layer quantizes its two expert GEMMs' inputs instead of
# gate_up / down) to every captured layer: 4 more kernel nodes. The int8 quant is an opaque custom op
# (quantization/kernels/scaled_mm: apply_weights calls ops.scaled_int8_quant, then the scaled GEMM)
# that no fusion pass matches (compilation/passes/fusion/rms_quant_fusion.py: QUANT_OPS are FP8 / FP4
# only, read in the 0.19.0 wheel); the FP8 one is the QuantFP8 CustomOp from 0.10.0
# (quantization/input_quant_fp8.py), whose native form Inductor fuses into the neighbouring kernels when
# V1 compiles the model, so it adds no node there. The 0.19 logs of Llama-3.1-8B W8A8 int8 with an fp8
# KV cache vs FP16 on the same A100 (0.86 vs 0.48 GiB, 51 piecewise + 35 full graphs) agree: 32 layers x
# 86 graphs x 4 nodes (0.11 GiB) plus the FlashInfer decode wrappers the fp8 KV cache brings
# (graphs.py FLASHINFER_DECODE_WORKSPACE, 0.27 GiB) make the 0.38 GiB between them.
ACT_QUANT_KERNELS = 4
WEIGHT_ONLY_8BIT = ("bitsandbytes", "bnb", "experts_int8")
FP8_ACT_QUANT = ("fp8", "fbgemm_fp8", "modelopt", "ptpc_fp8", "fp8_dynamic")
# Two FP8 quant kernels Inductor cannot fuse, because they sit inside an opaque custom op:
# - the fused-MoE op quantizes its own inputs, before each of its two expert GEMMs
#   (fused_moe/fused_moe.py::fused_experts_impl calls moe_kernel_quantize_input on the hidden states and
#   on intermediate_cache2 when use_fp8_w8a8; read in the 0.10.0 and 0.12.0 wheels), inside the
#   fused-MoE custom op: 2 nodes per FP8 MoE layer in every release;
# - a block-FP8 checkpoint (weight_block_size) runs each linear through the custom op
#   torch.ops.vllm.apply_w8a8_block_fp8_linear (quantization/utils/fp8_utils.py: per_token_group_quant_fp8,
#   then the block-scaled GEMM) up to 0.11.0; from 0.11.1 W8A8BlockFp8LinearOp quantizes with the
#   QuantFP8 CustomOp (group shape) outside the GEMM op, which Inductor fuses like the per-tensor one
#   (read in the 0.10.0, 0.10.2, 0.11.0, 0.11.1 and 0.12.0 wheels). Up to then a block-FP8 layer adds the
#   four quant nodes of an int8 one (qkv and o_proj, and gate_up / down or the fused-MoE op's two).
# A compressed-tensors FP8 checkpoint (float 8-bit weights: RedHatAI / llm-compressor FP8) quantizes its
# activations with the same Fp8LinearOp / QuantFP8 (compressed_tensors_w8a8_fp8.py, 0.10.0 wheel), its MoE
# through fused_experts' use_fp8_w8a8 path: FP8 here, not the int8 kernels.
# Below compute capability 8.9 FP8 runs as weight-only Marlin (fp8.py::Fp8LinearMethod.use_marlin,
# Fp8MoEMethod: fused_marlin_moe), which quantizes no activation.
FP8_MOE_QUANT_KERNELS = 2
BLOCK_FP8_OPAQUE_UNTIL = (0, 11, 1)
FP8_ACT_MIN_CC = 89
# awq.py::AWQLinearMethod.apply: from 256 tokens on, the AWQ kernel dequantizes the whole weight to
# fp16 and runs torch.matmul (FP16_MATMUL_HEURISTIC_CONDITION); captured, the dequantized weight and
# the matmul output live in the graph pool (one pool for all sizes: the largest). Under V1's
# torch.compile the condition is a Python branch on the traced shape: Dynamo evaluates it once, at the
# profile run's max_num_batched_tokens, and vLLM runs the compiled code without its guards, so every
# captured size dequantizes when that trace did (vllm-project/vllm#30783 and #37494 describe it; the
# branch is plain Python in the 0.10.2 wheel, no custom op shields it). V0 (no compile) decides per size. Only the `awq`
# method does this; awq_marlin (the default for AWQ checkpoints on cc >= 8.0 from 0.5.1, unless
# --quantization awq forces awq: awq_marlin.py::override_quantization_method) does not.
AWQ_DEQUANT_TOKENS = 256
# Up to 0.8.5 gptq_marlin_gemm (the GPTQ / AWQ Marlin kernels, csrc/quantization/gptq_marlin/gptq_marlin.cu)
# allocates per call, beside its output, a_tmp [m, k] in the model's dtype and, for the fp32 global reduce
# that marlin_utils.py turns on (USE_FP32_REDUCE_DEFAULT), c_tmp [determine_reduce_max_m(m), n] in fp32:
# m rounded up to 16, 32, 48, 64, then 64 x min(ceil(m / 64), max_par 16). Captured, both sit in the graph
# pool at the largest size. The symbol marlin::determine_reduce_max_m is in the 0.6.2, 0.6.5, 0.7.3 and
# 0.8.5 wheels' _C.abi3.so and not in 0.9.0's, 0.9.1's or later ones (a c_tmp of SMs x 64 x 256 floats).
MARLIN_REDUCE_UNTIL = (0, 9, 0)
MARLIN_MAX_PAR = 16


def act_quant_kernels(r: Resolved, e: Era, model: ModelSpec | None = None, moe_share: float = 0.0,
                      gpu: GpuSpec | None = None) -> float:
    """Extra quant kernels per captured layer for dynamic activation quantization (see above), averaged over
    the layers: `moe_share` is the share of the model's layers that are fused-MoE layers."""
    sc = r.scheme
    if sc is None or sc.bits != 8 or sc.name in WEIGHT_ONLY_8BIT:
        return 0
    fp8 = sc.name in FP8_ACT_QUANT or (model is not None and float8_compressed_tensors(model.quantization))
    if fp8 and gpu is not None and gpu.compute_capability < FP8_ACT_MIN_CC:
        return 0
    if fp8 and e.v1 and r.version >= (0, 10, 0):
        if model is not None and r.version < BLOCK_FP8_OPAQUE_UNTIL and (model.quantization or {}).get("weight_block_size"):
            return ACT_QUANT_KERNELS
        return FP8_MOE_QUANT_KERNELS * moe_share
    return ACT_QUANT_KERNELS


def plain_awq(r: Resolved, settings: dict) -> bool:
    """Whether an AWQ checkpoint runs the `awq` method's kernel (the one that dequantizes): awq_marlin
    takes AWQ from 0.5.1 on GPUs Marlin runs on (get_min_capability: 8.0 in 0.11, 7.5 in 0.21, the same
    as gptq_marlin's: Resolved.marlin_cc) unless --quantization awq forces the plain method
    (awq_marlin.py::override_quantization_method)."""
    if r.scheme is None or not r.scheme.name.startswith("awq"):
        return False
    return str(settings.get("quantization") or "") == "awq" or not r.marlin_cc or r.version < (0, 5, 1)


def awq_linear_shapes(model: ModelSpec, r: Resolved) -> list[tuple[int, int]]:
    """(in, out) per rank of the linear layers the AWQ kernel runs: qkv, o, and a dense model's gate_up
    and down (AWQ experts run the fused MoE kernels, which do not dequantize)."""
    h, tp, hd = model.hidden_size, r.tp, model.head_dim
    shapes = [(h, (model.num_attention_heads + 2 * model.num_key_value_heads) * hd // tp),
              (model.num_attention_heads * hd // tp, h)]
    if not model.is_moe:
        shapes += [(h, 2 * model.intermediate_size // tp), (model.intermediate_size // tp, h)]
    return shapes


def awq_dequant_pool(model: ModelSpec, r: Resolved, sizes: list[int], gpu: GpuSpec | None, settings: dict,
                     compiled: bool = False) -> int:
    """The AWQ kernel's dequantized weight and matmul output in the graph pool (see above): the
    largest linear layer at the largest captured size that dequantizes (256 tokens or more; any size
    where the model is `compiled` from a trace of 256 tokens or more)."""
    if not plain_awq(r, settings):
        return 0
    traced = compiled and r.max_num_batched_tokens >= AWQ_DEQUANT_TOKENS
    t = max((x for x in sizes if traced or x >= AWQ_DEQUANT_TOKENS), default=0)
    if not t:
        return 0
    return max((k * n + t * n) * 2 for k, n in awq_linear_shapes(model, r))


def awq_dequant_forward(model: ModelSpec, r: Resolved, t: int, settings: dict) -> int:
    """The profile run's forward of t tokens where the AWQ kernel dequantizes (t >= 256: see above): the
    four hidden-width tensors, the fp16 weight of the layer being run and its output, beside what the MLP
    still holds (forward.py mlp_bytes): gate_up's output while down runs (LlamaMLP.forward keeps
    `gate_up` referenced), so the largest of gate_up (dequantized h x 2I) and down (I x h, with gate_up's
    and the activation's outputs). 0 where the kernel does not dequantize."""
    if t < AWQ_DEQUANT_TOKENS or not plain_awq(r, settings):
        return 0
    db, h, inter = dtype_bytes(r.dtype), model.hidden_size, model.intermediate_size // max(r.tp, 1)
    down = (inter, h)
    # down's output is one of the four hidden-width tensors; its input and gate_up's output are still held
    return max(int(t * (4 * h + (3 * inter if (k, n) == down and not model.is_moe else n)) * db) + k * n * 2
               for k, n in awq_linear_shapes(model, r))


def marlin_reduce_scratch(model: ModelSpec, r: Resolved, tokens: int, gpu: GpuSpec | None, settings: dict) -> int:
    """The Marlin GEMM's a_tmp and fp32 c_tmp at `tokens` (see MARLIN_REDUCE_UNTIL) beyond the forward's
    tensors the pool is priced with: the largest over the attention projections and, for a dense model,
    gate_up, whose SiluAndMul output (counted in the forward) does not exist yet while the GEMM runs. GPTQ
    and AWQ checkpoints run Marlin on GPUs that have it, unless --quantization names the plain method."""
    sc = r.scheme
    name = sc.name.lower().removesuffix("_marlin") if sc is not None else ""
    if sc is None or name not in ("gptq", "awq", "compressed-tensors") or sc.bits != 4 or r.version >= MARLIN_REDUCE_UNTIL:
        return 0
    if not r.marlin_cc or str(settings.get("quantization") or "") in ("gptq", "awq"):
        return 0
    m = tokens
    reduce_m = next((x for x in (16, 32, 48, 64) if m <= x), 64 * min(-(-m // 64), MARLIN_MAX_PAR))
    db, h, tp, hd = dtype_bytes(r.dtype), model.hidden_size, max(r.tp, 1), model.head_dim
    shapes: list[tuple[int, int, float]] = [(h, (model.num_attention_heads + 2 * model.num_key_value_heads) * hd // tp, 0),
                                            (model.num_attention_heads * hd // tp, h, 0)]
    if not model.is_moe:
        inter = model.intermediate_size // tp
        shapes.append((h, 2 * inter, m * inter * db))
    return int(max(0, max(m * k * db + reduce_m * n * 4 - credit for k, n, credit in shapes)))
