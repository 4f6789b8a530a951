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


def read(path: str) -> Counter:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        return Counter({(e["file"], e["code"], e.get("server", ""), e.get("setting", "")): int(e.get("count", 1))
                        for e in doc["findings"]})
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: not a servefit baseline ({exc})") from None


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
