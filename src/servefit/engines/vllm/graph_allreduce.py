"""The all-reduces vLLM captures in its CUDA graphs under tensor parallelism, and what each costs in the
captured memory (graphs.graph_memory adds them): vLLM's custom all-reduce where it serves the group and
the input fits its buffer, the symmetric-memory all-reduce above that on NVSwitch Hopper / Blackwell,
else NCCL's, priced by whether NCCL allocates with cuMem.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.engines.vllm.non_torch import nvlink
from servefit.hardware.spec import GpuSpec

if TYPE_CHECKING:
    from servefit.engines.vllm.plan import Resolved

MiB = 2**20

# With tensor parallelism every graph holds the all-reduces of the layers it covers: two per decoder
# layer (after o_proj and after the MLP / MoE) and one for the vocab-parallel embedding
# (VocabParallelEmbedding.forward); the lm_head runs outside the graphs. Through vLLM's custom all-reduce
# each captured call adds its own kernel node and a registered input buffer: during capture
# custom_all_reduce.py::CustomAllreduce.custom_all_reduce runs all_reduce(registered=True) and the C++
# side queues the input address (csrc/custom_all_reduce.cuh: graph_unreg_buffers_); leaving capture(),
# register_graph_buffers exchanges and opens every peer's IPC handle for each of them. So the cost is per
# captured call, whatever else the layer holds (one figure for V0 and V1: the mechanism is the same since
# 0.4). 41 KiB per call: the 0.10.1.1 logs of Qwen2-7B on A100, 0.65 GiB at TP2 vs 0.50 alone, over
# 67 graphs x (2 x 28 + 1) calls. Where FlashInfer's all-reduce + RMSNorm fusion serves a graph's size
# (graph_mode.py::fused_allreduce_tokens) its fused kernel takes the norm's place, on a workspace
# registered once at start (initialize_fi_ar_workspace), so those calls cost nothing per graph.
# Calibration cases dennislee-2xa100-80gb-qwen2-7b-tp2-util025 / -util05 against dennislee-a100-80gb-qwen2-7b-util025.
CUSTOM_AR_GRAPH_COLLECTIVE = 41 * 1024
# Where the custom all-reduce is off (see custom_allreduce below) vLLM captures NCCL all-reduces
# instead (cuda_communicator.py::CudaCommunicator.all_reduce falls back to pynccl), and no custom
# all-reduce buffers are registered; each graph then keeps its captured NCCL kernels and their launch
# resources, per captured all-reduce (two per decoder layer and one for the embedding, in every graph).
# What each costs depends on whether NCCL allocates with cuMem: vLLM up to 0.10.1 sets
# NCCL_CUMEM_ENABLE=0 at import (env_override.py, read in the 0.9.2 and 0.10.1.1 wheels: unless the
# variable is set already, or /dev/nvidia-caps-imex-channels exists) because cuMem "costs memory
# during cudagraph capture" (vllm-project/vllm#5091, NVIDIA/nccl#1234); 0.10.2 drops the override
# (vllm-project/vllm#24141; absent from the 0.10.2 wheel on), so NCCL's own default applies: cuMem on
# where the system supports it (NCCL >= 2.19). Each figure is fitted on the one calibration log of
# its kind: 53 KiB with cuMem off (Qwen3-14B at TP4 on four PCIe cards, 0.9.2: 67 graphs x 81
# all-reduces, 0.93 GiB captured), 145 KiB with it on (Qwen3-30B-A3B W4A16 at TP2 on two cc 8.9
# GeForce cards, 0.13: 86 graphs x 97 all-reduces, 2.08 GiB captured).
# Calibration cases debate-4xpcie24-qwen3-14b-tp4-8k-092 (cuMem off), prograph-2xada24-qwen3-30b-a3b-w4a16-tp2-8k-013 (on).
NCCL_GRAPH_COLLECTIVE = 53 * 1024
NCCL_GRAPH_COLLECTIVE_CUMEM = 145 * 1024
NCCL_CUMEM_FROM = (0, 10, 2)


def custom_allreduce(gpu: GpuSpec | None, tp: int, settings: dict) -> bool:
    """Whether vLLM's custom all-reduce serves the TP group (custom_all_reduce.py::
    CustomAllreduce.__init__): off when disabled by flag, for more than two GPUs that are not
    fully NVLink-connected, and without P2P, which GeForce drivers do not offer (an NVLink-bridged
    pair has it; servefit cannot see the bridge)."""
    if tp <= 1 or settings.get("disable_custom_all_reduce"):
        return False
    if gpu is None:
        return True
    if "geforce" in gpu.name.lower():
        return False
    return tp <= 2 or nvlink(gpu)

def nccl_graph_collective(r: Resolved, env: dict[str, str] | None) -> int:
    """Bytes per NCCL all-reduce captured in a graph (see NCCL_GRAPH_COLLECTIVE): cuMem off before
    0.10.2 (vLLM's override), on from there; NCCL_CUMEM_ENABLE in the environment decides where set."""
    forced = (env or {}).get("NCCL_CUMEM_ENABLE")
    cumem = r.version >= NCCL_CUMEM_FROM if forced is None else forced.strip() not in ("", "0")
    return NCCL_GRAPH_COLLECTIVE_CUMEM if cumem else NCCL_GRAPH_COLLECTIVE


# Which all-reduce a captured call runs, by the bytes of its input (tokens x hidden x dtype bytes):
# cuda_communicator.py::CudaCommunicator.all_reduce tries the custom all-reduce first, then the torch
# symmetric-memory one, then pynccl. The custom all-reduce takes inputs under its buffer's max_size
# (custom_all_reduce.py::CustomAllreduce.should_custom_ar: inp_size < max_size), 8 MiB by default
# (CustomAllreduce.__init__ max_size=8192 * 1024). Where the symmetric-memory communicator is up
# (symm_mem.py::SymmMemCommunicator: VLLM_ALLREDUCE_USE_SYMM_MEM, default "0" in 0.10.2 and "1" from
# 0.11.0 (envs.py); a device capability and group size in SYMM_MEM_ALL_REDUCE_MAX_SIZES; and multicast,
# handle.multicast_ptr != 0, which needs NVSwitch: GpuSpec.nvls), CustomAllreduce.__init__ lowers
# max_size to CUSTOM_ALL_REDUCE_MAX_SIZES[cc][tp] where that is smaller, and inputs from there up to
# SYMM_MEM_ALL_REDUCE_MAX_SIZES[cc][tp] run the symmetric-memory all-reduce, bf16 only
# (should_use_symm_mem: inp.dtype != torch.bfloat16 -> False; an fp16 input falls through to pynccl).
# Tables from device_communicators/all_reduce_utils.py, the same in the 0.11.0, 0.12.0, 0.17.0, 0.19.0,
# 0.20.0, 0.24.0, 0.25.1 and 0.33.0 wheels but for cc 10.3, listed from 0.19 (not in 0.18).
CUSTOM_AR_MAX = 8 * MiB
SYMM_MEM_DEFAULT_FROM = (0, 11, 0)
SYMM_MEM_ENV_FROM = (0, 10, 2)
SYMM_MEM_CC103_FROM = (0, 19, 0)
CUSTOM_AR_MAX_WITH_SYMM: dict[int, dict[int, int]] = {
    90: {2: 64 * MiB, 4: 32 * MiB, 6: MiB // 2, 8: MiB // 4},
    100: {2: 2 * MiB, 4: 2 * MiB, 6: MiB, 8: MiB},
    103: {2: 4 * MiB, 4: 4 * MiB, 6: 8 * MiB, 8: 4 * MiB}}
SYMM_MEM_MAX: dict[int, dict[int, int]] = {
    90: {2: 64 * MiB, 4: 32 * MiB, 6: 64 * MiB, 8: 64 * MiB},
    100: {2: 8 * MiB, 4: 32 * MiB, 6: 128 * MiB, 8: 128 * MiB},
    103: {2: 4 * MiB, 4: 32 * MiB, 6: 32 * MiB, 8: 64 * MiB}}


def symm_mem_max(r: Resolved, gpu: GpuSpec | None, env: dict[str, str] | None) -> int:
    """The largest input (exclusive) the symmetric-memory all-reduce takes for this TP group; 0 where
    the communicator is not up (see above)."""
    forced = (env or {}).get("VLLM_ALLREDUCE_USE_SYMM_MEM")
    on = r.version >= SYMM_MEM_DEFAULT_FROM if forced is None else forced.strip() not in ("", "0")
    if not on or r.version < SYMM_MEM_ENV_FROM or gpu is None or not gpu.nvls:
        return 0
    cc = gpu.compute_capability
    if cc == 103 and r.version < SYMM_MEM_CC103_FROM:
        return 0
    return SYMM_MEM_MAX.get(cc, {}).get(r.tp, 0)


def allreduce_kind(r: Resolved, gpu: GpuSpec | None, settings: dict, env: dict[str, str] | None,
                   input_bytes: int) -> str:
    """"custom", "symm" or "nccl": the all-reduce CudaCommunicator.all_reduce runs for an input of
    `input_bytes` in this TP group (see above)."""
    if not custom_allreduce(gpu, r.tp, settings):
        return "nccl"
    symm = symm_mem_max(r, gpu, env)
    ca_max = min(CUSTOM_AR_MAX, CUSTOM_AR_MAX_WITH_SYMM[gpu.compute_capability][r.tp]) if symm and gpu else CUSTOM_AR_MAX
    if input_bytes < ca_max:
        return "custom"
    return "symm" if input_bytes < symm and r.dtype == "bfloat16" else "nccl"
