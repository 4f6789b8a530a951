"""Reading logs line by line: files, gzip files and stdin, never more than one line in memory
(overlong lines are cut at MAX_LINE), with a progress line on stderr for large inputs."""

from __future__ import annotations

import gzip
import io
import os
import stat
import sys
import time
from collections.abc import Iterator
from typing import IO, BinaryIO

from servefit.core import UsageError

MAX_LINE = 1 << 20  # longer lines are cut here (the rest of the line is skipped)
PROGRESS_MIN_BYTES = 50 * 1000 * 1000  # show progress above ~50 MB, and only on a terminal
PROGRESS_EVERY = 0.25  # seconds between progress updates


class LogInput:
    """An opened log: binary stream, display name, size in bytes on disk (None if unknown)."""

    def __init__(self, name: str, stream: BinaryIO, size: int | None, raw: IO[bytes] | None = None) -> None:
        self.name = name
        self.stream = stream
        self.size = size
        self._raw = raw or stream  # where the byte position is read for progress

    def position(self) -> int | None:
        try:
            return self._raw.tell()
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        if self.stream is not getattr(sys.stdin, "buffer", None):
            self.stream.close()
            if self._raw is not self.stream:
                self._raw.close()


def open_log(path: str) -> LogInput:
    """Open a log for reading; unreadable input is a UsageError (the CLI exits 2)."""
    if path == "-":
        stream = sys.stdin.buffer
        try:
            st = os.fstat(stream.fileno())
            size = st.st_size if stat.S_ISREG(st.st_mode) else None
        except (OSError, ValueError, io.UnsupportedOperation):
            size = None
        return _check(LogInput("<stdin>", stream, size))
    if os.path.isdir(path):
        raise UsageError(f"{path}: is a directory, not a log file")
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed by LogInput.close
        size = os.fstat(raw.fileno()).st_size
        magic = raw.read(2)
        raw.seek(0)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if magic == b"\x1f\x8b":
        gz = gzip.GzipFile(fileobj=raw, mode="rb")
        return _check(LogInput(path, gz, size, raw))  # type: ignore[arg-type]
    return _check(LogInput(path, raw, size))


def _check(log: LogInput) -> LogInput:
    peek = getattr(log.stream, "peek", None)
    try:
        head = peek(8192)[:8192] if peek is not None else b""
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        log.close()
        raise UsageError(f"{log.name}: cannot read: {exc}") from None
    if b"\x00" in head:
        log.close()
        raise UsageError(f"{log.name}: binary data, not a text log")
    return log


class Progress:
    """`servefit diagnose: server.log 1.2 / 4.0 GB (30%)` on stderr, rewritten in place."""

    def __init__(self, log: LogInput, out: IO[str]) -> None:
        self.log, self.out = log, out
        self.last = 0.0
        self.shown = False

    def update(self) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_EVERY:
            return
        self.last = now
        pos, size = self.log.position(), self.log.size
        if pos is None or not size:
            return
        pct = min(100, pos * 100 // size)
        self.out.write(f"\rservefit diagnose: {self.log.name} {pos / 1e9:.2f} / {size / 1e9:.2f} GB ({pct}%)")
        self.out.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            self.out.write("\r\033[K")
            self.out.flush()


def wants_progress(log: LogInput, stderr: IO[str] | None = None) -> bool:
    err = stderr or sys.stderr
    isatty = getattr(err, "isatty", None)
    return bool(log.size and log.size > PROGRESS_MIN_BYTES and isatty is not None and isatty())


def lines(log: LogInput, progress: Progress | None = None) -> Iterator[str]:
    """Decoded lines without their newline; bytes that are not UTF-8 are replaced."""
    stream = log.stream
    count = 0
    try:
        while True:
            raw = stream.readline(MAX_LINE)
            if not raw:
                break
            if len(raw) >= MAX_LINE and not raw.endswith(b"\n"):
                while True:  # skip the rest of an overlong line
                    rest = stream.readline(MAX_LINE)
                    if not rest or rest.endswith(b"\n"):
                        break
            count += 1
            if progress is not None and not count & 4095:
                progress.update()
            yield raw.decode("utf-8", "replace").rstrip("\r\n")
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise UsageError(f"{log.name}: cannot read: {exc}") from None
    finally:
        if progress is not None:
            progress.done()
