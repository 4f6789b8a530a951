"""Thinking Machines Inkling (model_type inkling_mm_model): local / global attention of different shapes,
short convolutions, routed + shared experts scored together, an HMLP vision tower and a dMel audio table.

Layout (transformers 5.24.0 models/inkling/modeling_inkling.py, docstring checkpoint thinkingmachines/Inkling;
the modules SGLang 0.5.23 srt/models/inkling.py and inkling_common/*.py load):
- InklingAttention, per layer kind: sliding layers (local_layer_ids) use swa_num_attention_heads /
  swa_num_key_value_heads / swa_head_dim and a relative-position bank d_rel x sliding_window, global
  layers the main heads and d_rel x rel_extent; q / k / v / o and r_proj (hidden -> heads x d_rel)
  bias-free, k_sconv / v_sconv (depthwise, kernel sconv_kernel_size, no bias) over the KV width,
  q_norm / k_norm of head_dim;
- the first dense_mlp_idx layers a dense SwiGLU (dense_intermediate_size) with a global scale, the others
  InklingMoE: routed experts of the experts' width, the router (routed + shared rows x hidden, a global
  scale, the stored e_score_correction_bias) and n_shared_experts SwiGLUs of the same width;
- two RMSNorms and two stream short convolutions (attn_sconv, mlp_sconv: hidden x kernel) per layer;
  a normed embedding, final norm, and an untied lm_head padded to vocab_size;
- vision (HMLPPatchEncoder, inkling_common/hmlp.py): plan_out_scales grows (t, h, w, channels) through the
  prime factors of patch_size then temporal_patch_size, channels rounded up to 64; layer i a bias-free
  Linear(start channels x fold, end channels) + RMSNorm, the last projecting to the LM width; a final norm;
- audio (InklingAudio): an (n_mel_bins x mel_vocab_size) x LM-width embedding and its norm;
- the MTP chain (InklingMTPLayer): per depth input_proj (2 x hidden -> hidden), hidden / embed norms and a
  decoder layer with the dense MLP. Left out of `params` as for DeepSeek-V3 (loaded only for speculative
  decoding); `mtp_params` counts it.
Standard library only: this is on the fast path.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from servefit.models.spec import ModelSpec

FAMILIES = frozenset({"inkling_mm_model", "inkling_text", "inkling"})


def is_inkling(s: ModelSpec) -> bool:
    return s.model_type in FAMILIES


def _lay(s: ModelSpec, key: str, default: int) -> int:
    return int(s.layout.get(key) or default)


def kv_shape(s: ModelSpec, kind: str) -> tuple[int, int, int]:
    """(KV heads, K width, V width) of a layer of this kind."""
    if kind == "sliding":
        d = _lay(s, "swa_head_dim", s.head_dim)
        return _lay(s, "swa_num_key_value_heads", s.num_key_value_heads), d, d
    return s.num_key_value_heads, s.head_dim, s.head_dim


def layer_attention(s: ModelSpec, kind: str) -> int:
    h, rel, k = s.hidden_size, _lay(s, "d_rel", 16), _lay(s, "conv_kernel", 4)
    if kind == "sliding":
        heads, extent = _lay(s, "swa_num_attention_heads", s.num_attention_heads), s.sliding_window
    else:
        heads, extent = s.num_attention_heads, _lay(s, "rel_extent", 1024)
    kv, d, _ = kv_shape(s, kind)
    return h * heads * d + 2 * h * kv * d + h * heads * rel + heads * d * h + 2 * kv * d * k + 2 * d + rel * extent


def layer_mlp(s: ModelSpec, i: int) -> tuple[int, int]:
    """(routed experts, the rest: dense MLP, or router + shared experts) of layer i."""
    h = s.hidden_size
    if i < s.first_k_dense_replace:
        return 0, 3 * h * s.intermediate_size + 1
    inter, e, shared = s.moe_intermediate_size, s.num_experts, s.num_shared_experts
    return e * 3 * h * inter, (e + shared) * h + 1 + e + shared * 3 * h * inter


def count_text(s: ModelSpec) -> int:
    """The language model and the audio table (the vision tower is vision_params); MTP left out."""
    h, k = s.hidden_size, _lay(s, "conv_kernel", 4)
    total = 2 * s.vocab_size * h + 2 * h
    for i, kind in enumerate(s.kinds()):
        total += layer_attention(s, kind) + sum(layer_mlp(s, i)) + 2 * h + 2 * h * k
    mel = _lay(s, "audio_mel_bins", 0) * _lay(s, "audio_mel_vocab", 0)
    return total + (mel * h + h if mel else 0)


def mtp_params(s: ModelSpec) -> int:
    """The MTP chain the checkpoint stores: per depth input_proj, two norms and a dense decoder layer."""
    h, k = s.hidden_size, _lay(s, "conv_kernel", 4)
    local = set(s.layout.get("mtp_local_layer_ids") or [])
    dense = 3 * h * s.intermediate_size + 1
    return sum(2 * h * h + 2 * h + layer_attention(s, "sliding" if d in local else "full") + dense + 2 * h + 2 * h * k
               for d in range(_lay(s, "mtp_layers", 0)))


def _factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out + ([n] if n > 1 else [])


def hmlp_scales(tps: int, patch: int, layers: int, chans: int = 3) -> list[tuple[int, int, int, int]]:
    """SGLang inkling_common/hmlp.py plan_out_scales: the (t, h, w, channels) each layer ends at; with
    fewer layers than scales the cheapest one-to-one assignment (scipy linear_sum_assignment there)."""
    scales, hw, t = [(1, 1, 1, chans)], 1, 1
    for p in reversed(_factors(patch)):
        hw *= p
        scales.append((1, hw, hw, -(-hw * hw * chans // 64) * 64))
    for p in reversed(_factors(tps)):
        t *= p
        scales.append((t, hw, hw, -(-hw * hw * chans * t // 64) * 64))
    logs = [math.log(a * b * c) for a, b, c, _ in scales]
    top = math.log(patch * patch * tps * chans)
    cost = [[abs(top * i / layers - x) for x in logs] for i in range(layers + 1)]
    if layers >= len(scales):
        idx = [min(range(len(scales)), key=row.__getitem__) for row in cost]
    else:
        best = min(itertools.permutations(range(len(scales)), layers + 1),
                   key=lambda perm: sum(cost[i][j] for i, j in enumerate(perm)))
        idx = list(best)
    idx[0], idx[-1] = 0, len(scales) - 1
    return [scales[i] for i in idx]


def count_vision(vision: dict[str, Any], text_hidden: int) -> int:
    """The HMLP patch encoder with its final norm (vision_config: patch_size, temporal_patch_size,
    n_layers / num_hidden_layers, n_channels, use_vision_norm)."""
    layers = int(vision.get("n_layers") or vision.get("num_hidden_layers") or 1)
    scales = hmlp_scales(int(vision.get("temporal_patch_size") or 1), int(vision.get("patch_size") or 16), layers,
                         int(vision.get("n_channels") or vision.get("num_channels") or 3))
    total = text_hidden if vision.get("use_vision_norm", True) else 0  # the catalog entries' towers have it
    for i, (a, b) in enumerate(itertools.pairwise(scales)):
        fold = (b[0] // a[0]) * (b[1] // a[1]) * (b[2] // a[2])
        total += a[3] * fold * text_hidden if i == layers - 1 else a[3] * fold * b[3] + b[3]
    return total


def read_config(c: dict[str, Any], spec: ModelSpec) -> None:
    """text_config keys as the checkpoint spells them (SGLang configs/inkling.py InklingModelConfig): the
    routed width is intermediate_size when dense_intermediate_size is given (transformers #49416)."""
    lay = spec.layout
    if c.get("dense_intermediate_size"):
        spec.moe_intermediate_size = int(c.get("moe_intermediate_size") or c.get("intermediate_size") or 0)
        spec.intermediate_size = int(c["dense_intermediate_size"])
    spec.num_experts = int(c.get("n_routed_experts") or spec.num_experts)
    spec.num_shared_experts = int(c.get("n_shared_experts") or 0)
    spec.first_k_dense_replace = int(c.get("dense_mlp_idx") or 0)
    spec.sliding_window = int(c.get("sliding_window_size") or 512)
    spec.tie_word_embeddings = False
    n = spec.num_hidden_layers
    local = c.get("local_layer_ids")
    local = set(local) if isinstance(local, list) else {i for i in range(n) if (i + 1) % 6}
    spec.layer_types = ["sliding" if i in local else "full" for i in range(n)]
    for key, name in (("swa_num_attention_heads", "swa_num_attention_heads"), ("swa_head_dim", "swa_head_dim"),
                      ("swa_num_key_value_heads", "swa_num_key_value_heads"), ("d_rel", "d_rel"),
                      ("rel_extent", "rel_extent"), ("sconv_kernel_size", "conv_kernel")):
        if c.get(key):
            lay[name] = int(c[key])
    spec.max_position_embeddings = spec.max_position_embeddings or spec.model_max_length or 131072
    audio: dict[str, Any] = c["audio_config"] if isinstance(c.get("audio_config"), dict) else {}
    lay["audio_mel_bins"] = int(audio.get("n_mel_bins") or 80)  # SGLang InklingAudioConfig's defaults
    lay["audio_mel_vocab"] = int(audio.get("mel_vocab_size") or 16)
    mtp: dict[str, Any] = c["mtp_config"] if isinstance(c.get("mtp_config"), dict) else {}
    depths = mtp.get("num_nextn_predict_layers") or mtp.get("n_layers")
    if depths:
        lay["mtp_layers"] = int(depths)
        lay["mtp_local_layer_ids"] = [int(x) for x in mtp.get("local_layer_ids") or []]


def tower(v: dict[str, Any]) -> dict[str, Any]:
    """The catalog `vision` dict from config.json's vision_config, SGLang 0.5.23 configs/inkling.py
    InklingVisionConfig's defaults where a key is missing (patch 16, temporal 1, one layer, no norm)."""
    return {"model_type": "inkling_vision", "hidden_size": int(v.get("hidden_size") or 1024),
            "patch_size": int(v.get("patch_size") or 16), "temporal_patch_size": int(v.get("temporal_patch_size") or 1),
            "num_hidden_layers": int(v.get("n_layers") or v.get("num_hidden_layers") or 1),
            "n_channels": int(v.get("n_channels") or v.get("num_channels") or 3),
            "use_vision_norm": bool(v.get("use_vision_norm", False))}


def conv_state_bytes(s: ModelSpec, attn_tp: int) -> int:
    """One request's short-convolution state over every layer, as SGLang 0.5.23 configs/inkling.py
    InklingModelConfig.mamba2_cache_params shapes it and mamba_utils.py BaseLinearStateParams.
    mamba_cache_per_req prices it: per layer (kernel - 1) rows of the full KV width twice, the sliding
    KV width twice and the hidden stream twice (KV heads split by attention TP, at least one), bf16."""
    k = _lay(s, "conv_kernel", 4)
    full_kv, full_d, _ = kv_shape(s, "full")
    swa_kv, swa_d, _ = kv_shape(s, "sliding")
    tp = max(attn_tp, 1)
    width = 2 * max(1, full_kv // tp) * full_d + 2 * max(1, swa_kv // tp) * swa_d + 2 * s.hidden_size
    return (k - 1) * width * 2 * s.num_hidden_layers
