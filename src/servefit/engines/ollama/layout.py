"""Ollama's layout era (0.11.5 - 0.2x): llm/server.go::buildLayout / assignLayers.

The runner reports (or, on the llama-runner path, GraphSize estimates) weights, cache and graph per
device; each GPU reserves MinimumMemory + OLLAMA_GPU_OVERHEAD + its graph; layers (weights + their
cache) are packed from the last layer down, the output layer first, onto as few GPUs as possible.
The Ollama engine's cache (kvcache/causal.go::Causal.Init, see cache_cells) holds num_ctx x
num_parallel cells per full-attention layer and num_parallel x window + batch per sliding-window layer,
rounded up to CachePadding, in the exact ggml type sizes. Log: msg="model weights" / "kv cache" /
"compute graph" per device, then msg="total memory" (ml/device.go::BackendMemory.Log)."""

from __future__ import annotations

from typing import Any

from servefit.core import DeviceMemory, EngineConfig, MemoryPlan
from servefit.engines.llamacpp import compute as C
from servefit.engines.llamacpp import kv as K
from servefit.engines.llamacpp.model import LModel
from servefit.engines.ollama import classic as CL
from servefit.engines.ollama.detail import OllamaDetail
from servefit.engines.ollama.graphsize import graph_size
from servefit.engines.ollama.report import gib, human_bytes
from servefit.hardware.spec import GpuSpec
from servefit.models.gguf import row_bytes

SWA_MEM = {"gptoss": 4096, "gpt-oss": 4096, "gemma4": 4096}  # kvcache.NewSWAMemCache(window, 4096, ...)
# model/models/llama4/model.go: kvcache.NewChunkedAttentionCache(chunk_size) sets only chunkSize; its swaWindowSize stays
# 0, which Causal.Init reads as math.MaxInt32, so the chunked layers hold maxSequences x capacity cells like the rest
CHUNKED_FULL = {"llama4"}
CACHE_BATCH_CLAMPED = (0, 12, 0)  # llm/server.go: opts.NumBatch = min(opts.NumBatch, opts.NumCtx)
SWA_PLUS_ONE = (0, 12, 4)  # Causal.Init: memory >= window + 1 with several sequences; ">= capacity" -> full
PAD_256_NO_FA = (0, 13, 2)  # ggml Backend.CacheConfig: CachePadding 256 without flash attention (32 before)


def cache_cells(v: tuple[int, ...], arch: str, num_ctx: int, np_: int, num_batch: int, fa: bool,
                window: int) -> tuple[int, int]:
    """(cells of a full-attention layer, cells of a sliding-window layer) as kvcache/causal.go::Causal.Init
    sizes them: capacity = num_ctx per sequence (runner/ollamarunner/cache.go::NewInputCache), maxBatch =
    the load request's BatchSize; rounded up to ml/backend/ggml Backend.CacheConfig's CachePadding
    (256 with flash attention; 32 without before v0.13.2)."""
    pad = 256 if fa or v >= PAD_256_NO_FA else 32
    max_batch = min(num_batch, num_ctx) if v >= CACHE_BATCH_CLAMPED else num_batch
    cells = K.pad(num_ctx * np_, pad)
    if not window or arch in CHUNKED_FULL:
        return cells, cells
    mem = SWA_MEM.get(arch, window)
    if v >= SWA_PLUS_ONE and np_ > 1:
        mem = max(mem, window + 1)
    if (mem >= num_ctx) if v >= SWA_PLUS_ONE else (mem > num_ctx):
        return cells, cells  # swaMemorySize = MaxInt32: the whole context
    return cells, K.pad(np_ * mem + max_batch, pad)


RECURRENT_BASE = (0, 17, 1)  # kvcache/recurrent.go, the state cache LFM2 / Nemotron-H / Qwen3-Next share


def recurrent_state_bytes(lm: LModel, v: tuple[int, ...], np_: int) -> int:
    """A state layer's cache on the Ollama engine (model/models/{qwen3next,nemotronh,lfm2}/cache.go): conv state
    ConvDim x ConvChannels and the recurrent state, f32, for every one of the maxSequences (num_parallel) slots,
    allocated in the layer's context (ml.Context.Layer), so the runner counts it as that layer's cache. The sizes
    are llama.cpp's n_embd_r / n_embd_s (qwen3next: (conv_kernel - 1) x (d_inner + 2 n_group d_state) and head_v^2
    x value heads; nemotronh: d_state x head_dim x heads); LFM2 keeps one recurrent float per slot from the shared
    kvcache.Recurrent base of v0.17.1 (RecurrentStateSize: 1), none with its own cache before."""
    lfm2_state = 1 if lm.arch.startswith("lfm2") and v >= RECURRENT_BASE else 0
    return 4 * (lm.n_embd_r + lm.n_embd_s + lfm2_state) * np_


def llama_runner_estimate(lm: LModel, ctx: dict[str, Any], batch: int, kvt: str, metal: bool
                          ) -> tuple[list[int], int, int]:
    """(kv per layer, partial graph, full graph) for a llama-runner model, v0.12.11+ llm/server.go
    llamaServer.Load: GraphSize(num_ctx, BatchSize = min(num_batch, num_ctx), numParallel, kvct, FA), the
    gqa x kv / 6 fallback, Metal partial = full. Unlike EstimateGPULayers there is no several-GPU rule:
    layers are fitted with max(partial, full) and the graph logged is full when every layer is on a GPU."""
    kv, partial, full = graph_size(lm, ctx["arch"], ctx["num_ctx"] * ctx["num_parallel"], batch, ctx["num_parallel"],
                                   kvt, ctx["v"], False)
    if partial == 0:
        partial = (max(lm.n_head) // (min(lm.n_head_kv) or 1)) * sum(kv) // 6
    full = full or partial
    if metal:
        partial = full
    return kv, partial, full


def layout_plan(cfg: EngineConfig, lm: LModel, gpu: GpuSpec, free: list[int], ctx: dict[str, Any], fa: bool,
                kvt: str, est: CL.Estimate, overhead: int, minimum: int, assumptions: list[str]) -> MemoryPlan:
    s = cfg.settings
    np_, num_ctx = ctx["num_parallel"], ctx["num_ctx"]
    batch = min(int(s.get("num_batch", 512)), num_ctx)
    cells, swa_cells = cache_cells(ctx["v"], ctx["arch"], num_ctx, np_, int(s.get("num_batch", 512)), fa, lm.n_swa)
    grp = CL.groups(lm)
    layer_w = [grp.get(f"blk.{i}", 0) for i in range(lm.n_layer)]
    eng = bool(ctx.get("eng"))
    layer_kv = []
    for il in range(lm.n_layer):
        if eng and lm.recurrent and lm.recurrent[il]:
            layer_kv.append(recurrent_state_bytes(lm, ctx["v"], np_))
            continue
        if not lm.has_kv(il):
            layer_kv.append(0)
            continue
        c = swa_cells if lm.swa[il] else cells
        # kvcache/causal.go Causal.Put allocates a value tensor of the value's width in every layer: MLA models
        # (model/models/deepseek2, glm4moelite: nn.AttentionWithVMLA(query, key, value = the kv_lora_rank latent))
        # keep a V of kv_lora_rank beside the K of kv_lora_rank + rope, unlike llama.cpp's V-less MLA cache
        vw = lm.v_width(il, 0)
        layer_kv.append((row_bytes(kvt, lm.k_width(il)) + (row_bytes(kvt, vw) if vw else 0)) * c)
    out_w = grp.get("output_norm", 0) + (grp["output"] if "output" in grp else grp.get("token_embd", 0))
    buffer = 0
    if eng:
        cp = K.CtxParams(n_ctx=cells, n_ctx_seq=cells, n_seq=np_, n_stream=1, unified=True, n_ubatch=batch,
                         n_batch=batch)
        kvl = K.KvLayout(cells_base=cells, cells_swa=swa_cells if lm.n_swa else 0, n_stream=1)
        graph = graph_fit = C.compute_buffer(lm, cp, kvl, fa, 0).device
    else:
        layer_kv, graph_partial, graph = llama_runner_estimate(lm, ctx, batch, kvt, gpu.vendor == "apple")
        graph_fit = max(graph_partial, graph)
        cells = num_ctx * np_  # GraphSize's context: no cache padding on this path
        buffer = layer_w[0] + layer_kv[0] if lm.n_layer else 0
    num_gpu = int(s.get("num_gpu", -1))
    used = [minimum + overhead + graph_fit + buffer for _ in free]
    on_dev: list[int | None] = [None] * (lm.n_layer + 1)  # index n_layer: output layer
    order = [lm.n_layer] + list(range(lm.n_layer - 1, -1, -1))
    placed = 0
    d = 0
    for il in order:
        if 0 <= num_gpu <= placed:
            break
        need = out_w if il == lm.n_layer else layer_w[il] + layer_kv[il]
        while d < len(free) and used[d] + need > free[d]:
            d += 1
        if d >= len(free):
            break
        used[d] += need
        on_dev[il] = d
        placed += 1
    if not eng and placed < lm.n_layer + 1:
        graph = graph_partial  # "the historical assignment of graph sizes": partial unless every layer is on a GPU
    devices = []
    for i in range(len(free)):
        w = sum(layer_w[il] for il in range(lm.n_layer) if on_dev[il] == i) + (out_w if on_dev[lm.n_layer] == i else 0)
        kvb = sum(layer_kv[il] for il in range(lm.n_layer) if on_dev[il] == i)
        g = graph if any(x == i for x in on_dev) else 0
        devices.append(DeviceMemory(total=gpu.memory_bytes, budget=free[i], weights=w, activation_peak=g,
                                    non_torch=minimum + overhead, kv_cache=kvb,
                                    free_headroom=max(0, free[i] - (w + kvb + g + minimum + overhead)),
                                    label=f"GPU{i} ({gpu.name})"))
    gpu_total = sum(dm.weights + dm.kv_cache + dm.activation_peak for dm in devices)
    # the llama-runner path synthesises its figures and "historically" leaves the input embeddings out
    all_w = sum(layer_w) + out_w + (grp.get("token_embd", 0) * (1 if "output" in grp else 0) if eng else 0)
    # ml/device.go::BackendMemory.Log: the total adds every device's graph (the Ollama engine's CPU graph when
    # no layer is on a GPU; the llama-runner path gives the CPU none)
    gpu_graphs = sum(dm.activation_peak for dm in devices)
    total = all_w + sum(layer_kv) + (gpu_graphs or graph if eng else gpu_graphs)
    forced = num_gpu > placed
    detail = OllamaDetail(memory_required_gib=gib(total), total_memory_gib=gib(total), vram_gib=gib(gpu_total),
                          model_weights_gib=gib(sum(dm.weights for dm in devices)),
                          kv_cache_gib=gib(sum(layer_kv)), compute_graph_gib=gib(graph),
                          layers_offloaded=placed, layers_model=lm.n_layer + 1, num_ctx=num_ctx, num_parallel=np_,
                          kv_cache_type=kvt, flash_attention=fa, era="layout", kv_cache_cells=cells)
    # ml/device.go::BackendMemory.Log: weights of each GPU then the CPU, then the caches, then the graphs,
    # a line only where the size is not zero, then the total
    names = [f"CUDA{i}" if gpu.vendor == "nvidia" else f"ROCm{i}" if gpu.vendor == "amd" else "Metal"
             for i in range(len(devices))]
    cpu_w = all_w - sum(dm.weights for dm in devices)
    cpu_kv = sum(layer_kv) - sum(dm.kv_cache for dm in devices)
    msgs = []
    for what, per_gpu, cpu in (("model weights", [dm.weights for dm in devices], cpu_w),
                               ("kv cache", [dm.kv_cache for dm in devices], cpu_kv),
                               ("compute graph", [dm.activation_peak for dm in devices], 0)):
        msgs += [f'msg="{what}" device={n} size="{human_bytes(b)}"' for n, b in zip(names, per_gpu, strict=True) if b > 0]
        if cpu > 0:
            msgs.append(f'msg="{what}" device=CPU size="{human_bytes(cpu)}"')
    msgs.append(f'msg="total memory" size="{human_bytes(total)}"')
    msgs.append(f"load_tensors: offloaded {placed}/{lm.n_layer + 1} layers to GPU")
    if not eng:
        assumptions.append("llama-runner model: compute graph from Ollama's GraphSize estimate")
    worst = max(range(len(devices)), key=lambda i: (devices[i].weights + devices[i].kv_cache) / max(1, free[i]))
    return MemoryPlan(engine="ollama", engine_version=cfg.version or "", outcome="oom_at_load" if forced else "started",
                      memory=devices[worst], kv_bytes_per_token=sum(layer_kv) // max(1, cells),
                      kv_cache_tokens=cells, max_model_len=num_ctx, max_concurrency=float(np_),
                      devices=devices if len(devices) > 1 else [],
                      parallel={"tensor": 1, "pipeline": 1, "world": len(devices)}, messages=msgs, detail=detail)
