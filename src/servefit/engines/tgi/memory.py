"""TGI's warmup arithmetic (server/text_generation_server/models/flash_causal_lm.py::warmup) and
the pieces it is made of: weights per shard, KV bytes per block, the router's warmup batch
(backends/v3/src/client/grpc_client.rs::warmup; router/client/src/client.rs before 2.3) and the
memory the prefill of that batch holds when the shard measures free memory."""

from __future__ import annotations

import math
from dataclasses import dataclass

from servefit.engines.tgi.era import Era
from servefit.engines.vllm.graph_pool import GraphPool
from servefit.memory.dtypes import dtype_bytes
from servefit.memory.weights import Scheme, scheme_for, weight_bytes
from servefit.models.spec import ModelSpec

GiB = 2**30
MiB = 2**20
# Calibrated on the public logs in benchmarks/accuracy/cases/tgi.yaml (TGI measures, not
# computes, these): the CUDA context, cuBLAS / flash-attention workspaces and allocator slack
# that sit outside the weights, the warmup KV blocks and the prefill activations.
CONTEXT = int(0.40 * GiB)
# The card's own CUDA context in its place (hardware/cuda_context.py::context_bytes, with or without vLLM's
# lmem_growth_bytes, plus 0 - 0.1 GiB) was tried in session 31: the calibration median moved 6.4% -> 4.5 - 5.5%
# only by trading cases (the A10G log tgi-ec2 -6.0% -> -0.1 .. -6.5%, the one 3.x log, tgi-2842 on RTX 3090s,
# +6.8% -> +5.9 .. +13.5%, each better where the other is worse), as vLLM's own trial of it went
# (engines/vllm/non_torch.py::CUDA_CONTEXT), so the flat figure stays.
NCCL = int(0.25 * GiB)  # NCCL buffers per rank when sharded
# From 2.3 the flashinfer backend keeps one 128 MiB workspace per shard for its prefill and decode
# wrappers (layers/attention/flashinfer.py::get_workspace, torch.empty(128 * 1024 * 1024, uint8),
# created in models/flash_causal_lm.py::FlashCausalLM.__init__ via create_prefill_state), alive
# when warmup reads free memory; the paged and flashdecoding backends have none. The CONTEXT
# term above was calibrated on paged-attention (< 2.3) logs only, so it does not hold it.
FLASHINFER_WORKSPACE = 128 * MiB
# Beside that shared float workspace each flashinfer wrapper allocates its own 8 MiB int workspace on the
# device in its constructor (flashinfer 0.1.6, pinned by TGI 2.3.0 - 3.0.x: python/flashinfer/prefill.py::
# BatchPrefillWithPagedKVCacheWrapper.__init__ and BatchPrefillWithRaggedKVCacheWrapper.__init__,
# python/flashinfer/decode.py::BatchDecodeWithPagedKVCacheWrapper.__init__: `self._int_workspace_buffer =
# torch.empty((8 * 1024 * 1024,), dtype=torch.uint8, device=...)`; the same in v0.2.0.post1 / post2, which
# server/Makefile-flashinfer builds from 3.1.0). FlashCausalLM.__init__ creates three wrappers before
# warm-up (create_prefill_state, create_prefill_with_paged_kv_state, create_decode_state in
# layers/attention/flashinfer.py); the CUDA-graph decode wrappers come after the KV cache is sized.
FLASHINFER_WRAPPERS = 3
FLASHINFER_INT_WORKSPACE = 8 * MiB
# Warmup prefill before 3.0 asked for the log-probabilities of every prompt token: the lm_head
# output for all N tokens (model dtype) plus log_softmax(out) (generate_token: torch.log_softmax(out, -1));
# calibrated on the three 2.x logs in benchmarks/accuracy/cases/tgi.yaml: 6 bytes per logit beyond the
# head output. Only the log_softmax output (one model-dtype tensor) is read in the code: the sampler
# (next_token_chooser, batch_top_tokens) sees out[prefill_next_token_indices], one row per request (read
# at v1.4.5 and v2.2.0), and a replay of the head, log_softmax and gather on synthetic Llama-3-8B tensors
# (torch 2.11, H200, session 28) left the allocator 2 bytes per logit beyond the head output; the other 4
# are calibrated, not explained (the torch 2.1 - 2.3 builds these releases ship were not replayed).
LOGPROB_EXTRA_BYTES = 6
GRAPH_BYTES = 24 * MiB  # per captured decode batch size (display only; captured inside the wiggle room)


def scheme(quantize: str | None, model: ModelSpec) -> Scheme | None:
    """Weight storage for TGI's --quantize (or the checkpoint's quantization_config)."""
    if quantize is None:
        return scheme_for(model.quantization)
    if quantize == "bitsandbytes":
        return scheme_for({"quant_method": "bitsandbytes", "bits": 8})
    if quantize in ("bitsandbytes-nf4", "bitsandbytes-fp4"):
        return scheme_for({"quant_method": "bitsandbytes", "bits": 4})
    if quantize == "eetq":
        return Scheme("eetq", 1.0, bits=8)
    if quantize == "fp8":
        return scheme_for({"quant_method": "fp8"})
    q = model.quantization if model.quantization else {"quant_method": quantize, "bits": 4}
    return scheme_for(q, None if model.quantization else quantize) or Scheme(quantize, 0.5 + 1 / 32, bits=4)


def weights_per_shard(model: ModelSpec, db: float, sch: Scheme | None, shards: int) -> int:
    """TGI shards every linear layer, the embedding (TensorParallelEmbedding) and the head
    (TensorParallelHead); norms are replicated (small). A tied head is a second copy on the GPU:
    the modeling files name the embedding as the head's weights (custom_modeling/
    flash_llama_modeling.py, flash_gemma3_modeling.py, ...: SpeculativeHead.load(prefix
    "...embed_tokens") when tie_word_embeddings), and layers/tensor_parallel.py::TensorParallelHead.load
    reads it again (utils/weights.py::Weights.get_sharded -> get_partial_sharded: its own
    tensor .to(device)), sharded over the vocabulary like the embedding; the checkpoint's parameter
    count holds it once."""
    n = max(shards, 1)
    tied_head = model.vocab_size * model.hidden_size * db if model.tie_word_embeddings else 0
    return int((weight_bytes(model, db, sch) + tied_head) / n)


def kv_layout(model: ModelSpec, kv_db: float, shards: int) -> tuple[int, int]:
    """(KV heads per shard, head size) as TGI stores them. DeepSeek-V2/V3 in TGI keep full K and
    V per head (flash_deepseek_v2_modeling.py: head_size = qk_nope + qk_rope, V padded), not the
    MLA latent."""
    if model.is_mla:
        return max(1, model.num_attention_heads // shards), model.qk_nope_head_dim + model.qk_rope_head_dim
    return max(1, model.num_key_value_heads // shards), model.head_dim


def attention_layer_count(model: ModelSpec) -> int:
    return sum(1 for k in model.kinds() if k in ("full", "sliding", "chunked"))


def bytes_per_token(model: ModelSpec, kv_db: float, shards: int) -> int:
    """flash_causal_lm.py::warmup: total_cache_size / BLOCK_SIZE =
    num_layers x num_kv_heads x head_size x 2 (K, V) x dtype_size (every layer keeps every token:
    TGI's KV cache has no sliding-window savings)."""
    heads, hs = kv_layout(model, kv_db, shards)
    return int(attention_layer_count(model) * heads * hs * 2 * kv_db)


@dataclass
class WarmupBatch:
    """The prefill batch TGI's router sends at warm-up: its requests, prompt tokens and KV blocks, which set
    the activation peak and the blocks already held when the KV cache is sized."""

    requests: int
    tokens: int  # prompt tokens in the prefill (current_tokens)
    blocks: int  # KV blocks allocated for it (batch.num_blocks)
    longest: int = 0  # the first (longest) request's prompt tokens
    # every request asks one new token, so all of them finish in the prefill (StoppingCriteria stops at
    # max_new_tokens; the warm-up sets ignore_eos_token) and generate_token returns no batch
    finished: bool = False


def warmup_batch(e: Era, prefill: int, max_input: int | None, max_total: int | None, block: int,
                 speculate: int, max_batch_size: int | None, window_blocks: int | None = None) -> WarmupBatch:
    """The router builds requests of `truncate` tokens until max_batch_prefill_tokens; each asks
    max_total_tokens - truncate new tokens (1 when max_total is left to the shard; 2 up to 1.1.0,
    router/client/src/client.rs::warmup `max_new_tokens: 2`)
    and reserves ceil((prompt + max_new - 1 + speculate) / BLOCK_SIZE) blocks
    (FlashCausalLMBatch.from_tokenized), at most `window_blocks` each where the sliding window caps
    them (models/flash_mistral.py::FlashMistralBatch.from_pb, 1.1.0 - 2.0.x)."""
    n = reqs = blocks = longest = 0
    finished = True
    while n < prefill and reqs < 100_000:
        truncate = prefill - n
        if max_input is not None:
            truncate = min(max_input, truncate)
        longest = max(longest, truncate)
        if not e.max_new_from_total:
            max_new = 2
        else:
            max_new = max(1, max_total - truncate) if max_total is not None else 1
        finished = finished and max_new == 1
        needed = math.ceil((truncate + max_new - 1 + speculate) / block)
        blocks += min(needed, window_blocks) if window_blocks else needed
        n += truncate
        reqs += 1
        if max_batch_size and reqs == max_batch_size:
            break
    return WarmupBatch(requests=reqs, tokens=n, blocks=blocks, longest=longest, finished=finished and reqs > 0)


def activation_peak(model: ModelSpec, e: Era, tokens: int, requests: int, db: float, shards: int,
                    prefill_logprobs: bool, scratch: int = 0) -> int:
    """Memory the warmup prefill still holds in PyTorch's caching allocator when the shard reads
    free memory (no empty_cache in between): one decoder layer's working set (hidden states,
    fused gate_up output and the activated half; fused-MoE intermediates; a quantized GEMM's own
    buffers, `scratch`: quant_scratch.py) plus the lm_head
    output, which the allocator cannot carve out of the freed layer blocks (it is allocated
    while the last hidden states are alive). Before 3.0 (or with --enable-prefill-logprobs)
    every prompt token gets log-probabilities, so the head output is tokens x vocab; after, one
    row per request. Sharded over a vocabulary the shards divide, layers/tensor_parallel.py::
    TensorParallelHead.forward (utils/layers.py before 2.1) also allocates the shard's slice
    (`gather_input`, rows x vocab / shards) before gathering every shard's slice into
    `world_out`; the slice is freed on return, so it stays cached beside the rest."""
    h = model.hidden_size
    fwd = tokens * (4 * h + _mlp_width(model, shards)) * db + scratch
    rows = tokens if (e.warmup_logprobs or prefill_logprobs) else requests
    head = rows * model.vocab_size * (db + (logprob_extra_bytes(e, db) if rows == tokens else 4)) + tokens * h * db
    if _gathered(model, shards, rows):
        head += rows * (model.vocab_size // shards) * db
    return int(fwd + head)


def _gathered(model: ModelSpec, shards: int, rows: int) -> bool:
    """Whether the lm_head output is gathered from the shards into a fresh (vocab x rows) tensor
    (TensorParallelHead.load: should_gather when the vocabulary splits evenly; one row is gathered
    without the transposed copy)."""
    return shards > 1 and model.vocab_size % shards == 0 and rows > 1


def prefill_live_peak(model: ModelSpec, e: Era, tokens: int, requests: int, db: float, shards: int,
                      prefill_logprobs: bool, scratch: int = 0) -> int:
    """The most memory the warm-up prefill holds in live tensors at once, the amount whose allocation
    raises "Not enough memory to handle N prefill tokens": PyTorch's caching allocator frees its
    cached blocks and retries before a CUDA OOM (c10/cuda/CUDACachingAllocator.cpp,
    release_cached_blocks), so the layers' freed activations do not count, unlike in what warm-up
    then reads as free (activation_peak). The peak is one layer's working set or the head's:
    - the lm_head output, tokens x vocab in the model dtype (rows = requests from 3.0 without
      prefill log-probabilities); sharded over a vocabulary the shards divide,
      layers/tensor_parallel.py::TensorParallelHead.forward all-gathers it into `world_out` and
      returns the transposed view `world_out.T`;
    - models/flash_causal_lm.py::FlashCausalLM.generate_token's `torch.log_softmax(out, -1)`: its
      output (before 2.4.0; from 2.4.0 `out=out`, in place), plus the contiguous copy softmax makes
      of a transposed input (and, with out= on that non-contiguous view, the result it copies back).
    The 2.2.0 log in benchmarks/accuracy/cases/tgi.yaml (tgi-2301-4xa6000-...) shows it: 46.33 GiB in
    use = weights + warm-up KV + `world_out` + its copy (+ non-torch memory) when log_softmax's 3.93 GiB
    output fails."""
    h = model.hidden_size
    fwd = tokens * (4 * h + _mlp_width(model, shards)) * db + scratch
    rows = tokens if (e.warmup_logprobs or prefill_logprobs) else requests
    gathered = _gathered(model, shards, rows)
    logits = rows * model.vocab_size * db
    # the head: the last hidden states in, the output out (the shard's slice it gathers, vocab / shards, is
    # freed before log_softmax's copies, which are larger)
    head = tokens * h * db + logits
    if rows == tokens:  # then log_softmax, the hidden states gone
        head = max(head, logits * (3 if gathered else 1 if e.inplace_logsoftmax else 2))
    return int(max(fwd, head))


def _mlp_width(model: ModelSpec, shards: int) -> int:
    """Per-token width of one layer's MLP intermediates on a shard (the fused gate_up output and
    the activated half; fused-MoE intermediates and router logits)."""
    if model.is_moe:
        inter = (model.moe_intermediate_size or model.intermediate_size) // shards
        return model.num_experts_per_tok * 3 * inter + model.num_experts * 2
    return 3 * (model.intermediate_size // shards)


def logprob_extra_bytes(e: Era, db: float) -> float:
    """Bytes per logit the prefill log-probabilities hold beyond the lm_head output: LOGPROB_EXTRA_BYTES
    counts log_softmax's output (one model-dtype tensor of tokens x vocab) among them; from 2.4.0
    models/flash_causal_lm.py::FlashCausalLM.generate_token writes it over the head output
    (`torch.log_softmax(out, -1, out=out)`), so that tensor is no longer allocated."""
    return LOGPROB_EXTRA_BYTES - (db if e.inplace_logsoftmax else 0)


def gemma3_mask_bytes(model: ModelSpec, e: Era, longest: int, requests: int, db: float, shards: int,
                      attention: str) -> int:
    """Gemma 3 (the VLM, TGI >= 3.2.0) builds dense requests x S x S attention masks for a prefill,
    S the longest prompt, and they stay alive through every layer
    (custom_modeling/flash_gemma3_modeling.py::Gemma3ForConditionalGeneration.forward):
    3.2.x, when the batch carries an image (the router's warm-up puts one in its first request):
    get_attention_mask's additive mask, the sliding-window bool mask and the local additive mask;
    the additive ones are float32 (torch.where(mask, 0, min_dtype) of two Python scalars takes the
    default dtype, and torch.where(bool, min_dtype, that) keeps it). Each layer's FlashGemma3Attention.forward then runs F.scaled_dot_product_attention
    with that float mask and enable_gqa, which neither the flash kernel (no mask) nor the
    memory-efficient one (no GQA) takes, so the math backend holds the scores and their softmax:
    2 x heads per shard x S x S (counted at the model dtype, the least it takes).
    >= 3.3.0, for every gemma3 prefill: vlm_causal_lm.py::VlmCausalLM.forward's bool mask and its
    float32 additive copy, then the same sliding-window pair; the SDPA runs only off flashinfer."""
    if model.model_type != "gemma3" or not model.multimodal or e.v < (3, 2, 0) or longest <= 0:
        return 0
    sq = requests * longest * longest
    masks = (4 + 1 + 4 + (1 if e.v >= (3, 3, 0) else 0)) * sq
    sdpa = e.v < (3, 3, 0) or attention != "flashinfer"
    heads = max(1, model.num_attention_heads // max(shards, 1))
    return masks + (int(2 * heads * sq * db) if sdpa else 0)


def kv_tensors_reserved(model: ModelSpec, kv_db: float, shards: int, blocks: int, block: int) -> int:
    """What PyTorch's caching allocator hands out for a KV cache of `blocks` blocks: models/flash_causal_lm.py::
    FlashCausalLM.init_kv_cache builds one KVCache per layer, a key and a value tensor of blocks x BLOCK_SIZE x
    heads x head size each (layers/attention/kv_cache.py::KVCache.__init__; models/cache_manager.py::CacheManager
    before 2.3), right after warmup's empty_cache. c10/cuda/CUDACachingAllocator.cpp::DeviceCachingAllocator::
    malloc cudaMallocs a segment rounded up to 2 MiB for a request of 10 MiB or more and splits the block only
    when more than kSmallSize (1 MiB) would remain, so a tensor whose segment leaves 1 MiB or less keeps that
    remainder, which no other tensor can use while it lives (the allocator as engines/vllm/graph_pool.py
    replays it); what mem_get_info then reports as used is these blocks, not the tensors' own bytes."""
    layers = attention_layer_count(model)
    if not layers or blocks <= 0:
        return 0
    heads, hs = kv_layout(model, kv_db, shards)
    pool = GraphPool()
    return sum(pool.malloc(int(blocks * block * heads * hs * kv_db)).size for _ in range(2 * layers))


@dataclass
class KvResult:
    """The KV cache TGI's warm-up allocates: its blocks and bytes, and the free memory it was sized from."""

    num_blocks: int
    free_after_peak: int  # bytes get_free_memory returned after the warmup prefill
    kv_bytes: int


def kv_blocks(e: Era, total: int, used: int, fraction: float, wiggle: float, block_bytes: int,
              batch_blocks: int) -> KvResult:
    """flash_causal_lm.py::warmup after the prefill:
    >= 3.0: free = max(0, mem_get_info.free - (1 - CUDA_MEMORY_FRACTION x TGI_WIGGLE_ROOM) x total),
            num_blocks = free // block_bytes + batch.num_blocks;
    <  3.0: free = max(0, mem_get_info.free - (1 - CUDA_MEMORY_FRACTION) x total),
            num_blocks = int(free x wiggle // block_bytes) + batch.num_blocks.
    `used` is everything the process holds at that moment (context, weights, warmup KV, activations)."""
    device_free = max(0, total - used)
    if block_bytes <= 0:  # no attention layer (Mamba: TGI's non-flash Mamba model keeps no paged KV cache)
        return KvResult(num_blocks=0, free_after_peak=device_free, kv_bytes=0)
    if e.wiggle_of_total:
        free = max(0, int(device_free - (1 - fraction * wiggle) * total))
        n = free // block_bytes + batch_blocks
    else:
        free = max(0, int(device_free - (1 - fraction) * total))
        n = int(free * wiggle // block_bytes) + batch_blocks
    return KvResult(num_blocks=n, free_after_peak=free, kv_bytes=n * block_bytes)


def process_overhead(attention: str, flash: bool, shards: int) -> int:
    """Memory a shard holds outside the weights, KV cache and prefill activations when warmup reads
    free memory: the CUDA context and workspaces, NCCL buffers when sharded, and flashinfer's
    workspace and its wrappers' int workspaces on that backend (FLASHINFER_WORKSPACE, FLASHINFER_INT_WORKSPACE)."""
    flashinfer = FLASHINFER_WORKSPACE + FLASHINFER_WRAPPERS * FLASHINFER_INT_WORKSPACE
    return CONTEXT + (NCCL if shards > 1 else 0) + (flashinfer if flash and attention == "flashinfer" else 0)


def kv_dtype_bytes(kv_cache_dtype: str | None, dtype: str) -> float:
    if kv_cache_dtype in ("fp8_e4m3fn", "fp8_e5m2"):
        return 1
    return dtype_bytes(dtype)
