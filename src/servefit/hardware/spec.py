"""GpuSpec: one accelerator as the driver reports it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class GpuSpec:
    """`memory_bytes` is the total the driver reports (cudaMemGetInfo / nvidia-smi), which is
    what vLLM's `total_gpu_memory` shows, not the marketing size. `compute_capability` is an
    int like 89 (8.9). Unified-memory devices (Apple, GH200's LPDDR side, DGX Spark) share the
    pool with the OS."""

    key: str  # catalog key, e.g. "h100-sxm"
    name: str  # nvidia-smi style name, e.g. "NVIDIA H100 80GB HBM3"
    vendor: str  # nvidia | amd | apple | intel
    memory_bytes: int
    compute_capability: int = 0  # 0 for non-CUDA devices
    fp8: bool = False  # native FP8 tensor cores
    bf16: bool = True
    unified_memory: bool = False
    nvls: bool = False  # NVSwitch with NVLink SHARP multicast: NCCL NVLS buffers beyond 2 GPUs
    aliases: list[str] = field(default_factory=list)
    source: str = "catalog"  # catalog | --gpu-memory override | ...
    # Where memory_bytes comes from ("vllm log ...", "torch total_memory ...", "estimated: ...").
    memory_source: str = ""
    # Total as nvidia-smi / rocm-smi print it (unified memory: the physical RAM); 0 when unknown.
    # Usually larger than memory_bytes: the driver keeps a few hundred MiB that CUDA never reports.
    smi_memory_bytes: int = 0
    # Memory other processes hold on the device now (--gpu local); vLLM will not start when the
    # free memory is below its budget.
    in_use_bytes: int = 0

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / 2**30

    @property
    def integrated(self) -> bool:
        """A CUDA device on the system's memory (torch's is_integrated: DGX Spark's GB10, Jetson), where the
        engines read free memory from the OS; not the GH200, whose HBM is its own and which CUDA does not
        call integrated."""
        return self.unified_memory and self.vendor == "nvidia"
