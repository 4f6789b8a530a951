"""What vLLM reads as "free" on a unified-memory NVIDIA device (DGX Spark's GB10, Jetson), release by
release, and what that leaves servefit unable to know: said as assumptions, not fitted.

- CUDA's free memory there (cudaMemGetInfo, torch.cuda.mem_get_info) is the kernel's MemFree, which
  counts the page cache as used; its total is the OS's MemTotal (121.69 GiB on a GB10).
- Up to 0.11.0 vLLM takes CUDA's figures as they are (vllm/utils/__init__.py::MemorySnapshot.measure).
- From 0.11.1 every memory snapshot on compute capability 8.7 / 11.0 / 12.1 (Orin, Thor, Spark) replaces
  the free figure with psutil.virtual_memory().available, the kernel's MemAvailable
  (vllm/utils/mem_utils.py::MemorySnapshot.measure, shared_sysmem_device_mem_sms: not in the 0.11.0
  wheel; in the 0.11.1, 0.11.2, 0.12 - 0.15 and 0.17 - 0.19 wheels); from 0.20 on any device CUDA calls integrated
  (platforms/cuda.py::is_integrated_gpu). The start-up check (v1/worker/utils.py::request_memory:
  free < ceil(total x util) refuses to start) and the non-torch growth the budget charges then count
  every process's memory, the OS's and vLLM's own host memory included: from the init snapshot
  (v1/worker/gpu_worker.py::Worker.init_device, taken before the model runner is built) to the one after
  the profile (utils/mem_utils.py::memory_profiling), the EngineCore process builds the model runner's
  host buffers, loads the weights and, in profile_run, compiles the model with torch.compile (Dynamo and
  Inductor in-process: "torch.compile took 14.68 s" between "Model loading took" and "Available KV cache
  memory" in the GB10 0.24 V2 log of calibration case tennsoku-gb10-qwen3-06b-2k-u015-smoke-024). How
  much host memory that takes is not set by vLLM's code (imports, compiler state, the compile cache being
  cold or warm), so it is not predicted: the calibration GB10 0.24 logs (V1 and V2, utilization 0.15,
  same image) log 0.83 - 1.16 GiB less KV cache than planned, 0.83 - 1.14 GiB across starts of one command.
- Up to 0.11.0 the checkpoint's files, read into the page cache while the weights load, lower MemFree
  after the start-up snapshot: vLLM's non-torch growth (total - free - torch's reserved) counts them,
  about the weights' size, against the KV cache (page_cache).
- From 0.20 the CUDA-graph estimate the budget subtracts is read from CUDA's free memory around two
  captures per mode (v1/worker/gpu_model_runner.py::profile_cudagraph_memory), i.e. MemFree, so files
  written meanwhile (kernels compiled on a first start) enlarge it (Model Runner V2 estimates none before
  0.29: graphs.graph_estimate).
- In every release the capture log's figure ("Graph capturing finished ..., took X GiB", and from 0.20 the
  pool's "actual") is the drop in CUDA's free memory across capture_model (torch.cuda.mem_get_info in
  worker/model_runner.py and v1/worker/gpu_model_runner.py, torch.accelerator.get_memory_info from 0.25),
  i.e. MemFree: page cache the kernel reclaims to make room for the graphs hides them (with the KV cache
  sized to the utilization ceiling MemFree may sit at the kernel's reclaim floor, and the figure read near
  0), while host memory taken and files written meanwhile count in. Neither is predicted: both rest on the
  OS's state (what the page cache holds, what else runs), which the engine's code does not set.
"""

from __future__ import annotations

from servefit.engines.vllm.era import Era, vtuple
from servefit.hardware.spec import GpuSpec

GiB = 2**30
MEM_AVAILABLE_FROM = (0, 11, 1)


def page_cache(gpu: GpuSpec, e: Era, weights: int, settings: dict) -> int:
    """Bytes of checkpoint files a release reading MemFree (up to 0.11.0) charges as non-torch memory on
    unified memory: the files read while loading, taken as the size of the weights this GPU loads
    (none with --load-format dummy, which reads no file)."""
    if not gpu.integrated or vtuple(e.version) >= MEM_AVAILABLE_FROM or settings.get("load_format") == "dummy":
        return 0
    return weights


def notes(gpu: GpuSpec, e: Era, budget: int, graphs_subtracted: bool, graphs_captured: bool = False) -> list[str]:
    """The assumptions a plan on a unified-memory device rests on, in this release's terms."""
    if not gpu.integrated:
        return []
    total, v = gpu.memory_bytes, vtuple(e.version)
    if v < MEM_AVAILABLE_FROM:
        out = [f"unified memory: vLLM {e.version} reads free memory from CUDA, which on this device counts the "
               f"page cache as used: it refuses to start unless {budget / GiB:.2f} GiB of the {total / GiB:.2f} GiB "
               "are free that way; planned with an empty page cache at start (as after `sync; echo 3 > "
               "/proc/sys/vm/drop_caches`), so the checkpoint files read while loading count against the KV cache "
               "as non-torch memory, taken as the weights' size"]
    else:
        out = [f"unified memory: vLLM reads the memory the OS reports available (MemAvailable): it refuses to "
               f"start unless {budget / GiB:.2f} GiB of the {total / GiB:.2f} GiB are available, so the OS, other "
               f"programs and vLLM's own processes may hold at most {max(total - budget, 0) / GiB:.2f} GiB at start; "
               "host memory those take while vLLM loads and profiles is charged to the KV cache too, and is not "
               "predicted"]
    if graphs_subtracted:
        out.append("unified memory: the CUDA-graph estimate vLLM subtracts is read from CUDA's free memory, which "
                   "here also drops with files written during the captures (kernels compiled on a first start); "
                   "predicted as on a discrete GPU")
    if graphs_captured:
        out.append("unified memory: the capture log's 'took X GiB' is the drop in CUDA's free memory (the kernel's "
                   "MemFree), not the graphs' size: page cache the kernel reclaims for them hides them (near the "
                   "utilization ceiling the log can read about 0), host memory and files written meanwhile add in; "
                   "the plan gives what the graphs hold")
    return out
