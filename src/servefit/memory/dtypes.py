"""Bytes per element of the dtypes engines store weights and KV caches in."""

from __future__ import annotations

# torch / HF dtype names (vllm/utils/torch_utils.py::STR_DTYPE_TO_TORCH_DTYPE: fp8 KV caches are
# stored as uint8, one byte)
DTYPE_BYTES: dict[str, float] = {
    "float32": 4, "float": 4, "fp32": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "half": 2, "fp16": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "int8": 1, "uint8": 1,
    "fp4": 0.5, "nvfp4": 0.5, "int4": 0.5,
}


def dtype_bytes(name: str) -> float:
    try:
        return DTYPE_BYTES[name.lower()]
    except KeyError:
        raise KeyError(f"unknown dtype {name!r}") from None
