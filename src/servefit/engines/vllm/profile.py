"""What vLLM's start-up profile charges besides weights and KV cache: the activation peak of the
dummy run and memory outside torch's allocator, version by version (the CUDA-graph pool is in
graphs.py).

vLLM measures them at start (vllm/worker/worker.py::Worker.determine_num_available_blocks
in V0, vllm/v1/worker/gpu_worker.py::Worker.determine_available_memory in V1); servefit
replays what the engine runs and prices it with terms calibrated on the calibration half of
benchmarks/accuracy/cases/vllm.yaml (never on the held-out half).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from servefit.engines.vllm.era import Era
from servefit.engines.vllm.forward import (
    attention_stage_bytes,
    mlp_bytes,
    moe_workspace_bytes,
    pooling_runner,
)
from servefit.engines.vllm.graph_quant import awq_dequant_forward
from servefit.engines.vllm.non_torch import CONSUMED_FROM
from servefit.engines.vllm.weights import VOCAB_PAD
from servefit.hardware.spec import GpuSpec
from servefit.memory.dtypes import dtype_bytes
from servefit.models.spec import ModelSpec

if TYPE_CHECKING:
    from servefit.core import EngineConfig
    from servefit.engines.vllm.encoder import EncoderProfile
    from servefit.engines.vllm.plan import Resolved

GiB = 2**30
MiB = 2**20
# The dummy sampler run (V0 model_runner.py::ModelRunner._dummy_run with SamplingParams(top_p=0.99,
# top_k=vocab-1); V1 gpu_model_runner.py::_dummy_sampler_run): fp32 logits, the top-k/top-p sort
# (values + int64 indices), probs and logprobs over min(max_num_seqs, tokens) requests x the padded
# vocab. 39 bytes per logit up to 0.15 (V1 0.11 logs on H100; V0 0.6.5 / 0.7 logs give 41-43), ~15
# from 0.16 (0.17-0.28 logs).
# The 39 agrees with the native V1 path read in the 0.11.0 wheel and PyTorch's sort: _dummy_sampler_run
# keeps the model-dtype logits (2 B), Sampler.forward makes the fp32 copy (4), and
# topk_topp_sampler.py::apply_top_k_top_p sorts it; for 128 rows or more torch.sort takes
# aten/src/ATen/native/cuda/SortStable.cu::segmented_sort_pairs: values (4) and int64 indices (8) out, an
# int64 reverse-index input (8) and cub's segmented radix sort's alternate key / value buffers (4 + 8):
# 38 B at the sort, the peak; the llm-d 0.11 logs (1024 requests) show 38.4 - 38.9 B per logit (allocator
# rounding). Fewer than 128 rows take segmented_sort_pairs_by_full_sort (two int2 index/segment copies,
# ~50 B), not modelled.
SAMPLER_BYTES_PER_LOGIT = 39
SAMPLER_BYTES_PER_LOGIT_016 = 15
# Model Runner V2 up to 0.32 (v1/worker/gpu/model_runner.py::_dummy_sampler_run, the same in the 0.25.0
# to 0.32.0 wheels; the sampler read in 0.30.0 / 0.31.0) samples an empty dummy batch: SamplingStates
# starts every slot at temperature 0 (sample/states.py: UvaBackedTensor zeros), so it is greedy, no logits
# processor runs (from 0.28 Sampler.apply_sampling_params returns the logits as they are when no request
# needs processing) and the Gumbel kernel keeps only per-block partials. What the sampler holds is the
# logits in the model's dtype (compute_logits); before 0.28 apply_sampling_params first copies them to a
# new fp32 tensor whatever the batch asks (V2_RUNNER_FP32_COPY_UNTIL: read in the 0.22.0, 0.24.0 - 0.26.0
# and 0.27.0 wheels; 0.28.0 and 0.29.0 return early). 0.33 adds a second pass with SamplingParams.for_sampler_warmup (the fp32 logits
# pipeline with penalties, top-k/top-p and logprobs): V2_WARMUP_FP32_COPY below (no 0.33 log).
# Calibration: the 0.30.0 T4 log's torch peak (0.46 logged less the 0.34 graph estimate = 0.12 GiB)
# is the forward's 0.126; the 0.31.0 A100 40GB log's (0.79 - 0.35 = 0.44) is that of a first start
# that compiled the model (see COLD_COMPILE_GIB).
V2_RUNNER_SAMPLER_UNTIL = (0, 33, 0)
V2_RUNNER_FP32_COPY_UNTIL = (0, 28, 0)
# 0.33's warm-up pass, read in the 0.33.0 wheel: the model-dtype logits stay; Sampler.apply_sampling_params
# copies them to fp32 (4 B) and applies penalties, bias, bad words, temperature and min-p in place; then
# Sampler._sample_random either calls flashinfer_sample (v1/sample/ops/topk_topp_sampler.py: with per-request
# top-k and top-p tensors flashinfer.sampling.top_k_top_p_sampling_from_logits, which in the
# flashinfer-python 0.7.2.post1 the wheel pins takes no fast path for a tensor top_k and allocates the
# top-k-masked logits and their softmax, fp32: 8 B) or, where FlashInfer's sampler is not selected
# (flashinfer_sampler_selected), masks in place with the Triton kernel, whose per-program buffer it keeps
# (triton_topk_buffer: `kept`), and draws with the Gumbel kernel's per-block partials. The logprobs that
# follow (sample/logprob.py::compute_topk_scores, 5 per request) take a top-k of the logits: small.
V2_WARMUP_FP32_COPY = 4
V2_WARMUP_FLASHINFER = 8
# FlashInfer's top-k/top-p sampler (v1/sample/ops/topk_topp_sampler.py::flashinfer_sample ->
# flashinfer.sampling.top_k_top_p_sampling_from_logits, read in the 0.10.0 and 0.12.0 wheels) sorts
# nothing: it holds the model-dtype logits, their fp32 copy, the top-k-masked logits and the
# probabilities, 2 + 4 + 4 + 4 bytes per logit, where the native path's sort (values and int64
# indices, plus the sort's scratch) gives the 39 above. Which one profiles, per release
# (TopKTopPSampler.__init__): 0.9.2 - 0.11.0 use FlashInfer whenever FlashInfer >= 0.2.3 is installed
# (an optional extra of the pip package up to 0.11.0, a dependency from 0.11.1) unless
# VLLM_USE_FLASHINFER_SAMPLER=0; from 0.11.1 to 0.20 only with VLLM_USE_FLASHINFER_SAMPLER=1 (read in
# the 0.11.1, 0.12.0, 0.13.0, 0.19.1 and 0.20.0 wheels: "Users must opt in explicitly"). From
# 0.16 the calibrated 15 stands for either. The dennislee22 0.10.1.1 calibration logs (Qwen2-7B, 256
# requests; "Using FlashInfer for top-p & top-k sampling." at topk_topp_sampler.py:50, the repository's
# README installs with `pip install vllm ... flashinfer-python`) keep 0.94 - 0.97 GiB more for the KV cache
# on one GPU at utilization 0.25 and 0.5 (1.27 - 1.30 with TP2) than 39 bytes leave: the 25 bytes per logit
# the sort costs are 256 x 152,064 x 25 = 0.91 GiB. The llm-d logs, run in the vllm/vllm-openai:v0.11.0 image,
# profile the native 39 (llama 8B, Qwen3 0.6B / 32B, gpt-oss: 38.4 - 38.9 bytes). Which one ran depends on
# the install, not on the command: a build whose install lines name FlashInfer (flashinfer_installed) plans
# FlashInfer's; otherwise, without the variable, the plan keeps 39 and says so.
FLASHINFER_SAMPLER_BYTES_PER_LOGIT = 14
FLASHINFER_SAMPLER_BY_DEFAULT = ((0, 9, 2), (0, 11, 1))  # when installed
# A V1 engine compiles the model (torch.compile, Inductor) in the first forward of its profile
# (v1/worker/gpu_worker.py::Worker.determine_available_memory runs model_runner.profile_run inside
# utils/mem_utils.py::memory_profiling). With an empty compile cache the compilation's temporaries
# (Inductor's kernel benchmarking: config/compilation.py sets combo_kernels and benchmark_combo_kernel)
# raise the torch peak that the budget keeps, so a first start sizes a smaller KV cache than a restart
# that loads the compiled graphs ("Directly load the compiled graph(s)" / "Directly load AOT
# compilation" in the log). vLLM issue #54122 and PR #54209 (open) describe it; a new compile-cache key
# (max-num-batched-tokens, max-model-len, ...) starts cold again. servefit predicts the warm start and
# says so. Calibration logs, Qwen2.5-1.5B fp16 at 2048 batched tokens: torch peak 0.12 GiB warm (0.30.0,
# T4) and 0.44 GiB cold (0.31.0, A100 40GB; "Compiling a graph for compile range (1, 2048)").
COLD_COMPILE_GIB = 0.44 - 0.12
# Hidden-width tensors alive at a decoder layer's peak in the profiling forward. V0 runs the model eagerly
# (worker/model_runner.py::ModelRunner.profile_run calls the nn.Module; no torch.compile). Read in the
# 0.6.4.post1 wheel, models/llama.py: LlamaModel.forward's loop keeps its reference to the layer's input
# while the layer runs; LlamaDecoderLayer.forward's fused add + RMSNorm (layernorm.py::RMSNorm.forward_cuda,
# ops.fused_add_rms_norm) works in place on that input and the residual, and the layer keeps its reference to
# the MLP's input while LlamaMLP.forward runs gate_up_proj and SiluAndMul (x is rebound after the activation,
# so gate_up's output is gone before down_proj). At SiluAndMul: the layer's input, the residual and the MLP's
# input (3 x hidden) beside gate_up's output and the activation's (3 x intermediate); in the attention half
# the layer's input, the residual and o_proj's output beside qkv and the attention output. vLLM issue #10517's V0 logs of Llama-3.1-8B on
# an RTX 3090 (peak_torch_memory 17.06 GiB at 20,000 batched tokens, 17.98 at 29,000; weights 14.99 GiB) rise
# by 109,760 bytes a token, 3 x 4096 x 2 + 3 x 14336 x 2 = 110,592 (four hidden-width tensors would be
# 118,784), and both peaks are that times the tokens (2.06 and 2.99 GiB). V1 compiles the layers between the
# attention ops with Inductor, which plans those buffers itself: four, as calibrated on V1 logs. The one V1 pair
# that isolates the slope (0.29.0, Qwen2.5-7B on an RTX 5090, warm cache, 2048 and 8192 batched tokens: 0.64 and
# 1.42 GiB logged with the same 0.38 GiB graph estimate) rises about 136,300 bytes a token, nearer three
# (135,168) than four (142,336); three for V1 moves 33 calibration figures, most of them away from their logs,
# as the V1 terms beside it were fitted with four, so V1 keeps four until those are re-derived. Without
# compilation (compiles) V1 runs the same eager code as V0: three.
EAGER_HIDDEN = 3
COMPILED_HIDDEN = 4


# The dummy sampler's top-k/top-p goes through vLLM's Triton kernel where FlashInfer's sampler is not
# selected (v1/sample/ops/topk_topp_sampler.py: TopKTopPSampler.__init__ takes forward_cuda when
# flashinfer_sampler_supported(), i.e. VLLM_USE_FLASHINFER_SAMPLER unset or 1 and
# FlashInferBackend.supports_compute_capability, 8.0 - 12.1 in the 0.27.0, 0.30.0 and 0.33.0 wheels;
# otherwise forward_native -> apply_top_k_top_p, which takes the Triton kernel for 8 requests or more in
# 0.27.0 and for any batch in 0.30.0 and 0.33.0; 0.28 / 0.29 not read, planned as 0.27). From 0.31
# flashinfer_sampler_supported also refuses a card of 16 SMs or fewer (FLASHINFER_SAMPLER_MAX_SMS: "top-k
# masking requires more than 16 SMs"; not in the 0.30.0 wheel). Model Runner V2 samples its dummy batch
# greedily before 0.33; 0.33's warm-up pass (SamplingParams.for_sampler_warmup: temperature 0.9, top-k 50,
# top-p 0.9, no seed, raw logprobs; v1/worker/gpu/model_runner.py::_dummy_sampler_run) is eligible for
# the fused sampler, and v1/worker/gpu/sample/sampler.py::Sampler (use_flashinfer =
# flashinfer_sampler_supported(), read in the 0.27.0 - 0.33.0 wheels; _sample_random in 0.33.0) takes
# FlashInfer's on the same cards as the V1 runner, the Triton kernel elsewhere.
# v1/sample/ops/topk_topp_triton.py::apply_top_k_top_p_triton allocates a
# per-program buffer of min(next_power_of_2(min(SMs, requests)), SMs) rows x vocab in fp32 and keeps it
# in _TRITON_BUFFER_CACHE after the run (the small-batch split pipeline's cache is about 1 MiB: left out).
FLASHINFER_SAMPLER_MIN_CC = 80
TRITON_TOPK_MIN_REQS = 8
TRITON_TOPK_ANY_BATCH_FROM = (0, 30, 0)
FLASHINFER_SAMPLER_MAX_SMS = 16
FLASHINFER_SAMPLER_SMS_FROM = (0, 31, 0)


def flashinfer_sampler_selected(r: Resolved, gpu: GpuSpec, env: dict[str, str] | None) -> bool:
    """Whether v1/sample/ops/topk_topp_sampler.py::flashinfer_sampler_supported picks FlashInfer's top-k /
    top-p sampler on this NVIDIA card (see FLASHINFER_SAMPLER_MIN_CC; the 0.11.1+ default)."""
    from servefit import data

    sms = data.load("gpu_sms.yaml")["sms"].get(gpu.key)
    flag = (env or {}).get("VLLM_USE_FLASHINFER_SAMPLER")
    try:  # envs.py reads it with bool(int(...)); a value int() refuses stops vLLM at start
        flashinfer_off = flag is not None and int(flag) == 0
    except ValueError:
        flashinfer_off = False
    few_sms = r.version >= FLASHINFER_SAMPLER_SMS_FROM and sms is not None and sms <= FLASHINFER_SAMPLER_MAX_SMS
    return not flashinfer_off and FLASHINFER_SAMPLER_MIN_CC <= gpu.compute_capability <= 121 and not few_sms


def triton_topk_buffer(model: ModelSpec, r: Resolved, gpu: GpuSpec | None, env: dict[str, str] | None,
                       v2_runner: bool, last_stage: bool) -> int:
    """Bytes of the Triton top-k/top-p buffer the dummy sampler keeps from 0.26.1, where vLLM counts it as
    consumed memory rather than peak activation (see FLASHINFER_SAMPLER_MIN_CC and forward.py
    held_after_profile); 0 where FlashInfer samples (the default on 8.0 - 12.1 cards, from 0.31 of more than 16
    SMs; V2 too from 0.33), on Model Runner V2 before 0.33, on a rank that does not sample, or off NVIDIA GPUs."""
    if r.version < CONSUMED_FROM or not last_stage or gpu is None or gpu.vendor != "nvidia":
        return 0  # before 0.26.1 the buffer only matters inside the torch peak, which the sampler figure prices
    from servefit import data

    if v2_runner and r.version < V2_RUNNER_SAMPLER_UNTIL:
        return 0
    if flashinfer_sampler_selected(r, gpu, env):
        return 0
    sms = data.load("gpu_sms.yaml")["sms"].get(gpu.key)
    reqs = min(r.max_num_seqs, r.max_num_batched_tokens)
    if not sms or reqs < 1 or (reqs < TRITON_TOPK_MIN_REQS and r.version < TRITON_TOPK_ANY_BATCH_FROM):
        return 0
    programs = min(sms, reqs)
    rows = min(1 << (programs - 1).bit_length(), sms)
    return rows * model.vocab_size * 4


# Model Runner V2's sampler keeps per-request penalty statistics on the GPU (v1/worker/gpu/sample/
# penalties.py::PenaltiesState.__init__: output_bin_counts, max_num_reqs x vocab int32, and
# prompt_bin_mask, max_num_reqs x cdiv(vocab, 32) int32; read in the 0.22.0, 0.24.0, 0.27.0, 0.30.0 and
# 0.33.0 wheels). v1/worker/gpu/model_runner.py::load_model builds the Sampler after the weights'
# DeviceMemoryProfiler has closed, so they are not weights; from 0.26.1 total_consumed counts them
# (utils/mem_utils.py::memory_profiling), before it nothing does (torch memory from before the profile).
def v2_sampler_state_bytes(model: ModelSpec, r: Resolved, v2_runner: bool) -> int:
    """The V2 runner's penalty statistics the 0.26.1+ budget charges (see above); 0 otherwise."""
    if not v2_runner or r.version < CONSUMED_FROM:
        return 0
    return r.max_num_seqs * (model.vocab_size + -(-model.vocab_size // 32)) * 4


def compiles(r: Resolved, v1: bool, settings: dict) -> bool:
    """Whether vLLM compiles the model (torch.compile): V1 unless eager (--enforce-eager: no compilation
    unless a level is set, config/__init__.py::VllmConfig.__post_init__ in the 0.11.0 wheel, mode NONE in
    0.29.0's config/vllm.py) or compilation_config level / mode 0."""
    raw = settings.get("compilation_config")  # a dict, or the bare level (graph_mode.py reads it the same way)
    level = raw.get("mode", raw.get("level")) if isinstance(raw, dict) else raw
    return v1 and not r.enforce_eager and not (level is not None and str(level).upper() in ("0", "NONE", "NO_COMPILATION"))


def compile_cache_note(r: Resolved, e: Era, settings: dict) -> str | None:
    """The warm-cache assumption (see COLD_COMPILE_GIB), for engines that compile the model (compiles)."""
    if not compiles(r, e.v1, settings):
        return None
    return ("a warm torch.compile cache: a first start, or one after changing max-model-len or "
            "max-num-batched-tokens, counts the compilation's temporary memory in the activation peak and "
            f"sizes a smaller KV cache ({COLD_COMPILE_GIB:.2f} GiB more for a 1.5B model at 2,048 batched "
            "tokens, more for larger models)")


def encoder_profile(model: ModelSpec, r: Resolved, settings: dict, v1: bool) -> EncoderProfile | None:
    if not model.vision:  # a text model: no encoder in the profiling run (and no encoder module to load)
        return None
    from servefit.engines.vllm import encoder, mm_profiling

    if mm_profiling.skipped(settings, r.version, v1):  # --skip-mm-profiling: the LM's dummy forward alone
        return None
    return encoder.profile(model, settings, v1=v1, max_num_seqs=r.max_num_seqs, db=dtype_bytes(r.dtype), tp=r.tp,
                           encoder_dp=r.encoder_dp,
                           max_model_len=r.max_model_len if isinstance(r.max_model_len, int) else r.derived_len,
                           max_num_batched_tokens=r.max_num_batched_tokens, chunked_prefill=r.chunked_prefill,
                           version=r.version)


# The pip distributions that carry FlashInfer's Python package (flashinfer-python; `flashinfer` was its name
# on FlashInfer's own wheel index before 0.2.6) and the vllm extra that pulls it in (0.10.1 - 0.11 METADATA:
# Provides-Extra: flashinfer, Requires-Dist: flashinfer-python==0.2.11 / 0.3.0 / 0.3.1; extra == "flashinfer").
FLASHINFER_DISTRIBUTIONS = ("flashinfer-python", "flashinfer")
FLASHINFER_SAMPLER_MIN_RELEASE = (0, 2, 3)  # TopKTopPSampler.__init__: older FlashInfer falls back to PyTorch's


def flashinfer_installed(packages: list[str] | tuple[str, ...]) -> bool | None:
    """Whether the pip requirements a build installs (LaunchSite.packages, as written: `flashinfer-python`,
    `flashinfer-python==0.2.11`, `vllm[flashinfer]==0.10.1.1`) give vLLM a FlashInfer whose sampler it uses:
    True, False for a pinned release older than 0.2.3, None when none of them names FlashInfer."""
    found: bool | None = None
    for req in packages:
        name, _, pin = req.strip().lower().partition("==")
        base, _, extras = name.partition("[")
        base = base.strip().replace("_", "-")
        if base == "vllm" and "flashinfer" in extras:
            found = True
        elif base in FLASHINFER_DISTRIBUTIONS:
            release = tuple(int(p) for p in re.findall(r"\d+", pin)[:3]) if pin else ()
            found = not release or release >= FLASHINFER_SAMPLER_MIN_RELEASE
    return found


def flashinfer_sampler(r: Resolved, env: dict[str, str] | None, packages: list[str] | tuple[str, ...] = ()) -> bool | None:
    """Whether the dummy sampler run uses FlashInfer's sampler before 0.16 (see
    FLASHINFER_SAMPLER_BYTES_PER_LOGIT): decided by VLLM_USE_FLASHINFER_SAMPLER where set; in 0.9.2 - 0.11.0
    without it, by whether the build installs FlashInfer (`packages`: the pip requirements of its install
    lines, flashinfer_installed; v1/sample/ops/topk_topp_sampler.py::TopKTopPSampler.__init__ takes
    forward_cuda when `import flashinfer.sampling` succeeds, read in the 0.9.2, 0.10.0, 0.10.2 and 0.11.0
    wheels), None where the install is not known."""
    val = (env or {}).get("VLLM_USE_FLASHINFER_SAMPLER")
    lo, hi = FLASHINFER_SAMPLER_BY_DEFAULT
    if val is not None and r.version >= lo:
        try:
            return bool(int(val))
        except ValueError:  # vLLM's int() raises at start: nothing to plan differently
            return False
    return flashinfer_installed(packages) if lo <= r.version < hi else False


def activation_peak(model: ModelSpec, r: Resolved, last_stage: bool, v1: bool = True,
                    settings: dict | None = None, v2_runner: bool = False,
                    flashinfer: bool | None = False, aux_layers: int = 0, kept: int = 0) -> int:
    """Peak of profile_run on the rank that samples: a forward of max_num_batched_tokens (gated MLP
    or fused-MoE intermediates dominate) or the dummy sampler over min(max_num_seqs, tokens)
    requests, whichever is larger (gpu_model_runner.py::profile_run, _dummy_sampler_run); from 0.14
    an unquantized MoE's kernel workspace is still held while the sampler runs. V0 runs
    the same dummy sampling after the forward has freed its intermediates
    (model_runner.py::ModelRunner.execute_model: logits are gathered to the driver, the only rank
    that samples), so the same max applies; the other TP ranks peak at the forward. A Qwen-VL
    vision tower adds the encoder's profiling run (encoder.py): in V1 its peak, or its outputs
    held through the LM run; in V0 its peak, and the uncut dummy prompts set the LM's tokens.
    Model Runner V2 before 0.33 holds only the model-dtype logits in its sampler, before 0.28 with
    their fp32 copy (see V2_RUNNER_SAMPLER_UNTIL), from 0.33 its warm-up pass (V2_WARMUP_FP32_COPY);
    `flashinfer` says whether FlashInfer's sampler runs (flashinfer_sampler; for that pass
    runner_v2.warmup_sampler), `kept` what the sampler allocates on top and keeps (its Triton buffer).
    `aux_layers`: target layers whose hidden states a drafter takes (DFlash: dflash_config.target_layer_ids);
    the forward keeps one new tokens x hidden tensor per layer to its end (qwen3_next.py / interfaces.py
    _maybe_add_hidden_state: hidden_states + residual, appended as each layer is passed; read in 0.20.1)."""
    db = dtype_bytes(r.dtype)
    enc = encoder_profile(model, r, settings or {}, v1)
    t = enc.lm_tokens if enc and enc.lm_tokens else r.max_num_batched_tokens
    fwd = max(forward_bytes(model, r, t, COMPILED_HIDDEN if compiles(r, v1, settings or {}) else EAGER_HIDDEN),
              awq_dequant_forward(model, r, t, settings or {})) \
        + (int(aux_layers * t * model.hidden_size * db) if last_stage else 0)
    if pooling_runner(model, settings or {}, v1):
        last_stage = False  # the pooler's outputs (a vector or one row per token) stay below the forward's peak
    reqs = enc.seqs if enc and enc.seqs else min(r.max_num_seqs, r.max_num_batched_tokens)
    padded_vocab = math.ceil(model.vocab_size / VOCAB_PAD) * VOCAB_PAD
    if v2_runner and r.version < V2_RUNNER_SAMPLER_UNTIL:
        per_logit = db + (4 if r.version < V2_RUNNER_FP32_COPY_UNTIL else 0)
    elif v2_runner:  # 0.33's warm-up pass (V2_WARMUP_FP32_COPY)
        per_logit = db + V2_WARMUP_FP32_COPY + (V2_WARMUP_FLASHINFER if flashinfer else 0)
    elif v1 and r.version < (0, 16, 0) and flashinfer:
        per_logit = FLASHINFER_SAMPLER_BYTES_PER_LOGIT
    elif v1 and r.version >= (0, 16, 0):
        per_logit = SAMPLER_BYTES_PER_LOGIT_016
    else:
        per_logit = SAMPLER_BYTES_PER_LOGIT
    sampler = int(reqs * padded_vocab * per_logit) + kept if last_stage else 0
    if sampler:  # an unquantized MoE's workspace outlives the forward (forward.py moe_workspace_bytes)
        sampler += moe_workspace_bytes(model, r, t, db)
    lm = max(fwd, sampler)
    if not v1:  # V0: the dummy items' pixel values stay on the GPU through the LM forward (encoder.py)
        return max(lm + enc.inputs, enc.peak) if enc else lm
    # V1: the encoder outputs and the dummy items' pixel values stay through the LM forward (encoder.py)
    return max(enc.peak, enc.outputs + enc.inputs + lm) if enc else lm


def forward_bytes(model: ModelSpec, r: Resolved, tokens: int, hidden: int = COMPILED_HIDDEN) -> int:
    """Working set of one forward of `tokens` tokens, the larger of a decoder layer's two halves: the
    `hidden` hidden-width tensors (EAGER_HIDDEN, COMPILED_HIDDEN) and the MLP's or the fused-MoE kernel's
    intermediates (forward.py mlp_bytes), or the attention's projections beside the MoE workspace that
    outlives the MLP (forward.py attention_stage_bytes, moe_workspace_bytes)."""
    db = dtype_bytes(r.dtype)
    mlp = int(tokens * hidden * model.hidden_size * db) + mlp_bytes(model, r, tokens, db)
    return max(mlp, attention_stage_bytes(model, r, tokens, db, hidden) + moe_workspace_bytes(model, r, tokens, db))


def logged_activation(act: int, estimate_applied: int, version: tuple[int, int, int]) -> int:
    """The "X GiB for peak activation" vLLM logs at start: the torch peak, plus from 0.26.1 the
    CUDA-graph estimate the budget subtracts (see CONSUMED_FROM)."""
    return act + estimate_applied if version >= CONSUMED_FROM else act


def sampler_note(model: ModelSpec, r: Resolved, e: Era, cfg: EngineConfig) -> str | None:
    """0.9.2 - 0.11 sample with FlashInfer where it is installed (profile.FLASHINFER_SAMPLER_BYTES_PER_LOGIT):
    where the build's install lines name it, say so; where the install is unknown, planned with PyTorch's
    sampler: say how much KV cache FlashInfer's smaller profile would add."""
    from servefit.engines.vllm.graphs import model_runner_v2
    from servefit.engines.vllm.kvcache import attention_free

    which = flashinfer_sampler(r, cfg.env, cfg.site.packages if cfg.site else [])  # the build's pip installs
    if e.v1 and which and "VLLM_USE_FLASHINFER_SAMPLER" not in (cfg.env or {}):
        return f"FlashInfer's top-k / top-p sampler, which vLLM {e.version} profiles where FlashInfer is installed, as the build does"
    if not e.v1 or attention_free(model) or which is not None:
        return None
    v2 = model_runner_v2(model, r, cfg.env, cfg.settings)
    native, fi = (activation_peak(model, r, True, True, cfg.settings, v2, f) for f in (False, True))
    if native - fi < 0.01 * GiB:
        return None
    return (f"PyTorch's top-k / top-p sampler: vLLM {e.version} samples with FlashInfer instead where FlashInfer is "
            f"installed (an optional extra up to 0.11.0) and VLLM_USE_FLASHINFER_SAMPLER is not 0; its profile is "
            f"{(native - fi) / GiB:.2f} GiB smaller, and the KV cache that much larger")
