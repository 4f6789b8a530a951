"""What vLLM's DeepGEMM warm-up leaves in PyTorch's caching allocator just before the CUDA-graph capture,
which the capture log then reads its figure lower by (capture.py).

From 0.10.2 gpu_worker.py::Worker.compile_or_warm_up_model calls model_executor/warmup/kernel_warmup.py::
kernel_warmup before capture_model (0.10.1 after it), and kernel_warmup first runs
deep_gemm_warmup.py::deep_gemm_warmup when envs.VLLM_USE_DEEP_GEMM, utils/deep_gemm.py::
is_deep_gemm_supported (the `deep_gemm` package importable, compute capability exactly 9.0 or 10.0) and
the warm-up is not skipped (VLLM_SKIP_DEEP_GEMM_WARMUP=1 in 0.10.2 / 0.11, VLLM_DEEP_GEMM_WARMUP=skip from
0.12). VLLM_USE_DEEP_GEMM defaults to 0 in the 0.10.2 wheel's envs.py and to 1 from 0.11.0. Read in the
0.10.2, 0.11.0, 0.12.0, 0.13.0, 0.14.0, 0.17.0 and 0.18.0 wheels:

- deepgemm_fp8_gemm_nt_warmup: for each LinearBase whose quant method is Fp8LinearMethod with block
  quantization, weight_block_size [128, 128] and both weight dimensions multiples of 128
  (_fp8_linear_may_use_deep_gemm), once per weight shape (FP8_GEMM_NT_WARMUP_CACHE), in model.modules()
  order, _deepgemm_fp8_gemm_nt_warmup allocates a1q [M, k] fp8, a1q_scales [M, k / 128] fp32 and
  out [M, n] bf16 with M = max_num_batched_tokens, runs the GEMM over slices of them ('full': every M
  from 1, the 0.10.2 / 0.11 behaviour; 'relax', the default from 0.12: selected M values), and frees them.
- deepgemm_grouped_fp8_gemm_nt_contiguous_warmup: for each FusedMoE whose experts are block-FP8 (and, from
  0.12, VLLM_MOE_USE_DEEP_GEMM), once per expert weight shape, MAX_M = fused_moe/deep_gemm_utils.py::
  compute_aligned_M(min(DP x M, VLLM_FUSED_MOE_CHUNK_SIZE), top_k, local experts, 128) = round_up(tokens x
  top_k + experts x 127, 128); it allocates the expert ids (MAX_M / 128 int32, then repeat_interleave'd to
  MAX_M int32), then for w13 and then w2 a1q [MAX_M, k] fp8, a1q_scales [MAX_M, k / 128] fp32 and
  out [MAX_M, n] bf16, freed after each.

The alignment (deep_gemm's get_m_alignment_for_contiguous_layout) is 128, the weight block the warm-up
requires. Every buffer is freed, so what the warm-up leaves is the caching allocator's segments (priced as
graph_pool.GraphPool carves them: a later, larger buffer that no cached block fits gets a segment of its
own), all unused when capture_model takes its first reading. Not counted: DeepGEMM's own per-call
scale re-layout (small next to the buffers), and the DeepSeek-V3.2 indexer's projections. FlashInfer's
autotune forward, run next (capture.py), reuses these blocks: the two are taken as the larger of them.

Whether DeepGEMM is installed: `deep_gemm` is a dependency of no vLLM wheel (its METADATA, 0.10.2 - 0.18);
the vllm/vllm-openai image builds it into vllm-base since vllm-project/vllm#21533 (docker/Dockerfile,
merged 2025-07-24, before 0.10.1), and a build's pip packages may name it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.engines.vllm.capture import AUTOTUNE_BEFORE_CAPTURE
from servefit.engines.vllm.forward import FUSED_MOE_CHUNK_SIZE
from servefit.engines.vllm.graph_pool import pool_reserved
from servefit.memory.kv import kv_heads_per_rank, latent_cache
from servefit.models.family_traits import is_gated_mlp

if TYPE_CHECKING:
    from servefit.engines.vllm.plan import Resolved
    from servefit.hardware.spec import GpuSpec
    from servefit.models.spec import ModelSpec

USE_DEEP_GEMM_BY_DEFAULT = (0, 11, 0)  # envs.py VLLM_USE_DEEP_GEMM: "0" in 0.10.2, "1" from 0.11.0
WARMUP_CHOICE_FROM = (0, 12, 0)  # envs.py VLLM_DEEP_GEMM_WARMUP (skip / full / relax) replaces VLLM_SKIP_DEEP_GEMM_WARMUP
DEEP_GEMM_CCS = (90, 100)  # is_deep_gemm_supported: is_device_capability(90) or is_device_capability(100)
BLOCK = 128


def _flag(env: dict[str, str], name: str, default: bool) -> bool:
    """envs.py's bool(int(os.getenv(name, default))); a value int() rejects stops vLLM, planned as the default."""
    val = str(env.get(name, "")).strip()
    try:
        return bool(int(val)) if val else default
    except ValueError:
        return default


def fp8_block_checkpoint(model: ModelSpec) -> bool:
    """A checkpoint vLLM loads with Fp8LinearMethod / Fp8MoEMethod in 128 x 128 blocks (quant_method fp8,
    weight_block_size [128, 128]: DeepSeek-V3 / R1, Qwen3 FP8, GLM FP8...)."""
    q = model.quantization or {}
    return str(q.get("quant_method", "")).lower() == "fp8" and list(q.get("weight_block_size") or []) == [BLOCK, BLOCK]


def warmup_runs(model: ModelSpec, r: Resolved, gpu: GpuSpec | None, env: dict[str, str] | None) -> bool:
    """Whether kernel_warmup runs the DeepGEMM warm-up before the capture, given DeepGEMM is installed."""
    env = env or {}
    first, fixed = AUTOTUNE_BEFORE_CAPTURE  # kernel_warmup before capture_model, up to the emptied cache
    if gpu is None or gpu.compute_capability not in DEEP_GEMM_CCS or not first <= r.version < fixed:
        return False
    if not fp8_block_checkpoint(model) or not _flag(env, "VLLM_USE_DEEP_GEMM", r.version >= USE_DEEP_GEMM_BY_DEFAULT):
        return False
    if r.version >= WARMUP_CHOICE_FROM:
        return str(env.get("VLLM_DEEP_GEMM_WARMUP", "relax")).strip() != "skip"
    return not _flag(env, "VLLM_SKIP_DEEP_GEMM_WARMUP", False)


def linear_shapes(model: ModelSpec, r: Resolved) -> list[tuple[int, int]]:
    """The (n, k) per rank of the block-FP8 linear layers _fp8_linear_may_use_deep_gemm takes, in the order
    model.modules() meets them (the first layer's attention, its MLP, then a MoE layer's shared experts),
    once per shape: qkv_proj / o_proj (llama.py, qwen3.py); MLA's fused_qkv_a_proj (or q_proj without a
    q LoRA), q_b_proj, kv_b_proj, o_proj (deepseek_v2.py::DeepseekV2MLAAttention); gate_up_proj and down_proj."""
    h, tp = model.hidden_size, max(r.tp, 1)
    heads = model.num_attention_heads // tp
    shapes: list[tuple[int, int]] = []
    if latent_cache(model):
        qk = model.qk_nope_head_dim + model.qk_rope_head_dim
        if model.q_lora_rank:
            shapes += [(model.q_lora_rank + model.kv_lora_rank + model.qk_rope_head_dim, h), (heads * qk, model.q_lora_rank)]
        else:
            shapes.append((heads * qk, h))
        shapes += [(heads * (model.qk_nope_head_dim + model.v_head_dim), model.kv_lora_rank), (h, heads * model.v_head_dim)]
    elif heads:
        shapes += [((heads + 2 * kv_heads_per_rank(model, tp)) * model.head_dim, h), (h, heads * model.head_dim)]
    gate = 2 if is_gated_mlp(model) else 1
    if not model.is_moe or model.first_k_dense_replace > 0 or model.moe_layer_step > 1:
        shapes += [(gate * model.intermediate_size // tp, h), (h, model.intermediate_size // tp)]
    if model.is_moe and model.num_shared_experts:
        shared = model.num_shared_experts * (model.moe_intermediate_size or model.intermediate_size) // tp
        shapes += [(gate * shared, h), (h, shared)]
    out: list[tuple[int, int]] = []
    for n, k in shapes:
        if n > 0 and k > 0 and n % BLOCK == 0 and k % BLOCK == 0 and (n, k) not in out:
            out.append((n, k))
    return out


def _gemm(events: list[tuple[str, int]], m: int, n: int, k: int) -> None:
    """One shape's warm-up: a1q, a1q_scales and out allocated, then freed."""
    start = len(events)
    events += [("alloc", m * k), ("alloc", m * (k // BLOCK) * 4), ("alloc", m * n * 2)]
    events += [("free", i) for i in range(start, start + 3)]


def warmup_cached_bytes(model: ModelSpec, r: Resolved, gpu: GpuSpec | None, env: dict[str, str] | None) -> int:
    """Segments the DeepGEMM warm-up leaves cached (0 where it does not run): its buffers in order, as the
    caching allocator serves them from an empty cache (the profiling run's blocks are handed back before the
    KV cache is allocated)."""
    if not warmup_runs(model, r, gpu, env):
        return 0
    m = r.max_num_batched_tokens
    events: list[tuple[str, int]] = []
    for n, k in linear_shapes(model, r):
        _gemm(events, m, n, k)
    moe = r.version < WARMUP_CHOICE_FROM or _flag(env or {}, "VLLM_MOE_USE_DEEP_GEMM", True)
    if model.is_moe and moe:
        shards = max(r.tp, 1) * max(r.dp, 1)
        inter = (model.moe_intermediate_size or model.intermediate_size) // (1 if r.expert_parallel else shards)
        experts = model.num_experts // shards if r.expert_parallel else model.num_experts
        chunk = next(size for until, size in FUSED_MOE_CHUNK_SIZE if r.version < until)
        tokens = min(max(r.dp, 1) * m, chunk) if chunk else max(r.dp, 1) * m
        max_m = -(-(tokens * model.num_experts_per_tok + experts * (BLOCK - 1)) // BLOCK) * BLOCK
        start = len(events)
        events += [("alloc", max_m // BLOCK * 4), ("alloc", max_m * 4)]  # expert_ids_block, expert_ids
        gate = 2 if is_gated_mlp(model) else 1
        _gemm(events, max_m, gate * inter, model.hidden_size)  # w13
        _gemm(events, max_m, model.hidden_size, inter)  # w2
        events += [("free", start), ("free", start + 1)]
    return pool_reserved(events) if events else 0


def deep_gemm_known(image: str | None, packages: list[str] | tuple[str, ...] = ()) -> bool:
    """Whether the install has the `deep_gemm` package: the vllm/vllm-openai image, or a build whose pip
    packages name it."""
    if "vllm/vllm-openai" in (image or ""):
        return True
    names = (p.strip().lower().partition("==")[0].partition("[")[0].strip() for p in packages)
    return any(n.replace("-", "").replace("_", "") == "deepgemm" or "/deepgemm" in n for n in names)
