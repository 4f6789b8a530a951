"""The free tails PyTorch's caching allocator leaves inside the segments that hold a model's weights.

The releases that take PyTorch's share as allocated bytes (non_torch.counts_cached_segments: V0 0.6.4 -
0.6.6, V1 up to 0.9.0) charge those tails as non-torch memory: the segment stays reserved while a weight
lives in it, empty_cache cannot release it, and allocated_bytes leaves the tail out. Allocator rules
(c10/cuda/CUDACachingAllocator.cpp, PyTorch 2.5: round_size, get_allocation_size, should_split,
get_free_block):
- a request is rounded up to 512 B; one of more than 1 MiB (kSmallSize) comes from the large pool;
- a large-pool request below 10 MiB (kMinLargeAlloc) that no free block fits opens a 20 MiB segment
  (kLargeBuffer); from 10 MiB on, a segment of the request rounded up to 2 MiB (kRoundLarge);
- the smallest free block that fits is taken (best fit), and split when more than 1 MiB would be left
  (large pool); a tail of 1 MiB or less stays in the block and counts as allocated.
vLLM creates the parameters in module order at model construction (torch.empty on the device) and the
default loader copies the checkpoint into them, so the order below is the model's own: the embedding,
then per decoder layer qkv_proj, o_proj (the rotary cos/sin cache with the first layer: get_rope caches
one), gate_up_proj and down_proj, then lm_head (llama.py / qwen2.py LlamaModel / Qwen2Model). Biases and
norms (the small pool, 2 MiB segments) are left out: a few MiB at most. Read in the 0.6.6.post1 wheel:
utils.py::memory_profiling (non_torch_increase = used - baseline - weights - the allocated_bytes.all.current
increase), worker/model_runner.py::load_model (weights: DeviceMemoryProfiler, max_memory_allocated),
model_loader/loader.py (the model is built under `with target_device`) and rotary_embedding.py::
RotaryEmbedding.__init__ (cos_sin_cache cast to the model dtype, a registered buffer)."""

from __future__ import annotations

import math

from servefit.engines.vllm.weights import VOCAB_PAD
from servefit.models.spec import ModelSpec

MiB = 2**20
SMALL_SIZE = 1 * MiB  # kSmallSize: larger requests use the large pool
LARGE_BUFFER = 20 * MiB  # kLargeBuffer: the segment a 1 - 10 MiB request opens
MIN_LARGE_ALLOC = 10 * MiB  # kMinLargeAlloc
ROUND_LARGE = 2 * MiB  # kRoundLarge
# decoder families whose parameters are the plain Llama layout (fused qkv_proj and gate_up_proj)
PLAIN_LAYOUT = ("llama", "qwen2", "qwen3", "mistral")


def free_tail_bytes(sizes: list[int]) -> int:
    """The large-pool bytes left free inside the segments after allocating `sizes` in this order."""
    free: list[int] = []
    for size in sizes:
        size = max(512, -(-size // 512) * 512)
        if size <= SMALL_SIZE:
            continue
        fits = [b for b in free if b >= size]
        if fits:
            block = min(fits)
            free.remove(block)
        else:
            block = LARGE_BUFFER if size < MIN_LARGE_ALLOC else -(-size // ROUND_LARGE) * ROUND_LARGE
        if block - size > SMALL_SIZE:
            free.append(block - size)
    return sum(free)


def weight_allocations(model: ModelSpec, dtype_bytes: float, tp: int) -> list[int] | None:
    """The weight tensors of one tensor-parallel rank in creation order; None where the layout is not the
    plain dense one (MoE, MLA, quantized, multimodal, other families)."""
    if (model.model_type not in PLAIN_LAYOUT or model.is_moe or model.kv_lora_rank or model.quantization
            or model.vision or model.multimodal):
        return None
    h, d = model.hidden_size, model.head_dim
    kv_heads = max(1, model.num_key_value_heads // tp)  # replicated when fewer than tp
    qkv = (model.num_attention_heads // tp + 2 * kv_heads) * d * h * dtype_bytes
    o = h * (model.num_attention_heads // tp) * d * dtype_bytes
    inter = -(-model.intermediate_size // tp)
    vocab = math.ceil(model.vocab_size / VOCAB_PAD) * VOCAB_PAD // tp
    embed = vocab * h * dtype_bytes
    rotary = model.max_position_embeddings * d * dtype_bytes
    sizes: list[float] = [embed]
    for layer in range(model.num_hidden_layers):
        sizes += [qkv, o] + ([rotary] if layer == 0 else []) + [2 * inter * h * dtype_bytes, h * inter * dtype_bytes]
    if not model.tie_word_embeddings:
        sizes.append(embed)
    return [int(x) for x in sizes]


def weight_tail_bytes(model: ModelSpec, dtype_bytes: float, tp: int) -> int:
    """Reserved, unallocated bytes in the weights' segments (0 where the layout is not modelled)."""
    sizes = weight_allocations(model, dtype_bytes, tp)
    return free_tail_bytes(sizes) if sizes else 0
