"""Weight bytes of a checkpoint under each quantization scheme.

The quantized linear layers carry packed low-bit weights plus per-group scales (and zeros);
embeddings, lm_head and norms stay in the activation dtype. The bytes per parameter follow
the tensors each format stores:
- AWQ (vllm/model_executor/layers/quantization/awq.py::AWQLinearMethod.create_weights):
  qweight int32 packs 8 4-bit values, qzeros packs 8 per group, scales fp16 per group.
- GPTQ (gptq.py::GPTQLinearMethod.create_weights): same shapes with g_idx (int32 per input row).
- FP8 (fp8.py): one byte per weight, one fp32 scale per tensor (or per channel).
- bitsandbytes nf4: 4 bits + an absmax per 64-block, double-quantized (~8.5 bits per 64).
- MXFP4 (gpt-oss, mxfp4.py): 4 bits + one e8m0 scale per 32 values, experts only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from servefit import data
from servefit.memory.params import ParamGroups, param_groups
from servefit.memory.unquantized import kept_fractions
from servefit.models.spec import ModelSpec


@dataclass(frozen=True)
class Scheme:
    """A weight quantization: bytes per parameter of the quantized linear layers, and whether it quantizes the
    MoE experts only."""

    name: str
    bytes_per_param: float  # for quantized linear layers
    experts_only: bool = False  # mxfp4 quantizes the MoE experts only
    bits: int = 16
    experts_bytes: float = 0.0  # the routed experts' own bytes per parameter where they differ (DeepSeek-V4 FP4)
    embeddings: bool = False  # the embedding and lm_head are stored in the scheme too (GGUF)


# vLLM's online-quantization shorthands for `--quantization` on an unquantized checkpoint
# (vllm/config/quantization.py::_ONLINE_SHORTHANDS, from 0.22; quantization/__init__.py registers each as
# OnlineQuantizationConfig): name -> (bytes per quantized weight, MoE experts only). fp8_per_tensor,
# fp8_per_block and fp8_per_channel (0.24+) store FP8 weights in the linear and MoE layers with an fp32
# scale per tensor / 128x128 block / output row (under 0.4% of the weights, left out); mxfp8 adds an e8m0
# scale per 32 weights; int8_per_channel_weight_only (int8) and nvfp4_per_token (0.27+: NVFP4, a fp8
# scale per 16) set only `moe`, so a model's linear layers stay in the model dtype. The 0.29+ "mxfp4"
# shorthand is not here: it shares its name with gpt-oss's checkpoint method (the MXFP4 scheme below).
ONLINE_SHORTHANDS: dict[str, tuple[float, bool, int]] = {
    "fp8_per_tensor": (1.0, False, 8), "fp8_per_block": (1.0, False, 8), "fp8_per_channel": (1.0, False, 8),
    "mxfp8": (1.0 + 1 / 32, False, 8), "int8_per_channel_weight_only": (1.0, True, 8),
    "nvfp4_per_token": (0.5 + 1 / 16, True, 4),
}


def online_shorthand(name: str | None) -> Scheme | None:
    """The storage of a vLLM online-quantization shorthand given as --quantization (ONLINE_SHORTHANDS);
    None for any other name."""
    method = (name or "").lower()
    if method not in ONLINE_SHORTHANDS:
        return None
    per_weight, experts_only, bits = ONLINE_SHORTHANDS[method]
    return Scheme(method, per_weight, experts_only=experts_only, bits=bits)


def scheme_for(quant: dict[str, Any] | None, override: str | None = None) -> Scheme | None:
    """The storage scheme for a checkpoint's quantization_config, or an online method
    (`--quantization fp8`). None means unquantized."""
    method = (override or (quant or {}).get("quant_method") or "").lower()
    if not method or method in ("none", "auto"):
        return None
    given = quant or {}
    q = _from_config(method, given)
    if q is not given:  # the method the engine picks from the config (ModelOpt NVFP4: modelopt_fp4)
        method = str(q.get("quant_method") or method).lower()
    if method in ("exl2", "exl3"):  # ExLlama: the name's bits per weight, scales included (4.0bpw, 6.5bpw)
        bpw = float(q.get("bits") or 4)
        return Scheme(method, bpw / 8, bits=round(bpw))
    bits = int(q.get("bits") or q.get("w_bit") or 4)
    group = int(q.get("group_size") or q.get("q_group_size") or 128)
    if group <= 0:  # per-channel
        group = 1 << 30
    if method == "compressed-tensors" and q.get("float") and bits == 4:
        # NVFP4 (group 16, fp8 scales) / MXFP4 (group 32, e8m0 scales): 4 bits + one byte per group
        return Scheme(method, 0.5 + 1 / group, bits=4)
    if method == "compressed-tensors" and bits < 8 and q.get("symmetric") is True:
        # symmetric pack-quantized: packed weights + a 16-bit scale per group, no zero point
        # (compressed_tensors_moe_wna16_marlin.py::create_weights registers w13/w2_weight_zero_point only
        # `if not self.symmetric`; schemes/compressed_tensors_wNa16.py likewise, 0.25.1)
        return Scheme(method, bits / 8 + 2 / group, bits=bits)
    if method.startswith(("awq", "gptq", "moe_wna16", "auto-round", "inc", "auto_round")) or (
            method == "compressed-tensors" and bits < 8):
        # packed weights + fp16 scale and packed zero per group (+ int32 g_idx per input row
        # for GPTQ, negligible per parameter)
        return Scheme(method, bits / 8 + 2 / group + (bits / 8) / group, bits=bits)
    if method == "fp8" and q.get("expert_dtype") == "fp4":
        # DeepSeek-V4: FP8 weights, FP4 routed experts packed two a byte with one e8m0 scale per 32
        # (vLLM models/deepseek_v4 quant_config.py; the checkpoint's experts.*.w1 int8 + F8_E8M0 scale)
        return Scheme(method, 1.0, bits=8, experts_bytes=0.5 + 1 / 32)
    if method in ("fp8", "fbgemm_fp8", "modelopt", "ptpc_fp8", "fp8_dynamic", "experts_int8", "w8a8") or (
            method == "compressed-tensors" and bits >= 8):
        return Scheme(method, 1.0, bits=8)
    if method in ("bitsandbytes", "bnb"):
        if bits >= 8 or q.get("load_in_8bit"):
            return Scheme(method, 1.0 + 4 / 4096, bits=8)
        return Scheme(method, 0.5 + 1 / 64 + 4 / (64 * 256), bits=4)
    if method == "mxfp4":
        return Scheme(method, 0.5 + 1 / 32, experts_only=True, bits=4)
    if method in ("modelopt_fp4", "nvfp4"):
        return Scheme(method, 0.5 + 1 / 16, bits=4)
    if method == "gguf":
        return gguf_scheme(str(q.get("type") or ""))
    if method == "mlx":  # mlx.core.quantize: packed weights plus a 16-bit scale and bias per group (mlx-community repacks)
        return Scheme(method, bits / 8 + 4 / (group if "group_size" in q else 64), bits=bits)
    return Scheme(method, 2.0)


def gguf_scheme(file_type: str) -> Scheme:
    """A GGUF file as vLLM loads it: every tensor kept in the file's own type, dequantized by the kernels
    (model_executor/layers/quantization/gguf.py::GGUFConfig.get_quant_method: GGUFLinearMethod for the
    linear layers, GGUFEmbeddingMethod for VocabParallelEmbedding, so the embedding and a ParallelLMHead
    too; read in the 0.8.2 wheel). Bytes per parameter: the file type's default tensor type's block bytes
    over its block size (data/gguf_quants.yaml: Q8_0 34 / 32); the mixes' few larger tensors (Q6_K
    output in Q4_K_M) are left out. A file type not named: Q4_K, as before."""
    q = data.load("gguf_quants.yaml")
    ftype = file_type.upper().replace("-", "_")
    ftype = ftype if ftype in q["ftypes"] else q["aliases"].get(ftype, "Q4_K_M")
    base = q["ftypes"].get(ftype, q["ftypes"]["Q4_K_M"])[1]
    _, block, size = next(v for v in q["types"].values() if v[0] == base)
    return Scheme("gguf", size / block, bits=min(16, round(8 * size / block)), embeddings=True)


def _from_config(method: str, q: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's quantization_config with the bits and group its method keeps elsewhere:
    compressed-tensors in each config group's `weights` (num_bits, type, group_size: vLLM
    compressed_tensors.py::CompressedTensorsConfig._quantization_scheme_map_from_config; 4-bit
    float is NVFP4 in groups of 16, _is_fp4a4_nvfp4, or MXFP4 in groups of 32), ModelOpt in `quant_algo`
    (modelopt.py::ModelOptNvFp4Config.override_quantization_method: NVFP4 / FP4 is modelopt_fp4)."""
    if method == "modelopt":
        inner = q.get("quantization")
        algo = str((inner if isinstance(inner, dict) else q).get("quant_algo") or "").upper()
        return {**q, "quant_method": "modelopt_fp4"} if "FP4" in algo else q
    if method != "compressed-tensors" or q.get("bits") or not isinstance(q.get("config_groups"), dict):
        return q
    for group in q["config_groups"].values():
        w = group.get("weights") if isinstance(group, dict) else None
        if not isinstance(w, dict) or not isinstance(w.get("num_bits"), int):
            continue
        bits, gs = w["num_bits"], w.get("group_size")
        # no group size: one scale per output channel (strategy "channel") or per tensor
        out = {**q, "bits": bits, "group_size": gs if isinstance(gs, int) and gs > 0 else -1}
        if isinstance(w.get("symmetric"), bool):
            out["symmetric"] = w["symmetric"]
        return {**out, "float": True} if w.get("type") == "float" else out
    return q


def float8_compressed_tensors(quant: dict[str, Any] | None) -> bool:
    """A compressed-tensors checkpoint whose 8-bit weights are floats (FP8 W8A8 / W8A16, `type: float` in its
    config group), not int8."""
    q = _from_config("compressed-tensors", quant or {})
    return str((quant or {}).get("quant_method", "")).lower() == "compressed-tensors" and q.get("bits") == 8 \
        and bool(q.get("float"))


def kept_params(m: ModelSpec, g: ParamGroups, scheme: Scheme | None) -> list[float] | None:
    """Per decoder layer, the linear parameters the checkpoint keeps unquantized (its skip
    list: see memory/unquantized.py); None when every linear layer is quantized."""
    if scheme is None or scheme.experts_only:  # mxfp4 quantizes the experts only anyway
        return None
    fr = kept_fractions(m, m.quantization, [x > 0 for x in g.experts])
    if fr is None:
        return None
    return [fa * a + fm * mm + fx * x for (fa, fm, fx), a, mm, x in zip(fr, g.attn, g.mlp, g.experts, strict=True)]


def weight_bytes(m: ModelSpec, dtype_bytes: float = 2, scheme: Scheme | None = None,
                 groups: ParamGroups | None = None) -> int:
    """Bytes of every weight once loaded (one copy, unsharded)."""
    g = groups or param_groups(m)
    total_params = m.params or g.total
    # the catalog's count is the checkpoint's; split it with the architecture's proportions
    dense_other = g.embed + g.lm_head + g.norms + g.other
    linear = max(0, total_params - dense_other)
    if scheme is None:
        return int(total_params * dtype_bytes)
    if scheme.experts_only:
        experts = min(linear, sum(g.experts))
        rest = total_params - experts
        return int(rest * dtype_bytes + experts * scheme.bytes_per_param)
    kept = min(linear, int(sum(kept_params(m, g, scheme) or [])))
    experts = min(linear - kept, sum(g.experts)) if scheme.experts_bytes else 0
    if scheme.embeddings:  # the embedding and lm_head stored like the linear layers (gguf_scheme)
        dense_other -= g.embed + g.lm_head
        linear += g.embed + g.lm_head
    return int(dense_other * dtype_bytes + (linear - kept - experts) * scheme.bytes_per_param + kept * dtype_bytes
               + experts * scheme.experts_bytes)
