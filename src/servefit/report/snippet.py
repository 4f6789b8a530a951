"""--show-source: the source line under a finding with the span underlined, as ruff prints it."""

from __future__ import annotations

from collections.abc import Callable

from servefit.core import Span
from servefit.redact import redact_text


def reader(extra: dict[str, str] | None = None) -> Callable[[str], list[str] | None]:
    """Lines of a file, read once each (`extra`: texts that are not files, such as stdin)."""
    cache: dict[str, list[str] | None] = {k: v.splitlines() for k, v in (extra or {}).items()}

    def read(path: str) -> list[str] | None:
        if path not in cache:
            from servefit.safe_io import read_text

            try:
                cache[path] = read_text(path, 8 << 20).splitlines()
            except OSError:
                cache[path] = None
        return cache[path]

    return read


def snippet(span: Span | None, read: Callable[[str], list[str] | None]) -> list[str]:
    """`  |` / `NN | the line` / `  |    ^^^^` for a span on one line (its first line otherwise)."""
    if span is None or span.line < 1:
        return []
    lines = read(span.file)
    if not lines or span.line > len(lines):
        return []
    text = redact_text(lines[span.line - 1].expandtabs(1))
    width = len(str(span.line))
    end = span.end_col if span.end_line == span.line and span.end_col > span.col else span.col + 1
    end = min(max(end, span.col + 1), max(len(text) + 1, span.col + 1))
    gutter = " " * width
    return [f"{gutter} |", f"{span.line} | {text}", f"{gutter} | {' ' * (span.col - 1)}{'^' * (end - span.col)}"]
