"""Engine plugins. Built-ins are imported on first use; third-party engines register under the
`servefit.engines` entry-point group and are looked up only when a name is not built in."""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING

from servefit.core import UsageError

if TYPE_CHECKING:
    from servefit.engines.base import Engine

BUILTIN = {
    "vllm": "servefit.engines.vllm",
    "llamacpp": "servefit.engines.llamacpp",
    "ollama": "servefit.engines.ollama",
    "tgi": "servefit.engines.tgi",
    "sglang": "servefit.engines.sglang",
}
_cache: dict[str, Engine] = {}


def get(name: str) -> Engine:
    if name in _cache:
        return _cache[name]
    mod_name = BUILTIN.get(name)
    eng: Engine | None = None
    if mod_name is not None:
        try:
            eng = importlib.import_module(mod_name).ENGINE
        except (ModuleNotFoundError, AttributeError):
            eng = None
    if eng is None:
        from importlib.metadata import entry_points

        for ep in entry_points(group="servefit.engines"):
            if ep.name == name:
                eng = ep.load()
                break
    if eng is None:
        raise UsageError(f"unknown engine {name!r} (known: {', '.join(available())})")
    _cache[name] = eng
    return eng


def available() -> list[str]:
    """Built-in engines whose module is present."""
    out = []
    for name, mod in BUILTIN.items():
        if importlib.util.find_spec(mod) is not None:
            out.append(name)
    return out


def loaded() -> list[Engine]:
    """Every engine that imports; one broken plugin must not stop the others."""
    out = []
    for name in available():
        try:
            out.append(get(name))
        except (UsageError, ImportError, AttributeError):
            continue
    return out


def detect(words: list[str], image: str | None = None) -> tuple[str, int] | None:
    """(engine, command length) for a command line, else by image name with length 0."""
    engines = loaded()
    for eng in engines:
        n = eng.command_length(words)
        if n:
            return eng.name, n
    for eng in engines:
        if eng.matches_image(image):
            return eng.name, 0
    return None
