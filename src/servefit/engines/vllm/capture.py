"""What vLLM's "Graph capturing finished in N secs, took X GiB" measures, release by release, next
to the memory the graphs hold (graphs.graph_memory).

v1/worker/gpu_model_runner.py::GPUModelRunner.capture_model logs the drop in free device memory
(torch.cuda.mem_get_info) from before the first capture to after the last one. The first capture of
every batch size enters torch.cuda.graph, whose __enter__ calls torch.cuda.empty_cache()
(compilation/cuda_graph.py::CUDAGraphWrapper patches it out only for the later pieces of a size), so
blocks the caching allocator held unused when the measurement started are handed back during the
capture and subtracted from the figure. Which blocks those are depends on the release:

- 0.10.2 to 0.17: gpu_worker.py::Worker.compile_or_warm_up_model calls
  model_executor/warmup/kernel_warmup.py::kernel_warmup before capture_model. On compute capability
  9.0 and up, with FlashInfer present, it runs flashinfer_autotune: a dummy forward of
  max_num_batched_tokens tokens (runner._dummy_run(max_num_batched_tokens, is_profile=True)), whose
  freed activations stay cached. capture_model takes its first reading without emptying the cache,
  so the log reads lower than the graphs hold by the segments that forward left reserved (what
  mem_get_info sees: the caching allocator's cudaMalloc'd segments, not the bytes the tensors used,
  graph_pool.py), and can print a negative figure. (0.10.1 runs kernel_warmup after capture_model, and only on compute capability 10.0.)
- from 0.18: capture_model calls torch.accelerator.empty_cache() before its first reading (read in the
  0.18.0 wheel; 0.17.0 does not), and Model Runner V2 (v1/worker/gpu/model_runner.py) always has.

Where the readings sit: up to 0.11.0 (and in V0's worker/model_runner.py::ModelRunner.capture_model)
both are taken outside distributed/parallel_state.py::graph_capture; from 0.11.1 the V1 runner takes
them inside it (read in the 0.11.0, 0.11.1, 0.12.0, 0.19.0, 0.20.0 and 0.24.0 wheels), so what the
custom all-reduce does on leaving it (custom_all_reduce.py::CustomAllreduce.capture ->
register_graph_buffers: IPC handles of the peers' buffers, their pointers copied into the rank_data area
CustomAllreduce.__init__ allocates at start, 8 MiB) falls after the reading. That step is taken to allocate
no device memory of its own (the C++ side is not in the wheel's Python), so the per-call cost
graph_allreduce.py prices is taken to be paid inside the capture in every release; Model
Runner V2 enters graph_capture per capture call (v1/worker/gpu/cudagraph_utils.py), inside its readings.
The CUDA-graph memory profiling that runs before the KV cache is sized (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS:
in 0.18 / 0.19 off by default, from 0.20 on; gpu_model_runner.py::profile_cudagraph_memory) does not change
the figure: it captures into a throwaway pool, then clears every graph (CUDAGraphWrapper.
clear_all_graphs) and empties the cache (_cleanup_profiling_kv_cache) before the KV cache is allocated,
and capture_model empties the cache again before its first reading (read in the 0.20.0 wheel).

Whether the autotune runs depends on the install: utils/flashinfer.py::has_flashinfer needs the flashinfer
package and, without the flashinfer-cubin package (or VLLM_HAS_FLASHINFER_CUBIN=1), nvcc on the PATH for
its JIT. FlashInfer is an optional extra of the 0.10.2 / 0.11.0 wheels and a dependency of the wheel from
0.11.1 (Requires-Dist: flashinfer-python==0.5.2 in the 0.11.1 METADATA, 0.5.3 in 0.12.0's, without an
extra; has_flashinfer reads the same in 0.11.1 and 0.12.0; flashinfer-cubin too from 0.19.1); the
vllm/vllm-openai image installs it and keeps the CUDA toolchain for FlashInfer's JIT (docker/Dockerfile:
a CUDA devel final base, later a base image with the JIT dependencies). So the logged figure is
predicted lower from 0.11.1 to 0.17, in the official image from 0.10.2, and where
VLLM_HAS_FLASHINFER_CUBIN=1 says so; for a 0.10.2 / 0.11.0 install of the plain wheel the plan says by
how much it may read lower. From 0.17 --no-enable-flashinfer-autotune (KernelConfig) skips the
autotune, as -O0 does. kernel_warmup runs DeepGEMM's warm-up first (block-FP8 checkpoints on compute
capability 9.0 / 10.0 where the deep_gemm package is installed: deepgemm_warmup.py), whose freed buffers
stay cached the same way; the autotune forward reuses those blocks, so the capture hands back the larger
of the two (taken as a lower bound: the forward may need blocks the warm-up's do not fit).

Not yet explained (left unpriced rather than fitted): on H100 with 0.11.0 / 0.12.0 the logs read lower than
pool - released by 0.46 GiB (calibration llmd-h100-qwen3-0p6b-16k, llmd-h100-llama31-8b-16k), 1.19 (llmd-h100-
qwen3-32b-16k), 1.6 - 1.7 (llmd-2xh100-qwen3-32b-tp2-16k, llmd-2xh100-llama33-70b-fp8-tp2-16k) and 0.76
(videocut-2xh100-qwen3-vl-30b-a3b-tp2-64k-s256-0120), but by 0.06 for llmd-h100-mistral-small-32-24b-095-16k
and 0.0 - 0.23 for gpt-oss; off Hopper the same releases (0.11.2 L40S, 0.13.0 A100 / RTX 4090, 0.17.0 RTX
4090) fit, so the pool terms are not in question there. Read in the 0.11.0 wheel (0.12.0 in the same order),
what runs between the profile's emptied cache (utils/__init__.py::memory_profiling: gc.collect and
empty_cache on exit) and capture_model's first reading: initialize_kv_cache (int8 tensors reshaped by views,
nothing freed), compile_or_warm_up_model's compile_sizes warm-ups (none by default), kernel_warmup (DeepGEMM
for block-FP8 only, flashinfer_autotune's forward, the FlashInfer attention warm-up only where every group is
FlashInfer) and initialize_cudagraph_capture (no allocation). Nothing allocated before the reading is
dropped during it besides what gc.collect (freeze_gc, torch.cuda.graph.__enter__) reclaims. For Qwen3-0.6B
the log implies 0.69 GiB handed back where all of one layer's tensors at 8192 tokens together are 0.36 GiB,
so a larger autotune forward would need segments left pinned layer after layer (not so in the eager order:
graph_pool.STEADY_LAYERS; Inductor's order in the compiled pieces is not modelled), and Mistral-Small-3.2
already fits with the forward as priced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from servefit.hardware.spec import GpuSpec

if TYPE_CHECKING:
    from servefit.core import EngineConfig
    from servefit.engines.vllm.era import Era
    from servefit.engines.vllm.plan import Resolved
    from servefit.models.spec import ModelSpec

GiB = 2**30
# [first release that runs kernel_warmup (autotune, DeepGEMM) before capture, first release that empties the
# cache before reading]
AUTOTUNE_BEFORE_CAPTURE = ((0, 10, 2), (0, 18, 0))
AUTOTUNE_MIN_CC = 90  # current_platform.has_device_capability(90)
# The first wheel that requires flashinfer-python outright (0.11.1 METADATA; 0.11.0's lists it under an extra)
FLASHINFER_WHEEL_DEPENDENCY = (0, 11, 1)


def released_at_capture(model: ModelSpec, r: Resolved, e: Era, gpu: GpuSpec | None, settings: dict,
                        v2_runner: bool = False) -> int:
    """Bytes the first capture hands back to the device that the capture log subtracts from its
    figure (see the module docstring): the segments the autotune forward of max_num_batched_tokens
    left reserved, as the caching allocator carves that forward's tensors (graph_pool.forward_pool:
    a dense decoder traced tensor by tensor, so a freed block too small for the next request stays
    reserved beside the segment cudaMalloc'd for it; other models at their working set,
    profile.forward_bytes). Model Runner V2 empties the cache before its first reading
    (v1/worker/gpu/model_runner.py::capture_model, 0.14 on)."""
    from servefit.engines.vllm.graph_pool import forward_pool

    first, fixed = AUTOTUNE_BEFORE_CAPTURE
    if not e.v1 or v2_runner or r.enforce_eager or gpu is None or gpu.compute_capability < AUTOTUNE_MIN_CC:
        return 0
    if not first <= r.version < fixed or settings.get("enable_flashinfer_autotune") is False:
        return 0
    return forward_pool(model, r, [r.max_num_batched_tokens])


def capture_release(model: ModelSpec, r: Resolved, e: Era, gpu: GpuSpec | None, cfg: EngineConfig,
                    v2_runner: bool = False) -> Released:
    """What the first capture hands back (Released): the autotune forward (released_at_capture) and the
    DeepGEMM warm-up's cache (deepgemm_warmup.py; V1 only, where the V1 runner captures), each with whether
    the install is known to run it."""
    from servefit.engines.vllm.deepgemm_warmup import deep_gemm_known, warmup_cached_bytes

    image = cfg.site.image if cfg.site else None
    dg = 0 if not e.v1 or v2_runner or r.enforce_eager else warmup_cached_bytes(model, r, gpu, cfg.env)
    return Released(released_at_capture(model, r, e, gpu, cfg.settings, v2_runner), autotune_known(cfg.env, r.version, image),
                    dg, deep_gemm_known(image, cfg.site.packages if cfg.site else ()))


def autotune_known(env: dict[str, str] | None, version: tuple[int, int, int] = (0, 12, 0),
                   image: str | None = None) -> bool:
    """Whether FlashInfer can run for the autotune (see above): VLLM_HAS_FLASHINFER_CUBIN=1, a release
    whose wheel depends on FlashInfer (0.11.1 on: see the module docstring), or the vllm/vllm-openai image."""
    if str((env or {}).get("VLLM_HAS_FLASHINFER_CUBIN", "")).strip().lower() in ("1", "true"):
        return True
    return version >= FLASHINFER_WHEEL_DEPENDENCY or "vllm/vllm-openai" in (image or "")


@dataclass(frozen=True)
class Released:
    """What the first capture hands back (see above): the autotune forward's working set and the DeepGEMM
    warm-up's cached segments (0 where they do not run), and whether the install is known to run each."""

    autotune: int = 0
    autotune_known: bool = False
    deep_gemm: int = 0
    deep_gemm_known: bool = False

    @property
    def known(self) -> int:
        """Bytes the log is predicted to read lower: the larger of the warm-ups known to run."""
        return max(self.autotune if self.autotune_known else 0, self.deep_gemm if self.deep_gemm_known else 0)

    @property
    def possible(self) -> int:
        """Bytes it reads lower where every optional package is installed."""
        return max(self.autotune, self.deep_gemm)


def logged_graph_bytes(pool: int, released: Released) -> int:
    """The "took X GiB" figure: the graphs' memory, less what the capture released where the warm-ups
    are known to run (negative when the released cache was larger)."""
    return pool - released.known if pool else pool


def capture_note(released: Released, version: str) -> str | None:
    """Why the logged capture figure reads, or may read, lower than the graph memory in the plan."""
    if not released.possible:
        return None
    what = " and ".join(w for w, n in (("DeepGEMM's kernel warm-up", released.deep_gemm),
                                      ("a forward of max-num-batched-tokens (FlashInfer autotune)", released.autotune)) if n)
    why = (f"{what} just before the capture leave{'' if ' and ' in what else 's'} cached memory that the capture hands "
           "back; the plan counts the graphs' full size")
    needs = [n for n, run, known in (("FlashInfer runs where the flashinfer-cubin package or nvcc is present",
                                      released.autotune, released.autotune_known),
                                     ("DeepGEMM where the deep_gemm package is installed (the vllm/vllm-openai image)",
                                      released.deep_gemm, released.deep_gemm_known)) if run and known]
    missing = [n for n, run, known in (("FlashInfer", released.autotune, released.autotune_known),
                                       ("DeepGEMM", released.deep_gemm, released.deep_gemm_known)) if run and not known]
    if released.known:
        text = (f"vLLM {version} logs its CUDA-graph capture ('took X GiB') about {released.known / GiB:.2f} GiB lower "
                f"than the graphs hold: {why} ({'; '.join(needs)}; where missing, the log shows the full size)")
        if released.possible > released.known:
            text += f"; up to {released.possible / GiB:.2f} GiB lower where {missing[0]} is installed too"
        return text
    pip = "; ".join(p for n, p in (("FlashInfer", "`pip install vllm` does not install FlashInfer before 0.11.1"),
                                   ("DeepGEMM", "no vLLM wheel installs DeepGEMM")) if n in missing)
    return (f"where {' and '.join(missing)} {'are' if len(missing) > 1 else 'is'} installed (the vllm/vllm-openai "
            f"image has {'them' if len(missing) > 1 else 'it'}; {pip}), vLLM {version} logs its CUDA-graph capture "
            f"('took X GiB') up to {released.possible / GiB:.2f} GiB lower than predicted: {why}")
