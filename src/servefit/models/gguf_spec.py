"""A GGUF header in config.json terms: the ModelSpec every planner reads, so a local GGUF is
sized like a Hub checkpoint (models/gguf.py reads the header)."""

from __future__ import annotations

import os
from typing import Any

from servefit import data
from servefit.core import UsageError
from servefit.models.gguf import GgufInfo


def _max(v: Any, default: int = 0) -> int:
    if isinstance(v, list):
        return max((int(x) for x in v), default=default)
    return int(v) if v is not None else default


def swa_layers(info: GgufInfo, n_layer: int) -> tuple[list[bool], int]:
    """Which layers use sliding-window attention, and the window (llama_hparams::set_swa_pattern
    with the per-arch defaults of src/models/<arch>.cpp; the GGUF key overrides the pattern)."""
    arch_swa = data.load("gguf_quants.yaml")["swa_arch"].get(info.arch)
    if not arch_swa:
        return [False] * n_layer, 0
    window = int(info.get("attention.sliding_window", 0) or arch_swa["window"] or 0)
    if window <= 0:
        return [False] * n_layer, 0
    pat = info.get("attention.sliding_window_pattern")
    if isinstance(pat, list):
        return [bool(x) for x in pat][:n_layer] + [False] * max(0, n_layer - len(pat)), window
    n_pattern = int(pat) if isinstance(pat, int) and pat > 0 else int(arch_swa["pattern"])
    return [(il % n_pattern) < (n_pattern - 1) for il in range(n_layer)], window


def spec_from_gguf(info: GgufInfo) -> Any:
    """A ModelSpec (config.json terms) from a GGUF header (resolved_from="gguf")."""
    from servefit.models.spec import ModelSpec

    n_layer = int(info.get("block_count", 0) or 0)
    if not info.arch or n_layer <= 0:
        raise UsageError(f"{info.path}: GGUF header has no architecture/block_count"
                         + (" (the file is truncated inside its header)" if info.truncated else ""))
    n_embd = int(info.get("embedding_length", 0) or 0)
    n_head = _max(info.get("attention.head_count"), 1) or 1
    kv_raw = info.get("attention.head_count_kv", n_head)
    n_head_kv = _max(kv_raw, n_head)
    head_dim = int(info.get("attention.key_length", 0) or (n_embd // n_head if n_head else 0))
    swa, window = swa_layers(info, n_layer)
    kv_list = kv_raw if isinstance(kv_raw, list) else [n_head_kv] * n_layer
    kinds = []
    for il in range(n_layer):
        if il < len(kv_list) and int(kv_list[il]) == 0:
            kinds.append("mamba")
        else:
            kinds.append("sliding" if swa[il] else "full")
    names = {t.name for t in info.tensors}
    hf = {v: k for k, v in reversed(list(data.load("gguf_quants.yaml")["hf_arch"].items()))}
    mla = "attention.key_length_mla" in info.kv or f"{info.arch}.attention.key_length_mla" in info.kv
    rope = int(info.get("rope.dimension_count", 0) or 0)
    spec = ModelSpec(
        name=str(info.kv.get("general.name") or os.path.basename(info.path)),
        architecture=info.arch, model_type=hf.get(info.arch, info.arch),
        num_hidden_layers=n_layer, hidden_size=n_embd, num_attention_heads=n_head,
        num_key_value_heads=n_head_kv, head_dim=head_dim,
        intermediate_size=_max(info.get("feed_forward_length"), 0), vocab_size=info.n_vocab,
        max_position_embeddings=int(info.get("context_length", 0) or 0),
        tie_word_embeddings=bool(names) and "output.weight" not in names,
        torch_dtype="gguf", params=sum(t.n_elements for t in info.tensors),
        num_experts=int(info.get("expert_count", 0) or 0),
        num_experts_per_tok=int(info.get("expert_used_count", 0) or 0),
        num_shared_experts=int(info.get("expert_shared_count", 0) or 0),
        moe_intermediate_size=int(info.get("expert_feed_forward_length", 0) or 0),
        first_k_dense_replace=int(info.get("leading_dense_block_count", 0) or 0),
        kv_lora_rank=int(info.get("attention.kv_lora_rank", 0) or 0) if mla else 0,
        q_lora_rank=int(info.get("attention.q_lora_rank", 0) or 0),
        qk_rope_head_dim=rope if mla else 0,
        sliding_window=window, layer_types=kinds if any(k != "full" for k in kinds) else [],
        resolved_from="gguf",
    )
    ftype = info.kv.get("general.file_type")
    spec.quantization = {"quant_method": "gguf", "file_type": ftype}
    if info.truncated:
        spec.assumptions.append(f"{os.path.basename(info.path)}: header truncated; tensor table incomplete")
    return spec
