"""What Python compiles on every start of servefit, compiled once per user instead.

Two things are rebuilt from text on every run, and together they were a third of a one-file
lint on Python 3.11: the methods `@dataclass` writes for each class (`__init__`, `__repr__`,
`__eq__`: source text given to `exec`, ~70 classes on the lint path) and the regular expressions
servefit and PyYAML compile at import (~100; `re` keeps them for one process only). `install()`
keeps both in the user's cache directory, the way Python keeps module bytecode in
`__pycache__`: a method's code object keyed by its exact source text, a pattern's compiled form
(what `re._compiler.compile` hands to `_sre.compile`) keyed by the pattern and its flags; so
what a run gets is what compiling would have given. The file is per Python version; one that
cannot be read or written is ignored; SERVEFIT_NO_CACHE=1 turns it off. Only the command line
installs it (cli.entry), never an import of servefit as a library.
"""

from __future__ import annotations

import _sre
import atexit
import builtins
import marshal
import os
import re
import sys
from re import _compiler, _parser  # type: ignore[attr-defined]
from types import CodeType
from typing import Any

MAX_ENTRIES = 4000  # per kind; beyond this (many versions seen) the file keeps only this run's

_codes: dict[str, CodeType] = {}  # dataclass method source -> code
_regex: dict[tuple[Any, int], tuple[Any, ...]] = {}  # (pattern, flags) -> _sre.compile's other arguments
_used: set[Any] = set()
_loaded = 0  # entries read from the file
_compiled = 0  # entries this run compiled
_path: str | None = None
_re_compile: Any = None  # re._compiler.compile as it was


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


def _compile_regex(p: Any, flags: int = 0) -> Any:
    """re._compiler.compile, with the parse and code generation kept in the cache (the three
    steps below are that function's own, Python 3.11-3.13)."""
    global _compiled
    if not isinstance(p, (str, bytes)) or flags & re.DEBUG:
        return _re_compile(p, flags)
    key = (p, int(flags))
    args = _regex.get(key)
    if args is None:
        parsed = _parser.parse(p, flags)
        code = _compiler._code(parsed, flags)
        indexgroup: list[str | None] = [None] * parsed.state.groups
        for name, i in parsed.state.groupdict.items():
            indexgroup[i] = name
        args = _regex[key] = (int(flags | parsed.state.flags), [int(c) for c in code], parsed.state.groups - 1,
                              dict(parsed.state.groupdict), tuple(indexgroup))
        _compiled += 1
    _used.add(key)
    try:
        return _sre.compile(p, *args)
    except (TypeError, ValueError, OverflowError, RuntimeError):  # a damaged entry: what re itself does
        return _re_compile(p, flags)


def install(command: str = "") -> None:
    """Serve dataclass methods and regular expressions from the cache (once per process). One
    file per servefit command: each reads what it needs, not what tune or diagnose compiled."""
    global _path, _loaded, _re_compile
    import dataclasses

    if _path is not None or getattr(dataclasses, "exec", None) is _exec:
        return
    base = cache_dir()
    if base is None:
        return
    name = f"compiled-{command + '-' if command.isidentifier() else ''}{sys.implementation.cache_tag}"
    _path = os.path.join(base, f"{name}-O{sys.flags.optimize}.marshal")
    try:
        with open(_path, "rb") as fh:
            codes, regex = marshal.loads(fh.read())  # marshal.load(fh) reads piece by piece: 10x slower
        _codes.update((k, v) for k, v in codes.items() if isinstance(k, str) and isinstance(v, CodeType))
        _regex.update((k, v) for k, v in regex.items() if isinstance(k, tuple) and isinstance(v, tuple) and len(v) == 5)
    except (OSError, ValueError, EOFError, TypeError, AttributeError):
        pass
    _loaded = len(_codes) + len(_regex)
    dataclasses.exec = _exec  # type: ignore[attr-defined]  # a module global shadows the builtin
    if (3, 11) <= sys.version_info[:2] <= (3, 13):  # the versions whose re._compiler.compile this follows
        _re_compile = re._compiler.compile  # type: ignore[attr-defined]
        re._compiler.compile = _compile_regex  # type: ignore[attr-defined]
    atexit.register(_save)


def _save() -> None:
    """Write the cache when this run compiled something new."""
    if _path is None or not _compiled:
        return
    codes = _codes if len(_codes) <= MAX_ENTRIES else {k: v for k, v in _codes.items() if k in _used}
    regex = _regex if len(_regex) <= MAX_ENTRIES else {k: v for k, v in _regex.items() if k in _used}
    tmp = f"{_path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(_path), exist_ok=True)
        with open(tmp, "wb") as fh:
            marshal.dump((codes, regex), fh)
        os.replace(tmp, _path)
    except (OSError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass
