"""Ollama's classic estimator (<= 0.11.4; llama.cpp-runner models until 0.12.10):
llm/memory.go::EstimateGPULayers with GGML.GraphSize (graphsize.py), per release.

- the KV and graphs are for num_ctx x numParallel cells; batch = min(that, NumBatch) before v0.11.5
  (server/sched.go multiplied opts.NumCtx), min(num_ctx, NumBatch) after (GraphSize multiplies);
- graph sizes per architecture and release (graphsize.py), fallback gqa x kv_total / 6; on Metal
  partial = full, on several GPUs full = partial;
- a GPU is usable if free > overhead + projector + max(graphs) + MinimumMemory + 2 x layerSize(blk.0 + kv[0]);
  each usable GPU starts with MinimumMemory + one layer of buffer (v0.7.0 only: the largest group);
  layers are placed from the last one down (from the first one before v0.7.0, the unplaced ones then
  counted at the last layer's size) while free > overhead + used + max(graphs) + layer; the output layer (output_norm + output, or
  token_embd when tied) comes last; then the full (all layers placed) or partial graph is added.
- memory.required.full = all GPU allocations + what overflowed; .partial = the GPU allocations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from servefit.engines.llamacpp.model import LModel
from servefit.engines.ollama.graphsize import CTX_TIMES_PARALLEL, graph_size, kv_bytes_per_element

__all__ = ["Estimate", "estimate", "graph_size", "groups", "kv_bytes_per_element"]

LAYERS_FROM_LAST = (0, 7, 0)  # v0.7.0 EstimateGPULayers: layers placed from the last one down
MAX_GROUP_BUFFER = (0, 7, 0)  # v0.7.0 only: the one-layer buffer is the largest group (v0.7.1: blk.0 again)
MIN_CTX_2048 = (0, 7, 1)  # v0.7.1 - v0.11.4: the estimate sizes at least 2048 cells (x numParallel included)
OVERFLOW_PROJECTOR = (0, 7, 1)  # v0.7.1: a projector with no GPU to hold it counts as overflow

MIB = 2**20


@dataclass
class Estimate:
    """Ollama's classic estimate for one model load: the layers it offloads, the memory it logs as required
    (full and on the GPUs), and the parts that add up to it."""

    layers: int
    layers_model: int
    total: int  # memory.required.full
    vram: int  # memory.required.partial
    kv: int
    allocations: list[int]
    weights_repeating: int
    weights_output: int
    graph_full: int
    graph_partial: int
    split: list[int] = field(default_factory=list)

    @property
    def fully_loaded(self) -> bool:
        return self.layers >= self.layers_model


def groups(lm: LModel) -> dict[str, int]:
    """fs/ggml/ggml.go::Tensors.GroupLayers: bytes per "blk.N" / "output" / "token_embd" group."""
    out: dict[str, int] = {}
    for t in lm.tensors:
        parts = t.name.split(".")
        key = ".".join(parts[:2]) if parts[0] in ("blk", "mm") and len(parts) > 2 else parts[0]
        out[key] = out.get(key, 0) + t.nbytes
    return out


def estimate(lm: LModel, arch: str, free: list[int], num_ctx: int, num_batch: int, num_parallel: int, kvct: str,
             num_gpu: int, overhead: int, minimum: int, projector: int = 0, v: tuple[int, ...] = (0, 11, 4),
             fa: bool = False, metal: bool = False) -> Estimate:
    """llm/memory.go::EstimateGPULayers at release `v`. `num_ctx` is the per-slot context; the KV and
    graphs are for num_ctx x num_parallel cells (sched.go multiplied opts.NumCtx before v0.11.5, so batch
    was min(num_ctx x np, num_batch) then; GraphSize multiplies from v0.11.5 on, batch min(num_ctx, num_batch))."""
    grp = groups(lm)
    context = num_ctx * num_parallel
    if MIN_CTX_2048 <= v < CTX_TIMES_PARALLEL:  # "if llamaEngineProjectorWeights == 0 { ... opts.NumCtx =
        context = max(context, 2048)  # max(opts.NumCtx, 2048) }": every model without a projector file
    batch = min(num_ctx if v >= CTX_TIMES_PARALLEL else context, num_batch)
    kv, partial, full = graph_size(lm, arch, context, batch, num_parallel, kvct, v, fa)
    kv_total = sum(kv)
    if partial == 0:
        heads_kv = min(lm.n_head_kv) or 1
        partial = (max(lm.n_head) // heads_kv) * kv_total // 6
    if full == 0:
        full = partial
    if metal:
        partial = full  # "on metal there's no partial offload overhead"
    elif len(free) > 1:
        full = partial  # multigpu always uses the partial graph size
    out_layer = grp.get("output_norm", 0) + (grp["output"] if "output" in grp else grp.get("token_embd", 0))
    buffer = max(grp.values()) if v[:3] == MAX_GROUP_BUFFER and grp else grp.get("blk.0", 0)
    layer_size = buffer + (kv[0] if kv else 0)
    n = lm.n_layer
    alloc = [0] * len(free)
    counts = [0] * len(free)
    with_space: list[int] = []
    for i, f in enumerate(free):
        gzo = projector if not with_space else 0
        if f < overhead + gzo + max(partial, full) + minimum + 2 * layer_size:
            continue
        with_space.append(i)
        alloc[i] += minimum + layer_size
    overflow = 0
    if with_space:
        alloc[with_space[0]] += projector
    elif v >= OVERFLOW_PROJECTOR:
        overflow += projector
    layer_count = 0
    weights = 0
    from_last = v >= LAYERS_FROM_LAST
    for i in (range(n - 1, -1, -1) if from_last else range(n)):
        blk = grp.get(f"blk.{i}")
        if blk is not None:
            layer_size = blk + kv[i]
            weights += blk
        if 0 <= num_gpu <= layer_count:
            overflow += layer_size if from_last else 0
            continue
        for j in range(len(with_space), 0, -1):
            g = with_space[i % j]
            used = alloc[g] + max(partial, full)
            if free[g] > overhead + used + layer_size:
                alloc[g] += layer_size
                counts[g] += 1
                layer_count += 1
                break
            with_space.pop(i % j)
        if from_last and not with_space:
            overflow += layer_size
    fully = layer_count >= n
    if not from_last and not fully:  # before v0.7.0: every layer not placed counted as the last layer's size
        overflow += (n - layer_count) * layer_size
    if out_layer:
        considered = num_gpu < 0 or layer_count < num_gpu
        if considered:
            for j in range(len(with_space), 0, -1):
                g = with_space[layer_count % j]
                if free[g] > overhead + alloc[g] + max(partial, full) + out_layer:
                    alloc[g] += out_layer
                    counts[g] += 1
                    layer_count += 1
                    break
        if layer_count < n + 1 and (considered or from_last):  # before v0.7.0 only inside the num_gpu check
            fully = False
            overflow += out_layer
    for i in range(len(free)):
        if counts[i] > 0:
            alloc[i] += full if fully else partial
    vram = sum(alloc)
    return Estimate(layers=layer_count, layers_model=n + 1, total=vram + overflow, vram=vram, kv=kv_total,
                    allocations=alloc, weights_repeating=weights, weights_output=out_layer, graph_full=full,
                    graph_partial=partial, split=counts)
