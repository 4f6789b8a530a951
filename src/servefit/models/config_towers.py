"""config.json's vision towers that its vision_config alone does not describe (MoonViT, DeepSeek-VL2's
SigLIP, Molmo, Idefics2's perceiver, Gemma 3n, the Omni thinkers' audio encoders): the catalog
`vision` dict models/vision_towers.py counts, so a local checkpoint plans its tower as the catalog
does. Standard library only: this is on the fast path."""

from __future__ import annotations

import importlib
from typing import Any

from servefit.models.config_layouts import as_dict, as_int

# Gemma 3n's MobileNetV5-300M vision and USM audio towers with their embedders: the total both the
# E2B and E4B llmfit records leave after their text models (data/models/gemma.yaml)
GEMMA3N_TOWERS = 983281504


def tower(top: dict[str, Any], vision: dict[str, Any] | None) -> dict[str, Any] | None:
    """The catalog `vision` dict of a tower in models/vision_towers.py, from a config.json whose
    vision_config says too little for the generic readers: Kimi-VL / Kimi-K2.5 (MoonViT), DeepSeek-VL2
    (timm SigLIP: width / layers / mlp_ratio) and DeepSeek-OCR (towers fixed in vLLM), MiniCPM-V
    (a SigLIP vision_config with the resampler's query_num at the top level)."""
    mt = str(top.get("model_type") or "")
    v = vision or {}
    if mt == "inkling_mm_model":  # the HMLP patch encoder (models/arch_inkling.py)
        return importlib.import_module("servefit.models.arch_inkling").tower(v)  # type: ignore[no-any-return]
    if mt in ("kimi_vl", "kimi_k25") or v.get("model_type") in ("moonvit", "kimi_k25_vision"):
        return {"model_type": "moonvit", "hidden_size": as_int(v.get("hidden_size"), 1152),
                "num_hidden_layers": as_int(v.get("num_hidden_layers"), 27),
                "intermediate_size": as_int(v.get("intermediate_size"), 4304), "patch_size": as_int(v.get("patch_size"), 14),
                "init_pos_emb_height": as_int(v.get("init_pos_emb_height") or v.get("pos_emb_height"), 64),
                "init_pos_emb_width": as_int(v.get("init_pos_emb_width") or v.get("pos_emb_width"), 64)}
    if mt == "kimi_k3":  # vLLM transformers_utils/configs/kimi_k3.py KimiK3VisionConfig (vt_* names, its defaults)
        return {"model_type": "moonvit", "hidden_size": as_int(v.get("vt_hidden_size"), 1024),
                "num_hidden_layers": as_int(v.get("vt_num_hidden_layers"), 27),
                "intermediate_size": as_int(v.get("vt_intermediate_size"), 4096),
                "num_attention_heads": as_int(v.get("vt_num_attention_heads"), 12), "patch_size": as_int(v.get("patch_size"), 14),
                "init_pos_emb_height": as_int(v.get("init_pos_emb_height"), 64),
                "init_pos_emb_width": as_int(v.get("init_pos_emb_width"), 64),
                "qkv_hidden_size": as_int(v.get("qkv_hidden_size"), 1536),
                "norm_type": "rms_norm" if v.get("norm_type", "rmsnorm") == "rmsnorm" else "layer_norm",
                "attention_bias": bool(v.get("attn_bias", False)), "linear_bias": bool(v.get("linear_bias", False)),
                "mm_projector_type": str(v.get("mm_projector_type") or "patchmergerv2")}
    if mt in ("deepseek_vl_v2", "deepseek_ocr"):
        if "DeepseekOCRForCausalLM" in (top.get("architectures") or []) or mt == "deepseek_ocr":
            return {"model_type": "deepencoder", "hidden_size": 1024, "patch_size": 14}
        width = as_int(v.get("width"), 1152)
        ratio = v.get("mlp_ratio")
        return {"model_type": "deepseek_vl2_siglip", "hidden_size": width, "num_hidden_layers": as_int(v.get("layers"), 27),
                "intermediate_size": int(width * float(ratio)) if isinstance(ratio, (int, float)) else 4304,
                "patch_size": as_int(v.get("patch_size"), 14), "image_size": as_int(v.get("image_size"), 384)}
    if mt == "dots_ocr" and v:  # vLLM dots_ocr.py DotsVisionConfig: embed_dim is the tower's width
        return {"model_type": "dots_vit", "hidden_size": as_int(v.get("embed_dim"), 1536),
                "num_hidden_layers": as_int(v.get("num_hidden_layers"), 42),
                "intermediate_size": as_int(v.get("intermediate_size"), 4224), "patch_size": as_int(v.get("patch_size"), 14),
                "spatial_merge_size": as_int(v.get("spatial_merge_size"), 2),
                "attention_bias": bool(v.get("use_bias", False)), "post_norm": bool(v.get("post_norm", True))}
    if mt == "idefics2" and v:  # the SigLIP vision_config, the perceiver_config and the LM's MLP width
        pc, text = as_dict(top.get("perceiver_config")), as_dict(top.get("text_config"))
        return {"model_type": "siglip_vision_model", "hidden_size": as_int(v.get("hidden_size"), 768),
                "num_hidden_layers": as_int(v.get("num_hidden_layers"), 12),
                "intermediate_size": as_int(v.get("intermediate_size"), 3072), "patch_size": as_int(v.get("patch_size"), 32),
                "image_size": as_int(v.get("image_size"), 224),
                "connector_intermediate_size": as_int(text.get("intermediate_size"), 14336),
                "resampler_n_latents": as_int(pc.get("resampler_n_latents"), 64),
                "resampler_depth": as_int(pc.get("resampler_depth"), 3),
                "resampler_n_heads": as_int(pc.get("resampler_n_heads"), 16),
                "resampler_head_dim": as_int(pc.get("resampler_head_dim"), 96),
                "resampler_kv_heads": as_int(pc.get("num_key_value_heads"), 4)}
    if mt == "lfm2_vl" and v:
        return {"model_type": "lfm2_vl", "hidden_size": as_int(v.get("hidden_size"), 1152),
                "num_hidden_layers": as_int(v.get("num_hidden_layers"), 27),
                "intermediate_size": as_int(v.get("intermediate_size"), 4304), "patch_size": as_int(v.get("patch_size"), 16),
                "num_patches": as_int(v.get("num_patches"), 256),
                "projector_hidden_size": as_int(top.get("projector_hidden_size"), 2560)}
    if mt == "molmo":  # VisionBackboneConfig is fixed in vLLM molmo.py (CLIP-L/14 at 336, 23 layers)
        inter = as_int(top.get("intermediate_size")) // 2
        return {"model_type": "molmo", "hidden_size": 1024, "num_hidden_layers": 23, "intermediate_size": 4096,
                "patch_size": 14, "image_size": 336, "projector_intermediate": inter}
    if mt == "molmo2":  # vit_config / adapter_config (molmo2.py VitConfig, AdapterConfig)
        vit, ad = as_dict(top.get("vit_config")), as_dict(top.get("adapter_config"))
        layers = as_int(vit.get("num_hidden_layers"), 27)
        deepest = max((as_int(x) + layers if as_int(x) < 0 else as_int(x)) for x in (ad.get("vit_layers") or [-3, -9])) + 1
        size = vit.get("image_default_input_size") or [378, 378]
        return {"model_type": "molmo2", "hidden_size": as_int(vit.get("hidden_size"), 1152),
                "num_hidden_layers": min(layers, deepest), "intermediate_size": as_int(vit.get("intermediate_size"), 4304),
                "patch_size": as_int(vit.get("image_patch_size"), 14),
                "image_size": as_int(size[0] if isinstance(size, list) and size else 378, 378),
                "projector_intermediate": as_int(ad.get("intermediate_size"), 18944)}
    if mt == "gemma3n" and v:  # only the released towers' total is known (GEMMA3N_TOWERS)
        known = v.get("architecture") == "mobilenetv5_300m_enc"
        return {"model_type": "gemma3n", "hidden_size": as_int(v.get("hidden_size"), 2048), "patch_size": 16,
                "towers_params": GEMMA3N_TOWERS if known else 1}
    if mt in ("qwen2_5_omni", "qwen3_omni_moe") and v:  # the thinker's tower and audio encoder (audio_config)
        a = as_dict(top.get("audio_config"))
        keys = ("d_model", "encoder_layers", "encoder_ffn_dim", "encoder_attention_heads", "num_mel_bins", "output_dim",
                "downsample_hidden_size")  # Qwen3-Omni: Conv2d front end
        return {**v, "model_type": "qwen2_5_vl" if mt == "qwen2_5_omni" else "qwen3_vl",
                "audio": {k: as_int(a[k]) for k in keys if a.get(k) is not None}}
    if mt in ("minicpmv", "minicpmo") and v:
        return {**v, "model_type": "minicpmv", "query_num": as_int(top.get("query_num"), 64)}
    return vision
