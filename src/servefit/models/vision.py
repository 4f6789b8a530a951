"""Vision towers: parameter counts of the encoder + projector layouts the catalog and
config.json readers know, and the facts the engines' encoder profiling needs.

Standard library only: this is on the fast path.
"""

from __future__ import annotations

from typing import Any

# model_type values of the Qwen vision towers (the top-level model_type, or the vision_config's)
QWEN2_VL = ("qwen2_vl",)
QWEN2_5_VL = ("qwen2_5_vl", "qwen2_5_vl_vision")
# Qwen2-VL / Qwen2.5-VL image processor default (Qwen2VLImageProcessor: max_pixels 12845056)
QWEN_VL_MAX_PIXELS = 12845056
# Qwen3-VL and Qwen3.5 / 3.6 towers (vision_config model_type, or the top-level model_type)
QWEN3_VL = ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "qwen3_5_vision", "qwen3_5_moe_vision")
# size["longest_edge"] of the Qwen3-VL checkpoints' preprocessor_config.json (the profiling image's
# pixels) and video_preprocessor_config.json (a cap on the pixels of all frames together,
# video_smart_resize over frames x height x width); Qwen3.5 / 3.6 use the same processor classes
# (transformers auto maps: Qwen3VLProcessor) and are assumed to ship the same sizes
QWEN3_VL_MAX_PIXELS = 16777216
QWEN3_VL_VIDEO_MAX_PIXELS = 25165824


def is_qwen3_vision(vision: dict[str, Any], model_type: str) -> bool:
    return str(vision.get("model_type", "")) in QWEN3_VL or (model_type in QWEN3_VL and "depth" in vision)


def _qwen3_vl_params(vision: dict[str, Any], text_hidden: int) -> int:
    """Qwen3-VL / Qwen3.5 vision transformer (transformers modeling_qwen3_vl.py::Qwen3VLVisionModel,
    vLLM model_executor/models/qwen3_vl.py::Qwen3_VisionTransformer): Conv3d patch embed with
    bias, a learned position table (num_position_embeddings x width), `depth` blocks of two
    LayerNorms, qkv / proj and fc1 / fc2 (gelu) with biases, the 2x2 patch merger (LayerNorm on
    the width, Linear(4e -> 4e), Linear(-> LM width)) and one merger per deepstack index (Qwen3-VL;
    LayerNorm on 4e). Qwen3.5 has no deepstack mergers."""
    depth = int(vision.get("depth") or vision.get("num_hidden_layers") or 0)
    e = int(vision.get("hidden_size", 0))
    if not e or not depth:
        return 0
    inter = int(vision.get("intermediate_size") or 4 * e)
    chans = int(vision.get("in_chans") or vision.get("in_channels") or 3)
    patch = int(vision.get("patch_size", 16))
    tps = int(vision.get("temporal_patch_size", 2))
    merge = int(vision.get("spatial_merge_size", 2))
    out = int(vision.get("out_hidden_size") or text_hidden)
    npos = int(vision.get("num_position_embeddings", 2304))
    block = 4 * e + (e * 3 * e + 3 * e) + (e * e + e) + (e * inter + inter) + (inter * e + e)
    m = e * merge * merge
    mlp = (m * m + m) + (m * out + out)
    deepstack = len(vision.get("deepstack_visual_indexes") or [])
    return (chans * tps * patch * patch * e + e + npos * e + depth * block + 2 * e + mlp
            + deepstack * (2 * m + mlp))


GLM4V = ("glm4v", "glm4v_moe", "glm4v_vision", "glm4v_moe_vision")  # GLM-4.1V / 4.5V / 4.6V


def _glm4v_params(vision: dict[str, Any], text_hidden: int) -> int:
    """GLM-4.1V / GLM-4.5V vision tower (transformers modeling_glm4v.py::Glm4vVisionModel, vLLM
    glm4_1v.py::Glm4vVisionTransformer): a learned position table ((image_size / patch)^2 rows),
    the Conv3d patch embed with bias, `depth` blocks of two RMSNorms, bias-free qkv / proj and a
    bias-free SwiGLU whose width is out_hidden_size, the post-conv RMSNorm, the 2x2 Conv2d
    downsample (hidden -> out_hidden_size, with bias), the post RMSNorm, and the patch merger
    (Linear(out -> out), LayerNorm, SwiGLU out -> intermediate_size -> out, bias-free)."""
    depth = int(vision.get("depth") or vision.get("num_hidden_layers") or 0)
    e = int(vision.get("hidden_size", 0))
    if not e or not depth:
        return 0
    out = int(vision.get("out_hidden_size") or text_hidden)
    inter = int(vision.get("intermediate_size") or 13696)
    chans = int(vision.get("in_channels") or vision.get("in_chans") or 3)
    patch = int(vision.get("patch_size", 14))
    tps = int(vision.get("temporal_patch_size", 2))
    merge = int(vision.get("spatial_merge_size", 2))
    grid = (int(vision.get("image_size", 336)) // patch) ** 2
    qkv_bias = 3 * e if vision.get("attention_bias") else 0
    block = 2 * e + e * 3 * e + qkv_bias + e * e + 3 * e * out
    merger = out * out + 2 * out + 3 * out * inter
    return (grid * e + chans * tps * patch * patch * e + e + depth * block + 2 * e
            + e * out * merge * merge + out + merger)


def _glm_ocr_params(vision: dict[str, Any], text_hidden: int) -> int:
    """GLM-OCR vision tower (transformers 5.24.0 modeling_glm_ocr.py GlmOcrVisionModel): GLM-4.1V's
    without the position table and post-conv norm; its blocks have biased qkv / proj, q/k RMSNorms
    of head_dim and a biased SwiGLU of intermediate_size; the Conv2d downsample (with bias), the
    post RMSNorm, and the merger (Linear(out -> out), LayerNorm, bias-free SwiGLU out -> out x
    in_channels -> out)."""
    depth, e = int(vision["depth"]), int(vision["hidden_size"])
    out = int(vision.get("out_hidden_size") or text_hidden)
    inter = int(vision["intermediate_size"])
    chans = int(vision.get("in_channels") or vision.get("in_chans") or 3)
    patch, tps = int(vision["patch_size"]), int(vision.get("temporal_patch_size", 2))
    merge = int(vision.get("spatial_merge_size", 2))
    hd = e // int(vision["num_heads"])
    block = 2 * e + (3 * e * e + 3 * e) + (e * e + e) + 2 * hd + (3 * e * inter + 2 * inter + e)
    merger = out * out + 2 * out + 3 * out * (out * chans)
    return chans * tps * patch * patch * e + e + depth * block + e * out * merge * merge + out + e + merger


INTERNVL = ("internvl_vision", "intern_vit_6b")  # InternViT towers of InternVL 2 / 2.5 / 3 / 3.5


def _internvl_params(vision: dict[str, Any], text_hidden: int, top: dict[str, Any]) -> int:
    """InternViT + InternVL's MLP projector (transformers modeling_internvl.py InternVLVisionModel and
    InternVLMultiModalProjector; vLLM internvl.py InternVisionModel / mlp1): class token, patch conv
    with bias, a (patches + 1)-row position table, layers of q/k/v (biases per `attention_bias`), an
    output projection with bias, optional per-head-width q/k RMSNorms over the whole width
    (`use_qk_norm`), two LayerNorms (weight + bias) or RMSNorms (`norm_type`), the fc1 / fc2 MLP
    with biases and two layer-scale vectors; a final LayerNorm unless `use_mean_pooling`; then
    LayerNorm(hidden x 1/downsample^2) -> Linear -> GELU -> Linear into the language model."""
    h = int(vision.get("hidden_size", 0))
    layers = int(vision.get("num_hidden_layers", 0))
    if not h or not layers:
        return 0
    inter = int(vision.get("intermediate_size") or 4 * h)
    patch = int(vision.get("patch_size", 14))
    chans = int(vision.get("num_channels", 3))
    grid = (int(vision.get("image_size", 448)) // patch) ** 2
    norm = h if vision.get("norm_type") == "rms_norm" else 2 * h
    attn = 3 * h * h + (3 * h if vision.get("attention_bias") else 0) + h * h + h
    attn += 2 * h if vision.get("use_qk_norm") else 0
    layer = attn + 2 * norm + (h * inter + inter) + (inter * h + h) + 2 * h
    enc = h + chans * patch * patch * h + h + (grid + 1) * h + layers * layer
    enc += 0 if vision.get("use_mean_pooling", True) else 2 * h
    ratio = float(vision.get("downsample_ratio") or top.get("downsample_ratio") or 0.5)
    wide = h * int(round(1 / ratio)) ** 2
    return enc + 2 * wide + (wide * text_hidden + text_hidden) + (text_hidden * text_hidden + text_hidden)


def qwen_vl_kind(vision: dict[str, Any], model_type: str) -> str:
    """"qwen2_5_vl", "qwen2_vl" or "" for a vision_config and the top-level model_type."""
    vtype = str(vision.get("model_type", ""))
    if vtype in QWEN2_5_VL or (model_type in QWEN2_5_VL and vtype not in QWEN2_VL):
        return "qwen2_5_vl"
    if vtype in QWEN2_VL or model_type in QWEN2_VL:
        return "qwen2_vl"
    return ""


def _qwen_vl_params(vision: dict[str, Any], text_hidden: int, kind: str) -> int:
    """Qwen2-VL / Qwen2.5-VL vision transformer: Conv3d patch embed without bias, `depth`
    pre-norm blocks, and the patch merger (norm, Linear(e*m^2 -> e*m^2), Linear(-> LM width)).

    Qwen2.5-VL blocks: two RMSNorms, qkv and proj with biases, SwiGLU gate/up/down with biases;
    merger norm RMSNorm. Qwen2-VL blocks: two LayerNorms with bias, qkv and proj with biases,
    fc1/fc2 MLP (mlp_ratio x embed_dim) with biases; merger norm LayerNorm with bias. Qwen2-VL's
    vision `embed_dim` is the tower width and its `hidden_size` the LM width."""
    depth = int(vision.get("depth") or vision.get("num_hidden_layers") or 0)
    chans = int(vision.get("in_chans") or vision.get("in_channels") or 3)
    patch = int(vision.get("patch_size", 14))
    tps = int(vision.get("temporal_patch_size", 2))
    merge = int(vision.get("spatial_merge_size", 2))
    if kind == "qwen2_5_vl":
        e = int(vision.get("hidden_size", 0))
        inter = int(vision.get("intermediate_size", 0))
        out = int(vision.get("out_hidden_size") or text_hidden)
        norm = e  # RMSNorm
        mlp = 2 * (e * inter + inter) + inter * e + e  # gate, up, down with biases
    else:
        e = int(vision.get("embed_dim") or vision.get("hidden_size", 0))
        inter = int(float(vision.get("mlp_ratio", 4)) * e)
        out = int(vision.get("hidden_size") or text_hidden) if vision.get("embed_dim") else text_hidden
        norm = 2 * e  # LayerNorm with bias
        mlp = e * inter + inter + inter * e + e  # fc1, fc2 with biases
    if not e or not depth:
        return 0
    block = 2 * norm + (e * 3 * e + 3 * e) + (e * e + e) + mlp
    m = e * merge * merge
    merger = norm + (m * m + m) + (m * out + out)
    return chans * tps * patch * patch * e + depth * block + merger


def count_vision_params(vision: dict[str, Any], text_hidden: int, model_type: str,
                        top: dict[str, Any] | None = None) -> int:
    """Parameters of a vision tower plus the projector into the language model, and of the audio
    encoder a vision dict may carry (`audio`: Qwen2.5-Omni's thinker; models/vision_towers.py)."""
    n = _count_vision(vision, text_hidden, model_type, top)
    if isinstance(vision.get("audio"), dict):
        from servefit.models.vision_towers import count_audio

        n += count_audio(vision["audio"], text_hidden)
    return n


def _count_vision(vision: dict[str, Any], text_hidden: int, model_type: str,
                  top: dict[str, Any] | None = None) -> int:
    """Parameters of a vision tower plus the projector into the language model.

    `vision` is the config.json `vision_config`; `top` the top-level config (projector keys such
    as `spatial_merge_size`), looked up in `vision` too when absent. Layouts: SigLIP (Gemma 3,
    PaliGemma, Idefics3 / SmolVLM), Phi-3-vision's CLIP with its HD projector,
    Pixtral (Mistral 3), Llama-4's ViT with its pixel-shuffle adapter, Qwen2-VL and Qwen2.5-VL;
    Qwen3-VL / Qwen3.5; other ViTs are counted as CLIP-style encoders with a two-layer projector."""
    top = top or {}
    from servefit.models.vision_towers import TOWERS, count_tower

    if vision.get("model_type") in TOWERS:  # MoonViT, DeepSeek-VL2 / OCR, MiniCPM-V
        return count_tower(vision, text_hidden)
    if vision.get("model_type") in INTERNVL:
        return _internvl_params(vision, text_hidden, top)
    if vision.get("model_type") == "glm_ocr_vision":
        return _glm_ocr_params(vision, text_hidden)
    if vision.get("model_type") in GLM4V or (model_type in GLM4V and "depth" in vision):
        return _glm4v_params(vision, text_hidden)
    if vision.get("model_type") == "gemma4_vision":  # models/arch_gemma4.py
        from servefit.models.arch_gemma4 import count_vision

        return count_vision(vision, text_hidden)
    if vision.get("model_type") == "gemma4_unified_vision":  # encoder-free (gemma-4-12B)
        from servefit.models.arch_gemma4 import count_unified_vision

        return count_unified_vision(vision, text_hidden)
    if is_qwen3_vision(vision, model_type):
        return _qwen3_vl_params(vision, text_hidden)
    qwen = qwen_vl_kind(vision, model_type)
    if qwen:
        return _qwen_vl_params(vision, text_hidden, qwen)

    def get(key: str, default: Any = None) -> Any:
        if vision.get(key) is not None:
            return vision[key]
        return top.get(key, default)

    h = int(get("hidden_size", 0))
    if not h:
        return 0
    layers = int(get("num_hidden_layers", 0))
    inter = int(get("intermediate_size", 4 * h))
    patch = int(get("patch_size", 14))
    image = int(get("image_size", 224))
    chans = int(get("num_channels", 3))
    grid = (image // patch) ** 2
    # a pre-norm ViT layer with biases everywhere: q/k/v/o, fc1/fc2, two LayerNorms
    vit_layer = 4 * (h * h + h) + (h * inter + inter) + (inter * h + h) + 4 * h
    vtype = str(vision.get("model_type", ""))
    if model_type == "mistral3" or (vtype == "pixtral" and model_type != "llava"):
        # Pixtral: bias-free RMSNorm layers with a gated MLP, 2-D RoPE (no position table)
        enc = _pixtral_encoder(h, layers, inter, patch, chans)
        merge = int(get("spatial_merge_size", 2))
        bias = bool(get("multimodal_projector_bias", False))
        proj = h + (h * merge * merge) * h  # norm + patch merger
        proj += h * text_hidden + text_hidden * text_hidden + (2 * text_hidden if bias else 0)
        return enc + proj
    if model_type == "mllama" or vtype == "mllama_vision_model":
        return _mllama_params(get, h, layers, inter, patch, image, chans, text_hidden)
    if vtype == "pixtral" and model_type == "llava":
        # Pixtral-12B in the LLaVA layout (transformers LlavaForConditionalGeneration, vLLM llava.py):
        # the Pixtral encoder without a patch merger, then linear_1 / linear_2 with biases
        enc = _pixtral_encoder(h, layers, inter, patch, chans)
        bias = bool(get("multimodal_projector_bias", True))
        return enc + h * text_hidden + text_hidden * text_hidden + (2 * text_hidden if bias else 0)
    if model_type == "llama4" or vtype == "llama4_vision_model":
        enc = chans * patch * patch * h + h + (grid + 1) * h + 4 * h + layers * vit_layer
        p_in = int(get("projector_input_dim", 4096))
        p_out = int(get("projector_output_dim", 4096))
        adapter = inter * p_in + p_out * p_out  # pixel-shuffle MLP fc1 / fc2
        proj = int(get("vision_output_dim", p_out)) * text_hidden
        return enc + adapter + proj
    siglip = chans * patch * patch * h + h + grid * h + layers * vit_layer + 2 * h  # no class token, post LN
    if model_type == "idefics2":
        return siglip + _idefics2_connector(get, h, text_hidden)
    if model_type in ("aya_vision", "cohere2_vision"):
        # transformers modeling_aya_vision.py AyaVisionMultiModalProjector / modeling_cohere2_vision.py
        # Cohere2VisionMultiModalProjector (vLLM aya_vision.py, cohere2_vision.py): SigLIP without its
        # head, a pixel shuffle (downsample_factor^2 x width), Aya's LayerNorm, then linear_1 into
        # alignment_intermediate_size, SwiGLU over its two halves, linear_2 into the LM; biases
        ds = int(get("downsample_factor", 2))
        inner = int(get("alignment_intermediate_size", text_hidden))
        norm = 2 * h * ds * ds if model_type == "aya_vision" else 0
        return siglip + norm + (h * ds * ds + 1) * inner + (inner // 2 + 1) * text_hidden
    if model_type == "paddleocr_vl":
        # vLLM 0.33.0 paddleocr_vl.py: SigLIP (its pooling head and packing_position_embedding are
        # skipped when loading) and Projector: pre_norm LayerNorm, the 2x2 merge (4 x width) through
        # linear_1 (4w -> 4w) and linear_2 (4w -> LM width), with biases
        return siglip + 2 * h + 4 * h * 4 * h + 4 * h + 4 * h * text_hidden + text_hidden
    if model_type == "paligemma":
        # modeling_paligemma.py / vLLM paligemma.py: SigLIP without its pooling head, then
        # multi_modal_projector.linear (vision width -> projection_dim = LM width, with bias)
        return siglip + h * text_hidden + text_hidden
    if model_type in ("idefics3", "smolvlm"):
        # modeling_idefics3.py / vLLM idefics3.py: Idefics3VisionTransformer (SigLIP: patch conv
        # with bias, one position row per patch, post_layernorm) and the connector's pixel shuffle
        # into modality_projection (vision width x scale_factor^2 -> LM width, no bias)
        scale = int(get("scale_factor", 2))
        return siglip + h * scale * scale * text_hidden
    if model_type == "phi3_v":
        # vLLM phi3v.py Phi3HDImageEmbedding: CLIP ViT (all its layers are in the checkpoint), the
        # 2 x 2 merged features (4 x width) through img_projection Linear -> GELU -> Linear with
        # biases, and the glb_GN / sub_GN separator vectors (4 x width each)
        clip = chans * patch * patch * h + (grid + 1) * h + h + layers * vit_layer + 4 * h
        return clip + 4 * h * text_hidden + text_hidden + text_hidden * text_hidden + text_hidden + 8 * h
    # LLaVA-NeXT / -OneVision add image_newline (one LM-width vector) to LLaVA's 2-layer projector
    newline = text_hidden if model_type in ("llava_next", "llava_next_video", "llava_onevision") else 0
    if model_type == "llava_next" and vtype == "siglip_vision_model":
        # Granite Vision (vLLM llava_next.py with a SigLIP tower): the features of several layers
        # concatenated (vision_feature_layer as a list) into linear_1; SigLIP keeps its pooling head
        # (vLLM siglip.py loads it unless vision_use_head is false): probe, MultiheadAttention,
        # LayerNorm and MLP
        feats = int(get("vision_feature_layers", 1))
        head = (h + 3 * h * h + 3 * h + h * h + h + 2 * h + h * inter + inter + inter * h + h
                if get("vision_use_head", True) else 0)
        return siglip + head + feats * h * text_hidden + text_hidden + text_hidden * text_hidden + text_hidden + newline
    if model_type == "bee":
        # vLLM bee.py BeeForConditionalGeneration: LLaVA-OneVision's SigLIP (no pooling head) and
        # image_newline, with BeeMultiModalProjector: a LayerNorm, then vision width -> 4 x LM width
        # -> LM width, both with biases
        enc = chans * patch * patch * h + h + grid * h + layers * vit_layer + 2 * h
        return enc + 2 * h + h * 4 * text_hidden + 4 * text_hidden + 4 * text_hidden * text_hidden + text_hidden + text_hidden
    if model_type in ("llava_onevision", "rvl"):  # SigLIP without its pooling head (modeling_llava_onevision.py)
        enc = chans * patch * patch * h + h + grid * h + layers * vit_layer + 2 * h
        enc += 2 * h if model_type == "rvl" else 0  # vLLM rvl.py RVLMultiModalProjector's pre_norm (LayerNorm)
        return enc + h * text_hidden + text_hidden + text_hidden * text_hidden + text_hidden + text_hidden
    if model_type == "gemma3" or vtype == "siglip_vision_model":
        enc = chans * patch * patch * h + h + grid * h + layers * vit_layer + 2 * h
        return enc + h + h * text_hidden  # mm_soft_emb_norm + mm_input_projection
    # CLIP (modeling_clip.py CLIPVisionTransformer: class embedding, pre/post LayerNorms) and
    # LLaVA's multi_modal_projector linear_1 / linear_2 with biases (modeling_llava.py)
    enc = chans * patch * patch * h + (grid + 1) * h + h + layers * vit_layer + 4 * h
    return enc + h * text_hidden + text_hidden + text_hidden * text_hidden + text_hidden + newline


def _idefics2_connector(get: Any, h: int, text_hidden: int) -> int:
    """Idefics2's connector (transformers modeling_idefics2.py Idefics2Connector, which TGI serves):
    modality_projection, a bias-free SwiGLU from the vision width through the LM's MLP width
    (`connector_intermediate_size`) into the LM width, then the perceiver resampler: n_latents
    learned latents, `resampler_depth` layers of three RMSNorms, grouped-query attention
    (resampler_n_heads x resampler_head_dim, resampler_kv_heads) and a bias-free SwiGLU of 4 x the
    LM width, and a final RMSNorm."""
    inter = int(get("connector_intermediate_size", 4 * text_hidden))
    heads, hd = int(get("resampler_n_heads", 16)), int(get("resampler_head_dim", 96))
    kv = int(get("resampler_kv_heads", 4))
    t = text_hidden
    layer = 3 * t + t * heads * hd + 2 * t * kv * hd + heads * hd * t + 3 * t * 4 * t
    return 2 * h * inter + inter * t + int(get("resampler_n_latents", 64)) * t + int(get("resampler_depth", 3)) * layer + t


def _pixtral_encoder(h: int, layers: int, inter: int, patch: int, chans: int) -> int:
    """Bias-free patch conv, ln_pre, and RMSNorm layers with q/k/v/o and a gated MLP."""
    return chans * patch * patch * h + h + layers * (4 * h * h + 3 * h * inter + 2 * h)


def _mllama_params(get: Any, h: int, layers: int, inter: int, patch: int, image: int, chans: int,
                   text_hidden: int) -> int:
    """Llama-3.2-Vision tower (transformers modeling_mllama.py::MllamaVisionModel, vLLM mllama.py):
    bias-free patch conv, class embedding, a position embedding (patches + 1 rows) and a tile
    position embedding ((aspect ratios + 1) x tiles x (patches + 1) x width) under one gate, gated pre/post
    tile embeddings, LayerNorms pre and post, `num_hidden_layers` + `num_global_layers` ViT layers
    (q/k/v/o without biases; the global ones add two scalar gates), then the projector from
    vision_output_dim into the LM width."""
    tiles = int(get("max_num_tiles", 4))
    ratios = len(get("supported_aspect_ratios") or [[1, 1]] * 8) + 1
    glob = int(get("num_global_layers", 0))
    grid = (image // patch) ** 2 + 1
    layer = 4 * h * h + (h * inter + inter) + (inter * h + h) + 4 * h
    enc = (chans * patch * patch * h + h + grid * h + ratios * tiles * grid * h + 1
           + 2 * (ratios * tiles * h + 1) + 4 * h + (layers + glob) * layer + 2 * glob)
    out = int(get("vision_output_dim", h))
    return enc + out * text_hidden + text_hidden
