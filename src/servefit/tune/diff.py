"""Unified diffs of tune's patches, with credentials masked in every displayed line (the file
written keeps them, of course)."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable

from servefit.core import LaunchSite
from servefit.redact import MASK, SECRET_FLAGS, is_secret_name, redact_text


def secret_values(sites: Iterable[LaunchSite]) -> set[str]:
    """Values of secret-named variables and of the words after secret flags (--api-key, --hf-token)."""
    out: set[str] = set()
    for site in sites:
        for name, tok in site.env.items():
            if is_secret_name(name) and len(tok.text) >= 4:
                out.add(tok.text)
        words = [t.text for t in site.argv]
        for i, w in enumerate(words):
            flag, eq, val = w.partition("=")
            if flag in SECRET_FLAGS or flag in ("-hft",):
                v = val if eq else (words[i + 1] if i + 1 < len(words) else "")
                if len(v) >= 4:
                    out.add(v)
    return out


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
    """A unified diff (git style a/ b/ names) of one file; empty when nothing changes."""
    if old == new:
        return ""
    name = display_path(path)
    a = old.splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    out: list[str] = []
    for line in difflib.unified_diff(a, b, fromfile=f"a/{name.lstrip('/')}",
                                     tofile=f"b/{name.lstrip('/')}", n=3):
        if line.startswith(("---", "+++", "@@")):
            out.append(line if line.endswith("\n") else line + "\n")
            continue
        shown = redact_line(line, secrets or set())
        if not shown.endswith("\n"):
            shown += "\n\\ No newline at end of file\n"
        out.append(shown)
    return "".join(out)
