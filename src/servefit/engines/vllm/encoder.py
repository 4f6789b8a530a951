"""The vision encoder's share of vLLM's profiling run, for Qwen2-VL / Qwen2.5-VL / Qwen3-VL / Qwen3.5 towers.

V1 (vllm/v1/worker/gpu_model_runner.py::GPUModelRunner.profile_run): before the dummy LM
forward, the encoder runs on `mm_max_items_per_batch` dummy items of the modality with the most
tokens per item, and its outputs stay in the encoder cache through the LM forward and the
sampler run. The item count comes from vllm/multimodal/encoder_budget.py::MultiModalBudget
(_get_max_items) and vllm/v1/core/encoder_cache_manager.py::compute_mm_encoder_budget: an
encoder budget of max(max_num_batched_tokens, tokens per item), at most max_num_seqs x the
items a prompt can hold (max_model_len // tokens per item, within the per-prompt limit), at
least one. The per-item size is the largest image the processor allows
(vllm/model_executor/models/qwen2_vl.py::Qwen2VLProcessingInfo: max_pixels / (patch x merge)^2
tokens, default max_pixels 12845056 -> 16384 tokens; a video item holds up to 14 frames, two per
temporal patch, within max_model_len; Qwen3-VL's dummy video and the tokens 0.11 - 0.12 count for it are in
mm_profiling.py, with --skip-mm-profiling and --mm-encoder-tp-mode data).

V0 (vllm/worker/model_runner.py::ModelRunner._dummy_run, 0.8.x): min(max_num_seqs,
max_num_batched_tokens // max_mm_tokens) dummy sequences (at least one), each carrying the
per-prompt limit of images and videos (default one each); a prompt longer than its share of
max_num_batched_tokens is not cut, so the LM forward runs over all the multimodal tokens. V0 moves
every dummy item's pixel values to the GPU before the forward (worker/model_runner.py::
ModelRunner.execute_model: MultiModalKwargs.as_kwargs(..., device)) and the model's forward keeps
them (qwen2_5_vl.py::Qwen2_5_VLForConditionalGeneration.forward holds image_input / video_input, float32
as the HF image processor returns them, through the language model's forward; llava.py, gemma3_mm.py
alike): they sit beside both encoder passes and the LM forward's peak (EncoderProfile.inputs), twice for
Qwen2-VL / Qwen2.5-VL, whose forward concatenates its own copy (see profile below).

V1 keeps them too: profile_run holds batched_dummy_mm_inputs (the items' pixel values on the GPU,
_get_mm_dummy_batch) until it returns, through the dummy LM forward and the sampler run
(v1/worker/gpu_model_runner.py::GPUModelRunner.profile_run, read in the 0.11.0 and 0.25.1 wheels).

The encoder's own peak: the larger of a ViT block's two halves over all dummy patches (flash
attention: no patches^2 term), plus the pixel values (vision_tower.py::vit_peak_bytes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from servefit.engines.vllm.mm_profiling import (
    QWEN3_VIDEO_FORMATTED,
    QWEN3_VIDEO_TEXT_FACTOR,
    dummy_image_size,
    pixtral_mask_bytes,
    qwen3_video_tokens,
    qwen_image_tokens,
)
from servefit.engines.vllm.vision_tower import (
    INTERNVL_MAX_TILES,
    fixed_peak,
    fixed_tower,
    patch_inputs,
    vit_peak_bytes,
)
from servefit.models.spec import ModelSpec
from servefit.models.vision import (
    INTERNVL,
    QWEN3_VL_MAX_PIXELS,
    QWEN_VL_MAX_PIXELS,
    is_qwen3_vision,
    qwen_vl_kind,
)

V1_MAX_FRAMES = 14  # qwen2_vl.py _MAX_FRAMES_PER_VIDEO in 0.33
V0_MAX_FRAMES = 16  # ... in 0.8.x
V1_EXPANDED = (0, 11, 0)  # dummy outputs copied to the encoder budget, up to 0.12 (see _fixed_profile)


@dataclass
class EncoderProfile:
    """The vision encoder's share of vLLM's profiling run: its peak, the outputs kept through the language
    model's forward, and the dummy items behind them."""

    peak: int  # bytes the encoder forward holds at its peak
    outputs: int  # bytes of the encoder outputs kept for the LM run (V1)
    lm_tokens: int  # tokens of the LM profiling forward (V0: the dummy prompts, uncut)
    items: int  # dummy items encoded
    tokens_per_item: int
    modality: str
    seqs: int = 0  # V0: dummy sequences (one logit row each)
    inputs: int = 0  # the dummy items' float32 pixel values, on the GPU through the LM forward (V0 and V1)


def _json(value: Any) -> Any:
    if isinstance(value, str):
        import json  # only for a --limit-mm-per-prompt: not on the path of a plain lint

        try:
            return json.loads(value)
        except ValueError:
            if "=" in value:  # the old key=value,key=value form of --limit-mm-per-prompt
                out = {}
                for part in value.split(","):
                    k, _, v = part.partition("=")
                    out[k.strip()] = v.strip()
                return out
            return None
    return value


def _limit(settings: dict[str, Any], modality: str, v1: bool) -> int:
    if settings.get("language_model_only"):
        return 0
    limits = _json(settings.get("limit_mm_per_prompt"))
    value = limits.get(modality) if isinstance(limits, dict) else None
    if isinstance(value, dict):
        value = value.get("count")
    if value is None:
        return 999 if v1 else 1  # vLLM's default per-prompt limit (V0: one per modality)
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 999 if v1 else 1


def _max_pixels(settings: dict[str, Any], default: int = QWEN_VL_MAX_PIXELS) -> int:
    kw = _json(settings.get("mm_processor_kwargs"))
    if isinstance(kw, dict):
        for d in (kw, kw.get("images_kwargs"), kw.get("size")):
            if isinstance(d, dict):
                v = d.get("max_pixels") or d.get("longest_edge")
                if isinstance(v, (int, float)) and v > 0:
                    return int(v)
    return default


def _video_tokens(per_frame_pair: int, room: int, max_frames: int, videos: int = 1) -> int:
    """Tokens of the largest dummy video: frames come in temporal pairs of `per_frame_pair`
    tokens, as many as fit in `room` tokens (at least one frame), capped at `max_frames`."""
    pairs = max(0, room) // per_frame_pair if per_frame_pair else 0
    frames = max(1, min(2 * pairs // max(videos, 1), max_frames))
    return per_frame_pair * -(-frames // 2)


def deepstack_buffer_bytes(model: ModelSpec, settings: dict[str, Any], max_num_batched_tokens: int, db: float) -> int:
    """Qwen3-VL's deepstack buffers, allocated while the model is built and so counted in vLLM's "Model loading
    took": one max_num_batched_tokens x text-hidden tensor in the model's dtype per deepstack level
    (models/qwen3_vl.py::Qwen3VLForConditionalGeneration.__init__, `torch.zeros(scheduler_config.
    max_num_batched_tokens, text_config.hidden_size)` for each of deepstack_visual_indexes, read in the
    0.11.0 and 0.25.1 wheels; qwen3_vl_moe.py and qwen3_omni_moe_thinker.py alike, 0.11 - 0.33), on every
    TP rank, only where the vision tower is built (0.11: not when the image and video limits are both 0)."""
    v = model.vision
    levels = len(v.get("deepstack_visual_indexes") or []) if v else 0
    if not levels or (not _limit(settings, "image", True) and not _limit(settings, "video", True)):
        return 0
    return int(levels * max_num_batched_tokens * model.hidden_size * db)


def profile(model: ModelSpec, settings: dict[str, Any], *, v1: bool, max_model_len: int, max_num_seqs: int,
            max_num_batched_tokens: int, chunked_prefill: bool, db: float, tp: int = 1,
            version: tuple[int, int, int] = (0, 33, 0), encoder_dp: bool = False) -> EncoderProfile | None:
    """The encoder's part of the profiling run, or None when the model has no tower servefit
    models (Qwen-VL, Qwen3-VL / Qwen3.5, Gemma 3, Mistral 3) or every modality is off (limit 0,
    --language-model-only)."""
    v = model.vision
    qwen3 = bool(v) and is_qwen3_vision(v, model.model_type)
    if not v:
        return None
    if v.get("model_type") == "mllama_vision_model":
        return None if v1 else _mllama_v0(model, settings, max_num_seqs=max_num_seqs,
                                          max_num_batched_tokens=max_num_batched_tokens, db=db, tp=tp)
    if not (qwen3 or qwen_vl_kind(v, model.model_type)):
        return _fixed_profile(model, settings, v1=v1, max_model_len=max_model_len, max_num_seqs=max_num_seqs,
                              max_num_batched_tokens=max_num_batched_tokens, chunked_prefill=chunked_prefill,
                              db=db, tp=tp, version=version, encoder_dp=encoder_dp)
    merge = int(v.get("spatial_merge_size", 2))
    unit = int(v.get("patch_size", 14)) * merge
    # Qwen3-VL / Qwen3.5 reuse Qwen2-VL's profiling (qwen3_vl.py::Qwen3VLProcessingInfo subclasses
    # Qwen2VLProcessingInfo) with their processor's longest_edge; deepstack levels ride along with
    # every output token (Qwen3_VisionTransformer.forward concatenates them)
    per_image = max(1, _max_pixels(settings, QWEN3_VL_MAX_PIXELS if qwen3 else QWEN_VL_MAX_PIXELS) // (unit * unit))
    out_hidden = int(v.get("out_hidden_size") or model.hidden_size) * (1 + len(v.get("deepstack_visual_indexes") or []))
    images, videos = _limit(settings, "image", v1), _limit(settings, "video", v1)
    if not images and not videos:
        return None
    if v1:
        video = _video_tokens(per_image, max_model_len, V1_MAX_FRAMES) if videos else 0
        video_max = video  # the video item's tokens as the budget counts them (Qwen3-VL 0.11 - 0.12: more)
        if qwen3 and videos:  # the video processor caps all frames' pixels (qwen3_vl.py::_get_vision_info)
            video = qwen3_video_tokens(per_image * unit * unit, unit, int(v.get("patch_size", 16)), max_model_len,
                                       version)
            lo, hi = QWEN3_VIDEO_FORMATTED
            video_max = int(video * QWEN3_VIDEO_TEXT_FACTOR) if lo <= version < hi else video
        # MultiModalBudget.get_modality_with_max_tokens: the modality whose item counts the most tokens
        modality, tok, enc_tok = ("video", video_max, video) if video_max >= per_image or not images else \
            ("image", per_image, per_image)
        if modality == "image" and (size := dummy_image_size(settings, version)):  # a smaller dummy image
            side = unit * int(per_image ** 0.5)  # the largest image's side (a square within max_pixels)
            width, height = min(size[0] or side, side), min(size[1] or side, side)
            enc_tok = min(per_image, qwen_image_tokens(width, height, unit, per_image * unit * unit))
        limit = videos if modality == "video" else images
        budget = max(max_num_batched_tokens, tok)
        reqs = max_num_seqs if chunked_prefill else min(max_num_seqs, max_num_batched_tokens // tok)
        items = max(1, min(budget // tok, reqs * max(1, min(limit, max_model_len // tok))))
        patches = items * enc_tok * merge * merge
        # cached rows per item: 0.11 pads each output to the encoder budget (see _fixed_profile), 0.12 to the
        # modality's max tokens per item (QWEN3_VIDEO_FORMATTED), later releases keep the output as it is
        rows = budget if V1_EXPANDED <= version < (0, 12, 0) and enc_tok < budget else \
            tok if version < QWEN3_VIDEO_FORMATTED[1] else enc_tok
        peak = vit_peak_bytes(model, patches, db, tp, version=version)
        if encoder_dp:  # --mm-encoder-tp-mode data (mm_profiling.py): the busiest rank's share of the items on the
            # whole tower, from a float32 copy of its items' pixel values (models/vision.py::
            # run_dp_sharded_mrope_vision_model: balanced by patches, torch.cat of the rank's items), beside the batch
            local = -(-items // tp) * enc_tok * merge * merge
            peak = vit_peak_bytes(model, local, db, 1, version=version) + 4 * patch_inputs(model) * patches
        return EncoderProfile(peak=peak, outputs=int(items * rows * out_hidden * db),
                              lm_tokens=0, items=items, tokens_per_item=tok, modality=modality,
                              inputs=4 * patch_inputs(model) * patches)
    # V0: max_mm_tokens from one prompt of max_model_len, then the dummy sequences
    video_max = _video_tokens(per_image, max_model_len - images * per_image, V0_MAX_FRAMES, videos) if videos else 0
    max_mm = images * per_image + videos * video_max
    seqs = max(1, min(max_num_seqs, max_num_batched_tokens // max_mm))
    seq_len = max_num_batched_tokens // seqs
    video = _video_tokens(per_image, seq_len - images * per_image, V0_MAX_FRAMES, videos) if videos else 0
    per_seq = images * per_image + videos * video
    lm_tokens = seqs * max(seq_len, per_seq)
    # images, then videos, are encoded as two batches (qwen2_vl.py / qwen2_5_vl.py::get_input_embeddings_v0,
    # 0.8.4): the text embeddings of every dummy token are made first and kept, the other batch's float32
    # pixel values stay on the GPU, and the video pass also keeps the image pass's outputs (image_embeds)
    image_patches, video_patches = seqs * images * per_image * merge * merge, seqs * videos * video * merge * merge
    px = 4 * patch_inputs(model)
    embeds = int(lm_tokens * model.hidden_size * db)
    # the forward holds a second float32 copy of every item's pixel values: the runner passes them batched
    # ([seqs, patches, C] stacked by multimodal/inputs.py::MultiModalKwargs._try_stack, one sequence
    # included: unsqueeze(0)), and qwen2_vl.py / qwen2_5_vl.py::_validate_and_reshape_mm_tensor turns a 3-D
    # tensor (or a list) into torch.concat(list(...)), a new tensor, which image_input / video_input keep
    # until forward returns, beside the runner's (read in the 0.7.3 and 0.8.4 wheels)
    copies = px * (image_patches + video_patches)
    image_pass = vit_peak_bytes(model, image_patches, db, tp, version=version) + px * video_patches + copies if images else 0
    video_pass = vit_peak_bytes(model, video_patches, db, tp, version=version) + px * image_patches + copies + \
        int(seqs * images * per_image * out_hidden * db) if videos else 0
    modality = "+".join(m for m, n in (("image", images), ("video", videos)) if n)
    return EncoderProfile(peak=embeds + max(image_pass, video_pass), outputs=0, lm_tokens=lm_tokens,
                          items=seqs * (images + videos), tokens_per_item=max(per_image, video), modality=modality,
                          seqs=seqs, inputs=2 * copies)


def _fixed_profile(model: ModelSpec, settings: dict[str, Any], *, v1: bool, max_model_len: int, max_num_seqs: int,
                   max_num_batched_tokens: int, chunked_prefill: bool, db: float, tp: int,
                   version: tuple[int, int, int], encoder_dp: bool = False) -> EncoderProfile | None:
    """The profiling run of a fixed-size image tower (fixed_tower): images only, counted as for the
    Qwen-VL towers above. In 0.11 (v1/worker/gpu_model_runner.py::profile_run, in the 0.11.0 wheel
    and neither the 0.10.2 nor the 0.12.0 one) every dummy output shorter than the encoder budget is
    copied into a zero tensor of budget x hidden rows before it is cached, so each item holds a
    budget's worth of rows."""
    tower = fixed_tower(model)
    images = _limit(settings, "image", v1)
    if tower is None or not images:
        return None
    tok, patches, width, mlp, pixels = tower
    hidden = model.hidden_size
    # float32 pixel values of one item: its patches less the class tokens, which carry none (CLIP's one, a
    # class token per InternViT tile: see fixed_tower)
    cls = INTERNVL_MAX_TILES + 1 if model.vision.get("model_type") in INTERNVL else int(model.model_type == "llava")
    item_px = 4 * pixels * (patches - cls)
    if v1:
        budget = max(max_num_batched_tokens, tok)
        reqs = max_num_seqs if chunked_prefill else min(max_num_seqs, max_num_batched_tokens // tok)
        items = max(1, min(budget // tok, reqs * max(1, min(images, max_model_len // tok))))
        rows = budget if V1_EXPANDED <= version < (0, 12, 0) and tok < budget else tok
        peak = fixed_peak(width, mlp, pixels, items * patches, db, tp)
        mask, padded = pixtral_mask_bytes(model, items * patches, db, version)  # Pixtral without xformers
        peak = mask + max(peak, padded)
        if encoder_dp:  # InternViT, --mm-encoder-tp-mode data: models/vision.py::run_dp_sharded_vision_model pads
            # the batch's tiles to a multiple of the TP size (a float32 copy) and runs one rank's share
            peak = fixed_peak(width, mlp, pixels, -(-items * patches // tp), db, 1) + items * item_px
        return EncoderProfile(peak=peak,
                              inputs=items * item_px,
                              outputs=int(items * rows * hidden * db), lm_tokens=0, items=items,
                              tokens_per_item=tok, modality="image")
    seqs = max(1, min(max_num_seqs, max_num_batched_tokens // (images * tok)))
    lm_tokens = seqs * max(max_num_batched_tokens // seqs, images * tok)
    return EncoderProfile(peak=fixed_peak(width, mlp, pixels, seqs * images * patches, db, tp), outputs=0,
                          lm_tokens=lm_tokens, items=seqs * images, tokens_per_item=tok, modality="image", seqs=seqs,
                          inputs=seqs * images * item_px)


def _mllama_v0(model: ModelSpec, settings: dict[str, Any], *, max_num_seqs: int, max_num_batched_tokens: int,
               db: float, tp: int) -> EncoderProfile | None:
    """Llama-3.2-Vision (mllama) on V0. worker/enc_dec_model_runner.py::EncoderDecoderModelRunner.profile_run
    (read in the 0.6.6 and 0.7.3 wheels) builds max_num_seqs dummy sequences whatever the token budget,
    max_num_batched_tokens split between them, each with the per-prompt image limit (V0: one) of an image
    of max_num_tiles tiles (mllama.py::dummy_encoder_data_for_mllama, 1024 x 1024 in 0.6.6;
    MllamaDummyInputsBuilder's 16:1 image in 0.7.3). The tower (mllama.py::MllamaVisionModel.forward, the
    same in both) runs them as one batch of L = tiles x (patches + class token, padded to a multiple of 8)
    tokens per image. Counted, as held together at the MLP of a local layer past the last stored one: the
    attention mask of _prepare_aspect_ratio_attention_mask (L x L per image, the model's dtype), the
    hidden states stored for intermediate_layers_indices (MllamaVisionEncoder.forward) and CLIPMLP's fc1
    output beside its GELU (sharded over TP). The code also holds hidden-width tensors there (the layer's
    input, its residual and norm output, the tower's input: 4 more) and the fp32 pixel values; with them
    the count for the PR #12126 log (11B, 128 sequences) is 43.2 GiB where vLLM logged 36.63, without them
    35.38: which of them the logged run did not hold is not resolved, so they are left out."""
    v = model.vision
    images = _limit(settings, "image", False)
    if not images:
        return None
    tiles = int(v.get("max_num_tiles", 4))
    patches = (int(v.get("image_size", 560)) // int(v.get("patch_size", 14))) ** 2 + 1
    per_image = tiles * -(-patches // 8) * 8
    width = int(v.get("hidden_size", 1280))
    mlp = 2 * int(v.get("intermediate_size", 4 * width)) // max(tp, 1)
    stored = len(v.get("intermediate_layers_indices") or [])
    batch = max_num_seqs * images
    tokens = batch * per_image
    peak = batch * per_image * per_image * db + tokens * (stored * width + mlp) * db
    return EncoderProfile(peak=int(peak), outputs=0, lm_tokens=max_num_batched_tokens,
                          items=batch, tokens_per_item=tiles * patches, modality="image", seqs=max_num_seqs)
