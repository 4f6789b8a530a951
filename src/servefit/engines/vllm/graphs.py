"""The CUDA-graph memory vLLM captures at start, version by version: which batch sizes and modes it
captures (graph_sizes), what the captured graphs hold (graph_memory) and what the KV budget subtracts
for them (graph_estimate). What the capture log line reads next to this is in capture.py; what
quantized linear kernels add (activation-quant nodes, AWQ / Marlin scratch) in graph_quant.py.

vLLM captures the graphs after the KV cache is allocated (V0 worker/model_runner.py::
ModelRunner.capture_model; V1 v1/worker/gpu_model_runner.py::GPUModelRunner.capture_model); from 0.20
the KV budget subtracts a profiled estimate of them first (gpu_worker.py::
Worker.determine_available_memory).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.engines.vllm.attn_backend import flashinfer_decode_wrappers
from servefit.engines.vllm.defaults import capture_sizes
from servefit.engines.vllm.era import Era
from servefit.engines.vllm.graph_allreduce import (
    CUSTOM_AR_GRAPH_COLLECTIVE,
    allreduce_kind,
    nccl_graph_collective,
)
from servefit.engines.vllm.graph_mode import (
    FULL_DECODE_MODES,
    cudagraph_mode,
    fused_allreduce_tokens,
    inductor_compiled,
    spec_decode_without_full_graphs,
)
from servefit.engines.vllm.graph_pool import forward_pool
from servefit.engines.vllm.graph_quant import act_quant_kernels, awq_dequant_pool, marlin_reduce_scratch
from servefit.engines.vllm.kvcache import speculative
from servefit.hardware.spec import GpuSpec
from servefit.memory.dtypes import dtype_bytes
from servefit.memory.kv import latent_cache
from servefit.models.spec import ModelSpec

if TYPE_CHECKING:
    from servefit.core import EngineConfig
    from servefit.engines.vllm.plan import Resolved

GiB = 2**30
MiB = 2**20
# CUDA-graph pool per captured graph and decoder layer (the driver keeps each graph's kernel nodes;
# the pool's tensors are shared across sizes): a piecewise graph (one per attention-free piece,
# i.e. per layer) 0.25 MiB (0.9.0.1 / 0.10.1.1 logs: Mistral-7B on A10G, Qwen2-7B on A100), a full
# decode graph 0.10 MiB (0.19 logs with 51 piecewise + 35 full graphs on A100 / A6000 / L40S).
# Fitted on calibration cases newblog-a10g-mistral-7b-instruct-8k, dennislee-a100-80gb-qwen2-7b-util025 / -util05
# (piecewise) and hpml-a100-40gb-llama31-8b-fp16-8k / -32k, hpml-rtxa6000-llama31-8b-fp16-32k,
# hpml-l40s-llama31-8b-fp16-8k (full).
GRAPH_PIECEWISE_PER_LAYER = int(0.25 * MiB)
GRAPH_FULL_PER_LAYER = int(0.10 * MiB)
# What a captured layer costs splits into its kernel nodes and, for a piecewise graph, the graph of its
# own (one per piece, i.e. per layer). Kernels per decoder layer, counted in vLLM's code with Inductor
# fusing each norm / activation / rotary into one Triton kernel: the piece between two attentions holds
# o_proj, add + RMSNorm, gate_up, SiluAndMul, down, add + RMSNorm, qkv and rotary (8); a FULL graph also
# holds the attention kernel and the KV-cache write (10). A FULL graph is one graph for the whole model,
# so its per-layer term is nodes only: a node is GRAPH_FULL_PER_LAYER / 10, and the rest of the
# piecewise term is the piece's own graph.
DENSE_LAYER_KERNELS = 8
FULL_LAYER_KERNELS = DENSE_LAYER_KERNELS + 2
GRAPH_NODE = GRAPH_FULL_PER_LAYER / FULL_LAYER_KERNELS
# A fused-MoE layer replaces the dense MLP's three kernels with the router GEMM and the fused_moe op's
# topk_softmax, moe_align_block_size, the two fused_moe GEMM kernels, silu_and_mul and moe_sum
# (model_executor/layers/fused_moe/fused_moe.py::fused_topk, fused_experts_impl, read in the 0.12.0 wheel;
# fused_marlin_moe launches the same sequence): 7, four more. Shared experts add their own gate_up, act
# and down (SharedFusedMoE).
MOE_EXTRA_KERNELS = 4
SHARED_EXPERT_KERNELS = 3
# vLLM splits the model for piecewise graphs at its mixer ops only (config/compilation.py::
# CompilationConfig._attention_ops: unified attention, mamba_mixer2, short_conv, gdn_attention_core...),
# so a layer without a mixer has no piece of its own: it sits inside its neighbours' pieces, and costs
# its kernel nodes only. Such layers (kind "none" in a decoder) are Nemotron-H's MLP / MoE layers
# (model_executor/models/nemotron_h.py: each layer is one of mamba, attention, MLP or MoE) and
# Nemotron-NAS's no-op-attention layers (nemotron_nas.py). A Nemotron-H mixer layer has no MLP: add +
# RMSNorm, in_proj / qkv and out_proj / o_proj (3); its MLP layer add + RMSNorm, up, ReLU^2 and down (4),
# its MoE layer add + RMSNorm and the fused-MoE op's 7.
NO_MIXER_LAYER_ARCHS = ("NemotronHForCausalLM", "DeciLMForCausalLM")
NEMOTRON_H_MIXER_KERNELS = 3
MLP_KERNELS = 4
GRAPH_PIECE = GRAPH_PIECEWISE_PER_LAYER - DENSE_LAYER_KERNELS * GRAPH_NODE
# The symmetric-memory all-reduce (graph_allreduce.py) captures three kernels and registers nothing per
# call: the copy into the symmetric buffer, the multimem / two-shot all-reduce and the copy out
# (device_communicators/symm_mem.py::SymmMemCommunicator.all_reduce, inside the opaque all-reduce op,
# so Inductor fuses neither copy; read in the 0.12.0 wheel). Its buffer is allocated once at start.
SYMM_MEM_GRAPH_COLLECTIVE = int(3 * GRAPH_NODE)
# Model Runner V2 (v1/worker/gpu/model_runner.py) captures the same graphs (the same piecewise
# backend, one graph per piece and size, then the FULL decode graphs), yet from 0.29 the pool it logs is
# much smaller: 0.20 GiB on 0.31.0 (A100 40GB) and 0.15 GiB on 0.30.0 (T4) for Qwen2.5-1.5B's 28 layers
# x (51 piecewise + 35 full) graphs, where the V1 runner's terms above give 0.44. x0.38 on the
# per-layer terms, least squares on those two calibration logs (the only V2 logs with a pool).
# Calibration cases reidharris-a100-40gb-qwen25-coder-15b-16k-0310 and llmlab-t4-qwen25-15b-fp16-4k-0300.
# Why from 0.29 only: there V2's profile_cudagraph_memory (v1/worker/gpu/cudagraph_utils.py, called by
# gpu_worker.py::determine_available_memory whenever graphs are captured, whatever
# VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS says) captures every PIECEWISE graph and the two largest FULL
# ones into a throwaway pool before the KV cache, and the logged capture is the process's second
# capture of the same graphs; the same logs show the first reading higher ("took 0.22 GiB" then 0.09
# for Qwen2.5-0.5B, 0.48 then 0.28 for Gemma 4 E2B). Up to 0.28 V2's profile_cudagraph_memory is a stub
# that returns 0 (read in the 0.20.0, 0.22.0, 0.24.0, 0.25.1, 0.26.0, 0.27.1 and 0.28.0 wheels; the real
# one in 0.29.0, 0.30.0 and 0.31.0), so the logged capture is the first, as the V1 runner's is, and is
# priced with the V1 terms; nothing is subtracted from the KV budget for it (graph_estimate).
GRAPH_V2_RUNNER_FACTOR = 0.38
V2_PROFILES_GRAPHS_FROM = (0, 29, 0)
# What Model Runner V2 budgets for its graphs is not the pool it later captures but
# v1/worker/gpu/cudagraph_utils.py::profile_cudagraph_memory: piecewise graphs captured in full into
# a throwaway pool over a minimal KV cache, and only the two largest FULL graphs, extrapolated as
# first + (n - 1) x max(second, 1 MiB) (_extrapolate_full_graph_memory). The first FULL capture pays
# the throwaway pool's baseline again, so the estimate runs above the pool: 0.35 vs 0.20 GiB on
# 0.31.0 (A100 40GB) and 0.34 vs 0.15 on 0.30.0 (T4), Qwen2.5-1.5B both ("CUDA graph pool memory:
# X GiB (actual), Y GiB (estimated)"). +0.17 GiB when FULL graphs are captured, the mean of those two
# calibration logs (the only V2 logs printing both). The V1 runner's estimate is taken as its pool:
# within about 10% on the calibration logs of 0.19 (0.53 / 0.48, 0.81 / 0.86, 0.84 / 0.92 GiB), 36%
# above on the one 0.26 log (Qwen3-Coder-30B-A3B: 0.15 / 0.11).
# Calibration cases reidharris-a100-40gb-qwen25-coder-15b-16k-0310 and llmlab-t4-qwen25-15b-fp16-4k-0300.
GRAPH_V2_ESTIMATE_EXTRA = int(0.17 * GiB)
# Which architectures default to Model Runner V2, per release (config/vllm.py::VllmConfig.
# use_v2_model_runner and _is_default_v2_model_runner_model, read in each wheel): none before 0.22;
# listed dense unquantized architectures in 0.22 / 0.23; listed ones in 0.24; from 0.25 every
# non-MoE model that is neither hybrid nor attention-free, or a listed MoE (hybrids may be listed
# from 0.27); every model from 0.29.
_V2_MOE = ("DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM")
_V2_026 = _V2_MOE + ("InklingForCausalLM", "InklingForConditionalGeneration", "LongcatFlashNgramForCausalLM")
V2_RUNNER_ARCHS = (((0, 23, 0), ("Qwen3ForCausalLM",)),
                   ((0, 24, 0), ("Qwen3ForCausalLM", "LlamaForCausalLM", "MistralForCausalLM")),
                   ((0, 25, 0), ("Qwen3ForCausalLM", "LlamaForCausalLM", "MistralForCausalLM") + _V2_MOE),
                   ((0, 26, 0), _V2_MOE), ((0, 27, 0), _V2_026),
                   ((0, 28, 0), _V2_026 + ("KimiK3ForConditionalGeneration",)),
                   ((0, 29, 0), _V2_026 + ("KimiK3ForConditionalGeneration", "DeepseekV4ForCausalLM")))
# FlashInfer's attention backend builds a decode wrapper of its own for every FULL decode graph size
# (v1/attention/backends/flashinfer.py::FlashInferMetadataBuilder._get_decode_wrapper with use_cudagraph:
# _decode_wrappers_cudagraph[batch_size], read in the 0.12.0, 0.19.0 and 0.24.0 wheels), and each
# flashinfer BatchDecodeWithPagedKVCacheWrapper allocates an 8 MiB int workspace on the device in its
# __init__ (flashinfer/decode.py). capture_model's warm-up of each size builds it, inside the capture's
# measurement. Which runs use it: attn_backend.py. The float workspace the wrappers share
# (VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE) is allocated before capture_model by kernel_warmup.py's
# FlashInfer attention warm-up, which runs where every attention group is FlashInfer; a hybrid's Mamba /
# linear-attention groups run other backends, so there the first FULL warm-up allocates it inside the
# measurement, which from 0.18 starts on an emptied cache (capture.py). envs.py default 394 MiB (0.12 - 0.24).
FLASHINFER_DECODE_WORKSPACE = 8 * MiB
FLASHINFER_FLOAT_WORKSPACE = 394 * MiB
# Where no piecewise graph is captured (V0 always; V1's FULL / FULL_DECODE_ONLY modes) the shared pool is
# the full graphs' own: V0's worker/model_runner.py::CUDAGraphRunner.capture captures the whole model into
# the pool handed from graph to graph (graph_memory_pool) and, from 0.6.4 (the first release that logs
# "took X GiB"), keeps only weak references to the outputs (weak_ref_tensor), so the pool holds one
# forward's working set at the largest batch, captured first (read in the 0.6.4.post1 and 0.6.5 wheels;
# 0.6.3 keeps the outputs and logs no figure). GRAPH_FULL_PER_LAYER is fitted on FULL decode graphs
# captured after the piecewise ones (FULL_AND_PIECEWISE), whose larger pool they reuse: it holds no pool.
# Priced as the caching allocator reserves that forward's tensors (graph_pool.forward_pool).
# FlashAttention 3 (Hopper) with full CUDA graphs pins an upper bound of splits so that its
# split-KV buffers [num_splits, heads, tokens, head_dim] (fp32, plus the fp32 LSE) are allocated
# in the graph pool (v1/attention/backends/flash_attn.py::FlashAttentionMetadataBuilder,
# envs.VLLM_FLASH_ATTN_MAX_NUM_SPLITS_FOR_CUDA_GRAPH = 32).
FA3_MAX_SPLITS = 32
# capture_model runs its warm-ups and captures on a stream of its own (distributed/parallel_state.py::
# graph_capture: torch.cuda.Stream()); cuBLAS gets a workspace per (handle, stream) from the caching
# allocator on first use (PyTorch aten/src/ATen/cuda/CublasHandlePool.cpp: getCurrentCUDABlasHandle,
# parseChosenWorkspaceSize), kept for the process, so the capture figure includes one. Its default size
# is 4096 x 8 KiB on sm90 and 4096 x 2 + 16 x 8 KiB elsewhere; the latter is inside the per-layer terms
# (calibrated off Hopper), so Hopper adds the difference. Torch >= 2.3 (vLLM >= 0.5); cc 9.0 only (the
# check is major == 9 and minor == 0).
CUBLAS_WORKSPACE = 4096 * 2 * 1024 + 16 * 8 * 1024
CUBLAS_WORKSPACE_SM90 = 4096 * 8 * 1024


def graph_sizes(model: ModelSpec, r: Resolved, e: Era, cfg: EngineConfig,
                gpu: GpuSpec | None = None) -> tuple[list[int], list[int]]:
    """(piecewise sizes, full sizes) vLLM captures in the mode cudagraph_mode resolves. V0
    (worker/model_runner.py::capture_model) captures one full decode graph per size, and one set per
    pipeline stage (`for virtual_engine in range(pipeline_parallel_size)`: every rank captures a set for
    each virtual engine). V1 (v1/worker/gpu_model_runner.py::GPUModelRunner.capture_model): the mixed
    mode's graphs for every size, then with FULL_DECODE_ONLY / FULL_AND_PIECEWISE full graphs for the
    uniform decode sizes up to max_num_seqs x (1 + speculative tokens) (uniform_decode_query_len, read from 0.10.1)."""
    s = cfg.settings
    mode = cudagraph_mode(model, r, e, s)
    if mode == "NONE":
        return [], []
    explicit = s.get("cudagraph_capture_sizes") or s.get("cuda_graph_sizes")
    q = 1 + speculative(s)[1]
    if q > 1 and spec_decode_without_full_graphs(model, r, e, mode, cfg, gpu):
        mode = "PIECEWISE" if mode == "FULL_AND_PIECEWISE" else "NONE"
        if mode == "NONE":
            return [], []
    listed = [int(x) for x in explicit] if explicit and len(explicit) > 1 else None
    top = s.get("max_cudagraph_capture_size") or (int(explicit[0]) if explicit and len(explicit) == 1 else None)
    listed, top = model_capture_override(model, r, listed, top)
    sizes = capture_sizes(e, r.max_num_seqs, r.max_num_batched_tokens, listed, top,
                          decode_query_len=q if r.version >= (0, 11, 0) else 1,
                          blackwell=gpu is not None and gpu.compute_capability // 10 == 10,
                          full_decode=mode in FULL_DECODE_MODES[1:] or (mode == "FULL" and r.version >= (0, 24, 0)))
    if not e.v1:
        return [], sizes * r.pp
    piecewise = sizes if mode in ("PIECEWISE", "FULL_AND_PIECEWISE") else []
    full = sizes if mode == "FULL" else []
    if mode in ("FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"):
        q = q if r.version >= (0, 10, 1) else 1
        full = [x for x in sizes if q <= x <= r.max_num_seqs * q]
    if lora_specialized(r, s):
        return piecewise * 2, full * 2
    return piecewise, full


# gpt-oss raises the largest capture size (model_executor/models/config.py::GptOssForCausalLMConfig.
# verify_and_update_config, "Overriding max cuda graph capture size to N for performance"): 0.10.1 -
# 0.10.2 replace a one-element cuda_graph_sizes below 1024 with [1, 2, 4] + range(8, 256, 8) +
# range(256, 1025, 16), 0.11.0 the same up to 992; from 0.11.1 max_cudagraph_capture_size = 1024 where
# neither it nor cudagraph_capture_sizes is set (read in the 0.10.1.1, 0.10.2, 0.11.0, 0.11.1, 0.11.2,
# 0.12.0, 0.29.0 wheels). max_num_seqs no longer bounds the sizes; max_num_batched_tokens still does.
GPT_OSS_CAPTURE = ((0, 10, 1), (0, 11, 0), (0, 11, 1))


def model_capture_override(model: ModelSpec, r: Resolved, listed: list[int] | None,
                           top: int | None) -> tuple[list[int] | None, int | None]:
    """(explicit sizes, largest size) once the model's own config hook has run (GPT_OSS_CAPTURE)."""
    first, to_992, to_max = GPT_OSS_CAPTURE
    if model.architecture != "GptOssForCausalLM" or r.version < first or listed is not None:
        return listed, top
    if r.version >= to_max:
        return listed, top or 1024
    ceiling = 992 if r.version >= to_992 else 1024
    if top is not None and top >= ceiling:
        return listed, top
    return [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, ceiling + 1, 16)), None


def lora_specialized(r: Resolved, settings: dict) -> bool:
    """From 0.12 a LoRA server captures every graph twice, with and without LoRA
    (config/compilation.py::CompilationConfig.cudagraph_specialize_lora, default True;
    v1/worker/gpu_model_runner.py::capture_model crosses the sizes with lora_cases [True, False])."""
    if not settings.get("enable_lora") or r.version < (0, 12, 0):
        return False
    cc = settings.get("compilation_config")
    return not (isinstance(cc, dict) and cc.get("cudagraph_specialize_lora") is False)

def drafter_layers(r: Resolved, settings: dict) -> int:
    """Decoder layers of an EAGLE / EAGLE-3 / MTP drafter whose piecewise graphs vLLM captures with
    the target's, one per piecewise size (from 0.12: v1/worker/gpu_model_runner.py::_dummy_run calls
    drafter.dummy_run(use_cudagraphs=...) while capturing the PIECEWISE sizes, and not for the LoRA
    half of a specialized capture; v1/spec_decode/eagle.py::EagleProposer.dummy_run captures one
    forward per size). 0.11 runs the drafter's dummy forward without graphs. The drafter's own
    config is not read: one layer, as EAGLE heads and the MTP modules of DeepSeek-V3 / Qwen3-Next /
    GLM-4.5 have (num_nextn_predict_layers 1)."""
    method, _ = speculative(settings)
    sc = settings.get("speculative_config")
    if method not in ("eagle", "eagle3", "mtp") or r.version < (0, 12, 0) or r.enforce_eager:
        return 0
    return 0 if isinstance(sc, dict) and sc.get("enforce_eager") else 1

def model_runner_v2(model: ModelSpec, r: Resolved, env: dict[str, str] | None = None,
                    settings: dict | None = None) -> bool:
    """Whether vLLM runs this model with Model Runner V2 (see V2_RUNNER_ARCHS): the
    VLLM_USE_V2_MODEL_RUNNER variable decides where set (0.12 on); otherwise the release's default."""
    forced = (env or {}).get("VLLM_USE_V2_MODEL_RUNNER")
    if forced is not None and r.version >= (0, 12, 0):
        return forced.strip().lower() in ("1", "true", "yes")
    s = settings or {}
    if r.version < (0, 22, 0) or s.get("runner") == "pooling" or s.get("convert") in ("embed", "classify", "reward"):
        return False
    if r.version >= (0, 29, 0):
        return True
    listed = model.architecture in next(archs for until, archs in V2_RUNNER_ARCHS if r.version < until)
    if r.version < (0, 24, 0):
        return listed and not model.is_moe and r.scheme is None
    if r.version < (0, 25, 0):
        return listed
    kinds = set(model.kinds())
    if "none" in kinds and len(kinds) == 1:  # attention-free
        return False
    # hybrid (ModelConfig.is_hybrid): recurrent Mamba / short-conv layers or linear attention (GDN)
    if kinds & {"mamba", "linear"} and (r.version < (0, 27, 0) or not listed):
        return False
    return listed or not model.is_moe

def moe_layer_share(model: ModelSpec) -> float:
    """Share of the decoder layers that are fused-MoE layers: from first_k_dense_replace on, every
    moe_layer_step-th."""
    n = model.num_hidden_layers
    if not model.is_moe or n <= 0:
        return 0.0
    step = max(1, model.moe_layer_step)
    return sum(1 for i in range(model.first_k_dense_replace, n) if (i + 1) % step == 0) / n


def moe_extra_kernels(model: ModelSpec) -> float:
    """Kernels a layer of this model adds to every graph over a dense layer, averaged over its layers
    (MOE_EXTRA_KERNELS on each fused-MoE layer)."""
    extra = MOE_EXTRA_KERNELS + (SHARED_EXPERT_KERNELS if model.num_shared_experts else 0)
    return extra * moe_layer_share(model)


def split_layers_per_layer(model: ModelSpec, piecewise: int, full: int) -> int:
    """Graph bytes per layer, averaged over the layers, for a model with layers that have no mixer (see
    NO_MIXER_LAYER_ARCHS): a piece graph only for each mixer layer; every layer's kernel nodes in every
    graph, a FULL graph also holding each mixer's own two (attention, or mamba's conv and state update)."""
    kinds = model.kinds()
    mixers = sum(1 for k in kinds if k != "none")
    bare = len(kinds) - mixers
    if model.architecture == "NemotronHForCausalLM":
        mixer_nodes = NEMOTRON_H_MIXER_KERNELS
        bare_nodes = (1 + 3 + MOE_EXTRA_KERNELS + (SHARED_EXPERT_KERNELS if model.num_shared_experts else 0)
                      if model.is_moe else MLP_KERNELS)
    else:  # Nemotron-NAS: a dense decoder layer, or its MLP alone
        mixer_nodes, bare_nodes = DENSE_LAYER_KERNELS, MLP_KERNELS
    nodes = mixers * mixer_nodes + bare * bare_nodes
    pieces = piecewise * (mixers * GRAPH_PIECE + nodes * GRAPH_NODE)
    fulls = full * (nodes + 2 * mixers) * GRAPH_NODE
    return int((pieces + fulls) / len(kinds))


def graph_memory(model: ModelSpec, r: Resolved, e: Era, layers: int, cfg: EngineConfig,
                 gpu: GpuSpec | None = None, last_stage: bool = True) -> tuple[int, int]:
    """(number of captured graphs, estimated pool bytes). vLLM captures, not computes, this
    (gpu_model_runner.py::capture_model logs "Graph capturing finished in N secs, took X GiB");
    the per-graph terms are calibrated; the FA3 split buffers, the AWQ dequantized weights, the Marlin
    scratch and a full-graph-only pool follow the kernels' shapes. What the logged figure is (read in the 0.11.0, 0.20.0 and 0.33.0
    wheels): the drop in free device memory (mem_get_info) from before the first capture to after
    the last one, taken before capture_model's closing empty_cache, so it holds the driver's memory
    for every instantiated graph, the shared graph pool (compilation/cuda_graph.py::CUDAGraphWrapper
    captures into one global pool and keeps only weak references to outputs, so the pool holds about
    one piece's intermediates at the largest size) and the blocks the eager warm-up run of the largest
    size left cached (_warmup_and_capture); 0.10.2 - 0.17 on compute capability 9.0+ may log it lower
    (capture.py). From 0.20 the KV budget subtracts instead the profiling
    estimate (profile_cudagraph_memory: per mode, the first capture's bytes + (n - 1) x max(second
    capture, 1 MiB), FULL and PIECEWISE sharing one first-capture term), which servefit takes to be
    the same figure."""
    piecewise, full = graph_sizes(model, r, e, cfg, gpu)
    if not piecewise and not full:
        return 0, 0
    graphs = len(piecewise) + len(full)
    if model.architecture in NO_MIXER_LAYER_ARCHS and "none" in model.kinds():
        per_layer = split_layers_per_layer(model, len(piecewise), len(full))
    else:
        per_layer = len(piecewise) * GRAPH_PIECEWISE_PER_LAYER + len(full) * GRAPH_FULL_PER_LAYER
        per_layer += int((len(piecewise) + len(full)) * moe_extra_kernels(model) * GRAPH_NODE)
    per_layer += int((len(piecewise) + len(full)) * act_quant_kernels(r, e, model, moe_layer_share(model), gpu) * GRAPH_NODE)
    if r.version >= V2_PROFILES_GRAPHS_FROM and model_runner_v2(model, r, cfg.env, cfg.settings):
        per_layer = int(per_layer * GRAPH_V2_RUNNER_FACTOR)
    drafter = drafter_layers(r, cfg.settings) if last_stage else 0
    drafter_graphs = len(set(piecewise)) if drafter else 0
    total = per_layer * layers + drafter_graphs * drafter * GRAPH_PIECEWISE_PER_LAYER
    if full and flashinfer_decode_wrappers(model, r, e, gpu, cfg.settings, cfg.env):
        total += len(set(full)) * FLASHINFER_DECODE_WORKSPACE
        if r.version >= (0, 18, 0) and set(model.kinds()) & {"mamba", "linear"}:
            size = str(cfg.env.get("VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE") or "").strip()
            total += int(size) if size.isdigit() else FLASHINFER_FLOAT_WORKSPACE
    if r.tp > 1:  # graphs of sizes FlashInfer's fused all-reduce serves pay no per-call cost (graph_mode.py)
        costs = {"custom": CUSTOM_AR_GRAPH_COLLECTIVE, "symm": SYMM_MEM_GRAPH_COLLECTIVE,
                 "nccl": nccl_graph_collective(r, cfg.env)}
        row = int(model.hidden_size * dtype_bytes(r.dtype))
        fused = fused_allreduce_tokens(model, r, cfg, gpu)

        def call(x: int) -> int:
            return costs[allreduce_kind(r, gpu, cfg.settings, cfg.env, x * row)] if x > fused else 0
        total += sum(call(x) for x in piecewise + full) * (2 * layers + 1)
        total += sum(call(x) for x in set(piecewise)) * 2 * drafter if drafter else 0
    if full and e.v1 and gpu is not None and gpu.compute_capability == 90 and not latent_cache(model):
        heads = max(1, model.num_attention_heads // r.tp)
        total += FA3_MAX_SPLITS * heads * max(full) * (model.head_dim + 1) * 4
    total += awq_dequant_pool(model, r, piecewise + full, gpu, cfg.settings, inductor_compiled(e, cfg.settings))
    if full and not piecewise:  # the full graphs' own pool (see above)
        total += forward_pool(model, r, full)
    total += marlin_reduce_scratch(model, r, max(piecewise + full), gpu, cfg.settings)
    if gpu is not None and gpu.compute_capability == 90 and r.version >= (0, 5, 0):
        total += CUBLAS_WORKSPACE_SM90 - CUBLAS_WORKSPACE
    return graphs, int(total)

def graphs_budgeted(model: ModelSpec, r: Resolved, e: Era, cfg: EngineConfig) -> bool:
    """Whether the KV budget subtracts a CUDA-graph estimate: from 0.18 where the variable leaves it on
    (Era.cudagraph_subtracted), except Model Runner V2 before 0.29, whose estimate is 0 (graph_estimate)."""
    return e.cudagraph_subtracted and not (r.version < V2_PROFILES_GRAPHS_FROM
                                           and model_runner_v2(model, r, cfg.env, cfg.settings))


def graph_estimate(model: ModelSpec, r: Resolved, e: Era, cfg: EngineConfig, pool: int,
                   gpu: GpuSpec | None = None) -> int:
    """What the KV budget subtracts for CUDA graphs from 0.20 (gpu_worker.py::
    Worker.determine_available_memory, cudagraph_memory_estimate): the pool itself for the V1 runner,
    the pool plus the FULL graphs' extrapolation baseline for Model Runner V2 (GRAPH_V2_ESTIMATE_EXTRA).
    Model Runner V2 before 0.29 estimates nothing: v1/worker/gpu/model_runner.py::GPUModelRunner.
    profile_cudagraph_memory returns 0 ("TBD whether we keep this API", read in the 0.18 - 0.28 wheels),
    so no "Estimated CUDA graph memory" line and nothing subtracted; 0.29 calls _profile_cudagraph_memory."""
    if not pool or not model_runner_v2(model, r, cfg.env, cfg.settings):
        return pool
    if r.version < V2_PROFILES_GRAPHS_FROM:
        return 0
    return pool + (GRAPH_V2_ESTIMATE_EXTRA if graph_sizes(model, r, e, cfg, gpu)[1] else 0)
