"""The CUDA-graph pool as PyTorch's caching allocator reserves it (engines/vllm/graph_pool.py, after
c10/cuda/CUDACachingAllocator.cpp::DeviceCachingAllocator): request rounding, segment sizes, best fit,
splitting and merging, replayed on small sequences whose segments can be counted by hand."""

from __future__ import annotations

from servefit.engines.vllm import graph_pool as gp

MiB = 2**20


def test_requests_round_to_512_bytes_and_segments_by_size_class():
    assert gp.round_size(1) == 512 and gp.round_size(512) == 512 and gp.round_size(513) == 1024
    # small (<= 1 MiB) requests get a 2 MiB segment, 1 - 10 MiB a 20 MiB one, larger ones their size rounded to 2 MiB
    assert gp.allocation_size(MiB) == 2 * MiB
    assert gp.allocation_size(MiB + 512) == 20 * MiB
    assert gp.allocation_size(10 * MiB - 512) == 20 * MiB
    assert gp.allocation_size(10 * MiB) == 10 * MiB
    assert gp.allocation_size(18 * MiB + 512) == 20 * MiB


def test_best_fit_and_split_rules():
    pool = gp.GraphPool()
    a = pool.malloc(3 * MiB)  # a 20 MiB segment, 17 MiB left as a free block
    b = pool.malloc(9 * MiB)  # fits the 17 MiB block: no new segment
    assert pool.segments == [20 * MiB] and (a.size, b.size) == (3 * MiB, 9 * MiB)
    # 8 MiB left: a 7 MiB request leaves exactly 1 MiB, which the large pool does not split off (> kSmallSize)
    c = pool.malloc(7 * MiB)
    assert c.size == 8 * MiB and pool.segments == [20 * MiB]
    # small requests have their own pool: a 2 MiB segment, split down to 512 B remainders
    d = pool.malloc(600 * 1024)
    assert pool.segments == [20 * MiB, 2 * MiB] and d.size == 600 * 1024
    # best fit: with a 14 MiB and a 20 MiB free block, a 2 MiB request takes the 14 MiB one
    fit = gp.GraphPool()
    big, other = fit.malloc(20 * MiB), fit.malloc(14 * MiB)
    fit.free(big)
    fit.free(other)
    assert fit.malloc(2 * MiB).segment == 1


def test_freed_neighbours_merge_and_are_reused():
    pool = gp.GraphPool()
    a, b, _ = pool.malloc(4 * MiB), pool.malloc(4 * MiB), pool.malloc(4 * MiB)
    pool.free(a)
    pool.free(b)
    # the two freed 4 MiB blocks merge: 8 MiB fits in the segment again
    assert pool.malloc(8 * MiB).offset == 0 and pool.reserved == 20 * MiB
    assert gp.pool_reserved([("alloc", 4 * MiB), ("alloc", 4 * MiB), ("free", 0), ("free", 1), ("alloc", 8 * MiB)]) == 20 * MiB
    # 12 MiB left in the segment: a 13 MiB request (>= 10 MiB) takes a segment of its own, rounded to 2 MiB
    assert gp.pool_reserved([("alloc", 4 * MiB), ("alloc", 4 * MiB), ("alloc", 13 * MiB)]) == 20 * MiB + 14 * MiB


def test_later_layers_reserve_nothing_more():
    # a few dense shapes, smaller than the 150 checked when STEADY_LAYERS was chosen
    for h, inter, tp in ((3584, 18944, 1), (4096, 14336, 2), (5120, 17920, 1), (896, 4864, 1)):
        sizes = sorted({1, 2, 4, *range(8, 257, 8)}, reverse=True)
        reserved = []
        for layers in (gp.STEADY_LAYERS, 28):
            events: list[tuple[str, int]] = []
            for t in sizes:
                hidden, q, kv = t * h * 2, t * h * 2 // tp, t * 1024 // tp
                gp._dense_forward(events, layers, hidden, q + 2 * kv, q, 2 * t * inter * 2 // tp, t * inter * 2 // tp, tp)
            reserved.append(gp.pool_reserved(events))
        assert reserved[0] == reserved[1], (h, inter, tp)


def test_a_dense_forward_at_256_tokens():
    # Llama-3.1-8B, one size of 256 tokens, bf16: hidden 2 MiB, qkv 3, attention output 2, o_proj 2 and the
    # 7 MiB SiluAndMul output in one 20 MiB segment, gate_up's 14 MiB in one of its own; the second layer
    # reuses both, and by the third the freed blocks lie so that SiluAndMul's output (allocated while
    # gate_up's is alive) fits no free block: a third 20 MiB segment
    events: list[tuple[str, int]] = []
    gp._dense_forward(events, 2, 2 * MiB, 3 * MiB, 2 * MiB, 14 * MiB, 7 * MiB, 1)
    assert gp.pool_reserved(events) == 34 * MiB
    events = []
    gp._dense_forward(events, 4, 2 * MiB, 3 * MiB, 2 * MiB, 14 * MiB, 7 * MiB, 1)
    assert gp.pool_reserved(events) == 54 * MiB
    # under TP o_proj's and down_proj's all-reduce outputs are new tensors: 8 allocations a layer, not 6
    tp: list[tuple[str, int]] = []
    gp._dense_forward(tp, 4, 2 * MiB, 3 * MiB, 2 * MiB, 14 * MiB, 7 * MiB, 2)
    assert sum(1 for op, _ in tp if op == "alloc") == 2 + 4 * 8
    assert sum(1 for op, _ in events if op == "alloc") == 2 + 4 * 6
