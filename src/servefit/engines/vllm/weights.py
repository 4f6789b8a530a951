"""Weight bytes on each GPU: the checkpoint's parameters by layer, quantized or kept in 16 bits,
sharded over tensor-parallel ranks and split into pipeline stages as vLLM places them."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from servefit.memory.dtypes import dtype_bytes
from servefit.memory.params import mlp_params, param_groups
from servefit.memory.weights import kept_params, weight_bytes
from servefit.models.arch_gemma4 import is_gemma4, vllm_unloaded_params
from servefit.models.architecture import full_layer_params
from servefit.models.family_traits import is_gated_mlp
from servefit.models.spec import ModelSpec

if TYPE_CHECKING:
    from servefit.engines.vllm.plan import Resolved

VOCAB_PAD = 64  # VocabParallelEmbedding pads the vocabulary to a multiple of 64
# MTP_MODULE: MTP speculative decoding loads the checkpoint's mtp.* module with the model (v1/spec_decode/
# llm_base_proposer.py::load_model inside the runner's DeviceMemoryProfiler, so "Model loading took"
# counts it): one decoder layer built as the target's full-attention layers (qwen3_5_mtp.py,
# deepseek_mtp.py: the MoE block where the model has one) and a ColumnParallelLinear of 2 x hidden to
# hidden (fc / eh_proj); its embed_tokens and lm_head (shared_head.head) are replaced by the target's
# (_maybe_share_embeddings / _maybe_share_lm_head), so they do not stay. Norms left out; the routed
# experts take the experts' storage, the rest the layers'. Read in the 0.22.0 wheel.


def pp_layers(n_layers: int, pp: int) -> list[int]:
    """vllm/distributed/utils.py::get_pp_indices: the remainder goes to stages -2, -3, ..."""
    base, rem = divmod(n_layers, pp)
    counts = [base] * pp
    for i in range(rem):
        counts[-2 - i if pp > 1 else 0] += 1
    return counts


def stage_weights(model: ModelSpec, r: Resolved, mtp: bool = False) -> list[int]:
    """Weight bytes on one GPU of each pipeline stage (TP shards the linear layers, the
    vocabulary and lm_head; norms and the rotary cache are replicated). `mtp`: MTP speculative
    decoding also loads the checkpoint's multi-token-prediction module into the last stage
    (MTP_MODULE)."""
    db = dtype_bytes(r.dtype)
    g = param_groups(model)
    total = weight_bytes(model, db, r.scheme, g)
    if r.scheme and r.scheme.experts_only:
        total += int(sum(g.experts) * r.scheme.bytes_per_param * (mxfp4_factor(model, r) - 1)) if model.is_moe else 0
    qb = r.scheme.bytes_per_param if r.scheme else db
    per_layer = []
    pad = mxfp4_factor(model, r) if r.scheme and r.scheme.name == "mxfp4" and model.is_moe else 1.0
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
    # a GGUF file's embedding stays in its own type (memory/weights.py gguf_scheme)
    embed_b = padded_vocab * model.hidden_size * (qb if r.scheme and r.scheme.embeddings else db)
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
        from servefit.engines.vllm import vision_tower

        tower_tp = r.tp if vision_tower.sharded(model) and not r.encoder_dp else 1  # data mode: replicated
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
        if mtp and stage == r.pp - 1:
            attn, block = full_layer_params(model)
            inter = model.moe_intermediate_size or model.intermediate_size
            experts = model.num_experts * mlp_params(model.hidden_size, inter, is_gated_mlp(model)) if model.is_moe else 0
            xb = ((r.scheme.experts_bytes if r.scheme else 0) or qb) * pad
            b += ((attn + block - experts) * dense_qb + experts * xb * ep_share + 2 * model.hidden_size ** 2 * db) / r.tp
        out.append(int(b))
    return out


def mxfp4_backend(version: tuple[int, int, int], cc: int, env: dict[str, str] | None, image: str | None = None) -> str:
    """The MXFP4 MoE kernel vLLM picks on a CUDA GPU of compute capability `cc`, as far as it sets
    the weights' size: "marlin", "triton" (OpenAI's triton_kernels), "flashinfer_sm90" or
    "flashinfer_sm100" (quantization/mxfp4.py::Mxfp4MoEMethod._should_use_marlin in 0.10.1;
    get_mxfp4_backend in 0.10.2 - 0.13, read in the 0.10.2, 0.11.0, 0.12.0 and 0.13.0 wheels;
    fused_moe/oracle/mxfp4.py::select_gpt_oss_mxfp4_moe_backend in 0.20.0). Marlin below compute 9.0
    and, on Hopper, up to 0.10.1 (torch < 2.8). From 0.10.2 Triton on 9.x and 12.x where the
    triton_kernels package is installed: in 0.10.2 / 0.11 the vllm/vllm-openai image has it, the pip
    wheel does not list it (the calibration logs agree: a pip install of 0.11.0 on H100 sizes its KV
    cache as Marlin's weights leave it, the 0.11.0 image logs Triton's weights); from 0.12
    triton_kernels ships inside vLLM (vllm/third_party) and serves 9.0 - 10.x only, so 12.x (GeForce
    and RTX PRO Blackwell) is back on Marlin. Data-centre Blackwell (10.x) runs FlashInfer's BF16
    kernel wherever FlashInfer is installed (the image; a dependency of the wheel from 0.12), Marlin
    otherwise. VLLM_MXFP4_USE_MARLIN=1 forces Marlin in 0.10.1 and from 0.12 (0.10.2 / 0.11 do not
    read it)."""
    env = env or {}
    forced = str(env.get("VLLM_MXFP4_USE_MARLIN", "")).strip().lower() in ("1", "true")
    image_has = "vllm-openai" in (image or "")  # triton_kernels and FlashInfer before 0.12
    if forced and (version < (0, 10, 2) or version >= (0, 12, 0)):
        return "marlin"
    if 100 <= cc < 110:
        return "flashinfer_sm100" if version >= (0, 12, 0) or (version >= (0, 10, 1) and image_has) else "marlin"
    if cc == 90 and version >= (0, 10, 2) and str(env.get("VLLM_USE_FLASHINFER_MOE_MXFP4_BF16", "")).strip() == "1":
        return "flashinfer_sm90"
    if cc < 90 or version < (0, 10, 2) or (cc >= 110 and version >= (0, 12, 0)):
        return "marlin"
    if version < (0, 12, 0) and not image_has:
        return "marlin"  # a pip install: no triton_kernels
    return "triton"


def mxfp4_factor(model: ModelSpec, r: Resolved) -> float:
    """Bytes the loaded MXFP4 experts take over the checkpoint's (0.5 + 1/32 bytes per parameter),
    per backend (quantization/mxfp4.py::Mxfp4MoEMethod.create_weights and
    process_weights_after_loading, 0.10.1 - 0.13; 0.20.0's Mxfp4MoEMethod.process_weights_after_loading).
    Marlin pads the per-rank intermediate size to a multiple of 128 and the hidden size to 256.
    FlashInfer's SM90 kernel pads both to 128, its SM100 kernels both to 256 (the shuffled copies
    replace the loaded weights and scales). Triton pads the intermediate size to 64 only, but
    keeps the loaded scales (w13_weight_scale / w2_weight_scale stay registered) beside the
    swizzled copies it hands the kernel (_swizzle_mxfp4), so the scales count twice; the Hopper
    swizzle's own padding of the copies (to 256 rows from torch 2.8.1) is left out. The calibration
    logs agree: gpt-oss-120b on H100 with 0.10.1 (torch 2.7.1, Marlin) loads 65.97 GiB, with the 0.11.0
    image (Triton) 64.38."""
    inter = max(1, (model.moe_intermediate_size or model.intermediate_size) // r.tp)
    h = model.hidden_size
    kind = r.mxfp4
    i_to, h_to, scales = {"marlin": (128, 256, 1), "flashinfer_sm90": (128, 128, 1),
                         "flashinfer_sm100": (256, 256, 1), "triton": (64, 1, 2)}[kind]
    area = -(-inter // i_to) * i_to * -(-h // h_to) * h_to
    return area * (0.5 + scales / 32) / (inter * h * (0.5 + 1 / 32))


def mxfp4_note(model: ModelSpec, r: Resolved, cc: int) -> str | None:
    """0.10.2 / 0.11 run Triton's MXFP4 kernels only where the triton_kernels package is installed
    (mxfp4_backend): planned with Marlin unless the vllm/vllm-openai image is named; say what Triton
    would load instead."""
    if not (r.scheme and r.scheme.name == "mxfp4" and model.is_moe and r.mxfp4 == "marlin") \
            or not (0, 10, 2) <= r.version < (0, 12, 0) or not (90 <= cc < 100 or cc >= 110):
        return None
    g = param_groups(model)
    triton = replace(r, mxfp4="triton")
    less = sum(g.experts) * r.scheme.bytes_per_param * (mxfp4_factor(model, r) - mxfp4_factor(model, triton))
    return (f"MXFP4 experts loaded for the Marlin kernel, as a pip install of vLLM {'.'.join(map(str, r.version))} "
            f"does; the vllm/vllm-openai image has the triton_kernels package and loads them for Triton, about "
            f"{less / r.tp / 2**30:.2f} GiB less per GPU (a larger KV cache)")


def lora_stage_bytes(model: ModelSpec, r: Resolved, settings: dict) -> list[int]:
    """The stacked LoRA slots --enable-lora allocates with the model, per GPU of each pipeline stage:
    v1/worker/gpu/model_runner.py::load_model (and gpu_model_runner.py's) calls load_lora_model inside the
    DeviceMemoryProfiler that gives "Model loading took", and lora/model_manager.py::_create_lora_modules
    wraps every linear layer, the embedding and, through lm_head, the logits processor. Each wrapper's
    create_lora_weights (read in the 0.22.0 wheel) holds, per slot of max_loras (default 1) and rank
    max_lora_rank (default 16), in lora_dtype (default the model's): lora/layers/base_linear.py, a column-parallel
    layer (qkv, gate_up: one slice per packed projection) rank x full input + output per rank x rank, a
    row-parallel one (o_proj, down) rank x input per rank + full output x rank (with fully_sharded_loras
    the column A's rank and the row B's output are split over TP); vocal_parallel_embedding.py, vocab x rank
    + hidden x rank; logits_processor.py, rank x hidden + vocab x rank; fused_moe.py, per local expert
    (w1, w3, w2) the same A / B shapes, the router (ReplicatedLinear) rank x hidden + experts x rank.
    A tied lm_head is the embedding module again and is wrapped a second time (named_modules with
    remove_duplicate=False). MLA projections, recurrent mixers and vision towers are priced as a
    standard attention layer / left out; before 0.12 the embedding and logits slots also held
    lora_extra_vocab_size (256) extra rows (read in the 0.10.2 and 0.11.0 wheels; gone in 0.12.0), a few
    MiB, not counted. 0 without --enable-lora."""
    if not settings.get("enable_lora"):
        return [0] * r.pp
    rank = int(settings.get("max_lora_rank") or 16)
    slots = int(settings.get("max_loras") or 1)
    lora_dtype = str(settings.get("lora_dtype") or "auto")
    db = dtype_bytes(r.dtype if lora_dtype == "auto" else lora_dtype)
    tp = max(r.tp, 1)
    full = bool(settings.get("fully_sharded_loras"))
    col_rank = rank // tp if full else rank

    def column(inp: int, outs: list[int]) -> int:  # ColumnParallelLinear: outs are per rank
        return sum(col_rank * inp + o * rank for o in outs)

    def row(inp_per_rank: int, out: int) -> int:  # RowParallelLinear
        return rank * inp_per_rank + (out // tp if full else out) * rank

    h = model.hidden_size
    q = model.num_attention_heads // tp * model.head_dim
    kv = max(1, model.num_key_value_heads // tp) * model.head_dim
    attn = column(h, [q, kv, kv]) + row(model.num_attention_heads * model.head_dim // tp, h)
    gated = 2 if is_gated_mlp(model) else 1  # MergedColumnParallelLinear gate_up: two slices
    dense_inter = model.intermediate_size // tp
    dense = column(h, [dense_inter] * gated) + row(dense_inter, h)
    if model.is_moe:
        local = model.num_experts // (tp * max(r.dp, 1)) if r.expert_parallel else model.num_experts
        inter = (model.moe_intermediate_size or model.intermediate_size) // (1 if r.expert_parallel else tp)
        experts = local * (gated * (col_rank * h + inter * rank) + rank * inter + (h // tp if full else h) * rank)
        shared_inter = model.num_shared_experts * (model.moe_intermediate_size or model.intermediate_size) // tp
        shared = column(h, [shared_inter] * gated) + row(shared_inter, h) if shared_inter else 0
        moe = experts + rank * h + model.num_experts * rank + shared
        mixed = model.first_k_dense_replace > 0 or model.moe_layer_step > 1
        per_layer = [attn + (moe if i >= model.first_k_dense_replace and (i + 1) % model.moe_layer_step == 0
                             or not mixed else dense) for i in range(model.num_hidden_layers)]
    else:
        per_layer = [attn + dense] * model.num_hidden_layers
    vocab_rows = model.vocab_size * rank + h * rank  # the embedding and the logits processor alike
    out, start = [], 0
    for stage, n in enumerate(pp_layers(len(per_layer), r.pp)):
        b = sum(per_layer[start:start + n])
        start += n
        if stage == 0:
            b += vocab_rows
        if stage == r.pp - 1:
            b += vocab_rows * (2 if model.tie_word_embeddings else 1)
        out.append(int(b * slots * db))
    return out
