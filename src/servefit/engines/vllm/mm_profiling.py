"""How vLLM's multimodal options and per-release processor rules shape the encoder's profiling run
(encoder.py prices it): --skip-mm-profiling, --mm-encoder-tp-mode data, and the dummy video Qwen3-VL
profiles with."""

from __future__ import annotations

import math
from typing import Any

from servefit.models.spec import ModelSpec
from servefit.models.vision import INTERNVL, QWEN3_VL_VIDEO_MAX_PIXELS, is_qwen3_vision, qwen_vl_kind

# Qwen3-VL in 0.11 and 0.12 (qwen3_vl.py::Qwen3VLProcessingInfo.get_max_video_tokens) counts a video item's
# tokens as its vision tokens x 12.5 (the "<{timestamp} seconds>" text each one gains); 0.13 returns the
# vision tokens (read in the 0.11.0, 0.12.0, 0.13.0 and 0.14.0 wheels). From 0.12 profile_run copies each
# dummy output shorter than its modality's max tokens per item into a zero tensor of that many rows
# (v1/worker/gpu_model_runner.py::GPUModelRunner.profile_run, 0.12.0 wheel; gone in 0.13.0).
QWEN3_VIDEO_FORMATTED = ((0, 11, 0), (0, 13, 0))
QWEN3_VIDEO_TEXT_FACTOR = 12.5
QWEN3_MAX_FRAMES = 24576  # qwen3_vl.py _MAX_FRAMES_PER_VIDEO (0.11 - 0.14)
# From 0.17 (read in the 0.17.0, 0.20.0, 0.25.1 and 0.33.0 wheels; 0.14.0 still has the frame search; 0.15 -
# 0.16 not read, planned as 0.14) Qwen3VLProcessingInfo.get_max_video_tokens and Qwen3VLDummyInputsBuilder.
# get_dummy_mm_data use a two-frame video of the largest image within half the video pixel cap.
QWEN3_TWO_FRAMES_FROM = (0, 17, 0)
SKIP_MM_PROFILING_FROM = (0, 10, 1)  # --skip-mm-profiling (config/multimodal.py; read in the 0.10.1.1 wheel)
# --mm-encoder-tp-mode data runs the tower replicated, one share of the items per rank, where the model
# class sets supports_encoder_tp_data (models/*.py, read in the 0.10.2, 0.11.0, 0.12.0 and 0.14.0 wheels):
# Qwen2.5-VL from 0.10.2 (the flag's first release); Qwen2-VL, Qwen3-VL and InternVL from 0.11. Elsewhere
# config/model.py::ModelConfig.__post_init__ warns and falls back to "weights" (the sharded tower).
# --enable-multimodal-encoder-data-parallel is the older spelling of the same (engine/arg_utils.py, to 0.12).
ENCODER_DP_FROM = (0, 10, 2)
ENCODER_DP_MORE_FROM = (0, 11, 0)


def skipped(settings: dict[str, Any], version: tuple[int, int, int], v1: bool) -> bool:
    """--skip-mm-profiling: V1's profile_run runs no encoder dummy batch and caches no dummy outputs
    (v1/worker/gpu_model_runner.py::GPUModelRunner.profile_run, 0.10.1.1 - 0.33)."""
    return v1 and version >= SKIP_MM_PROFILING_FROM and bool(settings.get("skip_mm_profiling"))


def encoder_data_parallel(model: ModelSpec, settings: dict[str, Any], version: tuple[int, int, int], tp: int) -> bool:
    """Whether the vision tower runs data-parallel over the TP ranks (see ENCODER_DP_FROM)."""
    v = model.vision
    data = str(settings.get("mm_encoder_tp_mode") or "") == "data" or \
        bool(settings.get("enable_multimodal_encoder_data_parallel"))
    if not v or tp < 2 or not data or version < ENCODER_DP_FROM:
        return False
    kind = qwen_vl_kind(v, model.model_type)
    if kind == "qwen2_5_vl":
        return True
    return version >= ENCODER_DP_MORE_FROM and (kind == "qwen2_vl" or is_qwen3_vision(v, model.model_type) or
                                                v.get("model_type") in INTERNVL)


def _resize(height: int, factor: int, max_pixels: int, frames: int = 1) -> int:
    """The side of a square image (or of each of `frames` video frames) after transformers' smart_resize
    (qwen2_vl/image_processing_qwen2_vl.py, qwen3_vl/video_processing_qwen3_vl.py: the pixels of all frames
    within max_pixels, sides floored to `factor`, at least one factor)."""
    side = round(height / factor) * factor
    if (round(frames / 2) * 2 if frames > 1 else 1) * side * side > max_pixels:
        beta = math.sqrt(frames * height * height / max_pixels)
        side = max(factor, math.floor(height / beta / factor) * factor)
    return side


def qwen3_video_tokens(image_max_pixels: int, unit: int, patch: int, seq_len: int,
                       version: tuple[int, int, int] = (0, 12, 0)) -> int:
    """Vision tokens of the dummy video Qwen3-VL profiles with (one video per prompt): the largest image
    (get_image_size_with_most_features: a 9999999-pixel square resized within max_pixels) as frames, as many
    as keep the video within seq_len tokens (qwen2_vl.py::Qwen2VLProcessingInfo._get_max_video_frames from
    two frames up, capped at _MAX_FRAMES_PER_VIDEO), resized within the video processor's pixel cap
    (qwen3_vl.py::Qwen3VLProcessingInfo._get_vision_info, read in the 0.12.0 wheel)."""
    if version >= QWEN3_TWO_FRAMES_FROM:  # see QWEN3_TWO_FRAMES_FROM
        image_max_pixels = QWEN3_VL_VIDEO_MAX_PIXELS // 2
    image = _resize(9999999, unit, image_max_pixels)

    def tokens(frames: int) -> int:
        side = _resize(image, unit, QWEN3_VL_VIDEO_MAX_PIXELS, frames) // patch
        return max((frames + frames % 2) // 2, 1) * side * side // (unit // patch) ** 2

    frames = 2
    while version < QWEN3_TWO_FRAMES_FROM and frames < QWEN3_MAX_FRAMES and tokens(frames + 1) <= seq_len:
        frames += 1
    return tokens(frames)


DUMMY_SIZE_FROM = (0, 12, 0)  # ImageDummyOptions (config/multimodal.py; absent from the 0.11.0 wheel)


def dummy_image_size(settings: dict[str, Any], version: tuple[int, int, int]) -> tuple[int, int] | None:
    """(width, height) a --limit-mm-per-prompt '{"image": {"count": n, "width": w, "height": h}}' gives the
    dummy image from 0.12 (multimodal/profiling.py::BaseDummyInputsBuilder._get_dummy_images: each side
    min(override, the largest image's), read in the 0.12.0, 0.14.0 and 0.25.1 wheels), or None. The tokens
    an item counts in the encoder budget stay the largest image's (get_mm_max_tokens_per_item)."""
    raw = settings.get("limit_mm_per_prompt")
    if version < DUMMY_SIZE_FROM or not raw:
        return None
    if isinstance(raw, str):
        import json  # only for a --limit-mm-per-prompt: not on the path of a plain lint

        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    image = raw.get("image") if isinstance(raw, dict) else None
    if not isinstance(image, dict):
        return None
    try:
        width, height = int(image.get("width") or 0), int(image.get("height") or 0)
    except (TypeError, ValueError):
        return None
    return (width, height) if width > 0 or height > 0 else None


def qwen_image_tokens(width: int, height: int, unit: int, max_pixels: int) -> int:
    """Tokens of a width x height image after Qwen2-VL's smart_resize (transformers image_processing_qwen2_vl.py:
    sides rounded to `unit`, within max_pixels; the min_pixels floor is not applied)."""
    h, w = max(unit, round(height / unit) * unit), max(unit, round(width / unit) * unit)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h, w = max(unit, math.floor(height / beta / unit) * unit), max(unit, math.floor(width / beta / unit) * unit)
    return (h // unit) * (w // unit)



# Mistral 3's Pixtral tower (pixtral.py: PixtralHFTransformer for the HF-format checkpoints, VisionTransformer
# for --config-format mistral) runs every dummy image of the profiling batch as one sequence of all their
# patches. Where xformers is missing it builds transformers' generate_block_attention_mask, a dense
# (1, 1, n, n) tensor in the model's dtype over those n patches, kept through every layer, and passes it to
# F.scaled_dot_product_attention; PyTorch's memory-efficient kernel first pads a mask whose rows are not a
# multiple of 8 long (aten attention.cpp::preprocess_mask: mem_eff_alignment 8, pad_bias), a copy held for
# the call. xformers is a dependency on Linux x86_64 up to 0.11 (METADATA of the 0.9.2, 0.10.2 and 0.11.0
# wheels: its BlockDiagonalMask needs no such tensor; pixtral.py does not use it on compute 10.0 and
# later, not modelled) and not from 0.12 (vllm-project/vllm#29262 removed it, the image included: "vLLM does not install xformers by default": 0.12.0 - 0.15.0,
# 0.17.0, 0.20.0 - 0.22.0, 0.24.0 - 0.28.0 wheels read); from 0.29 the tower runs MMEncoderAttention over
# cu_seqlens, no mask (0.29.0 - 0.33.0). 0.11.1 / 0.11.2 were not read (planned as 0.11).
PIXTRAL_DENSE_MASK = ((0, 12, 0), (0, 29, 0))
SDPA_MASK_ALIGNMENT = 8


def pixtral_mask_bytes(model: ModelSpec, patches: int, db: float, version: tuple[int, int, int]) -> tuple[int, int]:
    """(the block-diagonal mask the Pixtral tower keeps through its layers, the padded copy one attention call
    adds) over `patches` dummy patches, in bytes; (0, 0) for other towers and releases (PIXTRAL_DENSE_MASK)."""
    v = model.vision or {}
    lo, hi = PIXTRAL_DENSE_MASK
    if model.model_type != "mistral3" or v.get("model_type") != "pixtral" or not lo <= version < hi:
        return 0, 0
    rest = patches % SDPA_MASK_ALIGNMENT
    padded = patches * (patches + SDPA_MASK_ALIGNMENT - rest) if rest else 0
    return int(patches * patches * db), int(padded * db)
