"""Catalogs and option tables shipped as YAML, read once per process."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

DATA_DIR = Path(__file__).parent

try:  # the C loader is ~10x faster; fall back where libyaml is missing
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader


@lru_cache(maxsize=None)
def load(name: str) -> Any:
    """Load `data/<name>` (e.g. "gpus.yaml", "engines/vllm.yaml")."""
    with open(DATA_DIR / name, encoding="utf-8") as fh:
        return yaml.load(fh, Loader=_Loader)
