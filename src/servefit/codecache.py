"""Dataclass methods compiled once per user instead of once per run.

`@dataclass` writes each class's `__init__`, `__repr__`, `__eq__` ... as source text and
compiles it with `exec` every time the class is defined: ~0.1 ms per method, a third of a
one-file lint's own time on Python 3.11 (the lint path defines ~70 dataclasses). `install()`
points the `exec` that the dataclasses module calls at one that keeps the compiled code in the
user's cache directory, keyed by the exact source text (so a cached method is the one `exec`
would have compiled), the way Python keeps module bytecode in `__pycache__`. A cache that cannot
be read or written is ignored; SERVEFIT_NO_CACHE=1 turns it off.
"""

from __future__ import annotations

import atexit
import builtins
import dataclasses
import marshal
import os
import sys
from types import CodeType
from typing import Any

MAX_ENTRIES = 4000  # beyond this (many source versions seen) the file keeps only this run's

_codes: dict[str, CodeType] = {}
_used: set[str] = set()
_loaded = 0  # entries read from the file
_compiled = 0  # entries this run compiled
_path: str | None = None


def cache_dir() -> str | None:
    """The user's servefit cache directory, or None when caching is off."""
    if os.environ.get("SERVEFIT_NO_CACHE"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "servefit")


def _exec(source: Any, globals: Any = None, locals: Any = None) -> None:  # noqa: A002 - exec's own names
    global _compiled
    if isinstance(source, str):
        code = _codes.get(source)
        if code is None:  # exactly what exec(source) compiles: no __future__ flags of this module
            code = _codes[source] = compile(source, "<string>", "exec", dont_inherit=True)
            _compiled += 1
        _used.add(source)
        source = code
    builtins.exec(source, globals, locals)


def install() -> None:
    """Serve the dataclasses module's `exec` from the cache (once per process)."""
    global _path, _loaded
    if _path is not None or getattr(dataclasses, "exec", None) is _exec:
        return
    base = cache_dir()
    if base is None:
        return
    _path = os.path.join(base, f"dataclass-code-{sys.implementation.cache_tag}-O{sys.flags.optimize}.marshal")
    try:
        with open(_path, "rb") as fh:
            found = marshal.loads(fh.read())  # marshal.load(fh) reads piece by piece: 10x slower
        if isinstance(found, dict):
            _codes.update((k, v) for k, v in found.items() if isinstance(k, str) and isinstance(v, CodeType))
    except (OSError, ValueError, EOFError, TypeError):
        pass
    _loaded = len(_codes)
    dataclasses.exec = _exec  # type: ignore[attr-defined]  # a module global shadows the builtin
    atexit.register(_save)


def _save() -> None:
    """Write the cache when this run compiled something new."""
    if _path is None or not _compiled:
        return
    keep = _codes if len(_codes) <= MAX_ENTRIES else {k: _codes[k] for k in _used}
    tmp = f"{_path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(_path), exist_ok=True)
        with open(tmp, "wb") as fh:
            marshal.dump(keep, fh)
        os.replace(tmp, _path)
    except (OSError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass
