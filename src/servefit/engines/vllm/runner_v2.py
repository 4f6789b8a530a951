"""GPU memory Model Runner V2 allocates before its profile (v1/worker/gpu/), which the V1 runner does not.

V2's runner object is built after the worker's init snapshot (v1/worker/gpu_worker.py::Worker.init_device:
MemorySnapshot, then GPUModelRunner(...)), and load_model builds its sampler and structured-outputs worker
after the weights' DeviceMemoryProfiler has closed. So these tensors are neither weights nor part of the
profile's peak: from 0.26.1 utils/mem_utils.py::memory_profiling charges them through total_consumed (the
free-memory drop since the init snapshot); before it nothing charges them (torch memory from before the
profile). Read in the 0.25.0, 0.26.0, 0.27.0, 0.28.0, 0.29.0, 0.30.0, 0.32.0 and 0.33.0 wheels.

What is not here: tensors V2 keeps in pinned host memory through UVA (buffer_utils.py UvaBackedTensor,
StagedWriteTensor(uva_instead_of_gpu=True): RequestState.all_token_ids, the sampling parameters) take no
device memory on a discrete GPU; the block tables are built in initialize_kv_cache, after the profile; the
dummy sampler's logits are the profile's peak (profile.py activation_peak); the CUDA-graph estimate is
graphs.py's. For Qwen3-14B at 256 requests what this module adds past the penalties is about 9 MiB, so it
does not explain the calibration L40S 0.28 logs' 1.1 GiB (newblog-l40s-qwen3-14b-*): their source's L4 runs
of one command size 9.10 and 10.33 GiB across starts, the gap of a first start's torch.compile
(profile.py COLD_COMPILE_GIB), which servefit does not predict.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.engines.vllm.kvcache import speculative
from servefit.engines.vllm.non_torch import CONSUMED_FROM
from servefit.engines.vllm.profile import (
    V2_RUNNER_SAMPLER_UNTIL,
    flashinfer_sampler_selected,
    triton_topk_buffer,
    v2_sampler_state_bytes,
)
from servefit.hardware.spec import GpuSpec
from servefit.memory.dtypes import dtype_bytes
from servefit.models.spec import ModelSpec

if TYPE_CHECKING:
    from servefit.engines.vllm.plan import Resolved

# Per request, the sampler's fixed-width GPU tables (torch.zeros under StagedWriteTensor, device=GPU):
# sample/logit_bias.py::LogitBiasState: allowed_token_ids int32 [MAX_NUM_ALLOWED_TOKEN_IDS = 1024],
# logit_bias_token_ids int32 and logit_bias fp32 [MAX_NUM_LOGIT_BIAS_TOKENS = 1024], stop_token_ids int32
# [MAX_NUM_STOP_TOKEN_IDS = 128]; sample/bad_words.py::BadWordsState: bad_word_token_ids int32
# [VLLM_MAX_BAD_WORDS_TOTAL_TOKENS = 1024] and bad_word_offsets int32 [VLLM_MAX_NUM_BAD_WORDS + 1 = 129]
# (module constants up to 0.27, envs.py defaults from 0.28); sample/logprob.py::LogprobTokenIdsState:
# token_ids int32 [sampling_params.py MAX_LOGPROB_TOKEN_IDS = 128]. The same sizes 0.25.0 - 0.33.0.
SAMPLER_TABLES_PER_REQUEST = (1024 + 1024 + 1024 + 128) * 4 + (1024 + 129) * 4 + 128 * 4
# Per request on every rank (states.py::RequestState): total_len and num_computed_tokens int32,
# last_sampled_tokens int64, next_prefill_tokens int32 (one lookahead row; multi-module MTP's extra rows
# left out), draft_tokens int64 per speculative step; input_batch.py::InputBuffers: seq_lens,
# dcp_local_seq_lens and query_start_loc (one more row) int32.
REQUEST_STATE_PER_REQUEST = 4 + 4 + 8 + 4 + 3 * 4
DRAFT_TOKEN_BYTES = 8
# Per scheduled token (InputBuffers): input_ids int32, positions int64, is_padding bool.
INPUT_BUFFER_PER_TOKEN = 4 + 8 + 1
# From 0.32 model_runner.py::GPUModelRunner.__init__ keeps RequestState.all_token_ids on the GPU
# (use_dense_all_token_ids) where the speculative method is n-gram (SpeculativeConfig.use_ngram: "ngram",
# "ngram_gpu"): max_num_seqs x max_model_len int32. 0.31 and earlier keep it in UVA host memory.
DENSE_TOKEN_IDS_FROM = (0, 32, 0)
NGRAM_METHODS = ("ngram", "ngram_gpu")
# A drafting model's speculator (spec_decode/speculator.py::DraftModelSpeculator.__init__, built on the last
# pipeline stage) with --speculative-config draft_sample_method "probabilistic" (the default is "greedy",
# config/speculative.py) caches its proposal distribution: draft_logits, max_num_seqs x speculative steps x
# the draft's vocabulary, fp32 in 0.25.0 - 0.27.0, from 0.28 in model_config.head_dtype (draft_logits_spec:
# the model's dtype for a generating model unless its config sets head_dtype). The speculator's own input
# buffers and per-request scalars (a few bytes a request) are left out.
DRAFT_LOGITS_HEAD_DTYPE_FROM = (0, 28, 0)


def persistent_bytes(model: ModelSpec, r: Resolved, settings: dict, v2_runner: bool, last_stage: bool,
                     pooling: bool, max_len: int) -> int:
    """Bytes of the GPU tensors Model Runner V2 builds before its profile that the 0.26.1+ budget charges
    (see above); 0 on the V1 runner or before 0.26.1. The sampler's tables, its penalty statistics
    (profile.py v2_sampler_state_bytes) and the structured-outputs bitmask exist only on the last
    pipeline stage of a generating model (model_runner.py::load_model: is_last_pp_rank and not
    is_pooling_model)."""
    if not v2_runner or r.version < CONSUMED_FROM:
        return 0
    reqs = r.max_num_seqs
    method, steps = speculative(settings)
    total = reqs * (REQUEST_STATE_PER_REQUEST + DRAFT_TOKEN_BYTES * steps) + 4
    total += r.max_num_batched_tokens * INPUT_BUFFER_PER_TOKEN
    if method in NGRAM_METHODS and r.version >= DENSE_TOKEN_IDS_FROM:
        total += reqs * max_len * 4
    sc = settings.get("speculative_config")
    if last_stage and method and method not in NGRAM_METHODS and isinstance(sc, dict) \
            and sc.get("draft_sample_method") == "probabilistic":
        per_logit = dtype_bytes(r.dtype) if r.version >= DRAFT_LOGITS_HEAD_DTYPE_FROM else 4
        total += int(reqs * steps * model.vocab_size * per_logit)
    if last_stage and not pooling:
        total += v2_sampler_state_bytes(model, r, v2_runner) + reqs * SAMPLER_TABLES_PER_REQUEST
        # structured_outputs.py::StructuredOutputsWorker: logits_indices and grammar_bitmask
        # (cdiv(vocab, 32) int32) for max_num_reqs x decode_query_len logits, decode_query_len being the
        # speculative steps + the one sampled token (model_runner.py::load_model)
        total += reqs * (1 + steps) * (1 + -(-model.vocab_size // 32)) * 4
    return total


def warmup_sampler(model: ModelSpec, r: Resolved, gpu: GpuSpec | None, env: dict[str, str] | None, v2_runner: bool,
                   last_stage: bool) -> tuple[bool, int] | None:
    """For 0.33's warm-up pass of the V2 sampler (profile.py V2_WARMUP_FP32_COPY): whether FlashInfer's sampler
    draws (v1/worker/gpu/sample/sampler.py::Sampler.use_flashinfer, flashinfer_sampler_supported: CUDA only)
    and the bytes the Triton top-k/top-p kernel keeps otherwise; None on the V1 runner or before 0.33."""
    if not v2_runner or r.version < V2_RUNNER_SAMPLER_UNTIL:
        return None
    flashinfer = gpu is not None and gpu.vendor == "nvidia" and flashinfer_sampler_selected(r, gpu, env)
    return flashinfer, triton_topk_buffer(model, r, gpu, env, v2_runner, last_stage)
