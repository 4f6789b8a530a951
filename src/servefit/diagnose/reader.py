"""Reading logs line by line: files, gzip files, stdin, FIFOs and process substitution
(`servefit diagnose <(kubectl logs ...)`), never more than one line in memory (overlong lines
are cut at MAX_LINE), with a progress line on stderr for large inputs. Nothing is read twice and
nothing is seeked, so a pipe streams. A .gz file is decompressed with a bound: past
GZ_FREE_BYTES, reading stops once the output outgrows GZ_MAX_RATIO times the compressed bytes
read (a decompression bomb); the note says so and how to read it all (`zcat F | servefit
diagnose -`, where the user chose the stream)."""

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
GZ_FREE_BYTES = 32 << 20  # decompressed bytes always read
GZ_MAX_RATIO = 100  # past them, at most this many decompressed bytes per compressed byte (logs: 5-30)


class LogInput:
    """An opened log: binary stream, display name, size in bytes on disk (None if unknown)."""

    def __init__(self, name: str, stream: BinaryIO, size: int | None, raw: IO[bytes] | None = None) -> None:
        self.name = name
        self.stream = stream
        self.size = size
        self._raw = raw or stream  # where the byte position is read for progress
        self.gz = raw is not None and raw is not stream and size is not None  # a .gz file: bounded
        self.notes: list[str] = []  # what the reader could not do, for stderr

    def position(self) -> int | None:
        try:
            return self._raw.tell()
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        stdin = getattr(sys.stdin, "buffer", None)
        if self.stream is not stdin:
            self.stream.close()
        if self._raw is not self.stream and self._raw is not stdin:
            self._raw.close()


def open_log(path: str) -> LogInput:
    """Open a log for reading; unreadable input is a UsageError (the CLI exits 2). Pipes and
    FIFOs stream (peeked, never seeked); gzip data is recognised by its magic bytes."""
    if path == "-":
        raw: BinaryIO = sys.stdin.buffer
        name = "<stdin>"
    elif os.path.isdir(path):
        raise UsageError(f"{path}: is a directory, not a log file")
    else:
        name = path
        try:
            raw = open(path, "rb")  # noqa: SIM115 - closed by LogInput.close
        except OSError as exc:
            raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(raw.fileno())
        size = st.st_size if stat.S_ISREG(st.st_mode) else None
    except (OSError, ValueError, io.UnsupportedOperation):
        size = None
    peek = getattr(raw, "peek", None)
    try:
        magic = peek(2)[:2] if peek is not None else b""
    except OSError as exc:
        raise UsageError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if magic == b"\x1f\x8b":
        gz = gzip.GzipFile(fileobj=raw, mode="rb")
        return _check(LogInput(name, gz, size, raw))  # type: ignore[arg-type]
    return _check(LogInput(name, raw, size))


def _bomb(log: LogInput, out_bytes: int) -> bool:
    read = log.position() or 0
    if out_bytes <= GZ_MAX_RATIO * max(read, 1):
        return False
    log.notes.append(f"{log.name}: stopped after {out_bytes >> 20} MiB of decompressed text: it decompresses more "
                     f"than {GZ_MAX_RATIO}x (the bound on .gz input); `zcat {log.name} | servefit diagnose -` "
                     "reads it all")
    return True


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
    out_bytes = 0
    try:
        while True:
            raw = stream.readline(MAX_LINE)
            if not raw:
                break
            if log.gz:
                out_bytes += len(raw)
                if out_bytes > GZ_FREE_BYTES and not count & 255 and _bomb(log, out_bytes):
                    break
            if len(raw) >= MAX_LINE and not raw.endswith(b"\n"):
                while True:  # skip the rest of an overlong line
                    rest = stream.readline(MAX_LINE)
                    if log.gz:
                        out_bytes += len(rest)
                        if out_bytes > GZ_FREE_BYTES and _bomb(log, out_bytes):
                            return
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
