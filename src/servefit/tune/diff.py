"""Unified diffs of tune's patches, with credentials masked in every displayed line (the file
written keeps them, of course)."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable

from servefit import redact
from servefit.core import LaunchSite
from servefit.redact import MASK, redact_text


def secret_values(sites: Iterable[LaunchSite]) -> set[str]:
    """The secret values the servers were given (redact.secret_values over their env and argv)."""
    sites = list(sites)
    return redact.secret_values([(k, tok.text) for s in sites for k, tok in s.env.items()],
                                [[tok.text for tok in s.argv] for s in sites])


def redact_line(line: str, secrets: set[str]) -> str:
    for s in sorted(secrets, key=len, reverse=True):
        if s in line:
            line = line.replace(s, MASK)
    return redact_text(line)


def display_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def unified(path: str, old: str, new: str, secrets: set[str] | None = None) -> str:
    """A unified diff (git style a/ b/ names) of one file; empty when nothing changes. Context
    lines that would show a credential are left out by narrowing the context (3 lines, else 2,
    then 1), so the masked diff still applies; only a credential on a changed line itself, or
    one no narrower context avoids, is shown masked."""
    if old == new:
        return ""
    name = display_path(path)
    a = old.splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    best: list[str] = []
    for n in (3, 2, 1):
        out: list[str] = []
        clean = True
        for line in difflib.unified_diff(a, b, fromfile=f"a/{name.lstrip('/')}",
                                         tofile=f"b/{name.lstrip('/')}", n=n):
            if line.startswith(("---", "+++", "@@")):
                out.append(line if line.endswith("\n") else line + "\n")
                continue
            shown = redact_line(line, secrets or set())
            if shown != line and line.startswith(" "):
                clean = False
            if not shown.endswith("\n"):
                shown += "\n\\ No newline at end of file\n"
            out.append(shown)
        if n == 3:
            best = out
        if clean:
            return "".join(out)
    return "".join(best)
