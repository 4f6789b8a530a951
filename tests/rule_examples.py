"""Run a rule's documented example (data/rules/*.yaml `example` / `passing`) through the linter.

An example is the file (`file`, `text`, saved in `encoding`), the files beside it (`also`), the
target (`gpu`, `gpus`, `version`), the files named on the command line (`linted`, default the
file) and, for the rules about the installation rather than a file, the state of an engine
plugin (`plugins: {tgi: not-installed}` or `{tgi: raises}`)."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from servefit import engines
from servefit.config import Config, Configs
from servefit.linter.policy import apply
from servefit.linter.run import LintOptions, lint_paths

CONFIG_FILES = ("servefit.toml", "pyproject.toml")


def lint_example(ex: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(code, line, column) of every finding in the example's file, as `servefit lint` reports them."""
    with tempfile.TemporaryDirectory() as d, plugins(ex.get("plugins") or {}):
        path = Path(d) / ex["file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(ex["text"].encode(ex.get("encoding", "utf-8")))
        for name, text in (ex.get("also") or {}).items():  # companion files (a Modelfile's compose, an env file)
            (Path(d) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(d) / name).write_text(text, encoding="utf-8")
        names = [ex["file"], *(ex.get("also") or {})]
        # the repository's own configuration when the example has one, else none at all
        own = any(Path(n).name in CONFIG_FILES for n in names)
        cfg = Config(root=d)
        opts = LintOptions(gpu=ex.get("gpu"), gpus=ex.get("gpus"), engine_version=ex.get("version"),
                           config=None if own else cfg, configs=Configs() if own else None, render=False)
        result = lint_paths([str(Path(d) / n) for n in ex.get("linted") or [ex["file"]]], opts)
        return [(f.code, f.span.line if f.span else 0, f.span.col if f.span else 0)
                for f in apply(result, cfg) if f.span is None or Path(f.span.file) == path]


@contextmanager
def plugins(states: dict[str, str]) -> Iterator[None]:
    """Engine plugins as the example needs them: `not-installed` (its module cannot be
    imported, as when the package is missing) or `raises` (its parse fails with an exception)."""
    saved_modules = {k: v for k, v in sys.modules.items() if any(k == m or k.startswith(m + ".")
                                                                  for m in _modules(states))}
    patched = []
    try:
        for name, state in states.items():
            if state == "not-installed":
                for k in [k for k in sys.modules if k == engines.BUILTIN[name] or k.startswith(engines.BUILTIN[name] + ".")]:
                    del sys.modules[k]
                sys.modules[engines.BUILTIN[name]] = None  # type: ignore[assignment]
            elif state == "raises":
                eng = engines.get(name)
                patched.append(eng)
                eng.parse = _raise  # type: ignore[method-assign]
            else:
                raise ValueError(f"plugin state {state!r}: not-installed or raises")
        engines.reset()
        yield
    finally:
        for eng in patched:
            del eng.parse
        for mod in _modules(states):
            sys.modules.pop(mod, None)
        sys.modules.update(saved_modules)
        engines.reset()


def _modules(states: dict[str, str]) -> list[str]:
    return [engines.BUILTIN[n] for n, s in states.items() if s == "not-installed"]


def _raise(*_args: Any, **_kw: Any) -> Any:
    raise KeyError("tensor_parallel_size")  # what a plugin bug looks like: a key it forgot to default
