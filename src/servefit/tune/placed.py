"""A tuned setting placed in the files: the edits that write it and their applicability, as
ruff's fixes have: `safe` for settings, `unsafe` for a change of checkpoint or quantization
(applied only with --unsafe), `display-only` where servefit cannot place the edit and shows it; how a
value is written (fmt)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from servefit.core import Edit

SAFE, UNSAFE, DISPLAY = "safe", "unsafe", "display-only"
RANK = {SAFE: 0, UNSAFE: 1, DISPLAY: 2}


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
