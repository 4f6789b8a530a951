"""The quantization a model name's words say, in the spellings repackers use: `-AWQ`, `-autoawq`,
`AWQ-INT4`, `int4-awq`, `GPTQ-Int8`, `4bit-gptq`, `gptq-4bit-32g`, `W4A16`, `quantized.w8a8`,
`FP8-Dynamic`, `NVFP4`, `MXFP4`, `bnb-4bit`, `bnb-nf4`, `MLX-4bit`, `exl2-4.0bpw`, GGUF file types.

`words` are the lower-case name words of catalog.py::_tokens (split at `-`, `_`, `.` before a
letter). The dicts are quantization_config's keys (quant_method, bits, group_size), which
memory/weights.py::scheme_for sizes."""

from __future__ import annotations

import re
from typing import Any

# one word standing for another: AutoAWQ / AutoGPTQ exports, bitsandbytes' nf4, NVFP4 weight-only
# a hybrid `int4fp8` checkpoint (INT4 experts, FP8 attention) is sized as INT4, its bulk
ALIASES = {"autoawq": "awq", "autogptq": "gptq", "nf4": "bnb", "nvfp4a16": "nvfp4", "fp8dynamic": "fp8",
           "float8": "fp8", "int4fp8": "int4"}
QUANT_WORDS = {
    "ud", "i1", "imat", "imatrix", "qat", "awq", "gptq", "int4", "int8", "int3", "fp8", "dynamic", "static", "bnb",
    "2bit", "3bit", "4bit", "5bit", "6bit", "8bit", "4bits", "8bits", "unsloth", "w4a16", "w8a8", "w8a16", "w4a8",
    "quantized", "unquantized", "mlx", "gguf", "nvfp4", "mxfp4", "fp4", "exl2", "exl3", "marlin", "dwq", "block",
    "kv", "actorder", "e4m3", *ALIASES,
}
# Qwen's own -FP8 checkpoints (Qwen3, Qwen3-2507, Qwen3-VL, Qwen3.5 / 3.6 ...) are "fine-grained fp8 quantization
# with block size of 128" (their model cards): config.json quantization_config {"quant_method": "fp8",
# "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128]}, which vLLM loads with
# Fp8LinearMethod's block path (quantization/fp8.py: block_quant = weight_block_size is not None).
QWEN_FP8_BLOCK = (128, 128)
_GROUP = re.compile(r"^(?:g|gs)(\d+)$|^(\d+)g$")  # g128, gs32, 128g, 32g
_BPW = re.compile(r"^(\d+(?:\.\d+)?)bpw$")  # exl2's bits per weight: 4.0bpw, 6.5bpw
_HEAD_BITS = re.compile(r"^h[68]$")  # exl2's lm_head bits (with an exl2 word only)


_KINDS: dict[str, tuple[bool, bool]] = {}  # word -> (a quantization word, an exl2 head-bits word)


def is_quant_word(word: str, words: set[str]) -> bool:
    """Whether a name word belongs to the quantization, not to the model's own name."""
    kind = _KINDS.get(word)
    if kind is None:
        if len(_KINDS) > 65536:
            _KINDS.clear()
        kind = _KINDS[word] = (word in QUANT_WORDS or bool(_GROUP.match(word) or _BPW.match(word)),
                               bool(_HEAD_BITS.match(word)))
    return kind[0] or (kind[1] and bool(words & {"exl2", "exl3"}))


def _bits(ws: set[str], default: int) -> int:
    for b in (8, 6, 5, 4, 3, 2):
        if ws & {f"{b}bit", f"{b}bits", f"int{b}"}:
            return b
    return default


def _group(ws: set[str], default: int) -> int:
    for w in sorted(ws):
        m = _GROUP.match(w)
        if m:
            return int(m.group(1) or m.group(2))
    return default


def scheme(words: list[str], org: str, gguf_type: str | None, dtype: str | None) -> tuple[dict[str, Any] | None, str]:
    """(quantization_config, label) a name implies; (None, "") for an unquantized name. `gguf_type`
    is a GGUF file-type word (q4_k_m) and `dtype` an unquantized dtype word (bf16) of the name."""
    ws = {ALIASES.get(w, w) for w in words}
    if "unquantized" in ws:  # google/gemma-3-12b-it-qat-q4_0-unquantized: the QAT weights in bf16
        return None, ""
    if "awq" in ws:  # vLLM's AWQ is 4-bit only (quantization/awq.py::AWQConfig)
        g = _group(ws, 128)
        return {"quant_method": "awq", "bits": 4, "group_size": g}, f"AWQ 4-bit, group {g}"
    if "gptq" in ws:
        b, g = _bits(ws, 4), _group(ws, 128)
        return {"quant_method": "gptq", "bits": b, "group_size": g}, f"GPTQ {b}-bit, group {g}"
    if "w4a16" in ws or "w4a8" in ws:
        g = _group(ws, 128)
        return ({"quant_method": "compressed-tensors", "bits": 4, "group_size": g},
                f"compressed-tensors INT4 weights (W4A16), group {g}")
    if "w8a8" in ws or "w8a16" in ws:
        return {"quant_method": "compressed-tensors", "bits": 8}, "compressed-tensors INT8 weights"
    if "nvfp4" in ws or "fp4" in ws:
        return {"quant_method": "modelopt_fp4", "bits": 4, "group_size": 16}, "NVFP4 4-bit, group 16"
    if "mxfp4" in ws:
        return {"quant_method": "mxfp4"}, "MXFP4"
    if "fp8" in ws:
        if org.lower() == "qwen" and "fp8" in words:  # Qwen's own -FP8 checkpoints are block-wise (QWEN_FP8_BLOCK)
            return {"quant_method": "fp8", "weight_block_size": list(QWEN_FP8_BLOCK)}, "FP8 weights, 128 x 128 blocks"
        return {"quant_method": "fp8"}, "FP8 weights"
    if "exl2" in ws or "exl3" in ws:  # ExLlamaV2 / V3: TGI serves exl2; vLLM and SGLang have no such method
        method = "exl3" if "exl3" in ws else "exl2"
        bpw = next((float(m.group(1)) for w in ws if (m := _BPW.match(w))), None)
        quant: dict[str, Any] = {"quant_method": method}
        if bpw:
            quant["bits"] = bpw
        return quant, f"{'ExLlamaV3' if method == 'exl3' else 'ExLlamaV2'} {f'{bpw:g} bits per weight' if bpw else ''}".strip()
    if "gguf" in ws or gguf_type:
        return _gguf(gguf_type, dtype)
    if "mlx" in ws or org == "mlx-community":
        if ws & {"2bit", "3bit", "4bit", "5bit", "6bit", "8bit", "4bits", "8bits"}:
            b = _bits(ws, 4)
            return {"quant_method": "mlx", "bits": b, "group_size": 64}, f"MLX {b}-bit, group 64"
        return None, ""
    if "bnb" in ws or ws & {"4bit", "8bit", "4bits", "8bits"}:
        b = _bits(ws, 4)
        return {"quant_method": "bitsandbytes", "bits": b}, f"bitsandbytes {b}-bit"
    if "int4" in ws:
        g = _group(ws, 128)
        return ({"quant_method": "compressed-tensors", "bits": 4, "group_size": g},
                f"INT4 weights (W4A16), group {g}")
    if "int8" in ws:
        return {"quant_method": "compressed-tensors", "bits": 8}, "INT8 weights (W8A8)"
    return None, ""


def _gguf(gguf_type: str | None, dtype: str | None) -> tuple[dict[str, Any], str]:
    quant: dict[str, Any] = {"quant_method": "gguf"}
    if gguf_type:
        quant["type"] = gguf_type.upper()
        quant["bits"] = int(re.sub(r"\D", "", gguf_type)[:1] or 4)
        return quant, f"GGUF {gguf_type.upper()}"
    if dtype:  # an unquantized GGUF: model-BF16.gguf
        quant["type"] = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}[dtype]
        quant["bits"] = 32 if dtype == "float32" else 16
        return quant, f"GGUF {quant['type']}"
    return quant, "GGUF"
