"""Reading one file as text, or saying in one line why not, in bounded time and memory.

A file is not read when it is not a regular file (a FIFO, a device: opening one could block
forever), is a symlink that loops or points nowhere, is larger than the size cap, cannot be
opened, looks binary, or is text in an encoding other than UTF-8. The encoding is named by a
small heuristic, no dependency: a byte-order mark (UTF-16/32), NUL bytes in every other place
(UTF-16 without a BOM), magic numbers of common binary formats, else the first byte that is not
UTF-8 and whether the text reads as Windows-1252 or only as Latin-1. A UTF-8 BOM is kept in the
text (offsets count it; columns do not, see text.LineIndex) and so are CRLF line ends.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

BOMS = ((b"\xff\xfe\x00\x00", "UTF-32 little-endian"), (b"\x00\x00\xfe\xff", "UTF-32 big-endian"),
        (b"\xff\xfe", "UTF-16 little-endian"), (b"\xfe\xff", "UTF-16 big-endian"))
MAGIC = ((b"GGUF", "a GGUF model file"), (b"\x7fELF", "an ELF executable"), (b"\x89PNG", "a PNG image"),
         (b"PK\x03\x04", "a zip archive"), (b"\x1f\x8b", "gzip-compressed data"), (b"%PDF", "a PDF document"),
         (b"\x93NUMPY", "a NumPy array"), (b"\x80\x02", "a Python pickle"), (b"\x80\x04", "a Python pickle"))
SNIFF = 8192


@dataclass
class Problem:
    """Why a file could not be read as text, and where in it the problem was found."""

    message: str
    offset: int = 0  # character offset into the decodable prefix where it was found
    line: int = 1
    col: int = 1
    latin1: str | None = None  # a not-UTF-8 file's text read as Latin-1 (to look for engine names)


def read_text(path: str, limit: int) -> tuple[str | None, Problem | None]:
    """(text, None) or (None, why not)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        if os.path.islink(path):
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            what = "loops" if exc.errno == errno.ELOOP else "points nowhere"
            return None, Problem(f"symlink to {target} {what}; skipped")
        return None, Problem(f"cannot be read ({exc.strerror or exc}); skipped")
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a directory" if stat.S_ISDIR(st.st_mode) else \
            "a device or socket"
        return None, Problem(f"{kind}, not a regular file; skipped")
    if st.st_size > limit:
        return None, Problem(f"{st.st_size:,} bytes, over the {limit >> 20} MiB servefit reads; skipped")
    from servefit.safe_io import open_regular

    try:
        with open_regular(path) as fh:  # O_NONBLOCK + fstat: a file swapped for a FIFO meanwhile never blocks
            raw = fh.read(limit + 1)
    except OSError as exc:
        return None, Problem(f"cannot be read ({exc.strerror or exc}); skipped")
    if len(raw) > limit:
        return None, Problem(f"over the {limit >> 20} MiB servefit reads; skipped")
    return decode(raw)


def decode(raw: bytes) -> tuple[str | None, Problem | None]:
    for bom, name in BOMS:
        if raw.startswith(bom):
            return None, Problem(f"{name} text (byte-order mark); servefit reads UTF-8 only: save it as UTF-8")
    head = raw[:SNIFF]
    if b"\0" in head:
        for magic, name in MAGIC:
            if head.startswith(magic):
                return None, Problem(f"binary file ({name}); skipped")
        even, odd = head[0::2], head[1::2]
        if len(head) >= 4 and (odd.count(0) > 0.9 * len(odd) or even.count(0) > 0.9 * len(even)):
            return None, Problem("looks like UTF-16 text without a byte-order mark; servefit reads UTF-8 only: "
                                 "save it as UTF-8")
        return None, Problem("binary file; skipped")
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, _not_utf8(raw, exc.start)


def _not_utf8(raw: bytes, bad: int) -> Problem:
    prefix = raw[:bad].decode("utf-8", errors="replace")
    line = prefix.count("\n") + 1
    col = len(prefix) - (prefix.rfind("\n") + 1) + 1
    high = sum(1 for b in raw[:SNIFF] if b >= 0x80)
    if high > 0.3 * min(len(raw), SNIFF):
        guess = "binary, or text in an unknown encoding"
    else:
        try:
            raw.decode("cp1252")
            guess = "looks like Latin-1 / Windows-1252"
        except UnicodeDecodeError:
            guess = "looks like Latin-1 (ISO-8859-1)"
    return Problem(f"not UTF-8 ({guess}): byte 0x{raw[bad]:02x} at line {line}, column {col}; skipped. "
                   "Save the file as UTF-8 (iconv -f latin1 -t utf-8)", offset=len(prefix), line=line, col=col,
                   latin1=raw.decode("latin-1"))
