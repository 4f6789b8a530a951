"""The bytes a CUDA-graph memory pool reserves for the tensors a capture allocates, as PyTorch's CUDA
caching allocator carves them (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator; the
constants and functions below are the same in torch 2.1 - 2.9, the releases vLLM pinned from 0.2.x
to 0.11: requirements-cuda.txt / requirements/cuda.txt in each wheel's source).

vLLM's "took X GiB" is a drop in free device memory (torch.cuda.mem_get_info, V0
worker/model_runner.py::ModelRunner.capture_model; V1 v1/worker/gpu_model_runner.py::
GPUModelRunner.capture_model), so a graph pool counts by the segments it reserved (cudaMalloc'd), not
the bytes its tensors use. A capture allocates from the graph's private pool (Note [Interaction with
CUDA graph capture]: DeviceCachingAllocator::beginAllocateToPool / PrivatePool), whose blocks are not
shared with the default pools and whose segments are not returned until the pool is released, so
empty_cache does not take them back; within the pool, freed blocks are reused as usual.

- DeviceCachingAllocator::malloc rounds each request (round_size) to a multiple of kMinBlockSize
  (512 B), and serves it from the small pool (<= kSmallSize, 1 MiB) or the large one.
- get_free_block takes the smallest free block of the pool that fits (BlockComparatorSize: by size,
  then address); without one, alloc_block cudaMallocs a segment of get_allocation_size: kSmallBuffer
  (2 MiB) for a small request, kLargeBuffer (20 MiB) for one under kMinLargeAlloc (10 MiB), else the
  request rounded up to kRoundLarge (2 MiB).
- should_split splits the block when what remains is at least kMinBlockSize (small pool) or more than
  kSmallSize (large pool); the remainder goes back to the pool.
Not modelled: expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, off by default
throughout; vLLM's sleep mode uses its own CuMemAllocator), max_split_size_mb and roundup_power2_divisions
(unset by default).
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
    segment: int
    offset: int
    size: int
    free: bool = True


@dataclass
class GraphPool:
    """A private pool: malloc as the caching allocator serves it, `reserved` the segments held."""

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


def pool_reserved(tensors: list[int]) -> int:
    """Segments a pool reserves for these tensors allocated in order and alive together (a forward's peak
    working set, the largest batch captured first into a pool no earlier capture has grown)."""
    pool = GraphPool()
    for size in tensors:
        if size > 0:
            pool.malloc(size)
    return pool.reserved


def forward_pool(model: ModelSpec, r: Resolved, tokens: int) -> int:
    """The pool a full-graph-only capture reserves (graphs.py: V0, V1's FULL modes): the forward's working
    set at the largest batch as profile.forward_bytes prices it, tensor by tensor through the allocator:
    the four hidden-width tensors, then for a dense model the gate_up output and the SiluAndMul output
    (forward.py::mlp_bytes), else the rest of the working set as one allocation."""
    from servefit.engines.vllm.profile import forward_bytes

    db = dtype_bytes(r.dtype)
    hidden = int(tokens * model.hidden_size * db)
    total = forward_bytes(model, r, tokens)
    rest = total - 4 * hidden
    inter = int(tokens * (model.intermediate_size // max(r.tp, 1)) * db)
    if not model.is_moe and rest == 3 * inter:
        return pool_reserved([hidden] * 4 + [2 * inter, inter])
    return pool_reserved([hidden] * 4 + [rest])
