"""Weight bytes on each GPU: the checkpoint's parameters by layer, quantized or kept in 16 bits,
sharded over tensor-parallel ranks and split into pipeline stages as vLLM places them."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from servefit.memory.dtypes import dtype_bytes
from servefit.memory.params import param_groups
from servefit.memory.weights import kept_params, weight_bytes
from servefit.models.arch_gemma4 import is_gemma4, vllm_unloaded_params
from servefit.models.spec import ModelSpec

if TYPE_CHECKING:
    from servefit.engines.vllm.plan import Resolved

VOCAB_PAD = 64  # VocabParallelEmbedding pads the vocabulary to a multiple of 64


def pp_layers(n_layers: int, pp: int) -> list[int]:
    """vllm/distributed/utils.py::get_pp_indices: the remainder goes to stages -2, -3, ..."""
    base, rem = divmod(n_layers, pp)
    counts = [base] * pp
    for i in range(rem):
        counts[-2 - i if pp > 1 else 0] += 1
    return counts


def stage_weights(model: ModelSpec, r: Resolved) -> list[int]:
    """Weight bytes on one GPU of each pipeline stage (TP shards the linear layers, the
    vocabulary and lm_head; norms and the rotary cache are replicated)."""
    db = dtype_bytes(r.dtype)
    g = param_groups(model)
    total = weight_bytes(model, db, r.scheme, g)
    if r.scheme and r.scheme.experts_only:
        total += int(sum(g.experts) * r.scheme.bytes_per_param * (mxfp4_padding(model, r.tp) - 1)) if model.is_moe else 0
    qb = r.scheme.bytes_per_param if r.scheme else db
    per_layer = []
    pad = mxfp4_padding(model, r.tp) if r.scheme and r.scheme.name == "mxfp4" and model.is_moe else 1.0
    # --enable-expert-parallel shards the routed experts over tp x dp ranks instead of tp
    # (model_executor/layers/fused_moe/layer.py::FusedMoE, ep_size = tp_size * dp_size)
    ep_share = 1.0 / r.dp if r.expert_parallel else 1.0
    dense_qb = db if r.scheme and r.scheme.experts_only else qb
    experts_b = [x * ((r.scheme.experts_bytes if r.scheme else 0) or qb) * pad for x in g.experts]
    # layers the checkpoint keeps unquantized (modules_to_not_convert, ignore...) weigh db, not qb
    kept = kept_params(model, g, r.scheme) or [0.0] * len(g.attn)
    per_layer_full = [(a + m) * dense_qb + x + k * (db - qb)
                      for a, m, x, k in zip(g.attn, g.mlp, experts_b, kept, strict=True)]
    per_layer = [(a + m) * dense_qb + x * ep_share + k * (db - qb)
                 for a, m, x, k in zip(g.attn, g.mlp, experts_b, kept, strict=True)]
    padded_vocab = math.ceil(model.vocab_size / VOCAB_PAD) * VOCAB_PAD
    embed_b = padded_vocab * model.hidden_size * db
    head_b = 0 if model.tie_word_embeddings else embed_b
    arch_total = embed_b + head_b + sum(per_layer_full) + g.norms * db + g.other * db
    # the checkpoint's count wins over the architecture; the towers and norms are counted exactly,
    # so the difference goes to the language model's layers and embeddings
    fixed = (g.norms + g.other) * db
    scale = (total - fixed) / (arch_total - fixed) if arch_total > fixed and total > fixed else 1.0
    counts = pp_layers(len(per_layer), r.pp)
    rope_len = model.max_position_embeddings
    rs = model.rope_scaling or {}
    if rs.get("rope_type", rs.get("type")) in ("yarn", "deepseek_yarn") and model.original_max_position_embeddings:
        rope_len = int(model.original_max_position_embeddings * float(rs.get("factor", 1)))
    rotary = rope_len * (model.qk_rope_head_dim or model.head_dim) * db
    unloaded = 0.0
    if is_gemma4(model) and model.model_type in ("gemma4", "gemma4_text"):  # gemma4.py (not the unified model)
        # gemma4.py: the full layers' get_rope(global_head_dim, ...) is a second cached embedding
        # (rotary_embedding/gemma4_rope.py::Gemma4RotaryEmbedding keeps a cos/sin row of global_head_dim
        # per position, the non-rotated dims as identity), and the projections the checkpoint count lacks
        glob = int(model.layout.get("global_head_dim") or 0)
        rotary += rope_len * glob * db if glob and glob != model.head_dim else 0
        unloaded = vllm_unloaded_params(model) * db / max(model.num_hidden_layers, 1)
    tower_tp = 1
    if model.vision:  # a Qwen-VL tower is tensor-parallel like the LM (qwen2_5_vl.py: Column/RowParallelLinear)
        from servefit.engines.vllm import encoder

        tower_tp = r.tp if encoder.sharded(model) else 1
    out, start = [], 0
    for stage, n in enumerate(counts):
        layers_b = sum(per_layer[start:start + n]) * scale
        start += n
        b = layers_b / r.tp
        if stage == 0:
            b += embed_b * scale / r.tp + g.other * db / tower_tp
        if stage == r.pp - 1:
            b += head_b * scale / r.tp
        b += g.norms * db * n / max(len(per_layer), 1) + rotary + unloaded * n / r.tp
        if model.num_key_value_heads < r.tp and not model.is_mla:  # K/V projections replicated
            kvp = 2 * model.hidden_size * model.head_dim * db * n
            b += kvp * (1 - model.num_key_value_heads / r.tp)
        out.append(int(b))
    return out


def mxfp4_padding(model: ModelSpec, tp: int) -> float:
    """Marlin MXFP4 MoE pads the per-rank intermediate size to a multiple of 128 and the hidden
    size to 256 (model_executor/layers/quantization/mxfp4.py::Mxfp4MoEMethod.create_weights)."""
    inter = max(1, (model.moe_intermediate_size or model.intermediate_size) // tp)
    h = model.hidden_size
    return (-(-inter // 128) * 128 * -(-h // 256) * 256) / (inter * h)
