"""Run a rule's documented example (data/rules/*.yaml `example` / `passing`) through the linter."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from servefit.config import Config
from servefit.linter.policy import apply
from servefit.linter.run import LintOptions, lint_paths


def lint_example(ex: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(code, line, column) of every finding in the example's file, as `servefit lint` reports them."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / ex["file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(ex["text"], encoding="utf-8")
        for name, text in (ex.get("also") or {}).items():  # companion files (a Modelfile's compose, an env file)
            (Path(d) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(d) / name).write_text(text, encoding="utf-8")
        cfg = Config(root=d)
        opts = LintOptions(gpu=ex.get("gpu"), gpus=ex.get("gpus"), engine_version=ex.get("version"), config=cfg,
                           render=False)
        result = lint_paths([str(path)], opts)
        return [(f.code, f.span.line if f.span else 0, f.span.col if f.span else 0)
                for f in apply(result, cfg) if f.span is None or Path(f.span.file) == path]
