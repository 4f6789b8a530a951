"""Ollama's classic estimator (<= 0.11.4; llama.cpp-runner models until 0.12.10):
llm/memory.go::EstimateGPULayers with fs/ggml/ggml.go::GraphSize, as of v0.11.4.

- NumCtx is already num_ctx x numParallel (server/sched.go), batch = min(NumCtx, NumBatch);
- kv[i] = ctx x (key_length + value_length) x head_count_kv x bytes/element (f16 2, q8_0 1, q4_0 0.5:
  kvCacheBytesPerElement), Gemma-3 SWA layers and gpt-oss even layers use np x window + batch;
- graph sizes per architecture (full offload / partial offload), fallback gqa x kv_total / 6;
- a GPU is usable if free > overhead + projector + max(graphs) + MinimumMemory + 2 x layerSize(blk.0 + kv[0]);
  each usable GPU starts with MinimumMemory + one layer of buffer; layers are placed from the last one
  down while free > overhead + used + max(graphs) + layer; the output layer (output_norm + output, or
  token_embd when tied) comes last; then the full (all layers placed) or partial graph is added.
- memory.required.full = all GPU allocations + what overflowed; .partial = the GPU allocations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from servefit.engines.llamacpp.model import LModel

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


def kv_bytes_per_element(t: str) -> float:
    return {"q8_0": 1.0, "q4_0": 0.5}.get(t, 2.0)


def graph_size(lm: LModel, arch: str, context: int, batch: int, num_parallel: int, kvct: str,
               grp: dict[str, int]) -> tuple[list[int], int, int]:
    """(kv per layer, partial, full) -- fs/ggml/ggml.go::GraphSize."""
    e = lm.n_embd
    heads = max(lm.n_head)
    heads_kv = max(lm.n_head_kv) or 1
    heads_min = min(lm.n_head) or 1
    vocab = lm.n_vocab
    eh = e // heads_min if heads_min else 0
    ehk, ehv = lm.head_k or eh, lm.head_v or eh
    bpe = kv_bytes_per_element(kvct)
    n = lm.n_layer
    kv = [int(context * (ehk + ehv) * heads_kv * bpe)] * n
    full = partial = 0
    if arch in ("llama", "llama4"):
        full = max(4 * batch * (1 + 4 * e + context * (1 + heads)), 4 * batch * (e + vocab))
        partial = 4 * batch * e + max(
            4 * batch * (1 + e + max(context, e)) + e * e * 9 // 16 + 4 * context * (batch * heads + eh * heads_kv),
            4 * batch * (e + vocab) + e * vocab * 105 // 128)
        exps = next((t for t in lm.tensors if t.name == "blk.0.ffn_gate_exps.weight"), None)
        if exps is not None:  # mixtral 8x22b branch
            ff = lm.n_ff
            partial = max(3 * exps.nbytes + 4 * batch * (2 * ff + heads_kv + e + context + eh * heads_kv),
                          4 * (context * batch * heads + context * eh * heads_kv + batch * 1024 + eh * heads_kv * batch))
    elif arch in ("gemma", "gemma2", "gemma3", "gemma3n"):
        full = max(4 * batch * (e + vocab), 4 * batch * (2 + context + context * heads + 2 * e + 2 * ehk * heads))
        partial = max(4 * e * batch + e * vocab * 105 // 128 + 4 * vocab * batch,
                      4 * batch * (2 * e + 1 + 2 * ehk * heads + context + context * heads)
                      + 4 * ehk * context * 8 + e * ehk * heads * 9 // 16)
        if arch == "gemma3n":
            full, partial = full * 4, partial * 4
        if arch == "gemma3" and lm.n_swa:
            sw = num_parallel * lm.n_swa + batch
            kv = [kv[i] if (i + 1) % 6 == 0 else int(sw * (ehk + ehv) * heads_kv * bpe) for i in range(n)]
    elif arch == "command-r":
        full = max(4 * batch * (e + vocab), 4 * batch * (2 + 4 * e + context * (1 + heads)))
        partial = max(4 * batch * (e + vocab) + e * vocab * 105 // 128,
                      4 * batch * (1 + 2 * e + context * (1 + heads)) + 4 * e * context + e * e * 9 // 16)
    elif arch == "qwen2":
        full = max(4 * batch * (e + vocab), 4 * batch * (1 + 2 * e + context + context * heads))
        partial = max(4 * batch * (e + vocab) + e * vocab * 105 // 128,
                      4 * (batch * (1 + 2 * e + context * (1 + heads)) + e * (1 + context)))
    elif arch == "phi2":
        full = max(4 * batch * (e + vocab), 4 * batch * (1 + 4 * e + context + context * heads))
        partial = max(4 * batch * (2 * e + vocab) + e * vocab * 105 // 128,
                      4 * batch * (2 + 3 * e + context + context * heads))
    elif arch == "stablelm":
        full = 4 * batch * (context * (1 + heads) + 3 * e + 2)
        partial = max(4 * batch * (vocab + 2 * e), full)
    elif arch == "deepseek2":
        full = max(4 * batch * (3 * e + vocab), 4 * batch * (3 * e + 2 + context * (1 + heads_kv) + 2 * ehk * heads_kv))
        partial = max(4 * batch * (3 * e + vocab) + e * vocab * 105 // 128,
                      4 * batch * (2 * e + 1 + 2 * ehk * heads_kv + context + context * heads_kv)
                      + 4 * ehk * context * heads_kv + e * ehk * heads_kv * 9 // 16)
    elif arch in ("gptoss", "gpt-oss"):
        kv = [int((ehk + ehv) * heads_kv * bpe) * ((num_parallel * 4096 + batch) if i % 2 == 0 else context)
              for i in range(n)]
        kv_total = int(context * (ehk + ehv) * heads_kv * bpe) * n  # the total from before this override
        full = partial = 4 * heads // max(1, min(lm.n_head_kv) or 1) * kv_total // 6
    return kv, partial, full


def estimate(lm: LModel, arch: str, free: list[int], num_ctx: int, num_batch: int, num_parallel: int, kvct: str,
             num_gpu: int, overhead: int, minimum: int, projector: int = 0) -> Estimate:
    grp = groups(lm)
    batch = min(num_ctx, num_batch)
    kv, partial, full = graph_size(lm, arch, num_ctx, batch, num_parallel, kvct, grp)
    kv_total = sum(kv)
    if partial == 0:
        heads_kv = min(lm.n_head_kv) or 1
        partial = (max(lm.n_head) // heads_kv) * kv_total // 6
    if full == 0:
        full = partial
    if len(free) > 1:
        full = partial  # multigpu always uses the partial graph size
    out_layer = grp.get("output_norm", 0) + (grp["output"] if "output" in grp else grp.get("token_embd", 0))
    layer_size = grp.get("blk.0", 0) + (kv[0] if kv else 0)
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
    else:
        overflow += projector
    layer_count = 0
    weights = 0
    for i in range(n - 1, -1, -1):
        blk = grp.get(f"blk.{i}")
        if blk is not None:
            layer_size = blk + kv[i]
            weights += blk
        if 0 <= num_gpu <= layer_count:
            overflow += layer_size
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
        if not with_space:
            overflow += layer_size
    fully = layer_count >= n
    if out_layer:
        if num_gpu < 0 or layer_count < num_gpu:
            for j in range(len(with_space), 0, -1):
                g = with_space[layer_count % j]
                if free[g] > overhead + alloc[g] + max(partial, full) + out_layer:
                    alloc[g] += out_layer
                    counts[g] += 1
                    layer_count += 1
                    break
        if layer_count < n + 1:
            fully = False
            overflow += out_layer
    for i in range(len(free)):
        if counts[i] > 0:
            alloc[i] += full if fully else partial
    vram = sum(alloc)
    return Estimate(layers=layer_count, layers_model=n + 1, total=vram + overflow, vram=vram, kv=kv_total,
                    allocations=alloc, weights_repeating=weights, weights_output=out_layer, graph_full=full,
                    graph_partial=partial, split=counts)
