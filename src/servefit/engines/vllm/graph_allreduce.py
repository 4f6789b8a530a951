"""The all-reduces vLLM captures in its CUDA graphs under tensor parallelism, and what each costs in the
captured memory (graphs.graph_memory adds them): vLLM's custom all-reduce where it serves the group,
else NCCL's, priced by whether NCCL allocates with cuMem.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.engines.vllm.non_torch import nvlink
from servefit.hardware.spec import GpuSpec

if TYPE_CHECKING:
    from servefit.engines.vllm.plan import Resolved

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
