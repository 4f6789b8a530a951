"""Bounds on the work a small input can ask for, so that every run ends in bounded time and memory.

Variable expansion (shell `$VAR`, Dockerfile ENV/ARG, compose `${VAR}`, llama-swap macros) is
charged against a per-file budget: one value may not expand past EXPANSION_PER_VALUE bytes and
the expansions of one file not past EXPANSION_PER_FILE. Past either, `Exhausted` is raised; the
file reader turns it into one finding naming the file and the bound, and the run goes on with
the other files. Real deployment files expand a few kilobytes at most.

Counts read from model files (config.json, safetensors, GGUF) are checked against COUNT_LIMITS
by `count()`: each bound is far above the largest real model (1T-parameter MoEs with 384
experts and 61 layers, 262k vocabularies, 10M-token contexts) and far below what would make a
per-layer loop or a per-expert table expensive.
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from typing import Any

EXPANSION_PER_VALUE = 64 << 10
EXPANSION_PER_FILE = 2 << 20


class Exhausted(Exception):
    """A bound was reached; the message names it (the reader adds the file)."""


SERVERS_PER_FILE = 1000  # servers checked per file (real files hold 1 to a few dozen)
ENV_ENTRIES_PER_FILE = 250_000  # variables copied per file (env files, ConfigMaps, per-command snapshots)


class _Budget:
    def __init__(self) -> None:
        self.used = 0
        self.entries = 0


_current: ContextVar[_Budget | None] = ContextVar("servefit_expansion_budget", default=None)


class file_budget:
    """`with file_budget():` around the reading of one file: expansions inside are charged to it."""

    def __enter__(self) -> None:
        self._token = _current.set(_Budget())

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._token)


def charge(n: int) -> None:
    """Account for `n` bytes of text produced by one expansion."""
    if n > EXPANSION_PER_VALUE:
        raise Exhausted(f"a variable expands to more than {EXPANSION_PER_VALUE >> 10} KiB (the bound on one "
                        "expanded value); the file was not read further")
    b = _current.get()
    if b is None:
        b = _Budget()
        _current.set(b)
    b.used += n
    if b.used > EXPANSION_PER_FILE:
        raise Exhausted(f"variable expansions produce more than {EXPANSION_PER_FILE >> 20} MiB of text (the bound "
                        "for one file); the file was not read further")


def charge_entries(n: int) -> None:
    """Account for `n` variables applied from an env file (compose env_file, EnvironmentFile)."""
    b = _current.get()
    if b is None:
        return
    b.entries += n
    if b.entries > ENV_ENTRIES_PER_FILE:
        raise Exhausted(f"its commands copy more than {ENV_ENTRIES_PER_FILE:,} variables (from assignments, env files or "
                        "ConfigMaps; the bound for one file); the file was not read further")


# Model-file counts. Largest real values (data/models/*.yaml and the Hub): 61-128 layers (Kimi K2:
# 61, Llama-3.1-405B: 126), 384 routed experts (Kimi K2), 128 heads, hidden 16384-18432, vocab
# 262,208 (Gemma 3) / 256k, contexts 10M (Llama 4 Scout), head_dim 512 (Gemma 3n 256, MLA 576).
COUNT_LIMITS: dict[str, int] = {
    "layers": 4096,
    "hidden": 1 << 20,
    "heads": 1 << 16,
    "head_dim": 1 << 16,
    "intermediate": 1 << 22,
    "vocab": 1 << 24,
    "experts": 1 << 16,
    "positions": 1 << 31,
    "rank": 1 << 20,
    "window": 1 << 31,
    "small": 1 << 20,
    "array": 1 << 24,  # elements of one GGUF / safetensors list kept in memory
    "string": 1 << 20,  # bytes of one GGUF string kept in memory
}
MAX_JSON_DEPTH = 64  # config.json / baselines nest 3-5 levels


class BadValue(ValueError):
    """A model-file field with a value of the wrong type or out of range; names the field."""


def count(value: Any, field: str, kind: str = "small", *, minimum: int = 0, default: int | None = None) -> int:
    """`value` as a whole number in [minimum, COUNT_LIMITS[kind]], or BadValue naming `field`.
    None (the key is absent) gives `default` (0 when not given). Floats equal to a whole
    number (4.0) are accepted as config.json writers sometimes emit them; booleans, strings,
    lists, NaN, infinities and fractions are not."""
    if value is None:
        return default if default is not None else minimum if minimum > 0 else 0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadValue(f"{field} is {_show(value)}, not a whole number")
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise BadValue(f"{field} is {_show(value)}, not a whole number")
        value = int(value)
    limit = COUNT_LIMITS[kind]
    if value < minimum or value > limit:
        raise BadValue(f"{field} is {value}, outside {minimum}..{limit:,} (no real model comes close)")
    return int(value)


def number(value: Any, field: str, *, minimum: float = 0.0, maximum: float = 1e12, default: float = 0.0,
           open_min: bool = False) -> float:
    """A finite real number in range, or BadValue naming `field`."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadValue(f"{field} is {_show(value)}, not a number")
    v = float(value)
    if not math.isfinite(v) or v < minimum or v > maximum or (open_min and v == minimum):
        raise BadValue(f"{field} is {_show(value)}, outside {'(' if open_min else '['}{minimum:g}, {maximum:g}]")
    return v


def json_depth(doc: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """The nesting depth of a parsed JSON value, iteratively (no recursion on hostile input);
    BadValue past `limit`."""
    if not isinstance(doc, (dict, list)):
        return 0
    stack: list[tuple[Any, int]] = [(doc, 1)]
    deepest = 0
    while stack:
        v, d = stack.pop()
        if d > limit:
            raise BadValue(f"nested more than {limit} levels deep")
        deepest = max(deepest, d)
        for x in v.values() if isinstance(v, dict) else v:
            if isinstance(x, (dict, list)):
                stack.append((x, d + 1))
    return deepest


def _show(value: Any) -> str:
    r = repr(value)
    return r if len(r) <= 40 else r[:37] + "..."
