"""vLLM's DeepGEMM warm-up (model_executor/warmup/deep_gemm_warmup.py, run by kernel_warmup before
capture_model from 0.10.2 to 0.17) and what its cached buffers do to the logged CUDA-graph figure.
Every figure is computed by hand from the warm-up's buffers and the caching allocator's rules."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from servefit.engines.vllm.deepgemm_warmup import (
    deep_gemm_known,
    linear_shapes,
    warmup_cached_bytes,
    warmup_runs,
)
from servefit.engines.vllm.profile import forward_bytes
from servefit.pipeline import site_from_argv

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import DSV3, ENGINE, H100, L4, LLAMA8B  # noqa: E402

MiB = 2**20
BLOCK_FP8 = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
# a Qwen3-8B-FP8-like dense block-FP8 model: hidden 4096, 32 / 8 heads of 128, intermediate 12288
DENSE_FP8 = replace(LLAMA8B, name="dense-fp8", intermediate_size=12288, quantization=BLOCK_FP8)
DSV3_FP8 = replace(DSV3, quantization=BLOCK_FP8)
H200 = replace(H100, key="h200", name="NVIDIA H200", memory_bytes=150_119_218_176)
B200 = replace(H100, key="b200", name="NVIDIA B200", memory_bytes=191_514_411_008, compute_capability=100)
B300 = replace(B200, key="b300", name="NVIDIA B300", compute_capability=103)
RTX5090 = replace(L4, key="rtx5090", name="NVIDIA GeForce RTX 5090", compute_capability=120)


def res(version: tuple[int, int, int], tp: int = 1, tokens: int = 8192, dp: int = 1, ep: bool = False):
    return SimpleNamespace(version=version, tp=tp, dp=dp, expert_parallel=ep, max_num_batched_tokens=tokens)


def plan(argv: str, model, gpu, version: str, image: str | None = None, env=None, count: int = 1, packages=()):
    site = site_from_argv(argv.split(), env)
    site.image, site.packages = image, list(packages)
    cfg = ENGINE.parse(site, version)
    return ENGINE.plan(cfg, model, gpu, count)


def resolved(argv: str, version: str):
    """The plan's Resolved for argv (max_num_batched_tokens, dtype, TP) as vLLM's defaults fill them."""
    from servefit.engines.vllm.era import era
    from servefit.engines.vllm.plan import resolve

    cfg = ENGINE.parse(site_from_argv(argv.split()), version)
    return resolve(cfg, DSV3_FP8, H200, era(version))


def test_dense_warmup_leaves_the_segments_its_largest_buffers_took():
    # M = 8192; shapes (n, k) in module order: qkv (48 x 128, 4096), o_proj (4096, 4096), gate_up (24576, 4096),
    # down (4096, 12288). qkv takes a1q 8192 x 4096 = 32 MiB, its scales 8192 x 32 x 4 = 1 MiB (small pool: one
    # 2 MiB segment) and out 8192 x 6144 x 2 = 96 MiB; o_proj's fit in those; gate_up's out (384 MiB) gets a
    # segment of its own; down's a1q (96 MiB), scales (3 MiB) and out (64 MiB) fit in the cached blocks
    assert linear_shapes(DENSE_FP8, res((0, 11, 0))) == [(6144, 4096), (4096, 4096), (24576, 4096), (4096, 12288)]
    assert warmup_cached_bytes(DENSE_FP8, res((0, 11, 0)), H100, {}) == (32 + 2 + 96 + 384) * MiB


def test_moe_warmup_adds_the_grouped_gemm_buffers_at_the_aligned_m():
    # DeepSeek-V3 at TP8: fused_qkv_a_proj (1536 + 512 + 64 = 2112 rows) is not a multiple of 128 and is
    # skipped; q_b_proj (3072, 1536), kv_b_proj (4096, 512), o_proj (7168, 2048), the dense layers' gate_up
    # (4608, 7168) and down (7168, 2304), the shared expert's (512, 7168) and (7168, 256)
    r = res((0, 12, 0), tp=8)
    assert linear_shapes(DSV3_FP8, r) == [(3072, 1536), (4096, 512), (7168, 2048), (4608, 7168), (7168, 2304),
                                          (512, 7168), (7168, 256)]
    # linear part: q_b's a1q 12 MiB, the small-pool segment, q_b's out 48 MiB, kv_b's 64 MiB, o_proj's 112 MiB;
    # the rest fit. Grouped: MAX_M = 8192 x 8 + 256 x 127 = 98048 (a multiple of 128); w13's a1q
    # 98048 x 7168 B and w2's out 98048 x 7168 x 2 B take segments rounded to 2 MiB, the others fit
    def seg(n: int) -> int:
        return -(-n // (2 * MiB)) * 2 * MiB

    linear = (12 + 2 + 48 + 64 + 112) * MiB
    assert warmup_cached_bytes(DSV3_FP8, r, H200, {}) == linear + seg(98048 * 7168) + seg(98048 * 7168 * 2)
    # without the MoE warm-up (VLLM_MOE_USE_DEEP_GEMM=0, from 0.12) only the linear part
    assert warmup_cached_bytes(DSV3_FP8, r, H200, {"VLLM_MOE_USE_DEEP_GEMM": "0"}) == linear
    # 0.11 has no such switch: the MoE part stays
    assert warmup_cached_bytes(DSV3_FP8, res((0, 11, 0), tp=8), H200, {"VLLM_MOE_USE_DEEP_GEMM": "0"}) == \
        linear + seg(98048 * 7168) + seg(98048 * 7168 * 2)
    # expert parallelism: 32 local experts of the full 2048 width; MAX_M = 65536 + 32 x 127 = 69600 -> 69632:
    # w13's a1q 69632 x 7168 B (476 MiB) and out 69632 x 4096 x 2 B (544 MiB) take segments, w2's a1q (136 MiB)
    # fits in the first, its out 69632 x 7168 x 2 B (952 MiB) takes a third; the scales fit in cached blocks
    ep = res((0, 12, 0), tp=8, ep=True)
    assert warmup_cached_bytes(DSV3_FP8, ep, H200, {}) == linear + (476 + 544 + 952) * MiB


def test_grouped_warmup_tokens_are_capped_at_the_fused_moe_chunk():
    # min(DP x max_num_batched_tokens, VLLM_FUSED_MOE_CHUNK_SIZE): at DP4 with expert parallelism (64 local
    # experts of 2048) 32768 tokens, capped at 16384 from 0.12 (32768 before): MAX_M = 16384 x 8 + 64 x 127 =
    # 139200 -> 139264, and 32768 x 8 + 8128 = 270272 -> 270336. Over the linear part: w13's a1q (x 7168 B)
    # and out (x 4096 x 2 B) and w2's out (x 7168 x 2 B) take segments; w2's a1q and the scales fit
    def seg(n: int) -> int:
        return -(-n // (2 * MiB)) * 2 * MiB

    def grouped(max_m: int) -> int:
        return seg(max_m * 7168) + seg(max_m * 4096 * 2) + seg(max_m * 7168 * 2)

    linear = warmup_cached_bytes(DSV3_FP8, res((0, 12, 0), dp=4, ep=True), H200, {"VLLM_MOE_USE_DEEP_GEMM": "0"})
    assert warmup_cached_bytes(DSV3_FP8, res((0, 12, 0), dp=4, ep=True), H200, {}) == linear + grouped(139264)
    assert warmup_cached_bytes(DSV3_FP8, res((0, 11, 0), dp=4, ep=True), H200, {}) == linear + grouped(270336)


def test_when_the_warmup_runs():
    r11, r12 = res((0, 11, 0)), res((0, 12, 0))
    assert warmup_runs(DENSE_FP8, r11, H100, {}) and warmup_runs(DENSE_FP8, r12, B200, {})
    # is_deep_gemm_supported: compute capability exactly 9.0 or 10.0
    for gpu in (L4, B300, RTX5090, None):
        assert not warmup_runs(DENSE_FP8, r12, gpu, {}), gpu
    # VLLM_USE_DEEP_GEMM defaults to 0 in 0.10.2, 1 from 0.11.0
    assert not warmup_runs(DENSE_FP8, res((0, 10, 2)), H100, {})
    assert warmup_runs(DENSE_FP8, res((0, 10, 2)), H100, {"VLLM_USE_DEEP_GEMM": "1"})
    assert not warmup_runs(DENSE_FP8, r11, H100, {"VLLM_USE_DEEP_GEMM": "0"})
    # skipping: VLLM_SKIP_DEEP_GEMM_WARMUP up to 0.11, VLLM_DEEP_GEMM_WARMUP=skip from 0.12 (the old one ignored)
    assert not warmup_runs(DENSE_FP8, r11, H100, {"VLLM_SKIP_DEEP_GEMM_WARMUP": "1"})
    assert warmup_runs(DENSE_FP8, r12, H100, {"VLLM_SKIP_DEEP_GEMM_WARMUP": "1"})
    assert not warmup_runs(DENSE_FP8, r12, H100, {"VLLM_DEEP_GEMM_WARMUP": "skip"})
    assert warmup_runs(DENSE_FP8, r12, H100, {"VLLM_DEEP_GEMM_WARMUP": "full"})
    # 0.10.1 warms up after the capture; 0.18 empties the cache before its first reading
    assert not warmup_runs(DENSE_FP8, res((0, 10, 1)), H100, {"VLLM_USE_DEEP_GEMM": "1"})
    assert warmup_runs(DENSE_FP8, res((0, 17, 0)), H100, {})
    assert not warmup_runs(DENSE_FP8, res((0, 18, 0)), H100, {})
    # per-tensor FP8 and unquantized checkpoints have no block-FP8 layer for it
    assert not warmup_runs(replace(DENSE_FP8, quantization={"quant_method": "fp8"}), r12, H100, {})
    assert not warmup_runs(LLAMA8B, r12, H100, {})
    assert warmup_cached_bytes(LLAMA8B, r12, H100, {}) == 0


def test_deep_gemm_is_known_in_the_official_image_or_a_named_package():
    assert deep_gemm_known("vllm/vllm-openai:v0.11.0")
    assert not deep_gemm_known(None) and not deep_gemm_known("nvcr.io/nvidia/pytorch:25.01-py3")
    assert deep_gemm_known(None, ["deep_gemm"]) and deep_gemm_known(None, ["deep-gemm==2.1.1"])
    assert deep_gemm_known(None, ["git+https://github.com/deepseek-ai/DeepGEMM.git@v2.1.1"])
    assert not deep_gemm_known(None, ["flashinfer-python", "vllm==0.11.0"])


def test_capture_log_reads_the_larger_warmup_lower():
    argv = "vllm serve m --max-model-len 8192 --tensor-parallel-size 8"
    dg = warmup_cached_bytes(DSV3_FP8, res((0, 12, 0), tp=8), H200, {})
    fwd = forward_bytes(DSV3_FP8, resolved(argv, "0.12.0"), 8192)
    assert dg > fwd > 0
    # the official image has both: the capture hands back the larger (the autotune forward reuses the blocks)
    img = plan(argv, DSV3_FP8, H200, "0.12.0", image="vllm/vllm-openai:v0.12.0", count=8)
    assert img.detail.logged_cuda_graph_bytes == img.memory.cuda_graphs - dg
    assert any(f"about {dg / 2**30:.2f} GiB lower" in a and "DeepGEMM's kernel warm-up" in a for a in img.assumptions)
    # `pip install vllm` 0.12 has FlashInfer but not DeepGEMM: the forward only, the note gives the rest
    pip = plan(argv, DSV3_FP8, H200, "0.12.0", count=8)
    assert pip.detail.logged_cuda_graph_bytes == pip.memory.cuda_graphs - fwd
    assert any(f"up to {dg / 2**30:.2f} GiB lower where DeepGEMM is installed too" in a for a in pip.assumptions)
    # a build that installs deep_gemm
    built = plan(argv, DSV3_FP8, H200, "0.12.0", count=8, packages=["deep_gemm"])
    assert built.detail.logged_cuda_graph_bytes == img.detail.logged_cuda_graph_bytes
    # 0.11 plain wheel: neither is known; predicted at the graphs' size, the note names both
    p11 = plan(argv, DSV3_FP8, H200, "0.11.0", count=8)
    assert p11.detail.logged_cuda_graph_bytes == p11.memory.cuda_graphs
    assert any("where FlashInfer and DeepGEMM are installed" in a and "no vLLM wheel installs DeepGEMM" in a
               for a in p11.assumptions)
    # skipped warm-up: the autotune forward alone again; 0.18 empties the cache first
    skip = plan(argv, DSV3_FP8, H200, "0.12.0", image="vllm/vllm-openai:v0.12.0", count=8,
                env={"VLLM_DEEP_GEMM_WARMUP": "skip"})
    assert skip.detail.logged_cuda_graph_bytes == pip.detail.logged_cuda_graph_bytes
    p18 = plan(argv, DSV3_FP8, H200, "0.18.0", image="vllm/vllm-openai:v0.18.0", count=8)
    assert p18.detail.logged_cuda_graph_bytes == p18.memory.cuda_graphs
    # Model Runner V2 empties the cache before its first reading (v1/worker/gpu/model_runner.py::capture_model)
    v2 = plan(argv, DSV3_FP8, H200, "0.14.0", image="vllm/vllm-openai:v0.14.0", count=8,
              env={"VLLM_USE_V2_MODEL_RUNNER": "1"})
    assert v2.detail.logged_cuda_graph_bytes == v2.memory.cuda_graphs > 0
    # eager: nothing captured, nothing logged
    eager = plan(argv + " --enforce-eager", DSV3_FP8, H200, "0.12.0", image="vllm/vllm-openai:v0.12.0", count=8)
    assert eager.detail.logged_cuda_graph_bytes == eager.memory.cuda_graphs == 0
