"""A tuned setting placed in the files: the edits that write it and their applicability, as
ruff's fixes have: `safe` for settings, `unsafe` for a change of checkpoint or quantization
(applied only with --unsafe), `display-only` where servefit cannot place the edit and shows it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from servefit.core import Edit

SAFE, UNSAFE, DISPLAY = "safe", "unsafe", "display-only"
RANK = {SAFE: 0, UNSAFE: 1, DISPLAY: 2}


@dataclass
class Placed:
    """One tuned setting placed in the files: old and new value, the edits that write it and their
    applicability, and how the change reads in messages."""

    setting: str
    old: Any
    new: Any
    applicability: str
    edits: list[Edit] = field(default_factory=list)
    shown: str = ""  # how the change reads (`--max-model-len 32768`), for messages and manual edits
