"""Baselines: adopt servefit in a repo with findings, and see only new ones.

Entries match on (file, rule, server identity, setting), never on line numbers, so edits above
a finding do not bring it back; each entry absorbs as many findings as it recorded."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from servefit.core import Finding, UsageError

VERSION = 1


def key(f: Finding, rel) -> tuple[str, str, str, str]:
    file = rel(f.span.file) if f.span is not None else ""
    return (file, f.code, f.site or "", f.setting or "")


def write(path: str, findings: list[Finding], rel) -> int:
    counts = Counter(key(f, rel) for f in findings)
    entries = [{"file": k[0], "code": k[1], "server": k[2], "setting": k[3], "count": n}
               for k, n in sorted(counts.items())]
    Path(path).write_text(json.dumps({"version": VERSION, "findings": entries}, indent=2) + "\n", encoding="utf-8")
    return len(findings)


MAX_BYTES = 64 << 20
MAX_COUNT = 1 << 30


def read(path: str) -> Counter:
    """The baseline's entries; anything else (not a regular file, too large, nested, fields of
    the wrong type or out of range) is one UsageError naming what is wrong."""
    from servefit import safe_io

    try:
        raw = safe_io.read_bytes(path, MAX_BYTES)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the baseline ({exc.strerror or exc})") from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise UsageError(f"{path}: not a servefit baseline (nested too deeply)") from None
    except ValueError as exc:
        raise UsageError(f"{path}: not a servefit baseline ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("findings"), list):
        raise UsageError(f"{path}: not a servefit baseline (no \"findings\" list)")
    out: Counter = Counter()
    for i, e in enumerate(doc["findings"]):
        if not isinstance(e, dict):
            raise UsageError(f"{path}: findings[{i}] is not an object")
        k = []
        for name in ("file", "code", "server", "setting"):
            v = e.get(name, "" if name in ("server", "setting") else None)
            if not isinstance(v, str):
                raise UsageError(f"{path}: findings[{i}].{name} is not a string")
            k.append(v)
        n = e.get("count", 1)
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_COUNT:
            raise UsageError(f"{path}: findings[{i}].count is not a whole number in 0..{MAX_COUNT}")
        out[tuple(k)] += n
    return out


def filter_new(findings: list[Finding], base: Counter, rel) -> list[Finding]:
    left = Counter(base)
    out = []
    for f in findings:
        k = key(f, rel)
        if left[k] > 0:
            left[k] -= 1
        else:
            out.append(f)
    return out
