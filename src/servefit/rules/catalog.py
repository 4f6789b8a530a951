"""The rule catalogue: every finding's code, kebab name, default severity and docs.

Codes live as data in data/rules/*.yaml (one file per engine plus common.yaml), so engines,
the linter, `servefit rules` and the docs all read one table.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from servefit import data
from servefit.core import Finding, Fix, Severity, Span


@lru_cache(maxsize=1)
def rules() -> dict[str, dict[str, Any]]:
    """code -> rule entry, from every file in data/rules/."""
    out: dict[str, dict[str, Any]] = {}
    for name in data.files("rules"):
        for entry in data.load(name) or []:
            out[entry["code"]] = {**entry, "group": name[len("rules/"):-len(".yaml")]}  # an engine, security, ...
    return out


@lru_cache(maxsize=1)
def brief() -> dict[str, tuple[str, str, dict[str, Any]]]:
    """code -> (name, severity, option defaults): what a lint run reads of the catalogue, kept in
    the data cache (the whole catalogue, docs and examples included, is ~100 KB to read)."""
    inputs = [data.DATA_DIR / f for f in data.files("rules")] + [Path(__file__)]
    return data.derived("rules-brief", inputs, lambda: {
        code: (e["name"], e["severity"], {k: o["default"] for k, o in (e.get("options") or {}).items()})
        for code, e in rules().items()})


def finding(code: str, message: str, *, span: Span | None = None, setting: str | None = None,
            fix: Fix | None = None, site: str = "", severity: Severity | None = None) -> Finding:
    """A Finding for a catalogued rule; the severity defaults to the rule's."""
    entry = brief().get(code)
    if entry is None:
        raise KeyError(f"rule {code} is not in data/rules/")
    return Finding(code=code, name=entry[0], severity=severity or entry[1],  # type: ignore[arg-type]
                   message=message, span=span, fix=fix, setting=setting, site=site)


def lookup(code_or_name: str) -> dict[str, Any] | None:
    """A rule by code (case-insensitive) or kebab name."""
    cat = rules()
    key = code_or_name.strip()
    if key.upper() in cat:
        return cat[key.upper()]
    for entry in cat.values():
        if entry["name"] == key:
            return entry
    return None
