"""A checkpoint's own files, read with bounds (a hostile repository cannot make servefit read
gigabytes): config.json, and the parameter count from the safetensors headers of its shards
(each tensor's shape; the tensors the engine does not load left out). Standard library only:
this is on the fast path."""

from __future__ import annotations

import json
import os
import struct
from typing import Any

from servefit.models.spec import ModelSpec

MAX_CONFIG_BYTES = 8 << 20  # config.json: real ones are under 100 KB
MAX_SAFETENSORS_HEADER = 8 << 20  # one shard's JSON header: real ones are under 2 MB
MAX_SHAPE_DIMS = 16


def load_json_bounded(file: str, limit: int = MAX_CONFIG_BYTES) -> Any:
    """A JSON file read through safe_io (regular files only, at most `limit` bytes), with its
    nesting bounded; ValueError (BadValue) on anything else."""
    from servefit.budget import BadValue, json_depth
    from servefit.safe_io import read_bytes

    raw = read_bytes(file, limit)
    try:
        doc = json.loads(raw)
    except RecursionError:
        raise BadValue("nested too deeply") from None
    json_depth(doc)
    return doc


def read_config(path: str) -> tuple[dict[str, Any], str]:
    """(config dict, directory) for a config.json file or a directory holding one."""
    file = os.path.join(path, "config.json") if os.path.isdir(path) else path
    cfg = load_json_bounded(file)
    if not isinstance(cfg, dict):
        raise ValueError(f"{file}: not a JSON object")
    return cfg, os.path.dirname(os.path.abspath(file))


_DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "float8_e4m3fn": 1}


def _header(path: str) -> dict[str, Any]:
    from servefit.budget import BadValue, json_depth
    from servefit.safe_io import open_regular

    with open_regular(path) as fh:
        raw = fh.read(8)
        if len(raw) != 8:
            raise ValueError("shorter than a safetensors header")
        (size,) = struct.unpack("<Q", raw)
        if size > MAX_SAFETENSORS_HEADER:
            raise BadValue(f"header of {size:,} bytes, over the {MAX_SAFETENSORS_HEADER >> 20} MiB servefit reads")
        body = fh.read(size)
    try:
        head = json.loads(body)
    except RecursionError:
        raise BadValue("header nested too deeply") from None
    json_depth(head, 8)
    return head if isinstance(head, dict) else {}


def _elements(tname: str, meta: dict[str, Any]) -> int:
    """A tensor's element count from its `shape` (a short list of whole numbers), else BadValue."""
    from servefit.budget import BadValue

    shape = meta.get("shape", [])
    if not isinstance(shape, list) or len(shape) > MAX_SHAPE_DIMS:
        n = len(shape) if isinstance(shape, list) else type(shape).__name__
        raise BadValue(f"tensor {tname[:80]!r}: shape {n} is not a list of at most {MAX_SHAPE_DIMS} dimensions")
    total = 1
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d <= 1 << 40:
            raise BadValue(f"tensor {tname[:80]!r}: dimension {str(d)[:20]} is not a whole number up to 2^40")
        total *= d
    return total


def _skip_tensor(name: str, spec: ModelSpec) -> bool:
    """Tensors an engine does not load: multi-token-prediction modules (mtp.*, DeepSeek's layer
    past num_hidden_layers) and a tied lm_head stored twice."""
    if name.startswith("mtp.") or ".mtp." in name:
        return True
    if spec.tie_word_embeddings and name.endswith("lm_head.weight"):
        return True
    marker = "layers."
    at = name.find(marker)
    if at >= 0 and (at == 0 or name[at - 1] == "."):
        rest = name[at + len(marker):].split(".", 1)[0]
        if rest.isdigit() and int(rest) >= spec.num_hidden_layers and "vision" not in name \
                and "visual" not in name:
            return True
    return False


def params_from_safetensors(directory: str, spec: ModelSpec) -> int | None:
    """Parameters counted from the safetensors headers in `directory` (headers only; tensors are
    never read), or from model.safetensors.index.json's total_size over the dtype width when
    the shards are absent. None when neither is there or the checkpoint is packed-quantized
    (element counts of packed tensors are not parameter counts)."""
    if spec.quantization:
        return None
    try:
        names = sorted(f for f in os.listdir(directory) if f.endswith(".safetensors"))
    except OSError:
        return None
    total = 0
    try:
        for f in names:
            for tname, meta in _header(os.path.join(directory, f)).items():
                if tname == "__metadata__" or not isinstance(meta, dict) or _skip_tensor(tname, spec):
                    continue
                total += _elements(tname, meta)
    except (OSError, ValueError, struct.error) as exc:
        total = 0
        spec.assumptions.append(f"{os.path.basename(f)}: safetensors header not used ({exc}); parameters "
                                "counted otherwise")
    if total:
        return total
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.isfile(index):
        try:
            size = load_json_bounded(index)["metadata"]["total_size"]
            if isinstance(size, bool) or not isinstance(size, int) or not 0 < size < 1 << 50:
                raise ValueError("total_size")
        except (OSError, ValueError, KeyError, TypeError):
            spec.assumptions.append("model.safetensors.index.json: metadata.total_size unreadable or out of "
                                    "range; not used")
            return None
        width = _DTYPE_BYTES.get(spec.torch_dtype)
        if width and size:
            return size // width
    return None
