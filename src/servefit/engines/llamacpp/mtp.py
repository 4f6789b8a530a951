"""Speculative decoding's share of llama-server's memory: the recurrent-state rollback rows of the target context,
and the MTP head (`--spec-type draft-mtp` without -md), its layer and its draft context.

Read in the llama.cpp the index stores for 2026 (b9849 era, HilbertraumAI's Vulkan logs agree):
- common/common.h common_params_speculative::need_n_rs_seq(): draft.n_max (default 3, --spec-draft-n-max) when a
  model-based draft type is on (draft-mtp, draft-mtp-adaptive, draft-eagle3, draft-dflash, draft-dspark), else 0;
  the server sets the target's cparams.n_rs_seq from it (the draft context's is 0), and src/llama-arch.cpp
  llm_arch_supports_rs_rollback keeps it only for Qwen3.5 / Qwen3.5-MoE (other archs get 0).
- src/llama-memory-recurrent.cpp llama_memory_recurrent::llama_memory_recurrent: each layer's r and s tensors hold
  mem_size x (1 + n_rs_seq) rows ("1 cells, 64 layers, 1 seqs 2 rs_seq": 448.88 MiB where 149.62 holds one).
- the MTP head is the GGUF's trailing nextn_predict_layers block(s) (blk.64 of a 64-layer Qwen3.5/3.6 27B: a
  full-attention decoder layer plus nextn.eh_proj, enorm, hnorm, shared_head_norm). llama.cpp loads it only for
  draft-mtp ("model has unused tensor blk.64..." otherwise), and then load_tensors counts it ("offloaded 66/66").
  Its KV lives in the draft context, not the target's (the target logs the 16 attention layers' 512.00 MiB).
- tools/server/server-context.cpp: the MTP draft context (cparams_dft.ctx_type = LLAMA_CONTEXT_TYPE_MTP) against the
  same model: a KV cache of the nextn layer(s) at the draft cache types (-ctkd / -ctvd, f16 by default) for the
  target's n_ctx cells, and its own compute buffer; "[spec] estimated memory usage of MTP context" is their sum and
  is added to --fit-target (the fit keeps 1024 + 552.06 MiB).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from servefit.engines.llamacpp.model import LModel
from servefit.models.gguf import TensorInfo, row_bytes

RS_DRAFT_TYPES = {"draft-mtp", "draft-mtp-adaptive", "draft-eagle3", "draft-dflash", "draft-dspark"}
RS_ROLLBACK_ARCHS = {"qwen35", "qwen35moe", "qwen3_5", "qwen3_5_moe"}  # llm_arch_supports_rs_rollback (GGUF and catalog names)
DRAFT_N_MAX = 3  # common_params_speculative_draft::n_max
MTP_TYPES = {"draft-mtp", "draft-mtp-adaptive"}


def spec_types(s: dict[str, Any]) -> set[str]:
    """--spec-type's comma-separated list."""
    return {t.strip().lower() for t in str(s.get("spec_type") or "").split(",") if t.strip()}


def n_rs_seq(s: dict[str, Any], lm: LModel) -> int:
    """The target context's cparams.n_rs_seq: need_n_rs_seq(), kept only where the arch can roll back."""
    if lm.arch not in RS_ROLLBACK_ARCHS or not spec_types(s) & RS_DRAFT_TYPES:
        return 0
    try:
        return max(0, int(s.get("draft_max") or DRAFT_N_MAX))
    except ValueError:
        return DRAFT_N_MAX


def mtp_head(s: dict[str, Any]) -> bool:
    """The model's own MTP head drafts (draft-mtp without a separate -md draft model)."""
    return bool(spec_types(s) & MTP_TYPES) and not s.get("model_draft")


def with_nextn(lm: LModel, n_nextn: int = 1) -> LModel:
    """The catalog model with its MTP block(s) appended as layers n_layer.. (llama.cpp loads them for draft-mtp):
    each a full-attention layer shaped like the model's last full-attention layer (its tensors at the same types)
    plus nextn.eh_proj (2 n_embd x n_embd, at that layer's attn_output type) and three f32 norms. The layer has no
    KV in the target context (n_head_kv 0 here: its cache is the draft context's)."""
    if lm.source != "catalog" or n_nextn <= 0:
        return lm  # a GGUF header already lists the blocks it holds
    full = [il for il in range(lm.n_layer) if lm.has_kv(il) and not (lm.recurrent and lm.recurrent[il])]
    if not full:
        return lm
    src = full[-1]
    pre = f"blk.{src}."
    layer = [t for t in lm.tensors if t.name.startswith(pre)]
    out_t = next((t for t in layer if t.name.endswith("attn_output.weight")), None)
    tensors = list(lm.tensors)
    e = lm.n_embd
    for k in range(n_nextn):
        il = lm.n_layer + k
        tensors += [dataclasses.replace(t, name=f"blk.{il}." + t.name[len(pre):]) for t in layer]
        if out_t is not None:
            tensors.append(TensorInfo(f"blk.{il}.nextn.eh_proj.weight", (2 * e, e), out_t.type,
                                      row_bytes(out_t.type, 2 * e) * e))
        tensors += [TensorInfo(f"blk.{il}.nextn.{n}.weight", (e,), "F32", 4 * e)
                    for n in ("enorm", "hnorm", "shared_head_norm")]
    return dataclasses.replace(
        lm, n_layer=lm.n_layer + n_nextn, n_head=lm.n_head + [lm.n_head[src]] * n_nextn,
        n_head_kv=lm.n_head_kv + [0] * n_nextn, swa=lm.swa + [False] * n_nextn,
        recurrent=(lm.recurrent + [False] * n_nextn) if lm.recurrent else [], tensors=tensors,
        n_nextn=n_nextn, nextn_kv_heads=lm.n_head_kv[src])


def draft_kv_bytes(lm: LModel, n_ctx: int, type_k: str, type_v: str) -> int:
    """The MTP draft context's KV buffer: the nextn layer(s) at the draft cache types for n_ctx cells
    (32.00 MiB for Qwen3.8-27B's one layer of 4 KV heads x 256 at f16 and 8192 cells)."""
    width = lm.nextn_kv_heads * lm.head_k
    return lm.n_nextn * n_ctx * (row_bytes(type_k, width) + row_bytes(type_v, lm.nextn_kv_heads * lm.head_v))
