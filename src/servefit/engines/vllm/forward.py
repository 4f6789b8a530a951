"""The forward pass of vLLM's profiling run by model kind, and what closes it: the MLP / MoE
intermediates at max_num_batched_tokens, and whether the dummy sampler or the pooler runs
(profile.py::activation_peak puts them together)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.engines.vllm.non_torch import CONSUMED_FROM
from servefit.memory.dtypes import dtype_bytes
from servefit.memory.kv import kv_heads_per_rank, latent_cache
from servefit.models.family_traits import is_gated_mlp
from servefit.models.spec import ModelSpec

if TYPE_CHECKING:
    from servefit.engines.vllm.plan import Resolved

# Nemotron-H's MLP and experts square a ReLU, no gate (nemotron_h.py: NemotronHMLP, relu2_no_mul experts);
# the catalog's traits table leaves nemotron_h gated for its parameter count (models/arch_hybrid.py counts it)
UNGATED_HYBRIDS = ("nemotron_h",)
# model_executor/models/registry.py::_EMBEDDING_MODELS in the 0.11.0 wheel, the names ending in a bare "Model"
EMBEDDING_ARCHS = ("BertModel", "Gemma2Model", "Gemma3TextModel", "GteModel", "GteNewModel", "GritLM", "LlamaModel",
                   "MistralModel", "ModernBertModel", "NomicBertModel", "Qwen2Model", "RobertaModel", "XLMRobertaModel")
# registry.py _LATE_INTERACTION_MODELS entries with is_pooling_model (0.33.0 wheel): the runner is pooling
LATE_INTERACTION_ARCHS = ("JinaForRanking",)
MOE_CACHE13_FROM = (0, 8, 0)  # w1 / w2 outputs share one buffer: seen in 0.8.5, not in 0.7.3 (0.8.0 - 0.8.4 not read)
# The fused-MoE kernels work through the tokens in chunks (envs.py::VLLM_FUSED_MOE_CHUNK_SIZE): the
# intermediate caches are sized for one chunk. 32768 in the 0.6.3, 0.6.6, 0.7.3, 0.8.5, 0.10.1.1 and 0.11.0
# wheels, 16384 in 0.12.0 and 0.13.0; 0.20.0 has neither the variable nor chunking (taken from 0.20 on;
# 0.14 - 0.19 not read).
FUSED_MOE_CHUNK_SIZE = (((0, 12, 0), 32768), ((0, 20, 0), 16384), ((99, 0, 0), 0))
# AWQ and GPTQ experts call fused_marlin_moe.py::fused_marlin_moe directly (awq_marlin.py AWQMoEMethod.apply,
# gptq_marlin.py GPTQMarlinMoEMethod.apply), which sizes its intermediate caches for every token of the forward:
# no VLLM_FUSED_MOE_CHUNK_SIZE loop. Read in the 0.8.5, 0.10.2, 0.11.0, 0.11.1 and 0.12.0 - 0.19.1 wheels (AWQ also
# 0.20.0 and 0.21.0); GPTQ from 0.20.0 and AWQ from 0.22.0 run through the modular kernels (not read here).
MARLIN_MOE_UNCHUNKED = {"awq": ((0, 8, 5), (0, 22, 0)), "gptq": ((0, 8, 5), (0, 20, 0))}


def marlin_moe_unchunked(r: Resolved) -> bool:
    """Whether the routed experts run through the unchunked direct Marlin call (MARLIN_MOE_UNCHUNKED). AWQ
    experts take it on any GPU (awq.py get_quant_method hands a FusedMoE to AWQMoEMethod too, in the 0.11.0
    wheel); GPTQ experts only where gptq_marlin runs (checks.marlin_min_capability): below it gptq.py hands
    them to moe_wna16, whose fused_experts works in chunks."""
    name = r.scheme.name.lower().removesuffix("_marlin") if r.scheme is not None else ""
    since, until = MARLIN_MOE_UNCHUNKED.get(name, ((99, 0, 0), (0, 0, 0)))
    return (name == "awq" or r.marlin_cc) and since <= r.version < until


def mlp_bytes(model: ModelSpec, r: Resolved, t: int, db: float) -> int:
    """The MLP's intermediates in a forward of t tokens on one rank. Dense: the gate_up output and
    the SiluAndMul output, 3 x intermediate / TP per token; an ungated MLP (fc1, activation, fc2: GPT-2,
    OPT, Falcon... and Nemotron-H's relu2, nemotron_h.py::NemotronHMLP) holds 2. MoE (model_executor/layers/fused_moe/):
    fused_moe.py::fused_experts_impl (read in the 0.8.5, 0.10.1.1, 0.11.0 and 0.13.0 wheels) holds,
    per chunk of M = min(tokens, VLLM_FUSED_MOE_CHUNK_SIZE), cache13 of M x top_k x max(N, K) (the w1
    output, N = 2 x intermediate per rank, then the w2 output at the full hidden width K) and cache2 of
    M x top_k x N / 2; before cache13 (0.6.3, 0.6.6, 0.7.3 wheels) the w1 and w2 outputs had buffers of
    their own, M x top_k x (N + N / 2 + K). From 0.14 an unquantized MoE runs the modular TritonExperts
    instead (read in the 0.14.0, 0.15.0, 0.16.0, 0.17.0, 0.20.0 and 0.26.0 wheels), which hold
    M x top_k x (max(N / 2, K) + max(N, K)) in a workspace kept from one forward to the next
    (moe_workspace_bytes). Two calibration logs of Gemma 4 26B-A4B (0.19 and 0.20) fit it: their KV
    memory was 0.17 and 0.69 GiB above the logged one, the workspace at 2048 and 8192 tokens. The 0.26.1
    dev build's Qwen3-Coder-30B-A3B log at 2048 tokens gives 0.23 GiB of activation with its 0.15 GiB
    CUDA-graph estimate in it, less than either sizing leaves room for (not explained). Besides: the router logits, and a shared
    expert's output (t x hidden) alive beside them (its own gate_up / act come before). The experts
    are sharded over TP x DP ranks (fused_moe/config.py::FusedMoEParallelConfig.make flattens TP
    across DP), or whole per rank with --enable-expert-parallel; with data parallelism every rank's
    tokens are gathered into the MoE layer (layer.py::FusedMoE.forward_impl, naive dispatch /
    combine), so it runs DP x t tokens and holds the gathered input and output. Leading dense layers
    (first_k_dense_replace) and interleaved ones (moe_layer_step) run a dense MLP of intermediate_size:
    the larger of the two is the peak."""
    h, tp, dp = model.hidden_size, max(r.tp, 1), max(r.dp, 1)
    gated = is_gated_mlp(model) and model.model_type not in UNGATED_HYBRIDS
    dense = (3 if gated else 2) * (model.intermediate_size // tp) * t * db
    if not model.is_moe:
        return int(dense)
    inter = (model.moe_intermediate_size or model.intermediate_size) // (1 if r.expert_parallel else tp * dp)
    tokens = t * dp
    chunk = next(size for until, size in FUSED_MOE_CHUNK_SIZE if r.version < until)
    m = min(tokens, chunk) if chunk and not marlin_moe_unchunked(r) else tokens
    n = (2 if gated else 1) * inter  # the w1 output (relu2 experts: activation without a gate)
    if r.scheme is None and r.version >= MOE_WORKSPACE_FROM:  # the modular kernel's workspace (moe_workspace_bytes)
        per_slot = max(n // 2 if gated else n, h) + max(n, h)
    else:
        per_slot = max(n, h) + inter if r.version >= MOE_CACHE13_FROM else n + inter + h
    routed = m * model.num_experts_per_tok * per_slot * db + tokens * model.num_experts * 2 * db
    if dp > 1:
        routed += 2 * tokens * h * db
    shared = model.num_shared_experts * (model.moe_intermediate_size or model.intermediate_size) // tp
    if shared:
        routed = max(routed + t * h * db, (3 if gated else 2) * shared * t * db)
    mixed = model.first_k_dense_replace > 0 or model.moe_layer_step > 1
    return int(max(routed, dense) if mixed else routed)


def attention_stage_bytes(model: ModelSpec, r: Resolved, t: int, db: float, hidden: int = 4) -> int:
    """The attention half of a decoder layer in a forward of t tokens on one rank: the `hidden` hidden-width
    tensors counted for the MLP half (profile.py EAGER_HIDDEN / COMPILED_HIDDEN: the residual, the layer's
    input, o_proj's output...), the QKV
    projection's output (q + 2 kv per rank) and the attention output (q per rank) before o_proj
    (model_executor/models/llama.py::LlamaAttention.forward, qwen3_moe.py::Qwen3MoeAttention.forward).
    Below the MLP half for a dense model (3 x intermediate > 2 q + 2 kv); above it for a MoE whose
    routed intermediates live in the persistent workspace (moe_workspace_bytes), which stays allocated
    through the next layer's attention. 0 for MLA (other projections, not counted here)."""
    if latent_cache(model) or not model.num_attention_heads:
        return 0
    tp = max(r.tp, 1)
    q = model.num_attention_heads // tp * model.head_dim
    kv = kv_heads_per_rank(model, tp) * model.head_dim
    return int(t * (hidden * model.hidden_size + 2 * q + 2 * kv) * db)


# From 0.14 an unquantized MoE runs through the modular kernel (unquantized_fused_moe_method.py:
# FusedMoEModularKernel(MoEPrepareAndFinalizeNoEP(), TritonExperts(...)) in the 0.14.0 wheel, via
# oracle/unquantized.py in 0.15 - 0.20; 0.13.0 still calls fused_experts), whose intermediates live in
# v1/worker/workspace.py::WorkspaceManager: one buffer that only grows and is kept from one forward to
# the next, so the largest dummy forward's workspace is still held while the dummy sampler runs.
MOE_WORKSPACE_FROM = (0, 14, 0)


def moe_workspace_bytes(model: ModelSpec, r: Resolved, t: int, db: float) -> int:
    """The modular Triton MoE workspace after a forward of t tokens, held through the sampler run
    (MOE_WORKSPACE_FROM): modular_kernel.py::_allocate_buffers takes, through get_simultaneous, one
    buffer of workspace13 (or the output, whichever is larger) and one of workspace2, as
    fused_moe.py::TritonExperts.workspace_shapes sizes them for one chunk of M tokens:
    M x top_k x max(N / 2, K) and M x top_k x max(N, K), N = 2 x intermediate per rank (gate and up),
    K the hidden size, in the model's dtype. 0 before 0.14, for a dense model, and for quantized
    experts (other expert kernels, not read here)."""
    if not model.is_moe or r.scheme is not None or r.version < MOE_WORKSPACE_FROM:
        return 0
    h = model.hidden_size
    inter = (model.moe_intermediate_size or model.intermediate_size) // (1 if r.expert_parallel else max(r.tp, 1) * max(r.dp, 1))
    gated = is_gated_mlp(model) and model.model_type not in UNGATED_HYBRIDS
    n = (2 if gated else 1) * inter
    tokens = t * max(r.dp, 1)
    chunk = next(size for until, size in FUSED_MOE_CHUNK_SIZE if r.version < until)
    m = min(tokens, chunk) if chunk else tokens
    return int(m * model.num_experts_per_tok * (max(n // 2 if gated else n, h) + max(n, h)) * db)


def held_after_profile(model: ModelSpec, r: Resolved) -> int:
    """Bytes the profiling run allocates and keeps: the MoE workspace (moe_workspace_bytes at
    max_num_batched_tokens, WorkspaceManager never frees it). From 0.26.1 vLLM logs as peak activation
    only the transient part, utils/mem_utils.py::memory_profiling's transient_peak_headroom = torch peak
    - torch allocated after the run (read in the 0.27.1 and 0.31.0 wheels; 0.26.0 logs the whole
    torch_peak_increase), and counts what stays in its consumed memory (total_consumed, from
    mem_get_info): the budget is the same either way, only the logged split differs."""
    if r.version < CONSUMED_FROM:
        return 0
    return moe_workspace_bytes(model, r, r.max_num_batched_tokens, dtype_bytes(r.dtype))


def pooling_runner(model: ModelSpec, settings: dict, v1: bool) -> bool:
    """Whether vLLM runs the model as a pooling model, whose profile ends with the dummy pooler
    instead of the dummy sampler (v1/worker/gpu_model_runner.py::profile_run: _dummy_pooler_run; V0's
    pooling model runner samples nothing): --runner pooling / --convert embed|classify|reward, the
    older --task embed|embedding|classify|score|reward, or an architecture whose suffix vLLM maps to
    pooling (config/model.py::_SUFFIX_TO_DEFAULTS in 0.11.0: *ForSequenceClassification,
    *EmbeddingModel, *RewardModel, *ForRewardModeling, *ClassificationModel, *ForTextEncoding) or
    that the registry lists as an embedding model under a bare *Model name (EMBEDDING_ARCHS; the
    registry wins over the suffix, so ChatGLMModel or Qwen2_5OmniModel stay generative)."""
    if settings.get("runner") == "pooling" or settings.get("convert") in ("embed", "classify", "reward"):
        return True
    if settings.get("runner") == "generate" or settings.get("task") == "generate":
        return False
    if settings.get("task") in ("embed", "embedding", "classify", "score", "reward"):
        return True
    arch = model.architecture or ""
    pooling = ("ForSequenceClassification", "EmbeddingModel", "RewardModel", "ForRewardModeling",
               "ClassificationModel", "ForTextEncoding")
    return arch.endswith(pooling) or arch in EMBEDDING_ARCHS or arch in LATE_INTERACTION_ARCHS
