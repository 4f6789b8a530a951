"""Models only some engines can serve, or whose cache servefit models only for some: one clear line
instead of a plan that sizes the model as something it is not. The table is data/engine_support.yaml;
every engine's `plan` asks here first, so tune, explain's sweeps and Ollama's runner ask too."""

from __future__ import annotations

from functools import lru_cache

from servefit.models.spec import ModelSpec


@lru_cache(maxsize=1)
def _table() -> dict[str, dict[str, object]]:
    from servefit import data

    return {str(row["model_type"]): row for row in data.load("engine_support.yaml")}


def require_planned(model: ModelSpec, engine: str) -> None:
    """Raise a UsageError (exit 2, one line) when `engine` cannot serve `model` or servefit does not
    model how it caches it."""
    row = _table().get(model.model_type or "")
    if row is None:
        return
    engines = [str(e) for e in row["engines"]]  # type: ignore[attr-defined]
    if engine in engines:
        return
    from servefit.core import UsageError

    raise UsageError(f"servefit does not model how {engine} serves {model.name} ({row['why']}), so it cannot plan "
                     f"this server; {' / '.join(engines)} is modelled ({row['modelled']})")
