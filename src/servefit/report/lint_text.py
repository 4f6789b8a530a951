"""Lint findings as text: `file:line:col: CODE message`, sorted by place, and a summary line."""

from __future__ import annotations

from collections.abc import Callable

from servefit.core import Finding
from servefit.redact import redact_text
from servefit.termsafe import one_line

COLOR = {"error": "31", "warning": "33", "info": "36"}


def _key(f: Finding) -> tuple[str, int, int, str]:
    s = f.span
    return (s.file, s.line, s.col, f.code) if s is not None else ("", 0, 0, f.code)


def render(findings: list[Finding], files: int = 0, servers: int = 0, color: bool = False,
           quiet: bool = False, source: Callable[[str], list[str] | None] | None = None) -> str:
    """`quiet`: the findings without the summary line; `source`: a line reader for --show-source."""
    lines = []
    for f in sorted(findings, key=_key):
        s = f.span
        where = f"{one_line(s.file)}:{s.line}:{s.col}" if s is not None else "-"
        code = f"\x1b[{COLOR[f.severity]}m{f.code}\x1b[0m" if color else f.code
        lines.append(f"{where}: {code} {one_line(redact_text(f.message))}")
        if source is not None:
            from servefit.report.snippet import snippet  # --show-source only

            lines.extend(snippet(s, source))
    if not quiet:
        lines.append(summary(findings, files, servers))
    return "\n".join(lines) + "\n" if lines else ""


def statistics(findings: list[Finding]) -> str:
    """--statistics: one line per rule, most frequent first (`count  code  name`), as ruff prints them."""
    counts: dict[str, list[Finding]] = {}
    for f in findings:
        counts.setdefault(f.code, []).append(f)
    rows = sorted(counts.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    width = max((len(str(len(fs))) for _, fs in rows), default=1)
    code_w = max((len(c) for c, _ in rows), default=1)
    return "".join(f"{len(fs):>{width}}\t{code:<{code_w}}\t{fs[0].name}\n" for code, fs in rows)


def summary(findings: list[Finding], files: int = 0, servers: int = 0) -> str:
    """`2 errors, 1 warning, 0 info in 3 files (2 servers)`."""
    counts = {sev: sum(1 for f in findings if f.severity == sev) for sev in ("error", "warning", "info")}
    text = ", ".join(f"{n} {sev}{'s' if n != 1 and sev != 'info' else ''}" for sev, n in counts.items())
    return f"{text} in {files} file{'s' if files != 1 else ''} ({servers} server{'s' if servers != 1 else ''})"
