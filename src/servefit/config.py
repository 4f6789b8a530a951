"""servefit's own configuration: `[tool.servefit]` in pyproject.toml or a `servefit.toml`,
found from the linted path upwards, plus `--config KEY=VALUE` overrides.

The schema is schemas/config.schema.json. Validation here walks that schema with a small
interpreter for the keywords it uses (type, enum, properties, additionalProperties,
propertyNames, items, required, minimum, maximum, minItems), so a lint run never imports jsonschema;
tests check the interpreter against jsonschema on good and bad configs.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from servefit.core import SEVERITY_RANK, UsageError

SCHEMA_PATH = Path(__file__).parent / "schemas" / "config.schema.json"
_TYPES: dict[str, type | tuple[type, ...]] = {"object": dict, "array": list, "string": str, "boolean": bool,
                                              "number": (int, float)}


@dataclass
class Target:
    """One `[[targets]]` entry: the GPU, count, GPU memory and engine versions for the files its `paths`
    match, ahead of the project-wide values."""

    paths: list[str]
    gpu: str | None = None
    count: int | None = None
    gpu_memory: str | None = None
    engine_versions: dict[str, str] = field(default_factory=dict)


@dataclass
class Config:
    """One project's servefit settings (servefit.toml or `[tool.servefit]`, plus `--config` overrides): which
    rules run on a file, their severities, what fails the run, and the default target."""

    path: str | None = None  # the file it came from
    root: str = "."  # paths in the config are relative to this directory
    gpu: str | None = None
    gpus: int | None = None
    gpu_memory: str | None = None
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    severity: dict[str, str] = field(default_factory=dict)
    fail_on: str = "error"
    engine_versions: dict[str, str] = field(default_factory=dict)
    online: bool = False
    require_reason: bool = True
    exclude: list[str] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    trusted_orgs: list[str] = field(default_factory=list)  # Hub organisations whose remote code is trusted
    models: dict[str, str] = field(default_factory=dict)  # local path / private name -> Hub id or config.json
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)  # rule options: code -> {option: value}

    def enabled(self, code: str, file: str | None = None) -> bool:
        if self.select and not any(code.startswith(s) for s in self.select):
            return False
        if any(code.startswith(s) for s in self.ignore):
            return False
        if file is not None:
            rel = self.relative(file)
            for pattern, codes in self.per_file_ignores.items():
                if _match(rel, pattern) and any(code.startswith(c) for c in codes):
                    return False
        return True

    def severity_of(self, code: str, default: str) -> str:
        return self.severity.get(code, default)

    def fails(self, severity: str) -> bool:
        return self.fail_on != "never" and SEVERITY_RANK[severity] >= SEVERITY_RANK[self.fail_on]

    def relative(self, file: str) -> str:
        try:
            return os.path.relpath(os.path.abspath(file), os.path.abspath(self.root)).replace(os.sep, "/")
        except ValueError:
            return file

    def target_for(self, file: str) -> Target | None:
        rel = self.relative(file)
        for t in self.targets:
            if any(_match(rel, p) for p in t.paths):
                return t
        return None


def _match(rel: str, pattern: str) -> bool:
    """Glob with ** spanning directories (gitignore-like)."""
    if fnmatch.fnmatch(rel, pattern):
        return True
    if "**" in pattern:
        return fnmatch.fnmatch(rel, pattern.replace("**/", "").replace("/**", "/*")) or \
            fnmatch.fnmatch(rel, pattern.replace("**", "*"))
    return False


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The config schema, parsed once per user (the data cache): a project with a config then
    needs no json module to lint."""
    from servefit import data

    def parse() -> dict[str, Any]:
        import json

        return json.loads(SCHEMA_PATH.read_text())

    return data.derived("config-schema", [SCHEMA_PATH, __file__], parse)


def validate(data: Any, sch: dict[str, Any] | None = None, path: str = "tool.servefit") -> list[str]:
    """Problems as 'key.path: message', following the JSON Schema keywords the config schema uses."""
    sch = schema() if sch is None else sch
    errs: list[str] = []
    if "enum" in sch and data not in sch["enum"]:
        return [f"{path}: {data!r} is not one of {', '.join(map(str, sch['enum']))}"]
    t = sch.get("type")
    if t == "integer":
        if not isinstance(data, int) or isinstance(data, bool):
            return [f"{path}: expected an integer, got {type(data).__name__}"]
    elif t is not None:
        py = _TYPES[t]
        if not isinstance(data, py) or (t != "boolean" and isinstance(data, bool)):
            return [f"{path}: expected {t}, got {type(data).__name__}"]
    if "minimum" in sch and isinstance(data, (int, float)) and data < sch["minimum"]:
        errs.append(f"{path}: must be at least {sch['minimum']}")
    if "maximum" in sch and isinstance(data, (int, float)) and data > sch["maximum"]:
        errs.append(f"{path}: must be at most {sch['maximum']}")
    if isinstance(data, dict):
        props = sch.get("properties", {})
        for req in sch.get("required", []):
            if req not in data:
                errs.append(f"{path}: missing required key {req!r}")
        names = sch.get("propertyNames")
        for k, v in data.items():
            if names is not None:
                errs.extend(validate(k, names, f"{path}.{k}"))
            if k in props:
                errs.extend(validate(v, props[k], f"{path}.{k}"))
            elif sch.get("additionalProperties") is False:
                near = [p for p in props if p.replace("-", "") == str(k).replace("_", "").replace("-", "")]
                errs.append(f"{path}.{k}: unknown key" + (f" (did you mean {near[0]!r}?)" if near else ""))
            elif isinstance(sch.get("additionalProperties"), dict):
                errs.extend(validate(v, sch["additionalProperties"], f"{path}.{k}"))
    if isinstance(data, list):
        if "minItems" in sch and len(data) < sch["minItems"]:
            errs.append(f"{path}: needs at least {sch['minItems']} item(s)")
        if "items" in sch:
            for i, item in enumerate(data):
                errs.extend(validate(item, sch["items"], f"{path}[{i}]"))
    return errs


def find_config(start: str) -> tuple[str, dict[str, Any]] | None:
    """The nearest servefit.toml, or pyproject.toml with [tool.servefit], from `start` upwards."""
    d = Path(start).resolve()
    if d.is_file():
        d = d.parent
    for folder in [d, *d.parents]:
        here = _folder_config(folder)
        if here is not None:
            return None if here is _STOP else here
    return None


_STOP: Any = ("", {})  # a repository root (.git) without a configuration: the search ends there
_folders: dict[str, tuple[str, dict[str, Any]] | None] | None = None


@contextmanager
def searching_each_folder_once() -> Iterator[None]:
    """Inside (one run: files do not change meanwhile), what each folder holds for find_config
    is looked at once: the servers of 1,000 files share the folders above them."""
    global _folders
    if _folders is not None:
        yield
        return
    _folders = {}
    try:
        yield
    finally:
        _folders = None


def _folder_config(folder: Path) -> tuple[str, dict[str, Any]] | None:
    """The configuration in `folder` itself, _STOP at a repository root without one, or None."""
    key = str(folder)
    if _folders is not None and key in _folders:
        return _folders[key]
    found: tuple[str, dict[str, Any]] | None = None
    for name in ("servefit.toml", ".servefit.toml"):
        p = folder / name
        if p.is_file():
            found = str(p), _read(p, table=False)
            break
    else:
        p = folder / "pyproject.toml"
        data = _read(p, table=True) if p.is_file() else None
        if data is not None:
            found = str(p), data
        elif (folder / ".git").exists():
            found = _STOP
    if _folders is not None:
        _folders[key] = found
    return found


MAX_CONFIG_FILE = 4 << 20


def _read(p: Path, table: bool) -> Any:
    import tomllib

    from servefit import safe_io

    try:
        doc = tomllib.loads(safe_io.read_bytes(str(p), MAX_CONFIG_FILE).decode("utf-8"))
    except RecursionError:
        if table:  # someone else's pyproject.toml: servefit's table cannot be read, the run goes on
            import sys

            print(f"servefit: warning: {p}: nested too deeply to read; its [tool.servefit] is not used",
                  file=sys.stderr)
            return None
        raise UsageError(f"{p}: cannot read config: nested too deeply") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{p}: cannot read config: {exc}") from None
    if table:
        return doc.get("tool", {}).get("servefit")
    return doc.get("tool", {}).get("servefit", doc)


def parse_override(text: str) -> tuple[str, Any]:
    """`--config KEY=VALUE`: the value is read as TOML (so lists and numbers work), else a string."""
    import tomllib

    key, eq, raw = text.partition("=")
    if not eq or not key.strip():
        raise UsageError(f"--config expects KEY=VALUE, got {text!r}")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    except RecursionError:
        raise UsageError(f"--config {key.strip()}: value nested too deeply") from None
    return key.strip(), value


def load(start: str = ".", overrides: list[str] | None = None, path: str | None = None) -> Config:
    """Find, merge overrides into, validate and build the configuration."""
    data: dict[str, Any] = {}
    where: str | None = None
    if path:
        where, data = path, _read(Path(path), table=Path(path).name == "pyproject.toml") or {}
    else:
        found = find_config(start)
        if found:
            where, data = found
    data = dict(data or {})
    for ov in overrides or []:
        k, v = parse_override(ov)
        *outer, last = k.split(".") if k.startswith("rules.") else [k]  # rules.VLLM017.max=0.9
        table = data
        for part in outer:
            table[part] = table = dict(table.get(part) or {})
        table[last] = v
    errs = validate(data) if data else []  # nothing to check (and no schema to read) without a config
    if errs:
        raise UsageError(f"{where or '--config'}: invalid configuration: {errs[0]}")
    targets = [Target(paths=t["paths"], gpu=t.get("gpu"), count=t.get("count"), gpu_memory=t.get("gpu-memory"),
                      engine_versions=t.get("engine-versions", {})) for t in data.get("targets", [])]
    return Config(path=where, root=str(Path(where).parent) if where else os.getcwd(), gpu=data.get("gpu"),
                  gpus=data.get("gpus"), gpu_memory=data.get("gpu-memory"), select=data.get("select", []),
                  ignore=data.get("ignore", []), per_file_ignores=data.get("per-file-ignores", {}),
                  severity=data.get("severity", {}), fail_on=data.get("fail-on", "error"),
                  engine_versions=data.get("engine-versions", {}), online=bool(data.get("online", False)),
                  require_reason=bool(data.get("require-reason", True)), exclude=data.get("exclude", []),
                  targets=targets, trusted_orgs=data.get("trusted-orgs", []), models=data.get("models", {}),
                  rules=data.get("rules", {}))


class Configs:
    """The configuration of each file: the nearest servefit.toml / pyproject.toml
    [tool.servefit] from the file's directory upwards (as ruff does), or the one file given with
    `--config PATH` for every file; `--config KEY=VALUE` overrides apply on top of either."""

    def __init__(self, overrides: list[str] | None = None, path: str | None = None) -> None:
        self.overrides = list(overrides or [])
        self.path = path
        self._by_dir: dict[str, Config] = {}
        self._by_file: dict[str, Config] = {}  # the same file is asked about by each stage

    def for_file(self, file: str) -> Config:
        cfg = self._by_file.get(file)
        if cfg is not None:
            return cfg
        d = os.path.dirname(os.path.abspath(file)) if os.path.exists(file) else os.getcwd()
        cfg = self._by_dir.get(d)
        if cfg is None:
            cfg = self._by_dir[d] = load(d, self.overrides, self.path)
        if len(self._by_file) < 100_000:
            self._by_file[file] = cfg
        return cfg


def user_online(args: Any = None) -> bool:
    """Whether the user (never the linted repository) lets servefit read the Hub: `--online`,
    `--config online=true` on the command line, SERVEFIT_ONLINE=1, or `online = true` in the
    user's own ~/.config/servefit/config.toml ($XDG_CONFIG_HOME). A repository's servefit.toml or
    pyproject.toml may ask for it (lint says so), but cannot turn it on."""
    if args is not None:
        if getattr(args, "online", False):
            return True
        for item in getattr(args, "config", None) or []:
            if isinstance(item, str) and re.fullmatch(r"\s*online\s*=\s*true\s*", item, re.I):
                return True
    if os.environ.get("SERVEFIT_ONLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    path = Path(base) / "servefit" / "config.toml"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    import tomllib  # only when the user has a config file: reading TOML costs ~4 ms of start-up

    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        return False
    return data.get("online") is True


def configs_asking_online(configs: Configs | None) -> list[Config]:
    """The repository configurations seen in a run that set `online = true` (not honoured)."""
    if configs is None:
        return []
    seen: dict[str, Config] = {}
    for cfg in configs._by_dir.values():
        if cfg.online and cfg.path and cfg.path not in seen:
            seen[cfg.path] = cfg
    return list(seen.values())
