"""Checks on the GGUF header fields servefit reads as counts (layers, heads, widths), so that a
hostile or corrupt header ends in one UsageError naming the field, not a traceback or a silly plan
later (models/gguf.py reads the header and calls this)."""

from __future__ import annotations

from typing import Any

from servefit.core import UsageError
from servefit.models.gguf import ArrayLen

# Header fields read as counts: suffix after `{arch}.` -> (bound kind, smallest valid value).
# Per-layer keys may be arrays (one value per layer).
_GGUF_COUNTS: dict[str, tuple[str, int]] = {
    "block_count": ("layers", 0), "context_length": ("positions", 0), "embedding_length": ("hidden", 0),
    "feed_forward_length": ("intermediate", 0), "attention.head_count": ("heads", 0),
    "attention.head_count_kv": ("heads", 0), "attention.key_length": ("head_dim", 0),
    "attention.value_length": ("head_dim", 0), "attention.key_length_swa": ("head_dim", 0),
    "attention.value_length_swa": ("head_dim", 0), "attention.key_length_mla": ("head_dim", 0),
    "expert_count": ("experts", 0), "expert_used_count": ("experts", 0), "expert_shared_count": ("experts", 0),
    "expert_feed_forward_length": ("intermediate", 0), "leading_dense_block_count": ("layers", 0),
    "attention.kv_lora_rank": ("rank", 0), "attention.q_lora_rank": ("rank", 0),
    "rope.dimension_count": ("head_dim", 0), "attention.sliding_window": ("window", 0),
    "vocab_size": ("vocab", 0), "ssm.conv_kernel": ("small", 0), "ssm.inner_size": ("intermediate", 0),
    "ssm.state_size": ("rank", 0), "ssm.group_count": ("heads", 0), "ssm.time_step_rank": ("rank", 0),
    "attention.shared_kv_layers": ("layers", 0), "token_shift_count": ("small", 0), "wkv.head_size": ("head_dim", 0),
    "shortconv.l_cache": ("small", 0), "attention.sliding_window_pattern": ("layers", 0),
}


def check_fields(path: str, kv: dict[str, Any]) -> None:
    """Every header field servefit reads, by type and range: one UsageError naming the field."""
    from servefit.budget import BadValue, count

    arch = kv.get("general.architecture")
    if arch is not None and not isinstance(arch, str):
        raise UsageError(f"{path}: general.architecture is not a string")
    try:
        align = kv.get("general.alignment")
        if align is not None:
            a = count(align, "general.alignment", "small", minimum=1)
            if a & (a - 1):
                raise BadValue(f"general.alignment is {a}, not a power of two")
        if kv.get("general.file_type") is not None:
            count(kv["general.file_type"], "general.file_type", "small")
        for key, v in kv.items():
            suffix = key[len(arch) + 1:] if isinstance(arch, str) and key.startswith(arch + ".") else None
            if suffix not in _GGUF_COUNTS:
                continue
            kind, low = _GGUF_COUNTS[suffix]  # type: ignore[index]
            if isinstance(v, ArrayLen):
                raise BadValue(f"{key} is an array of {v.n:,} entries")
            for i, x in enumerate(v if isinstance(v, list) else [v]):
                if suffix == "attention.sliding_window_pattern" and isinstance(x, bool):
                    continue
                count(x, key if not isinstance(v, list) else f"{key}[{i}]", kind, minimum=low)
    except BadValue as exc:
        raise UsageError(f"{path}: {exc}") from None
