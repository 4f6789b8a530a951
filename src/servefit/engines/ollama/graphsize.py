"""Ollama's KV and graph estimate, release by release: GGML.GraphSize (llm/ggml.go until v0.5.12,
fs/ggml/ggml.go from v0.5.13) and the KV that llm/memory.go::EstimateGPULayers computed itself before
v0.4.0. Returns (kv per layer, partial offload graph, full offload graph).

What changed, by tag (each read in the tag's own GraphSize):
- branches join: stablelm v0.1.33, deepseek2 v0.1.45, gemma2 (and gemma's present formula) v0.1.48,
  chatglm v0.2.2, llama4 v0.6.7; an architecture without a branch gets EstimateGPULayers' gqa x kv / 6;
- v0.3.10: llama's full graph became max(..., 4 x batch x (embedding + vocab)); before it was the
  attention term alone (v0.1.32 - v0.3.9);
- v0.5.0: the KV element size follows OLLAMA_KV_CACHE_TYPE (kvCacheBytesPerElement); f16 before;
- v0.6.0: gemma3 joins the gemma branch; v0.6.3: its sliding layers cache numParallel x window + batch
  (every 6th layer global);
- v0.9.3: head counts are the maximum of per-layer arrays (HeadCountMax/HeadCountKVMax); gemma3n
  (graphs x 4);
- v0.11.0: gpt-oss (even layers: numParallel x 4096 + batch), graphs 4 x heads / headsKVmin x kv / 6
  with partial = 2 x full; v0.11.3: partial = full;
- v0.11.5: GraphSize multiplies context by numParallel itself (the caller passes num_ctx and
  batch = min(num_ctx, num_batch)); gpt-oss sets only partial = 2 x heads / headsKVmin x kv / 6 (full
  falls back to it in EstimateGPULayers);
- v0.11.8: gpt-oss with flash attention: partial = (4 x numParallel + context >> 10 + 110) MiB;
- v0.11.11: each layer's own head_count_kv; a layer without heads is recurrent and caches
  (d_conv - 1) x (d_inner + 2 x n_group x d_state) + d_state x d_inner f32 values.
"""

from __future__ import annotations

from servefit.engines.llamacpp.model import LModel

MIB = 2**20

BRANCH_SINCE = {"stablelm": (0, 1, 33), "deepseek2": (0, 1, 45), "gemma2": (0, 1, 48), "chatglm": (0, 2, 2),
                "llama4": (0, 6, 7), "gemma3": (0, 6, 0), "gemma3n": (0, 9, 3), "gptoss": (0, 11, 0),
                "gpt-oss": (0, 11, 5)}
GEMMA_V2 = (0, 1, 48)  # gemma's graph before: full 4 x batch x (e + vocab), partial 4 x batch x (2e + vocab + 1) + ...
VOCAB_GRAPH = (0, 3, 10)
KV_TYPE = (0, 5, 0)
GEMMA3_SWA = (0, 6, 3)
HEADS_MAX = (0, 9, 3)
GPTOSS_PARTIAL_EQ_FULL = (0, 11, 3)
CTX_TIMES_PARALLEL = (0, 11, 5)
GPTOSS_FA = (0, 11, 8)
PER_LAYER_KV = (0, 11, 11)


def kv_bytes_per_element(t: str) -> float:
    """fs/ggml/ggml.go::kvCacheBytesPerElement: q8_0 1, q4_0 0.5, anything else (f16) 2."""
    return {"q8_0": 1.0, "q4_0": 0.5}.get(t, 2.0)


def _kv(lm: LModel, context: int, heads_kv: int, ehk: int, ehv: int, bpe: float, v: tuple[int, ...]) -> list[int]:
    n = lm.n_layer
    if v < PER_LAYER_KV:
        return [int(context * (ehk + ehv) * heads_kv * bpe)] * n
    out = []
    for i in range(n):  # v0.11.11 GraphSize: full attention layer vs recurrent layer
        if lm.n_head[i] > 0 and lm.n_head_kv[i] > 0:
            out.append(int(context * (ehk + ehv) * lm.n_head_kv[i] * bpe))
        else:
            out.append((lm.n_embd_r + lm.n_embd_s) * 4)  # "recurrent always uses F32"
    return out


def graph_size(lm: LModel, arch: str, context: int, batch: int, num_parallel: int, kvct: str,
               v: tuple[int, ...], fa: bool = False) -> tuple[list[int], int, int]:
    """GGML.GraphSize at release `v`. `context` is num_ctx x numParallel (the caller multiplied before
    v0.11.5, GraphSize itself after: the product is the same); `batch` is min(num_ctx, num_batch)
    computed the way the release's caller did."""
    e = lm.n_embd
    if v >= HEADS_MAX:
        heads, heads_kv, heads_min = max(lm.n_head), max(lm.n_head_kv) or 1, min(lm.n_head)
    else:  # KV.HeadCount(): the scalar key (llama.cpp writes a scalar when all layers agree)
        heads, heads_kv = lm.n_head[0], lm.n_head_kv[0] or 1
        heads_min = heads
    vocab = lm.n_vocab
    eh = e // heads_min if heads_min else 0  # EmbeddingHeadCount(Max)
    ehk, ehv = lm.head_k or eh, lm.head_v or eh
    bpe = kv_bytes_per_element(kvct) if v >= KV_TYPE else 2.0
    n = lm.n_layer
    kv = _kv(lm, context, heads_kv, ehk, ehv, bpe, v)
    kv_total = sum(kv)
    full = partial = 0
    if v < BRANCH_SINCE.get(arch, (0, 0, 0)):
        return kv, 0, 0  # no branch yet: the caller's fallback
    if arch == "gemma" and v < GEMMA_V2:
        return kv, 4 * batch * (2 * e + vocab + 1) + e * vocab * 105 // 128, 4 * batch * (e + vocab)
    if arch in ("llama", "llama4"):
        full = 4 * batch * (1 + 4 * e + context * (1 + heads))
        if v >= VOCAB_GRAPH:
            full = max(full, 4 * batch * (e + vocab))
        partial = 4 * batch * e + max(
            4 * batch * (1 + e + max(context, e)) + e * e * 9 // 16 + 4 * context * (batch * heads + eh * heads_kv),
            4 * batch * (e + vocab) + e * vocab * 105 // 128)
        exps = next((t for t in lm.tensors if t.name == "blk.0.ffn_gate_exps.weight"), None)
        gate0 = next((t for t in lm.tensors if t.name == "blk.0.ffn_gate.0.weight"), None)
        if exps is not None:  # mixtral 8x22b branch
            ff = lm.n_ff
            partial = max(3 * exps.nbytes + 4 * batch * (2 * ff + heads_kv + e + context + eh * heads_kv),
                          4 * (context * batch * heads + context * eh * heads_kv + batch * 1024 + eh * heads_kv * batch))
        elif gate0 is not None and len(gate0.shape) > 1:  # mixtral 8x7b branch (per-expert gate tensors)
            g1 = gate0.shape[1]
            full = 4 * batch * (2 + 3 * e + context * (1 + heads) + 2 * heads_kv + g1)
            partial = max(4 * batch * (3 + eh * heads_kv + e + context * (1 + heads) + g1)
                          + (e * e + 3 * e * heads_kv * g1) * 9 // 16,
                          4 * batch * (1 + 2 * e + context * (1 + heads)) + e * (6 * context * heads_kv // heads + e * 9 // 16))
    elif arch in ("gemma", "gemma2", "gemma3", "gemma3n"):
        full = max(4 * batch * (e + vocab), 4 * batch * (2 + context + context * heads + 2 * e + 2 * ehk * heads))
        partial = max(4 * e * batch + e * vocab * 105 // 128 + 4 * vocab * batch,
                      4 * batch * (2 * e + 1 + 2 * ehk * heads + context + context * heads)
                      + 4 * ehk * context * 8 + e * ehk * heads * 9 // 16)
        if arch == "gemma3n":
            full, partial = full * 4, partial * 4
        if arch == "gemma3" and v >= GEMMA3_SWA:
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
    elif arch == "chatglm":
        full = 4 * batch * (e + vocab)
        partial = 4 * batch * (e + vocab) + e * vocab * 105 // 128
        qkv_bias = next((t for t in lm.tensors if t.name == "blk.0.attn_qkv.bias"), None)
        if qkv_bias is not None:
            b0 = qkv_bias.shape[0]
            full = max(full, 4 * batch * (2 + 2 * e + context + context * heads + ehk * heads + b0))
            partial = max(partial, 4 * batch * (1 + 2 * e + ehk * heads + context + context * heads)
                          + 4 * ehk * context + 4 * context * ehk + 4 * b0)
    elif arch in ("gptoss", "gpt-oss"):
        hkv_min = min(lm.n_head_kv) or 1
        kv = [int((ehk + ehv) * heads_kv * bpe) * ((num_parallel * 4096 + batch) if i % 2 == 0 else context)
              for i in range(n)]
        if v < CTX_TIMES_PARALLEL:
            full = 4 * heads // hkv_min * kv_total // 6  # kv_total: the sum from before this override
            partial = full if v >= GPTOSS_PARTIAL_EQ_FULL else 2 * full
        else:
            partial = 2 * heads // hkv_min * kv_total // 6
            if fa and v >= GPTOSS_FA:
                partial = (4 * num_parallel + (context >> 10) + 110) * MIB
    return kv, partial, full
