"""The KV cache exactly as llama.cpp sizes it.

- context: src/llama-context.cpp::llama_context::llama_context: n_ctx = -c or n_ctx_train,
  GGML_PAD(n_ctx, 256) (b6975+); unified -> n_ctx_seq = n_ctx, else n_ctx_seq = PAD(n_ctx / n_seq, 256)
  and n_ctx = n_ctx_seq * n_seq. Before b6868 the size was padded to 256 with flash attention and 32
  without (llama_kv_cache_unified::get_padding); between b6868 and b6975 not at all.
- per layer: src/llama-kv-cache.cpp::llama_kv_cache::llama_kv_cache: K = row_size(type_k, n_embd_k_gqa(il))
  x kv_size x n_stream, V likewise (none for MLA: has_v = !is_mla); without flash attention V widths
  that vary across layers are padded to the largest.
- sliding window: src/llama-kv-cache-iswa.cpp llama_kv_cache_iswa::llama_kv_cache_iswa (the _unified_iswa
  constructor in src/llama-kv-cache.cpp before), or size_base with --swa-full. By build:
  from #13194 (ISWA) min(size_base, PAD(n_swa*n_seq_max + n_batch, n_pad)), n_pad the cache padding (256
  with flash attention, 32 without); from #13833 (SWA_UBATCH) n_ubatch in place of n_batch; from #14363
  (KV_UNIFIED_OPTION) n_swa*(unified ? n_seq_max : 1); from #16812 (NO_PAD) n_pad is 1 (no padding);
  from #17046 (PAD_256) PAD(min(size_base, ...), 256).
- recurrent state: src/llama-memory-recurrent.cpp: f32 r/s rows x max(1, n_seq) x (1 + n_rs_seq) per recurrent
  layer (n_rs_seq: the speculative-decoding rollback snapshots, mtp.n_rs_seq).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from servefit.engines.llamacpp import versions as V
from servefit.engines.llamacpp.model import LModel
from servefit.models.gguf import row_bytes


def pad(x: int, n: int) -> int:
    """ggml.h::GGML_PAD (round up)."""
    return (x + n - 1) // n * n if n > 1 else x


@dataclass
class CtxParams:
    """The context llama.cpp settles on from -c, -np and the batch sizes: cells in all and per slot after
    padding, the KV streams, and the clamped batch sizes."""

    n_ctx: int  # total cells after padding (all streams)
    n_ctx_seq: int  # cells per stream = per-slot limit
    n_seq: int
    n_stream: int
    unified: bool
    n_ubatch: int
    n_batch: int
    kv_cells: int = 0  # cells per stream (= n_ctx_seq since multi-stream KV; n_ctx before)

    def __post_init__(self) -> None:
        if not self.kv_cells:
            self.kv_cells = self.n_ctx_seq


def context(lm: LModel, ctx: int, n_seq: int, unified: bool, n_batch: int, n_ubatch: int, fa: bool,
            b: int) -> CtxParams:
    n_seq = max(1, min(int(n_seq), 256))  # LLAMA_MAX_SEQ
    n_ctx = raw = ctx if ctx > 0 else lm.n_ctx_train
    if b >= V.PAD_256:
        n_ctx = pad(n_ctx, 256)
    elif b < V.NO_PAD:
        n_ctx = pad(n_ctx, 256 if fa else 32)
    if b < V.KV_UNIFIED_OPTION:  # one cache shared by every sequence; the server's slots get n_ctx / np
        n_batch = min(n_batch, n_ctx)
        return CtxParams(n_ctx=n_ctx, n_ctx_seq=n_ctx // n_seq, n_seq=n_seq, n_stream=1, unified=False,
                         n_ubatch=min(n_batch, n_ubatch), n_batch=n_batch, kv_cells=n_ctx)
    if unified:
        n_ctx_seq = n_ctx
    elif b < V.NO_PAD:
        # src/llama-model.cpp llama_model::create_memory (b5913 - b6867; read in the copies Ollama vendored at
        # llama.cpp b6646 and b6840): n_ctx_per_stream = PAD(ceil(n_ctx / n_seq_max), padding), n_ctx = that x
        # n_seq_max, so -c 4096 -np 3 with flash attention holds 3 x 1536 cells, not 3 x 1365
        n_ctx_seq = pad(-(-raw // n_seq), 256 if fa else 32)
        n_ctx = n_ctx_seq * n_seq
    else:
        n_ctx_seq = n_ctx // n_seq
        if b >= V.PAD_256:
            n_ctx_seq = pad(n_ctx_seq, 256)
        n_ctx = n_ctx_seq * n_seq
    kv_cells = 0
    hybrid = any(lm.recurrent) and any(lm.has_kv(il) for il in range(lm.n_layer))  # llm_arch_is_hybrid's models
    if not unified and hybrid and b < V.HYBRID_KV_SEQ:
        # src/llama-model.cpp llama_model::create_memory, the llm_arch_is_hybrid branch until PR #19559: the
        # attention cache gets attn_kv_size = cparams.n_ctx (every stream's cells) for each of the n_seq_max
        # streams. Before b6868 that n_ctx is only padded (PAD(n_ctx, padding), no per-stream split: Ollama's
        # vendored b6646 / b6840), and the context's n_ctx_per_seq() is that n_ctx / n_seq_max
        if b < V.NO_PAD:
            n_ctx = pad(raw, 256 if fa else 32)
            n_ctx_seq = n_ctx // n_seq
        kv_cells = n_ctx
    n_batch = min(n_batch, n_ctx)  # causal models: n_batch = min(n_ctx, n_batch)
    n_ubatch = min(n_batch, n_ubatch)
    return CtxParams(n_ctx=n_ctx, n_ctx_seq=n_ctx_seq, n_seq=n_seq, n_stream=1 if unified else n_seq,
                     unified=unified, n_ubatch=n_ubatch, n_batch=n_batch, kv_cells=kv_cells)


@dataclass
class KvLayout:
    """The KV cache as llama.cpp allocates it: cells per stream (full and sliding-window layers) and the bytes
    of each layer, which the placement puts on devices."""

    cells_base: int  # per stream
    cells_swa: int  # per stream (0: no SWA cache)
    n_stream: int
    layer_bytes: list[int] = field(default_factory=list)  # KV (or RS) bytes of each layer, all streams
    layer_rs: list[int] = field(default_factory=list)  # the recurrent-state part of each layer's bytes
    k_bytes: int = 0
    v_bytes: int = 0
    rs_bytes: int = 0
    swa_bytes: int = 0
    bytes_per_token: int = 0  # K+V per cell summed over attention layers
    v_padded_to: int = 0

    @property
    def total(self) -> int:
        return sum(self.layer_bytes)


def layout(lm: LModel, cp: CtxParams, type_k: str, type_v: str, fa: bool, swa_full: bool, b: int,
           n_rs_seq: int = 0) -> KvLayout:
    size_base = cp.kv_cells
    size_swa = 0
    # before llama_kv_cache_unified_iswa (src/llama-kv-cache.cpp, #13194) one cache held n_ctx cells
    # for every layer, sliding-window ones included: no separate SWA cache
    if lm.n_swa and any(lm.swa) and b >= V.ISWA:
        if swa_full:
            size_swa = size_base
        else:
            shared = cp.unified or cp.n_stream == 1
            batch = cp.n_ubatch if b >= V.SWA_UBATCH else cp.n_batch
            want = lm.n_swa * (cp.n_seq if shared else 1) + batch
            if b >= V.PAD_256:
                size_swa = pad(min(size_base, want), 256)
            else:
                size_swa = min(size_base, pad(want, 1 if b >= V.NO_PAD else 256 if fa else 32))
    out = KvLayout(cells_base=size_base, cells_swa=size_swa, n_stream=cp.n_stream)
    v_max = max((lm.v_width(il, b) for il in range(lm.n_layer) if lm.has_kv(il)), default=0)
    widths = {lm.v_width(il, b) for il in range(lm.n_layer) if lm.has_kv(il)}
    if not fa and len(widths) > 1:
        out.v_padded_to = v_max
    mem_rs = max(1, cp.n_seq)
    for il in range(lm.n_layer):
        if lm.recurrent and lm.recurrent[il]:
            # f32 rows, src/llama-memory-recurrent.cpp: mem_size x (1 + n_rs_seq) of them (speculative rollback, mtp.py)
            rs = 4 * (lm.n_embd_r + lm.n_embd_s) * mem_rs * (1 + n_rs_seq)
            out.rs_bytes += rs
            out.layer_rs.append(rs)
            if not lm.has_kv(il):
                out.layer_bytes.append(rs)
                continue
        else:
            rs = 0
            out.layer_rs.append(0)
        if not lm.has_kv(il):
            out.layer_bytes.append(0)
            continue
        cells = size_swa if (lm.swa[il] and size_swa) else size_base
        kw = lm.k_width(il)
        vw = out.v_padded_to or lm.v_width(il, b)
        k = row_bytes(type_k, kw) * cells * cp.n_stream
        v = row_bytes(type_v, vw) * cells * cp.n_stream if vw else 0
        out.k_bytes += k
        out.v_bytes += v
        if lm.swa[il] and size_swa:
            out.swa_bytes += k + v
        out.bytes_per_token += row_bytes(type_k, kw) + (row_bytes(type_v, vw) if vw else 0)
        out.layer_bytes.append(rs + k + v)
    return out


def block_problem(lm: LModel, type_k: str, type_v: str) -> str | None:
    """llama_init_from_model with -fa auto: a quantized cache type's block must divide n_embd_head_k / _v (the
    caller applies the build and -fa conditions)."""
    from servefit.models.gguf import type_by_name

    for name, t, hd in (("K", type_k, lm.head_k), ("V", type_v, lm.head_v)):
        blk = type_by_name()[t.upper()][1]
        if name == "V" and lm.mla:
            continue
        if blk > 1 and hd % blk:
            return (f"{name} cache type {t} with block size {blk} does not divide n_embd_head_{name.lower()}={hd}")
    return None
