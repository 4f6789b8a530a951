"""A tuned setting placed in the files: the edits that write it and their applicability, as
ruff's fixes have: `safe` for settings, `unsafe` for a change of checkpoint or quantization
(applied only with --unsafe), `display-only` where servefit cannot place the edit and shows it; how a
value is written (fmt)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from servefit.core import Edit, Fix, LaunchSite

SAFE, UNSAFE, DISPLAY = "safe", "unsafe", "display-only"
RANK = {SAFE: 0, UNSAFE: 1, DISPLAY: 2}
Reader = Callable[[str], str]


@dataclass
class Placed:
    """One tuned setting placed in the files: old and new value, the edits that write it and their
    applicability, and how the change reads in messages."""

    setting: str
    old: Any
    new: Any
    applicability: str
    edits: list[Edit] = field(default_factory=list)
    shown: str = ""  # how the change reads (`--max-model-len 32768`), for messages and manual edits


def fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def keep_to_own_files(render_own: list[str], placed: list[Placed]) -> None:
    """A server rendered from a Helm chart is changed only in the files that configure it alone:
    a line of the chart's templates (or of its values.yaml, under a render with its own values
    file) is every render's, and may sit inside a condition; such a change is shown, not written."""
    own = {os.path.normpath(f) for f in render_own}
    if not own:
        return
    names = ", ".join(sorted(os.path.basename(f) for f in own))
    for p in placed:
        elsewhere = sorted({e.span.file for e in p.edits if os.path.normpath(e.span.file) not in own})
        if p.applicability == DISPLAY or not elsewhere:
            continue
        p.applicability = DISPLAY
        where = elsewhere[0]
        if os.path.basename(os.path.dirname(where)) == "templates":
            p.shown += f" (the chart's template {os.path.basename(where)} writes this command for every values file)"
        else:
            p.shown += f" (in {names}: {os.path.basename(where)} sets it for every values file)"


@dataclass
class Patch:
    """A tuned server's changes placed in its files, as one fix that is only as safe as its least safe
    change."""

    site: LaunchSite
    placed: list[Placed]

    @property
    def edits(self) -> list[Edit]:
        return [e for p in self.placed if p.applicability != DISPLAY for e in p.edits]

    @property
    def applicability(self) -> str:
        if not self.placed:
            return SAFE
        return max((p.applicability for p in self.placed), key=lambda a: RANK[a])

    def fix(self) -> Fix:
        what = ", ".join(p.shown for p in self.placed)
        return Fix(message=f"tune: {what}" if what else "tune: nothing to change", edits=tuple(self.edits),
                   applicability=self.applicability)  # type: ignore[arg-type]

    def manual(self) -> list[str]:
        """The changes to make by hand: all of them when one cannot be placed (then nothing of
        this patch is written, so a change that could be placed alone is by hand too)."""
        if any(p.applicability == DISPLAY for p in self.placed):
            return [p.shown for p in self.placed if p.shown]
        return []


def reader(preloaded: dict[str, str] | None = None) -> Reader:
    """Read each file once, newlines as written (CRLF stays two characters). `preloaded`: texts
    that are not files (a command line typed after `--`)."""
    cache: dict[str, str] = dict(preloaded or {})

    def read(path: str) -> str:
        if path not in cache:
            from servefit.safe_io import read_bytes

            cache[path] = read_bytes(path, 64 << 20).decode("utf-8")  # a regular file only
        return cache[path]

    return read
