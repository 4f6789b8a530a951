"""The rule registry, in the shape of yamllint / hadolint: each finding code is emitted by exactly
one check function, registered with `@rule("CODE")`, so `grep -rn '@rule("VLLM017"'` finds the
one place that decides it. tests/test_rule_registry.py holds the catalogue (data/rules/*.yaml)
and the registry to each other.

Rule options (kube-linter style): a rule that has a threshold users argue about declares it
in its catalogue entry (`options: {max: {default: 0.95, ...}}`); a configuration sets it with

    [tool.servefit.rules.VLLM017]
    max = 0.9

and the check reads it with `option("VLLM017", "max")`. The options in force are those of the
file being linted: the assembly sets them around the parse and the plan of each server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

REGISTRY: dict[str, Callable[..., Any]] = {}  # code -> the one function that emits it
_OPTIONS: ContextVar[dict[str, dict[str, Any]] | None] = ContextVar("servefit_rule_options", default=None)


def rule(*codes: str) -> Callable[[F], F]:
    """Register the decorated function as the one check that emits `codes`."""
    def register(fn: F) -> F:
        for code in codes:
            other = REGISTRY.get(code)
            if other is not None and other is not fn and _name(other) != _name(fn):
                raise ValueError(f"rule {code} is registered twice: {_name(other)} and {_name(fn)}")
            REGISTRY[code] = fn
        fn.rule_codes = codes  # type: ignore[attr-defined]
        return fn
    return register


def _name(fn: Callable[..., Any]) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def option(code: str, name: str) -> Any:
    """The value of a rule option: the linted file's configuration, else the catalogue default."""
    given = (_OPTIONS.get() or {}).get(code, {})
    if name in given:
        return given[name]
    from servefit.rules.catalog import brief

    return brief()[code][2][name]


@contextmanager
def options(values: dict[str, dict[str, Any]] | None) -> Iterator[None]:
    """Rule options in force for the checks run inside (one file's `[tool.servefit.rules]`)."""
    token = _OPTIONS.set(values or None)
    try:
        yield
    finally:
        _OPTIONS.reset(token)
