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
    """Parameters of a vision tower plus the projector into the language model.

    `vision` is the config.json `vision_config`; `top` the top-level config (projector keys such
    as `spatial_merge_size`), looked up in `vision` too when absent. Layouts: SigLIP (Gemma 3),
    Pixtral (Mistral 3), Llama-4's ViT with its pixel-shuffle adapter, Qwen2-VL and Qwen2.5-VL;
    other ViTs are counted as CLIP-style encoders with a two-layer projector."""
    top = top or {}
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
    if model_type == "mistral3" or vtype == "pixtral":
        # Pixtral: bias-free RMSNorm layers with a gated MLP, 2-D RoPE (no position table)
        enc = chans * patch * patch * h + h + layers * (4 * h * h + 3 * h * inter + 2 * h)
        merge = int(get("spatial_merge_size", 2))
        bias = bool(get("multimodal_projector_bias", False))
        proj = h + (h * merge * merge) * h  # norm + patch merger
        proj += h * text_hidden + text_hidden * text_hidden + (2 * text_hidden if bias else 0)
        return enc + proj
    if model_type == "llama4" or vtype == "llama4_vision_model":
        enc = chans * patch * patch * h + h + (grid + 1) * h + 4 * h + layers * vit_layer
        p_in = int(get("projector_input_dim", 4096))
        p_out = int(get("projector_output_dim", 4096))
        adapter = inter * p_in + p_out * p_out  # pixel-shuffle MLP fc1 / fc2
        proj = int(get("vision_output_dim", p_out)) * text_hidden
        return enc + adapter + proj
    # LLaVA-NeXT / -OneVision add image_newline (one LM-width vector) to LLaVA's 2-layer projector
    newline = text_hidden if model_type in ("llava_next", "llava_next_video", "llava_onevision") else 0
    if model_type == "llava_onevision":  # SigLIP without its pooling head (modeling_llava_onevision.py)
        enc = chans * patch * patch * h + h + grid * h + layers * vit_layer + 2 * h
        return enc + h * text_hidden + text_hidden + text_hidden * text_hidden + text_hidden + newline
    if model_type == "gemma3" or vtype == "siglip_vision_model":
        enc = chans * patch * patch * h + h + grid * h + layers * vit_layer + 2 * h
        return enc + h + h * text_hidden  # mm_soft_emb_norm + mm_input_projection
    # CLIP (modeling_clip.py CLIPVisionTransformer: class embedding, pre/post LayerNorms) and
    # LLaVA's multi_modal_projector linear_1 / linear_2 with biases (modeling_llava.py)
    enc = chans * patch * patch * h + (grid + 1) * h + h + layers * vit_layer + 4 * h
    return enc + h * text_hidden + text_hidden + text_hidden * text_hidden + text_hidden + newline
