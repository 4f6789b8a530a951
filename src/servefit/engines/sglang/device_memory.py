"""What SGLang reads as a GPU's capacity and as its memory before the weights load, so that the pool
(rest = available after loading - pre_model_load_memory x (1 - mem_fraction_static)) starts from the
figure SGLang itself measured.

- Before loading (model_executor/model_runner.py::ModelRunner.init_torch_distributed, logged as "Load weight
  begin. avail mem=") SGLang takes utils/common.py::get_available_gpu_memory: the *free* memory
  (torch.cuda.mem_get_info), not the device total, the minimum over ranks. So memory other processes
  hold on the GPU comes off, and mem_fraction_static is a fraction of that free figure.
- On an integrated GPU (torch's device property is_integrated: DGX Spark's GB10, Jetson; the branch is in
  the 0.5.11 and 0.5.23 wheels, proposed in sglang PR #10075 "fix memory Jetson Orin/Thor/Spark", 2025-09)
  the free figure is psutil.virtual_memory().available, the kernel's MemAvailable: the system's MemTotal
  less what the OS, every other program and SGLang's other processes hold.
- Capacity (utils/common.py::get_nvgpu_memory_capacity, which picks the default mem_fraction_static,
  chunked_prefill_size and graph batch sizes): nvidia-smi's memory.total; on the GB10 nvidia-smi prints
  [N/A] (there is no frame buffer), so SGLang falls back to torch.cuda.mem_get_info()'s total, the OS's
  MemTotal, and logs "Failed to get GPU memory capacity from nvidia-smi. Falling back to
  torch.cuda.mem_get_info()" (_cuda_mem_fallback, read in the 0.5.11 and 0.5.23 wheels; without
  nvidia-smi the same fallback). Other integrated devices are taken to behave alike.
"""

from __future__ import annotations

from servefit.hardware.spec import GpuSpec

GiB = 2**30
MiB = 2**20
# What an idle GB10 (DGX Spark, DGX OS) keeps from MemAvailable: 121.69 GiB MemTotal, MemAvailable
# 115.85 GiB at a measured baseline (unsloth PR #10704, "Measured on a GB10": cuda_free=103.25
# MemFree=103.25 MemAvailable=115.85 Cached=12.64). A machine figure, not SGLang's: `--gpu local`
# replaces it with this machine's MemTotal - MemAvailable.
GB10_OS_HELD = int((121.69 - 115.85) * GiB)


def capacity_mib(gpu: GpuSpec) -> float | None:
    """get_device_memory_capacity(): nvidia-smi's total, CUDA's total where nvidia-smi has none."""
    if not gpu.memory_bytes:
        return None
    if gpu.integrated:
        return gpu.memory_bytes / MiB
    return (gpu.smi_memory_bytes or gpu.memory_bytes) / MiB


def held_by_others(gpu: GpuSpec) -> int:
    """Bytes get_available_gpu_memory does not see free before SGLang starts: what `--gpu local` measured
    in use (on an integrated GPU MemTotal - MemAvailable), else on a GB10 an idle DGX OS's share."""
    if gpu.in_use_bytes:
        return gpu.in_use_bytes
    if gpu.integrated and gpu.compute_capability == 121:
        return GB10_OS_HELD
    return 0


def notes(gpu: GpuSpec) -> list[str]:
    """The assumption the pre-load figure rests on, where the machine decides it."""
    if not gpu.integrated:
        return []
    held = held_by_others(gpu)
    if gpu.in_use_bytes:
        how = f"{held / GiB:.2f} GiB not available now on this machine (MemTotal - MemAvailable)"
    elif held:
        how = (f"{held / GiB:.2f} GiB held by an idle DGX OS (a measured GB10 baseline); a desktop session, "
               "containers or other programs take more, and every GiB they hold takes mem_fraction_static "
               "of a GiB from the KV pool")
    else:
        how = "nothing held by the OS or other programs (not known for this device: --gpu local measures it)"
    return [f"unified memory: SGLang sizes its static pool from the memory the OS reports available "
            f"(MemAvailable) when it starts, not the device total; planned with {how}"]
