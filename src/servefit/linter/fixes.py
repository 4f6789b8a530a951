"""Fixes on lint findings, in ruff's shape: a Fix is edits on spans plus an applicability
(safe / unsafe / display-only), built by the same patcher `servefit tune` uses, so a lint fix
and a tune patch change a file the same way. `servefit lint --diff` shows them, `--fix` applies
the safe ones, `--unsafe-fixes` the unsafe ones too.

Built only when asked (the patcher imports stay off the plain lint path)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from servefit.core import Edit, Finding, Fix


def _max_model_len(srv: Any, f: Finding) -> Fix | None:
    """VLLM003: the largest max-model-len that fits, which vLLM's own refusal names. Unsafe:
    requests longer than that are then refused, a choice the user makes."""
    ev = srv.evaluation
    n = ev.plan.fitting_max_model_len if ev is not None else None
    if not n:
        return None
    from servefit.tune.objective import Needs
    from servefit.tune.patch import make_patch
    from servefit.tune.space import build_space

    space = build_space(ev, Needs())
    point = {d.name: d.current for d in space.dims}
    if "max_model_len" not in point:
        return None
    point["max_model_len"] = int(n)
    patch = make_patch(space, point)
    if not patch.edits:
        return None
    app = "display-only" if patch.manual() else "unsafe"
    return Fix(f"set --max-model-len {n} (the largest that fits)", tuple(patch.edits), app)  # type: ignore[arg-type]


def _served_context(srv: Any, f: Finding) -> Fix | None:
    """OLLM009: past the model's context length Ollama serves that length, so writing it changes nothing
    that is served and clears the warning: safe. The tune space reads the file's num_ctx as its current
    value and the length served as the value to write (engines/ollama/tune.py)."""
    ev = srv.evaluation
    if ev is None:
        return None
    from servefit.tune.objective import Needs
    from servefit.tune.patch import make_patch
    from servefit.tune.space import build_space

    space = build_space(ev, Needs())
    point = {d.name: d.current for d in space.dims}
    served = int(ev.plan.max_model_len or 0)
    if point.get("num_ctx") in (None, served) or not served:
        return None
    point["num_ctx"] = served
    patch = make_patch(space, point)
    if not patch.edits:
        return None
    app = "display-only" if patch.manual() else "safe"
    return Fix(f"set num_ctx {served} (the length Ollama serves)", tuple(patch.edits), app)  # type: ignore[arg-type]


FIXERS: dict[str, Callable[[Any, Finding], Fix | None]] = {"VLLM003": _max_model_len, "OLLM009": _served_context}


def attach(servers: list[Any]) -> None:
    """Give each finding that has a known remedy its Fix (a finding keeps a fix it already has)."""
    for srv in servers:
        for f in srv.findings:
            builder = FIXERS.get(f.code)
            if builder is None or f.fix is not None:
                continue
            try:
                f.fix = builder(srv, f)
            except Exception:  # noqa: BLE001 - a fix that cannot be built is left out, not the report
                f.fix = None


@dataclass
class FixRun:
    """The files the applicable fixes change: path -> (old text, new text), and the findings fixed."""

    changes: dict[str, tuple[str, str]] = field(default_factory=dict)
    fixed: list[Finding] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


def plan(findings: list[Finding], unsafe: bool) -> FixRun:
    """Apply the fixes that are allowed to the files' texts (not yet written). Two fixes that
    touch the same bytes: the first wins, the second stays a finding."""
    from servefit.tune.patch import reader
    from servefit.tune.write import apply_edits

    allowed = ("safe", "unsafe") if unsafe else ("safe",)
    run = FixRun()
    per_file: dict[str, list[Edit]] = {}
    owners: dict[str, list[Finding]] = {}
    for f in findings:
        if f.fix is None or f.fix.applicability not in allowed or not f.fix.edits:
            continue
        files = {e.span.file for e in f.fix.edits}
        trial = {p: per_file.get(p, []) + [e for e in f.fix.edits if e.span.file == p] for p in files}
        read = reader()
        try:
            for p, es in trial.items():
                apply_edits(read(p), es)
        except (ValueError, OSError):
            continue
        per_file.update(trial)
        for p in files:
            owners.setdefault(p, []).append(f)
        run.fixed.append(f)
    read = reader()
    for path, edits in per_file.items():
        old = read(path)
        run.changes[path] = (old, apply_edits(old, edits))
    return run


def write(run: FixRun) -> None:
    from servefit.tune.write import WriteRefused, atomic_write

    for path, (old, new) in run.changes.items():
        if old == new:
            continue
        try:
            atomic_write(path, new, old)
        except WriteRefused as exc:
            run.refused[path] = str(exc)
