"""The vision tower's own peak in vLLM's profiling run, per tower kind and release: which towers vLLM shards
over tensor-parallel ranks, the fixed-size towers' largest image (Gemma 3, InternVL, LLaVA-1.5, PaliGemma,
Pixtral), and a Qwen-VL block's peak over the dummy patches (encoder.py places it in the profile)."""

from __future__ import annotations

from servefit.models.spec import ModelSpec
from servefit.models.vision import INTERNVL, is_qwen3_vision, qwen_vl_kind

INTERNVL_MAX_TILES = 12  # InternVL's max_dynamic_patch default (config.json of InternVL 2 - 3.5)
GEMMA3_IMAGE_TOKENS = 256  # Gemma 3's mm_tokens_per_image (config.json, every size)


def sharded(model: ModelSpec) -> bool:
    """Whether vLLM splits the vision tower over tensor-parallel ranks (Qwen-VL towers; Qwen3-VL and
    Qwen3.5 blocks use ColumnParallelLinear / RowParallelLinear too, qwen3_vl.py::Qwen3_VisionBlock;
    InternViT: intern_vit.py::InternMLP is Column/RowParallelLinear and InternParallelAttention a
    QKVParallelLinear padded with dummy heads to a multiple of the TP size)."""
    v, mt = model.vision, model.model_type
    return bool(v) and (bool(qwen_vl_kind(v, mt)) or is_qwen3_vision(v, mt) or v.get("model_type") in INTERNVL)


def fixed_tower(model: ModelSpec) -> tuple[int, int, int, int, int] | None:
    """(tokens per image, patches per image, ViT width, MLP intermediates per patch, pixel inputs per
    patch) of a tower whose largest image has a fixed size, or None. Gemma 3's SigLIP
    (gemma3_mm.py::Gemma3ProcessingInfo.get_num_image_tokens, read in the 0.11.0 wheel: without
    pan-and-scan, vLLM's default, one crop of image_size^2 pixels gives mm_tokens_per_image = 256
    tokens; SiglipMLP holds fc1's output and its GELU), InternVL's InternViT, LLaVA-1.5's CLIP and
    PaliGemma's SigLIP (below). Mistral 3's Pixtral
    (pixtral.py::PixtralHFEncoderInfo.get_num_image_tokens: the largest image is image_size square,
    ceil(image_size / (patch x spatial_merge_size)) tokens a side; PixtralHFMLP holds the gate_up
    output and the SiluAndMul output)."""
    v, mt = model.vision, model.model_type
    patch = int(v.get("patch_size", 14))
    image = int(v.get("image_size", 0))
    e = int(v.get("hidden_size", 0))
    inter = int(v.get("intermediate_size", 4 * e))
    if not image or not e:
        return None
    side = image // patch
    pixels = int(v.get("num_channels", 3)) * patch * patch
    if mt == "gemma3" and v.get("model_type") == "siglip_vision_model":
        return GEMMA3_IMAGE_TOKENS, side * side, e, 2 * inter, pixels
    if mt == "mistral3" and v.get("model_type") == "pixtral":
        unit = patch * int(v.get("spatial_merge_size", 2))
        return (-(-image // unit)) ** 2, side * side, e, 3 * inter, pixels
    if v.get("model_type") in INTERNVL:
        # internvl.py::InternVLProcessingInfo.get_image_size_with_most_features: the most tiles
        # (max_dynamic_patch 12) plus the thumbnail, each tile image_size^2 pixels (its patches and a
        # class token) giving (side x downsample_ratio)^2 tokens; InternMLP holds fc1's output and GELU
        tiles = INTERNVL_MAX_TILES + 1
        per_tile = int(side * float(v.get("downsample_ratio", 0.5))) ** 2
        return tiles * per_tile, tiles * (side * side + 1), e, 2 * inter, pixels
    if (mt == "llava" and v.get("model_type") == "clip_vision_model") or \
            (mt == "paligemma" and v.get("model_type") == "siglip_vision_model"):
        # llava.py (CLIP: the class token is encoded and dropped, one token per patch) and paligemma.py
        # (SigLIP: no class token): one fixed-size image, fc1 and its activation in the MLP
        return side * side, side * side + (mt == "llava"), e, 2 * inter, pixels
    return None


def fixed_peak(width: int, mlp: int, pixels: int, patches: int, db: float, tp: int) -> int:
    """A ViT block's hidden states, residual and norm output with its MLP intermediates (sharded over
    TP) over every dummy patch, plus the pixel values in fp32 and the model's dtype."""
    return int(patches * (pixels * (4 + db) + (3 * width + mlp // max(tp, 1)) * db))


def patch_inputs(model: ModelSpec) -> int:
    """Pixel values per patch of a Qwen-VL tower (in_chans x temporal_patch_size x patch_size^2)."""
    v = model.vision
    return int(v.get("in_chans", 3)) * int(v.get("temporal_patch_size", 2)) * int(v.get("patch_size", 14)) ** 2


# Qwen2-VL / Qwen2.5-VL pixel values at the tower's peak: from 0.9.2 the tower casts the float32 batch into a
# local that patch_embed's output replaces, so only the float32 values stay through the blocks (qwen2_vl.py /
# qwen2_5_vl.py, read in the 0.9.2, 0.10.0, 0.10.2, 0.11.0, 0.12.0, 0.19.0, 0.24.0, 0.29.0 wheels); before it (0.7.3,
# 0.8.5, 0.9.0, 0.9.1) _process_image_input / _process_video_input keep a .type(visual.dtype) copy beside them, as
# Qwen3-VL's do in every release read.
QWEN_VL_CAST_IN_TOWER_FROM = (0, 9, 2)
# The attention half of a Qwen2-VL / Qwen2.5-VL block, 0.9.2 - 0.10 (Qwen2VisionAttention.forward,
# Qwen2_5_VisionAttention.forward and the blocks' forward, read in the 0.9.2, 0.10.0, 0.10.2 wheels): beside the
# block input and norm1's output (held by the module call), the qkv output (3 widths per rank), contiguous q, k, v
# (3) and, while q then k is rotated (apply_rotary_pos_emb_vision: t.float(), vllm_flash_attn's apply_rotary_emb
# writing a new tensor, .type_as), a float32 copy, its float32 output and the cast (2 + 2 + 1), with the rotary
# table (rot_pos_emb, head_dim / 2 float32 a patch) and its cos and sin; with TP, split_qkv's all-gathered qkv is
# held while the per-rank copies are made. Above the MLP half. 0.11 rotates q and k concatenated (qk_concat, 0.11.0
# wheel: 2 + 4 + 4 + 2): not applied, as the one 0.11 log of such a tower (Qwen3-VL-Embedding, T4) sits below even
# the MLP-half figure (its dummy image is not the one servefit sizes), so no 0.11 figure can be checked. From 0.12
# q, k, v stay views and the rotation runs in the model's dtype (0.12.0 wheel): below the MLP half.
QWEN_VL_ROTARY_ATTENTION = ((0, 9, 2), (0, 11, 0))


def vit_peak_bytes(model: ModelSpec, patches: int, db: float, tp: int = 1, *, version: tuple[int, int, int]) -> int:
    """A Qwen-VL tower's peak over `patches` patches: the pixel values (QWEN_VL_CAST_IN_TOWER_FROM) and the larger
    of a block's two halves, the MLP's (hidden states, norm output, intermediates) and, where read, the
    attention's (QWEN_VL_ROTARY_ATTENTION)."""
    v = model.vision
    kind = qwen_vl_kind(v, model.model_type)
    e = int(v.get("hidden_size", 0)) if kind == "qwen2_5_vl" else int(v.get("embed_dim") or v.get("hidden_size", 0))
    if kind == "qwen2_5_vl":
        mlp = 3 * int(v.get("intermediate_size", 4 * e))  # gate_up output + SiluAndMul output
    elif is_qwen3_vision(v, model.model_type):
        mlp = 2 * int(v.get("intermediate_size", 4 * e))  # linear_fc1 output + GELU output
    else:
        mlp = 2 * int(float(v.get("mlp_ratio", 4)) * e)  # fc1 output + activation
    tp = max(tp, 1)
    half = (3 * e + mlp // tp) * db
    cast_in_tower = bool(kind) and version >= QWEN_VL_CAST_IN_TOWER_FROM
    lo, hi = QWEN_VL_ROTARY_ATTENTION
    heads = int(v.get("num_heads") or v.get("num_attention_heads") or 0)
    if kind and heads and lo <= version < hi:
        rope = e // heads // 2 * 4  # rot_pos_emb: head_dim / 2 float32 per patch
        rank = e // tp
        rotary = (2 * e + 11 * rank) * db + 3 * rope  # + cos, sin
        gather = (5 * e + 6 * rank) * db + rope if tp > 1 else 0
        half = max(half + rope, rotary, gather)
    return int(patches * (patch_inputs(model) * (4 if cast_in_tower else 4 + db) + half))
