"""A catalogued model name with a release date added: `DeepSeek-V4-Flash-0731`, `DeepSeek-V4-Pro-0813`.

A later checkpoint of the same model, published under the catalogued name plus its date (MMDD, or
YYMM as in `-2507`), is assumed to keep that model's architecture, and the assumption says so.
Only where the name without its date words is a catalogued name exactly: a dated name the catalog
holds itself (`Qwen3-30B-A3B-Instruct-2507`) is found before this, and a date beside other words
(`-0731-Vision`) is left to the other derivative rules of models/names.py.
"""

from __future__ import annotations

import re

_DATE = re.compile(r"^(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])$|^(2[3-9])(0[1-9]|1[0-2])$")  # MMDD (0731), YYMM (2507)


_BY_KEY: list[tuple[dict[int, str], dict[str, int]]] = []  # (keys, each key's first entry), for the last keys seen


def _first_by_key(keys: dict[int, str]) -> dict[str, int]:
    """Each key's first entry in `keys` order (built once per index, not scanned per name)."""
    if not _BY_KEY or _BY_KEY[0][0] is not keys:
        rev: dict[str, int] = {}
        for i, k in keys.items():
            rev.setdefault(k, i)
        _BY_KEY[:] = [(keys, rev)]
    return _BY_KEY[0][1]


def dated(ws: list[str], keys: dict[int, str], names: list[str]) -> tuple[int, str, str] | None:
    """(catalog entry, the words matched, why) for a catalogued name with date words added, or None."""
    dates = [w for w in ws if _DATE.match(w)]
    if not dates:
        return None
    key = "-".join(w for w in ws if not _DATE.match(w))
    entry = _first_by_key(keys).get(key)
    if entry is None:
        return None
    return entry, key, (f"'-{'-'.join(dates)}' reads as a dated release of {names[entry]}, assumed to keep its "
                        "architecture")
