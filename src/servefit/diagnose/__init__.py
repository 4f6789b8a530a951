"""diagnose: read engine logs and tracebacks, name the OOM's root cause (the four:
KV cache overflow, batch misconfiguration, fragmentation, model too large), quote the
evidence, and point at the setting to change.

    patterns.py    the log lines of torch, vLLM, llama.cpp, Ollama, TGI, SGLang and the kernel
    timestamps.py  every timestamp format, for uptime and time since start-up
    parse.py       lines -> failure events with the engine run's state at that moment
    classify.py    events -> root cause, timing, evidence, figures
    wording.py     root cause / timing / stage -> the words and summary the user reads
    fixes.py       root cause (+ the config's LaunchSite) -> fix lines, setting, tune command
    reader.py      streaming input (files, .gz, stdin) and progress on stderr
    collectors.py  what docker, compose, kubectl, CRI, journald and JSON loggers put around a line
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import IO, TYPE_CHECKING

from servefit.diagnose.model import Diagnosis

if TYPE_CHECKING:
    from servefit.core import LaunchSite

__all__ = ["Diagnosis", "diagnose_lines", "diagnose_path"]


def diagnose_lines(lines: Iterable[str], site: LaunchSite | None = None, source: str = "-") -> Diagnosis:
    """Diagnose a log given as lines (with or without their newlines)."""
    from servefit.diagnose import fixes
    from servefit.diagnose.classify import classify
    from servefit.diagnose.parse import Scanner

    scanner = Scanner()
    feed = scanner.feed
    for line in lines:
        feed(line.rstrip("\r\n"))
    diag = classify(scanner.result())
    diag.source = source
    fixes.apply(diag, site)
    return diag


def diagnose_path(path: str, site: LaunchSite | None = None, progress: bool | None = None,
                  stderr: IO[str] | None = None) -> Diagnosis:
    """Diagnose a log file ("-" for stdin), streaming it line by line. `progress=None` shows
    progress on stderr only when it is a terminal and the file is larger than ~50 MB."""
    import sys

    from servefit.diagnose import reader

    log = reader.open_log(path)
    try:
        show = reader.wants_progress(log, stderr) if progress is None else progress
        prog = reader.Progress(log, stderr or sys.stderr) if show else None
        return diagnose_lines(reader.lines(log, prog), site=site, source=log.name)
    finally:
        log.close()
        from servefit.termsafe import one_line

        for note in log.notes:
            print(f"servefit diagnose: {one_line(note)}", file=stderr or sys.stderr)
