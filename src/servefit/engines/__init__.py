"""Engine plugins. Every engine registers under the `servefit.engines` entry-point group
(pyproject.toml lists the five built-ins there too); the built-ins are also known by module so
that a checkout that is not installed still finds them, and so that the lint path does not pay
for scanning installed packages when only built-in engines are involved. Third-party engines
(`plugins()`) are read from the group once per process; the sources ask them to recognise
commands and images the built-in tables do not know (docs/engines.md)."""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

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
_plugins: list[Engine] | None = None


GROUP = "servefit.engines"


def _declared_elsewhere() -> bool:
    """Whether a package other than servefit declares the group: a scan of the installed
    packages' entry_points.txt, much cheaper than importing importlib.metadata on the lint path.
    What the installed packages' folders say is kept in the data cache until one of them changes
    (installing or removing a package changes its folder's mtime); the first sys.path entry (the
    working directory under `python -m`, the script's folder otherwise) is read each time."""
    import os
    import sys

    from servefit import data

    if not sys.path:
        return False
    first, rest = sys.path[0] or ".", [p or "." for p in sys.path[1:] if os.path.isdir(p or ".")]
    return _scan_for_group([first]) or bool(data.derived("entry-points", rest, lambda: _scan_for_group(rest)))


def _scan_for_group(folders: list[str]) -> bool:
    import os

    for base in folders:
        try:
            entries = os.scandir(base or ".")
        except OSError:
            continue
        with entries:
            for e in entries:
                if not e.name.endswith((".dist-info", ".egg-info")) or e.name.lower().split("-")[0].split(".")[0] == "servefit":
                    continue
                try:
                    with open(os.path.join(e.path, "entry_points.txt"), encoding="utf-8") as fh:
                        if f"[{GROUP}]" in fh.read():
                            return True
                except OSError:
                    continue
    return False


def _entry_points() -> list:  # type: ignore[type-arg]
    if not _declared_elsewhere():
        return []
    from importlib.metadata import entry_points

    return list(entry_points(group=GROUP))


def plugins() -> list[Engine]:
    """The engines registered by other packages (not built in), loaded once; one that fails to
    load is left out."""
    global _plugins
    if _plugins is None:
        found: list[Engine] = []
        for ep in _entry_points():
            if ep.name in BUILTIN:
                continue
            try:
                eng = ep.load()
            except Exception:  # noqa: BLE001 - a broken plugin must not stop the run
                continue
            _cache.setdefault(ep.name, eng)
            found.append(eng)
        _plugins = found
    return _plugins


def reset() -> None:
    """Forget loaded engines (tests that install a plugin)."""
    global _plugins
    _cache.clear()
    _plugins = None


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
    if eng is None and name:
        eng = next((p for p in plugins() if p.name == name), None)
    if eng is None:
        raise UsageError(f"unknown engine {name!r} (known: {', '.join(available())})")
    _cache[name] = eng
    return eng


def available() -> list[str]:
    """Built-in engines whose module is present, then the plugins'."""
    out = []
    for name, mod in BUILTIN.items():
        if importlib.util.find_spec(mod) is not None:
            out.append(name)
    return out + [p.name for p in plugins() if p.name not in out]


def loaded() -> list[Engine]:
    """Every engine that imports; one broken plugin must not stop the others."""
    out = []
    for name in available():
        try:
            out.append(get(name))
        except (UsageError, ImportError, AttributeError):
            continue
    return out


def section(name: str, key: str) -> dict[str, Any]:
    """A section of an engine's data (`logs`, `sweep`, `recognise`...): the built-ins' from
    data/engines/<name>.yaml without importing their code, a plugin's from its Engine.table."""
    if name in BUILTIN:
        from servefit import data

        try:
            return dict(data.load(f"engines/{name}.yaml").get(key) or {})
        except (OSError, ValueError):
            return {}
    eng = next((p for p in plugins() if p.name == name), None)
    try:
        return dict(eng.table(key) or {}) if eng is not None else {}
    except Exception:  # noqa: BLE001 - a broken plugin must not stop the run
        return {}


def title(name: str | None) -> str | None:
    """The name users read for an engine ("llama.cpp"), None when no engine has that id."""
    if not name:
        return None
    try:
        return get(name).title or name
    except (UsageError, ImportError, AttributeError):
        return None


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
