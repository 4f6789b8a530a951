"""The free tails PyTorch's caching allocator leaves inside the segments that hold a model's weights, and
what a GPTQ checkpoint's Marlin repack leaves reserved (gptq_marlin_free_bytes).

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
from dataclasses import replace

from servefit import data
from servefit.engines.vllm.weights import VOCAB_PAD
from servefit.hardware.spec import GpuSpec
from servefit.models.spec import ModelSpec

MiB = 2**20
SMALL_SIZE = 1 * MiB  # kSmallSize: larger requests use the large pool
LARGE_BUFFER = 20 * MiB  # kLargeBuffer: the segment a 1 - 10 MiB request opens
MIN_LARGE_ALLOC = 10 * MiB  # kMinLargeAlloc
SMALL_BUFFER = 2 * MiB  # kSmallBuffer: the segment a small-pool request opens
ROUND_LARGE = 2 * MiB  # kRoundLarge
# decoder families whose parameters are the plain Llama layout (fused qkv_proj and gate_up_proj); Phi-3 and
# Phi-4 (phi3) are vLLM's LlamaForCausalLM (phi3.py::Phi3ForCausalLM), left out with a scaled rotary
# embedding (LongRoPE keeps a short and a long cache)
PLAIN_LAYOUT = ("llama", "qwen2", "qwen3", "mistral", "phi3")


class CachingAllocator:
    """PyTorch's caching allocator as far as what stays reserved (the rules in the module docstring, frees
    included): segments of blocks, best fit within a pool, a split where enough is left (large pool: more than
    1 MiB; small pool, 2 MiB segments for requests of 1 MiB or less: 512 B or more), a freed block merged
    with its free neighbours, and release() dropping the segments with nothing live in them (empty_cache)."""

    def __init__(self) -> None:
        self.segments: list[tuple[bool, list[list[int]]]] = []  # (small pool, blocks [size, owner or -1])
        self.count = 0

    def malloc(self, nbytes: int) -> int:
        """Allocate; the handle to free it with (-1 for an empty tensor, which takes no memory)."""
        if nbytes <= 0:
            return -1
        size = max(512, -(-nbytes // 512) * 512)
        small = size <= SMALL_SIZE
        best: tuple[int, int, int] | None = None
        for si, (pool, blocks) in enumerate(self.segments):
            for bi, (bsize, owner) in enumerate(blocks):
                if pool == small and owner < 0 and bsize >= size and (best is None or bsize < best[2]):
                    best = (si, bi, bsize)
        if best is None:
            seg = SMALL_BUFFER if small else LARGE_BUFFER if size < MIN_LARGE_ALLOC else -(-size // ROUND_LARGE) * ROUND_LARGE
            self.segments.append((small, [[seg, -1]]))
            best = (len(self.segments) - 1, 0, seg)
        si, bi, bsize = best
        blocks = self.segments[si][1]
        self.count += 1
        left = bsize - size
        if (left >= 512) if small else (left > SMALL_SIZE):
            blocks[bi:bi + 1] = [[size, self.count], [left, -1]]
        else:
            blocks[bi] = [bsize, self.count]
        return self.count

    def free(self, handle: int) -> None:
        if handle < 0:
            return
        for _, blocks in self.segments:
            for bi, block in enumerate(blocks):
                if block[1] == handle:
                    block[1] = -1
                    if bi + 1 < len(blocks) and blocks[bi + 1][1] < 0:
                        block[0] += blocks.pop(bi + 1)[0]
                    if bi > 0 and blocks[bi - 1][1] < 0:
                        blocks[bi - 1][0] += blocks.pop(bi)[0]
                    return
        raise KeyError(handle)

    def release(self) -> None:
        self.segments = [seg for seg in self.segments if any(owner >= 0 for _, owner in seg[1])]

    def free_bytes(self) -> int:
        """Reserved bytes no live tensor holds."""
        return sum(size for _, blocks in self.segments for size, owner in blocks if owner < 0)


def free_tail_bytes(sizes: list[int]) -> int:
    """The large-pool bytes left free inside the segments after allocating `sizes` in this order."""
    alloc = CachingAllocator()
    for size in sizes:
        if size > SMALL_SIZE:
            alloc.malloc(size)
    return alloc.free_bytes()


def weight_allocations(model: ModelSpec, dtype_bytes: float, tp: int) -> list[int] | None:
    """The weight tensors of one tensor-parallel rank in creation order; None where the layout is not the
    plain dense one (MoE, MLA, quantized, multimodal, other families)."""
    if (model.model_type not in PLAIN_LAYOUT or model.is_moe or model.kv_lora_rank or model.quantization
            or model.vision or model.multimodal or (model.model_type == "phi3" and model.rope_scaling)):
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


def weight_tail_bytes(model: ModelSpec, dtype_bytes: float, tp: int, marlin: bool = False,
                      workspace_sms: int = 0) -> int:
    """Reserved, unallocated bytes in the weights' segments (0 where the layout is not modelled). `marlin`:
    a GPTQ checkpoint runs gptq_marlin here (the plan's call: Resolved.marlin_cc, no --quantization gptq);
    `workspace_sms`: see gptq_marlin_free_bytes."""
    if model.quantization:
        return (gptq_marlin_free_bytes(model, dtype_bytes, tp, workspace_sms) or 0) if marlin else 0
    sizes = weight_allocations(model, dtype_bytes, tp)
    return free_tail_bytes(sizes) if sizes else 0


def gptq_marlin_free_bytes(model: ModelSpec, dtype_bytes: float, tp: int, workspace_sms: int = 0) -> int | None:
    """What a GPTQ checkpoint run by gptq_marlin leaves reserved and unused after load (both pools, after
    empty_cache), read in the 0.6.5 wheel. Construction (with target_device) creates each linear's
    parameters in gptq_marlin.py::GPTQMarlinLinearMethod.create_weights order: qweight (int32, in/8 x out),
    g_idx (int32 per input row), qzeros (int32, groups x out/8), scales (groups x out, the model dtype). After
    the load, model_loader/loader.py runs each module's process_weights_after_loading in named_modules order:
    kernels/marlin.py::MarlinLinearKernel allocates the Marlin workspace (out/64 x 16 int32,
    utils/marlin_utils.py::marlin_make_workspace), replaces g_idx and qzeros by empty tensors (freed: no
    act-order, no zero points), repacks qweight into a new tensor of the same size and frees the old
    (ops.gptq_marlin_repack) and permutes the scales into a new one through a 64-entry index tensor
    (marlin_permute_scales: s.reshape(-1, 64)[:, scale_perm]), freeing the old; the same in the 0.6.4.post1, 0.7.3,
    0.8.5 and 0.9.0 wheels (kernels/mixed_precision/marlin.py), except that 0.9.0's workspace is one int32
    per SM (marlin_make_workspace_new: `workspace_sms`, the card's SMs). Each freed block is reused
    by the next best-fitting request, so the repacked weights pin parts of freed segments. None where this
    is not modelled: act-order (desc_act: marlin_sort_g_idx's argsort), asymmetric or 2/3-bit checkpoints,
    channel-wise scales, and the layouts weight_allocations leaves out."""
    q = model.quantization or {}
    bits, group = int(q.get("bits") or 0), int(q.get("group_size") or 0)
    if (str(q.get("quant_method", "")).lower() != "gptq" or q.get("desc_act") or q.get("sym") is False
            or bits not in (4, 8) or group <= 0):
        return None
    dense = replace(model, quantization=None)
    if weight_allocations(dense, dtype_bytes, tp) is None:
        return None
    h, d, pack = model.hidden_size, model.head_dim, 32 // bits
    heads = model.num_attention_heads // tp
    qkv_out = (heads + 2 * max(1, model.num_key_value_heads // tp)) * d
    inter = -(-model.intermediate_size // tp)
    embed = math.ceil(model.vocab_size / VOCAB_PAD) * VOCAB_PAD // tp * h
    alloc, linears = CachingAllocator(), []

    def linear(k: int, n: int) -> None:  # create_weights: qweight, g_idx, qzeros, scales
        handles = [alloc.malloc(k // pack * n * 4), alloc.malloc(k * 4), alloc.malloc(k // group * n // pack * 4),
                   alloc.malloc(int(k // group * n * dtype_bytes))]
        linears.append((k, n, handles))

    def small(nbytes: float) -> None:  # norms and biases: never freed
        alloc.malloc(int(nbytes))

    alloc.malloc(int(embed * dtype_bytes))
    for layer in range(model.num_hidden_layers):
        linear(h, qkv_out)
        if model.model_type == "qwen2":  # qwen2.py: QKVParallelLinear(bias=True), created after the weights
            small(qkv_out * dtype_bytes)
        linear(heads * d, h)
        if layer == 0:  # get_rope caches one rotary embedding for every layer
            alloc.malloc(int(model.max_position_embeddings * d * dtype_bytes))
        linear(h, 2 * inter)
        linear(inter, h)
        small(h * dtype_bytes)
        small(h * dtype_bytes)
    small(h * dtype_bytes)
    if not model.tie_word_embeddings:
        alloc.malloc(int(embed * dtype_bytes))
    for k, n, (qweight, g_idx, qzeros, scales) in linears:
        alloc.malloc(workspace_sms * 4 if workspace_sms else n // 64 * 16 * 4)  # the workspace, kept
        alloc.free(g_idx)
        alloc.free(qzeros)
        alloc.malloc(k // pack * n * 4)
        alloc.free(qweight)
        index = alloc.malloc(64 * 8)
        alloc.malloc(int(k // group * n * dtype_bytes))
        alloc.free(index)
        alloc.free(scales)
    alloc.release()
    return alloc.free_bytes()


MARLIN_SM_WORKSPACE_FROM = (0, 9, 0)  # marlin_make_workspace_new (read in the 0.9.0 wheel; 0.8.5 sizes it by out)


def workspace_sms(gpu: GpuSpec, version: tuple[int, int, int]) -> int:
    """The SMs gptq_marlin's workspace is sized by from 0.9.0 (the H100's 132 where the card is not listed);
    0 before, where it is sized by the layer's output."""
    if version < MARLIN_SM_WORKSPACE_FROM:
        return 0
    return int(data.load("gpu_sms.yaml")["sms"].get(gpu.key) or 132)
