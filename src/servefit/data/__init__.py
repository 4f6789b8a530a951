"""Catalogs and option tables shipped as YAML, read once per process.

Parsing the YAML is most of a one-file lint's own time, so the parsed data is kept in the user's
cache directory as `marshal` (plain dicts, lists and scalars: it cannot run code when loaded),
keyed by the file's name, size and mtime. A cache that cannot be read or written is ignored.
"""

from __future__ import annotations

import marshal
import os
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import yaml

from servefit.codecache import cache_dir

DATA_DIR = Path(__file__).parent
T = TypeVar("T")

try:  # the C loader is ~10x faster; fall back where libyaml is missing
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader


def _cache_dir() -> Path | None:
    base = cache_dir()
    return None if base is None else Path(base) / "data"


@cache
def load(name: str) -> Any:
    """Load `data/<name>` (e.g. "gpus.yaml", "engines/vllm.yaml")."""
    path = DATA_DIR / name
    st = path.stat()
    cfile = _cache_file(f"{name.replace('/', '_')}-{st.st_size}-{st.st_mtime_ns}")
    found = _read(cfile)
    if found is not _MISSING:
        return found
    with open(path, encoding="utf-8") as fh:
        value = yaml.load(fh, Loader=_Loader)
    _write(cfile, value)
    return value


def derived(name: str, inputs: Iterable[str | os.PathLike[str]], build: Callable[[], T]) -> T:
    """`build()`, kept in the cache like `load`'s data: for what a run derives from the data
    files (indexes, merged tables) when deriving it costs more than reading it back. `inputs` are
    every file the value depends on, the code that builds it included; the value must be plain
    data (dicts, lists, tuples, sets, scalars)."""
    try:
        stats = [os.stat(p) for p in inputs]
    except OSError:  # an input gone or unreadable: build it, keep nothing
        return build()
    # hash() of a tuple of ints is the same in every process (only str / bytes hashing is salted);
    # hashlib would load OpenSSL (~6 ms) for a cache key
    key = format(hash(tuple((st.st_size, st.st_mtime_ns) for st in stats)) & (2**64 - 1), "016x")
    cfile = _cache_file(f"{name}-{key}")
    found = _read(cfile)
    if found is not _MISSING:
        return found  # type: ignore[no-any-return]
    value = build()
    _write(cfile, value)
    return value


def files(folder: str) -> list[str]:
    """The YAML files of a data folder ("models", "rules"), relative to the data directory, in
    name order (os.listdir: Path.glob costs ~0.2 ms a call)."""
    return sorted(f"{folder}/{n}" for n in os.listdir(DATA_DIR / folder) if n.endswith(".yaml") and not n.startswith("."))


_MISSING = object()


def _cache_file(stem: str) -> Path | None:
    cdir = _cache_dir()
    return None if cdir is None else cdir / f"{stem}.marshal"


def _read(cfile: Path | None) -> Any:
    if cfile is None:
        return _MISSING
    try:
        return marshal.loads(cfile.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return _MISSING


def _write(cfile: Path | None, value: Any) -> None:
    if cfile is None:
        return
    try:
        cfile.parent.mkdir(parents=True, exist_ok=True)
        tmp = cfile.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(marshal.dumps(value))
        os.replace(tmp, cfile)
    except (OSError, ValueError):
        pass
