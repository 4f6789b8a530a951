"""Memory outside torch's allocator that vLLM's start-up profile charges to its budget (NCCL and custom
all-reduce buffers, NVLS buffers on NVSwitch boards, the CUDA context in 0.6.4, and from 0.27 the runner's
persistent buffers), version by version; terms calibrated on the calibration half of
benchmarks/accuracy/cases/vllm.yaml (never on the held-out half)."""

from __future__ import annotations

from servefit.hardware.spec import GpuSpec

GiB = 2**30
MiB = 2**20
# Releases that budget "consumed" memory and log it with the peak activation (vllm/v1/worker/
# gpu_worker.py::Worker.determine_available_memory in 0.27.1 - 0.33.0): there the logged "X GiB for
# peak activation" is the torch transient peak plus the CUDA-graph estimate the budget subtracts
# (peak_activation_memory = transient_peak_headroom + cudagraph_memory_estimate_applied); 0.20 -
# 0.26.0 log the torch peak alone (peak_activation_memory = torch_peak_increase). 0.26.1 was never
# released: builds that call themselves 0.26.1rc1.devN are main on the way to 0.27 and print the
# 0.27 wording (the AutoScientists log), so the switch is at 0.26.1.
CONSUMED_FROM = (0, 26, 1)
CUDA_CONTEXT = int(0.30 * GiB)  # CUDA context + cuBLAS outside the budget, before the snapshot
V1_SNAPSHOT_FROM = (0, 9, 1)  # V1 charges the CUDA context before this (non_torch_bytes)
# Non-torch growth during load and profiling by world size on NVLink boards without NVLS (NCCL
# ring/tree and custom all-reduce buffers): 0.13 GiB alone and 0.55 at TP2 (0.11 logs on H100),
# 1.79 at TP4 (2.04 logged on 4 x H200 with 0.10, less its NVLS term), 2.10 at TP8 (0.7 logs on
# 8 x A100); linear in between, flat beyond.
NON_TORCH_GIB = {1: 0.13, 2: 0.55, 4: 1.79, 8: 2.10}
# GPUs without NVLink talk over PCIe: NCCL opens a few channels there instead of the dozens it opens
# over NVLink, and vLLM's custom all-reduce stays off without P2P (custom_all_reduce.py::
# CustomAllreduce.__init__), so the communicators' buffers stay small: 0.25 GiB at TP2 (V0 0.7 log
# on 2 x RTX 4090); ring buffers are per neighbour, so the size does not grow with the world.
PCIE_NON_TORCH_GIB = 0.25
# NCCL's NVLS (NVLink SHARP) buffers on NVSwitch boards, per communicator of more than 2 GPUs,
# per GPU and per local rank (nvlsPerRankSize x nHeads in NCCL src/transport/nvls.cc): 288 MiB
# with NCCL 2.20 (torch 2.3/2.4: vLLM < 0.6.4; 2.25 GiB at 8 ranks, as NCCL logs it in vLLM
# issue #9699), 144 MiB with 2.21 (torch 2.5/2.6: vLLM < 0.9), 32 MiB from 2.23 (torch >= 2.7)
NVLS_MIB_PER_RANK = ((0, 6, 4), 288), ((0, 9, 0), 144), ((99, 0, 0), 32)
# From 0.27 the budget charges everything the instance took since its first snapshot
# (utils/mem_utils.py::memory_profiling: total_consumed = before_create.free - after_profile.free;
# 0.26.0 still adds non_torch_increase): that also counts the runner's persistent buffers
# allocated outside the weights' load, which earlier releases' non-torch delta did not see. +0.17 GiB:
# the calibration logs that print "consumed memory (weights + non-torch)" give, less the logged weights
# and the 0.13 GiB above, 0.13 (0.30.0, T4, warm compile cache), 0.20 (0.31.0, A100 40GB, cold) and
# 0.20 (a 0.26.1 main build, A100 80GB, warm): mean 0.177, within the logs' 0.01 GiB rounding of the
# 0.17 first fitted on two of them. The cold start did not raise it on A100.
CONSUMED_EXTRA = int(0.17 * GiB)

def non_torch_bytes(world: int, tp: int = 1, gpu: GpuSpec | None = None, version: tuple[int, int, int] = (0, 33, 0),
                    v1: bool = False) -> int:
    """Memory outside torch's allocator that vLLM's profile charges to the budget: NCCL and
    custom all-reduce buffers, plus NVLS buffers on NVSwitch boards. Before 0.11 the snapshot
    is taken before the distributed set-up (worker.py::init_device), so both the pynccl
    communicator and torch's own ProcessGroupNCCL (created lazily in profile_run) count; from
    0.11 the set-up comes first (vLLM PR #25359) and only torch's communicator does. 0.6.4 alone
    counted every byte the device had in use that torch had not allocated
    (worker.py::determine_num_available_blocks: mem_get_info - allocated_bytes), the CUDA context
    included; up to 0.6.3 the budget charges init_gpu_memory - free after the profile, with
    init_gpu_memory read in init_device after torch.cuda.set_device, so the context is outside it
    as from 0.6.5 (read in the 0.5.3 and 0.6.3 wheels). The V1 engine did the same as 0.6.4 up to
    0.9.0 (v1/worker/gpu_worker.py::Worker.determine_available_memory adds mem_get_info's used
    bytes less torch's allocated ones to the peak; read in the 0.6.5, 0.7.3, 0.8.5 and 0.9.0 wheels)
    and moved to utils.py::memory_profiling's baseline snapshot in 0.9.1. From 0.27 the runner's
    persistent buffers count too (CONSUMED_EXTRA)."""
    keys = sorted(NON_TORCH_GIB)
    w = min(max(world, 1), keys[-1])
    if w > 1 and gpu is not None and not nvlink(gpu):
        gib = PCIE_NON_TORCH_GIB
    else:
        lo = max(k for k in keys if k <= w)
        hi = min(k for k in keys if k >= w)
        gib = NON_TORCH_GIB[lo] if hi == lo else \
            NON_TORCH_GIB[lo] + (NON_TORCH_GIB[hi] - NON_TORCH_GIB[lo]) * (w - lo) / (hi - lo)
    context = CUDA_CONTEXT if (0, 6, 4) <= version < (0, 6, 5) or (v1 and version < V1_SNAPSHOT_FROM) else 0
    consumed = CONSUMED_EXTRA if version >= CONSUMED_FROM else 0
    return int(gib * GiB) + nvls_bytes(tp, gpu, version) + context + consumed


def nvlink(gpu: GpuSpec) -> bool:
    """Whether GPUs of this kind reach each other over NVLink: the SXM / NVL / NVSwitch boards and
    the superchips; PCIe cards (GeForce, RTX workstation, L4/L40, A10, PCIe A100/H100) do not."""
    key = gpu.key.lower()
    return gpu.nvls or any(t in key for t in ("sxm", "nvl", "gh200", "gb200", "b200", "b300", "mi3"))


def nvls_bytes(tp: int, gpu: GpuSpec | None, version: tuple[int, int, int]) -> int:
    if gpu is None or not gpu.nvls or tp <= 2:
        return 0
    per_rank = next(mib for until, mib in NVLS_MIB_PER_RANK if version < until)
    communicators = 1 if version >= (0, 11, 0) else 2
    return communicators * per_rank * MiB * min(tp, 8)
