"""The bytes a CUDA-graph memory pool reserves for the tensors a capture allocates, as PyTorch's CUDA
caching allocator carves them (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator, read at
pytorch/pytorch 001074d; vLLM 0.6.4.post1 and 0.6.5, the V0 releases whose logs this is checked on,
require torch==2.5.1 in their wheels' METADATA).

vLLM's "took X GiB" is a drop in free device memory (torch.cuda.mem_get_info before and after: V0
worker/model_runner.py::ModelRunner.capture_model, V1 v1/worker/gpu_model_runner.py::
GPUModelRunner.capture_model), so a graph pool counts by the segments it reserved (cudaMalloc'd), not
the bytes its tensors use. A capture allocates from the graph's private pool (Note [Interaction with
CUDA graph capture]: DeviceCachingAllocator::beginAllocateToPool / PrivatePool), whose blocks are not
shared with the default pools and whose segments stay reserved while the graphs live, so empty_cache
does not take them back; within the pool, freed blocks are reused as usual. V0 captures every size into
one pool (CUDAGraphRunner.capture with graph_memory_pool = the first graph's pool()); its eager
warm-up runs allocate from the default pool, which torch.cuda.graph.__enter__ empties (empty_cache)
before each capture, so they are not in the figure.

- DeviceCachingAllocator::malloc rounds each request (round_size) to a multiple of kMinBlockSize
  (512 B), and serves it from the small pool (<= kSmallSize, 1 MiB) or the large one.
- get_free_block takes the smallest free block of the pool that fits (BlockComparatorSize: by size,
  then address); without one, alloc_block cudaMallocs a segment of get_allocation_size: kSmallBuffer
  (2 MiB) for a small request, kLargeBuffer (20 MiB) for one under kMinLargeAlloc (10 MiB), else the
  request rounded up to kRoundLarge (2 MiB).
- should_split splits the block when what remains is at least kMinBlockSize (small pool) or more than
  kSmallSize (large pool); the remainder goes back to the pool. free_block merges a freed
  block with the free blocks beside it in its segment (try_merge_blocks).
Not modelled: PYTORCH_CUDA_ALLOC_CONF's expandable_segments (off by default in torch),
max_split_size_mb and roundup_power2_divisions (unset by default); where a user sets them the pool is
still priced as above.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from servefit.memory.dtypes import dtype_bytes

if TYPE_CHECKING:
    from servefit.engines.vllm.plan import Resolved
    from servefit.models.spec import ModelSpec

K_MIN_BLOCK = 512
K_SMALL_SIZE = 1 << 20
K_SMALL_BUFFER = 2 << 20
K_LARGE_BUFFER = 20 << 20
K_MIN_LARGE_ALLOC = 10 << 20
K_ROUND_LARGE = 2 << 20


# From the second layer on every layer allocates and frees the same tensors in the same order with the
# same two held at its boundary (the residual and its input), so the pool's free blocks come back to a
# repeating layout and later layers reserve nothing more; four layers (the first's own norm output, and a
# layout that alternates between two) reserve what all of them do (checked against the whole depth for
# 150 dense shapes, 24 - 40 layers, TP 1 - 4, in tests/test_vllm_graph_pool.py at a smaller scale).
STEADY_LAYERS = 4


def round_size(size: int) -> int:
    """DeviceCachingAllocator::round_size (no roundup_power2_divisions): a multiple of 512 B, at least 512."""
    return K_MIN_BLOCK if size < K_MIN_BLOCK else K_MIN_BLOCK * -(-size // K_MIN_BLOCK)


def allocation_size(size: int) -> int:
    """DeviceCachingAllocator::get_allocation_size: the segment cudaMalloc'd for a rounded request no free
    block fits."""
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return K_ROUND_LARGE * -(-size // K_ROUND_LARGE)


@dataclass
class _Block:
    """A block of a segment, as the allocator splits and merges them (free or handed out)."""

    segment: int
    offset: int
    size: int
    free: bool = True


@dataclass
class GraphPool:
    """A private pool: malloc / free as the caching allocator serves them, `reserved` the segments held."""

    blocks: list[_Block] = field(default_factory=list)
    segments: list[int] = field(default_factory=list)
    small: dict[int, bool] = field(default_factory=dict)  # segment -> belongs to the small pool

    @property
    def reserved(self) -> int:
        return sum(self.segments)

    def malloc(self, size: int) -> _Block:
        """DeviceCachingAllocator::malloc: get_free_block (best fit in the request's pool), else alloc_block;
        then should_split / split the block."""
        size = round_size(size)
        is_small = size <= K_SMALL_SIZE
        fits = [b for b in self.blocks if b.free and b.size >= size and self.small[b.segment] == is_small]
        if fits:
            block = min(fits, key=lambda b: (b.size, b.segment, b.offset))
        else:
            seg = len(self.segments)
            self.segments.append(allocation_size(size))
            self.small[seg] = is_small
            block = _Block(seg, 0, self.segments[seg])
            self.blocks.append(block)
        remaining = block.size - size
        if remaining >= K_MIN_BLOCK if is_small else remaining > K_SMALL_SIZE:
            self.blocks.append(_Block(block.segment, block.offset + size, remaining))
            block.size = size
        block.free = False
        return block

    def free(self, block: _Block) -> None:
        """DeviceCachingAllocator::free_block: the block back to its pool, merged with the free blocks
        next to it in its segment (try_merge_blocks)."""
        block.free = True
        for other in [b for b in self.blocks if b.segment == block.segment and b.free and b is not block]:
            if other.offset + other.size == block.offset or block.offset + block.size == other.offset:
                block.offset = min(block.offset, other.offset)
                block.size += other.size
                self.blocks.remove(other)


def pool_reserved(events: list[tuple[str, int]]) -> int:
    """Segments a pool reserves over a sequence of ("alloc", bytes) / ("free", index of the alloc event)."""
    pool = GraphPool()
    held: dict[int, _Block] = {}
    for i, (op, n) in enumerate(events):
        if op == "alloc":
            held[i] = pool.malloc(n)
        else:
            pool.free(held.pop(n))
    return pool.reserved


def _dense_forward(events: list[tuple[str, int]], layers: int, h: int, qkv: int, q: int, gu: int, act: int,
                   tp: int) -> None:
    """One captured forward of a dense decoder (V0 model_executor/models/llama.py at 0.6.4, Qwen2 alike):
    LlamaModel.forward embeds (one hidden-width tensor, the first residual), LlamaDecoderLayer.forward
    normalizes out of place in the first layer and in place (fused_add_rms_norm) after it;
    LlamaAttention.forward allocates the qkv output, the attention output and o_proj's, and frees the
    first two on return; LlamaMLP.forward rebinds x to each output, so gate_up's is freed once
    SiluAndMul's is allocated and that one once down_proj's is; the layer holds o_proj's output until
    the MLP returns, the caller's loop a layer's input until the layer returns. Under tensor
    parallelism o_proj's and down_proj's all-reduce returns a new tensor (custom_all_reduce.py::
    CustomAllreduce.custom_all_reduce, out = torch.empty_like(input)); the partial sum is freed."""
    def alloc(n: int) -> int:
        events.append(("alloc", n))
        return len(events) - 1

    def reduce(x: int) -> int:
        if tp <= 1:
            return x
        y = alloc(h)
        events.append(("free", x))
        return y

    live = alloc(h)  # the embedding output: the residual from here on
    x = alloc(h)  # the first layer's normed input
    residual = live
    for _ in range(layers):
        a = alloc(qkv)
        b = alloc(q)
        o = reduce(alloc(h))
        events.extend([("free", b), ("free", a)])
        g = alloc(gu)
        s = alloc(act)
        events.append(("free", g))
        d = reduce(alloc(h))
        events.extend([("free", s), ("free", o), ("free", x)])
        x = d
    events.extend([("free", x), ("free", residual)])  # weak references only to the output (0.6.4 on)


def forward_pool(model: ModelSpec, r: Resolved, sizes: list[int]) -> int:
    """The pool a full-graph-only capture reserves (graphs.py: V0, V1's FULL modes), as the allocator
    carves it over the captures: the sizes largest first (V0 capture_model: reversed(batch_size_capture_list))
    into one pool (graph_memory_pool handed on), each forward's tensors freed when its capture ends. A dense
    model's forward is traced tensor by tensor (_dense_forward; the same tensors profile.forward_bytes
    counts at its peak: four hidden-width ones, gate_up's output and SiluAndMul's); any other is its
    working set at each size as forward_bytes prices it, four hidden-width tensors and the rest as one.
    With one size it is also what an eager forward leaves reserved in the default pool, the same
    allocator's rules (capture.released_at_capture: the autotune forward before capture_model)."""
    from servefit.engines.vllm.profile import forward_bytes

    db = dtype_bytes(r.dtype)
    tp = max(r.tp, 1)
    events: list[tuple[str, int]] = []
    for t in sorted(set(sizes), reverse=True):
        hidden = int(t * model.hidden_size * db)
        rest = forward_bytes(model, r, t) - 4 * hidden
        inter = int(t * (model.intermediate_size // tp) * db)
        heads = model.num_attention_heads // tp
        if not model.is_moe and rest == 3 * inter and heads:
            q = int(t * heads * model.head_dim * db)
            kv = int(t * max(1, model.num_key_value_heads // tp) * model.head_dim * db)
            _dense_forward(events, min(max(1, model.num_hidden_layers), STEADY_LAYERS), hidden, q + 2 * kv, q, 2 * inter, inter, tp)
        else:
            start = len(events)
            events.extend([("alloc", hidden)] * 4 + [("alloc", rest)])
            events.extend(("free", i) for i in range(start, start + 5))
    return pool_reserved(events)
