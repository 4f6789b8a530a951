"""Vision towers beyond models/vision.py's: MoonViT (Kimi-VL, Kimi-K2.5 / K2.6), DeepSeek-VL2's
SigLIP with its downsampling MLP, DeepSeek-OCR's DeepEncoder (SAM ViT-B + CLIP-L), MiniCPM-V's
SigLIP with the perceiver resampler, dots.ocr's ViT; and the Whisper-style audio encoder of Qwen2.5-Omni's thinker.
Each follows the vLLM model file its docstring names (the
tensors vLLM builds and loads); keys are the catalog's `vision` keys (vision_config names where the
checkpoint has them). Standard library only: this is on the fast path.
"""

from __future__ import annotations

from typing import Any

TOWERS = ("moonvit", "deepseek_vl2_siglip", "deepencoder", "minicpmv", "gemma3n", "molmo", "molmo2", "lfm2_vl",
          "dots_vit", "minimax_m3_vl_vision", "step3p5_vision",
          "hunyuan_vl_vision", "muse_glimmer_vision", "llava_onevision2_vision",
          "pixel_shuffle_siglip2", "siglip2_navit", "inkling_vision", "moondream")


def _lin(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def _vit_layer(h: int, inter: int) -> int:
    """Pre-norm ViT block with biases everywhere: two LayerNorms, q/k/v/o, fc1 / fc2."""
    return 4 * h + 4 * _lin(h, h) + _lin(h, inter) + _lin(inter, h)


def _siglip(h: int, layers: int, inter: int, patch: int, image: int) -> int:
    """SigLIP without a class token: patch conv with bias, one position row per patch, the layers,
    post LayerNorm."""
    return 3 * patch * patch * h + h + (image // patch) ** 2 * h + layers * _vit_layer(h, inter) + 2 * h


def _moondream(v: dict[str, Any], text_hidden: int) -> int:
    """Moondream 2 (vikhyat/moondream@5ce4fe8e moondream/hf/vision_encoder.py VisionEncoder): a SigLIP
    ViT (LinearPatchEmbedding Linear(3 x 14 x 14, 1152) with bias, 729 position rows, 27 VitBlocks
    with a fused qkv Linear and biases, a final LayerNorm), then VisionProjection, an MLP from the
    full image's and the crops' features side by side (2 x 1152) through 4 x the LM width to the LM."""
    h, inter = int(v["hidden_size"]), int(v["intermediate_size"])
    enc = _siglip(h, int(v["num_hidden_layers"]), inter, int(v["patch_size"]), int(v["image_size"]))
    return enc + _lin(2 * h, 4 * text_hidden) + _lin(4 * text_hidden, text_hidden)


def _map_head(h: int, inter: int) -> int:
    """SigLIP's attention-pooling head (timm AttentionPoolLatent): latent, q, kv, proj, norm, MLP."""
    return h + _lin(h, h) + _lin(h, 2 * h) + _lin(h, h) + 2 * h + _lin(h, inter) + _lin(inter, h)


def _moonvit(v: dict[str, Any], text_hidden: int) -> int:
    """vLLM moonvit.py MoonVitPretrainedModel (Kimi-VL) / kimi_k25_vit.py MoonViT3dPretrainedModel
    (Kimi-K2.5: its time position table is fixed, not a parameter): patch conv with bias, a learned
    init_pos_emb_height x width x hidden position table, layers of two LayerNorms, wqkv / wo and
    fc0 / fc1 with biases, final_layernorm; then the projector (kimi_vl.py KimiVLMultiModalProjector,
    kimi_k25_vit.py "patchmerger"): pre_norm LayerNorm, linear_1 (4h -> 4h) and linear_2 (4h -> LM
    width), both with biases. Kimi-K3's tower (transformers_utils/configs/kimi_k3.py
    KimiK3VisionConfig) sets the options kimi_k25_vit.py reads: qkv_hidden_size (wqkv / wo width),
    norm_type rmsnorm (no norm biases), attn_bias / linear_bias / patch_embed_proj_bias false, and
    the "patchmergerv2" projector (bias-free linear_1 / linear_2, post_norm RMSNorm in the LM width)."""
    h, layers = int(v["hidden_size"]), int(v.get("num_hidden_layers", 27))
    inter, patch = int(v.get("intermediate_size", 4304)), int(v.get("patch_size", 14))
    pos = int(v.get("init_pos_emb_height", 64)) * int(v.get("init_pos_emb_width", 64))
    merged = h * 4  # merge_kernel_size (2, 2)
    if v.get("mm_projector_type") != "patchmergerv2":
        enc = 3 * patch * patch * h + h + pos * h + layers * _vit_layer(h, inter) + 2 * h
        return enc + 2 * h + _lin(merged, merged) + _lin(merged, text_hidden)
    qkv, rms = int(v.get("qkv_hidden_size") or h), v.get("norm_type") in ("rmsnorm", "rms_norm")
    attn_b, lin_b = bool(v.get("attention_bias", False)), bool(v.get("linear_bias", False))
    norm = h if rms else 2 * h
    block = 2 * norm + _lin(h, 3 * qkv, attn_b) + _lin(qkv, h, attn_b) + _lin(h, inter, lin_b) + _lin(inter, h, lin_b)
    enc = 3 * patch * patch * h + pos * h + layers * block + norm
    return enc + _lin(merged, merged, False) + _lin(merged, text_hidden, False) + text_hidden


def _deepseek_vl2(v: dict[str, Any], text_hidden: int) -> int:
    """vLLM deepseek_vl2.py DeepseekVLV2ForCausalLM: timm vit_so400m_patch14_siglip_384 built with
    num_classes=0 (its attention-pooling head stays), the downsample_mlp_gelu projector (2 x 2
    patches -> Linear -> GELU -> Linear into the LM width, biases) and image_newline /
    view_seperator (one LM-width vector each)."""
    h, inter = int(v["hidden_size"]), int(v.get("intermediate_size", 4304))
    enc = _siglip(h, int(v.get("num_hidden_layers", 27)), inter, int(v.get("patch_size", 14)),
                  int(v.get("image_size", 384))) + _map_head(h, inter)
    return enc + _lin(4 * h, text_hidden) + _lin(text_hidden, text_hidden) + 2 * text_hidden


def _deepencoder() -> int:
    """vLLM deepencoder.py build_sam_vit_b (SAM ViT-B at 1024 px: patch 16 conv with bias, a 64 x 64
    position table, 12 blocks with decomposed relative positions (window 14; global at 2, 5, 8, 11),
    the neck convs and LayerNorm2ds, net_2 / net_3 convs up to 1024 channels) and
    DeepCLIPVisionTransformer (CLIP-L/14 at 224: class token, bias-free patch conv, 257 positions,
    pre_layrnorm, 24 layers, no post LayerNorm). Both are fixed in vLLM (deepseek_ocr.py), not read
    from the config."""
    h, heads = 768, 12
    sam = 3 * 16 * 16 * h + h + 64 * 64 * h
    for i in range(12):
        size = 64 if i in (2, 5, 8, 11) else 14
        sam += 2 * h + _lin(h, 3 * h) + _lin(h, h) + 2 * (2 * size - 1) * (h // heads) + 2 * h
        sam += _lin(h, 4 * h) + _lin(4 * h, h)
    sam += h * 256 + 2 * 256 + 256 * 256 * 9 + 2 * 256 + 256 * 512 * 9 + 512 * 1024 * 9
    c = 1024
    clip = c + 3 * 14 * 14 * c + 257 * c + 2 * c + 24 * _vit_layer(c, 4096)
    return sam + clip


def _minicpmv(v: dict[str, Any], text_hidden: int) -> int:
    """vLLM minicpmv.py MiniCPMV2_5 / 2_6 / 4_0 / 4_5: Idefics2VisionTransformer (SigLIP, one position
    row per patch of image_size, post_layernorm; every layer the checkpoint holds) and the
    Resampler2_5 / 4_5 (vLLM layers/resampler.py BaseResampler): query_num queries of the LM width,
    kv_proj (vision width -> LM width, no bias), nn.MultiheadAttention (in_proj and out_proj with
    biases), ln_q / ln_kv / ln_post, and proj (LM width^2, no bias); the 2-D sin-cos positions are a
    buffer."""
    h, inter = int(v["hidden_size"]), int(v.get("intermediate_size", 4304))
    enc = _siglip(h, int(v.get("num_hidden_layers", 27)), inter, int(v.get("patch_size", 14)),
                  int(v.get("image_size", 980)))
    e, q = text_hidden, int(v.get("query_num", 64))
    resampler = q * e + (h * e if h != e else 0) + _lin(e, 3 * e) + _lin(e, e) + 3 * 2 * e + e * e
    return enc + resampler


def _molmo(v: dict[str, Any], text_hidden: int, version: int) -> int:
    """vLLM molmo.py MolmoVisionBackbone (Molmo): a CLIP-style ViT (class embedding, (image / patch)^2 + 1
    positions, a bias-free patch Linear, pre_ln, blocks of two LayerNorms, wq / wk / wv / wo and w1 / w2
    with biases) whose two feature layers (VIT_LAYERS -2, -9) feed image_pooling_2d (q / k / v from
    2 x width, wo, biases) and the SwiGLU image_projector (bias-free, the LM's MLP width), plus
    pad_embed (2 x 2 x width). molmo2.py Molmo2VisionBackbone (Molmo2): SigLIP-style (no class
    token, (image / patch)^2 positions, a patch Linear with bias, merged qkv / wo with biases), the
    checkpoint holding only the layers up to the deepest feature layer (-3, -9 of 27: 25), the same
    pooling and projector, no pad_embed."""
    h, layers = int(v["hidden_size"]), int(v["num_hidden_layers"])
    inter, patch = int(v.get("intermediate_size", 4 * h)), int(v.get("patch_size", 14))
    grid = (int(v["image_size"]) // patch) ** 2
    pool = _lin(2 * h, h) + 2 * _lin(2 * h, h) + _lin(h, h)
    proj = 2 * h * int(v["projector_intermediate"]) + int(v["projector_intermediate"]) * text_hidden
    if version == 1:
        vit = h + (grid + 1) * h + 3 * patch * patch * h + 2 * h + layers * _vit_layer(h, inter)
        return vit + pool + proj + 2 * 2 * h
    return grid * h + _lin(3 * patch * patch, h) + layers * _vit_layer(h, inter) + pool + proj


def _lfm2_vl(v: dict[str, Any], text_hidden: int) -> int:
    """vLLM lfm2_vl.py / lfm2_siglip2.py (LFM2-VL): SigLIP2 NaFlex (a patch Linear with bias, a
    num_patches-row position table, the layers the config keeps, post_layernorm) and
    Lfm2VLMultiModalProjector (LayerNorm over 2 x 2 unshuffled patches, linear_1 into
    projector_hidden_size and linear_2 into the LM width, biases)."""
    h, patch = int(v["hidden_size"]), int(v.get("patch_size", 16))
    hidden, wide = int(v.get("projector_hidden_size", 2560)), 4 * h
    enc = _lin(3 * patch * patch, h) + int(v.get("num_patches", 256)) * h
    enc += int(v["num_hidden_layers"]) * _vit_layer(h, int(v.get("intermediate_size", 4 * h))) + 2 * h
    return enc + 2 * wide + _lin(wide, hidden) + _lin(hidden, text_hidden)


def _dots_vit(v: dict[str, Any], text_hidden: int) -> int:
    """vLLM dots_ocr.py DotsVisionTransformer (dots.ocr): DotsPatchEmbed (patch conv with bias and an
    RMSNorm), blocks of two RMSNorms, qkv / proj and the SwiGLU fc13 / fc2 (biases when use_bias), the
    post_trunk_norm when post_norm, and PatchMerger (LayerNorm, Linear(4 x width, 4 x width) and
    Linear(4 x width, LM width), biases)."""
    e, inter, patch = int(v["hidden_size"]), int(v.get("intermediate_size", 4 * int(v["hidden_size"]))), int(v.get("patch_size", 14))
    b = bool(v.get("attention_bias", False))
    block = 2 * e + _lin(e, 3 * e, b) + _lin(e, e, b) + 2 * _lin(e, inter, b) + _lin(inter, e, b)
    wide = e * int(v.get("spatial_merge_size", 2)) ** 2
    enc = _lin(3 * patch * patch, e) + e + int(v["num_hidden_layers"]) * block + (e if v.get("post_norm", True) else 0)
    return enc + 2 * e + _lin(wide, wide) + _lin(wide, text_hidden)


def _minimax_m3(v: dict[str, Any], text_hidden: int) -> int:
    """MiniMax-M3's tower (transformers modeling_minimax_m3_vl.py MiniMaxM3VLVisionModel; vLLM
    models/minimax_m3/common/vision_tower.py): a Conv3d patch embedding without bias (channels x
    temporal x patch x patch), pre_layrnorm, CLIP-style layers with biases, no post norm; the
    projector MiniMaxM3VLMultiModalProjector maps each patch (linear_1 / linear_2) and then the
    merged 2 x 2 patches (merge_linear_1 / merge_linear_2), all with biases."""
    h, inter = int(v.get("hidden_size", 1280)), int(v.get("intermediate_size", 5120))
    patch, t = int(v.get("patch_size", 14)), int(v.get("temporal_patch_size", 2))
    proj, merge = int(v.get("projector_hidden_size", 6144)), int(v.get("spatial_merge_size", 2)) ** 2
    enc = int(v.get("num_channels", 3)) * t * patch * patch * h + 2 * h \
        + int(v.get("num_hidden_layers", 32)) * _vit_layer(h, inter)
    return enc + _lin(h, proj) + _lin(proj, text_hidden) + _lin(merge * text_hidden, proj) + _lin(proj, text_hidden)


def _step3p7(v: dict[str, Any], text_hidden: int) -> int:
    """Step-3.7's tower (transformers 5.24.0 modeling_step3p7.py Step3p7VisionModel): a bias-free
    patch conv, one position row per patch, pre_layernorm, ViT layers with biases and two
    LayerScale vectors (lambda_1 / lambda_2), no post norm; two stride-2 3x3 convs (h -> 2h -> 4h,
    with biases) and the multi_modal_projector (4h -> LM width, no bias unless projector_bias)."""
    h, inter = int(v["hidden_size"]), int(v["intermediate_size"])
    patch, image = int(v["patch_size"]), int(v["image_size"])
    enc = int(v.get("num_channels", 3)) * patch * patch * h + (image // patch) ** 2 * h + 2 * h \
        + int(v["num_hidden_layers"]) * (_vit_layer(h, inter) + 2 * h)
    down = _lin(9 * h, 2 * h) + _lin(9 * 2 * h, 4 * h)
    return enc + down + _lin(4 * h, text_hidden, bool(v.get("multimodal_projector_bias")))


def _hunyuan_vl(v: dict[str, Any], text_hidden: int) -> int:
    """HunyuanOCR's tower (transformers 5.24.0 modeling_hunyuan_vl.py HunYuanVLVisionTransformer): a
    biased patch conv, a class row plus a (max_image_size / patch)^2 position table, ViT layers with
    biases, and the patch merger: a merge x merge conv (h -> 2h) and a 1x1 conv (2h -> 4h), both
    biased, the mlp (4h -> LM width, biased), image_newline (4h), image_begin / end / sep (LM
    width each) and the before / after RMSNorms."""
    h, inter, patch = int(v["hidden_size"]), int(v["intermediate_size"]), int(v["patch_size"])
    merge = int(v.get("spatial_merge_size", 2))
    grid = (int(v.get("image_size", 2048)) // patch) ** 2 + 1  # max_image_size
    enc = int(v.get("num_channels", 3)) * patch * patch * h + h + grid * h \
        + int(v["num_hidden_layers"]) * _vit_layer(h, inter)
    merger = _lin(merge * merge * h, 2 * h) + _lin(2 * h, 4 * h) + _lin(4 * h, text_hidden) + 4 * h \
        + 3 * text_hidden + h + text_hidden
    return enc + merger


def _muse_glimmer(v: dict[str, Any], text_hidden: int) -> int:
    """Muse-Glimmer's tower (transformers 5.24.0 modeling_muse_glimmer.py MuseGlimmerVisionModel): a
    bias-free linear patch embedding (temporal x 3 x patch^2 -> h), a (image / patch)^2 position
    table, ln_pre, ViT layers with biases, ln_post; the 2x2 pixel shuffle feeds the adapter (fc1
    4h -> projector, fc2 projector -> projector) and vision_projection (projector -> LM width), all
    bias-free."""
    h, inter, patch = int(v["hidden_size"]), int(v["intermediate_size"]), int(v["patch_size"])
    proj, merge = int(v["projector_hidden_size"]), int(v.get("spatial_merge_size", 2)) ** 2
    enc = int(v.get("temporal_patch_size", 2)) * 3 * patch * patch * h + (int(v["image_size"]) // patch) ** 2 * h \
        + 4 * h + int(v["num_hidden_layers"]) * _vit_layer(h, inter)
    return enc + merge * h * proj + proj * proj + proj * text_hidden


def _onevision2(v: dict[str, Any], text_hidden: int) -> int:
    """LLaVA-OneVision-2's tower (vLLM 0.33.0 llava_onevision2.py LlavaOnevision2VisionTower): a
    bias-free patch conv, layernorm_pre, ViT layers with biases (fused qkv, proj, fc1 / fc2, two
    LayerNorms; RoPE, no position table) and the patch merger: ln_q, then merge^2 x h -> merge^2 x h
    -> LM width, both with biases."""
    h, inter, patch = int(v["hidden_size"]), int(v["intermediate_size"]), int(v["patch_size"])
    merged = int(v.get("spatial_merge_size", 2)) ** 2 * h
    enc = int(v.get("num_channels", 3)) * patch * patch * h + 2 * h + int(v["num_hidden_layers"]) * _vit_layer(h, inter)
    return enc + 2 * h + _lin(merged, merged) + _lin(merged, text_hidden)


def _isaac(v: dict[str, Any], text_hidden: int) -> int:
    """Isaac's tower (vLLM 0.33.0 isaac.py IsaacVisionEmbedding): SigLIP2 with a linear patch embedding
    (channels x patch^2 -> h, with bias), a num_patches position table ((image / patch)^2), ViT layers
    with biases and post_layernorm; after the pixel shuffle (scale^2 x h) linear_fc1 (-> 4x) and
    linear_fc2 (-> LM width), both bias-free."""
    h, inter, patch = int(v["hidden_size"]), int(v["intermediate_size"]), int(v["patch_size"])
    shuffled = int(v.get("scale_factor", 2)) ** 2 * h
    enc = _lin(int(v.get("num_channels", 3)) * patch * patch, h) + (int(v["image_size"]) // patch) ** 2 * h \
        + int(v["num_hidden_layers"]) * _vit_layer(h, inter) + 2 * h
    return enc + shuffled * 4 * shuffled + 4 * shuffled * text_hidden


def _ovis2_5(v: dict[str, Any], text_hidden: int) -> int:
    """Ovis 2.5 / 2.6 (vLLM 0.33.0 ovis2_5.py VisualTokenizer over siglip2navit.py Siglip2NavitModel): a
    linear patch embedding with bias, a num_patches position table ((image / patch)^2), ViT layers with
    biases and post_layernorm; the head maps hidden_stride^2 x h to visual_vocab_size - 4 (the indicator
    tokens; no bias) with a LayerNorm, and the visual embedding table (vte) is visual_vocab_size x LM
    width."""
    h, inter, patch = int(v["hidden_size"]), int(v["intermediate_size"]), int(v["patch_size"])
    vocab = int(v["visual_vocab_size"])
    enc = _lin(int(v.get("num_channels", 3)) * patch * patch, h) + (int(v["image_size"]) // patch) ** 2 * h \
        + int(v["num_hidden_layers"]) * _vit_layer(h, inter) + 2 * h
    head = int(v.get("spatial_merge_size", 2)) ** 2 * h * (vocab - 4) + 2 * (vocab - 4)
    return enc + head + vocab * text_hidden


def count_tower(vision: dict[str, Any], text_hidden: int) -> int:
    """Parameters of one of TOWERS (vision["model_type"]) with its projector into the LM."""
    kind = vision.get("model_type")
    if kind == "moonvit":
        return _moonvit(vision, text_hidden)
    if kind == "deepseek_vl2_siglip":
        return _deepseek_vl2(vision, text_hidden)
    if kind == "deepencoder":  # DeepSeek-OCR: a linear projector (2048 -> LM width) and the two vectors
        return _deepencoder() + _lin(2048, text_hidden) + 2 * text_hidden
    if kind == "minicpmv":
        return _minicpmv(vision, text_hidden)
    if kind in ("molmo", "molmo2"):
        return _molmo(vision, text_hidden, 1 if kind == "molmo" else 2)
    if kind == "lfm2_vl":
        return _lfm2_vl(vision, text_hidden)
    if kind == "dots_vit":
        return _dots_vit(vision, text_hidden)
    if kind == "minimax_m3_vl_vision":
        return _minimax_m3(vision, text_hidden)
    if kind == "step3p5_vision":
        return _step3p7(vision, text_hidden)
    if kind == "hunyuan_vl_vision":
        return _hunyuan_vl(vision, text_hidden)
    if kind == "muse_glimmer_vision":
        return _muse_glimmer(vision, text_hidden)
    if kind == "llava_onevision2_vision":
        return _onevision2(vision, text_hidden)
    if kind == "pixel_shuffle_siglip2":
        return _isaac(vision, text_hidden)
    if kind == "siglip2_navit":
        return _ovis2_5(vision, text_hidden)
    if kind == "inkling_vision":  # the HMLP patch encoder (models/arch_inkling.py)
        from servefit.models.arch_inkling import count_vision

        return count_vision(vision, text_hidden)
    if kind == "moondream":
        return _moondream(vision, text_hidden)
    if kind == "gemma3n":
        # Gemma 3n's MobileNetV5-300M vision tower, USM audio conformer and their embedders
        # (vLLM gemma3n_mm.py): a recorded total, not counted layer by layer (the catalog entries
        # say which counts fix it)
        return int(vision["towers_params"])
    raise ValueError(f"unknown vision tower {kind!r}")


def count_audio(a: dict[str, Any], text_hidden: int) -> int:
    """Qwen2.5-Omni's audio encoder (transformers modeling_qwen2_5_omni.py
    Qwen2_5OmniAudioEncoder, which vLLM qwen2_5_omni_thinker.py loads): conv1 (mel bins -> d_model,
    kernel 3) and conv2 (d_model -> d_model, kernel 3) with biases, Whisper layers (q / v / out with
    biases, k without, two LayerNorms, fc1 / fc2 with biases), ln_post, proj into output_dim (the LM
    width) with bias, and audio_bos_eos_token (2 x output_dim); the sinusoidal positions are a buffer."""
    d, ffn = int(a.get("d_model", 1280)), int(a.get("encoder_ffn_dim", 5120))
    mel, out = int(a.get("num_mel_bins", 128)), int(a.get("output_dim") or text_hidden)
    layers = int(a.get("encoder_layers", 32))
    if a.get("downsample_hidden_size"):
        return _qwen3_omni_audio(a, d, ffn, mel, out, layers)
    layer = 3 * _lin(d, d) + d * d + 4 * d + _lin(d, ffn) + _lin(ffn, d)
    return mel * d * 3 + d + d * d * 3 + d + layers * layer + 2 * d + _lin(d, out) + 2 * out


def _qwen3_omni_audio(a: dict[str, Any], d: int, ffn: int, mel: int, out: int, layers: int) -> int:
    """Qwen3-Omni's audio encoder (transformers modeling_qwen3_omni_moe.py
    Qwen3OmniMoeAudioEncoder; vLLM qwen3_omni_moe_thinker.py): three 3x3 stride-2 Conv2d with biases
    (1 -> c -> c -> c channels), conv_out (c x the mel bins left after three halvings -> d_model, no
    bias), Whisper layers with biases on q / k / v / out, ln_post, proj1 (d -> d) and proj2 (d ->
    output_dim) with biases; no audio_bos_eos_token."""
    c = int(a["downsample_hidden_size"])
    freq = (((mel + 1) // 2 + 1) // 2 + 1) // 2
    convs = (9 * c + c) + 2 * (9 * c * c + c) + c * freq * d
    layer = 4 * _lin(d, d) + 4 * d + _lin(d, ffn) + _lin(ffn, d)
    return convs + layers * layer + 2 * d + _lin(d, d) + _lin(d, out)
