"""Nothing from an input reaches a terminal raw: control characters (C0 but tab, DEL, C1) and
the Unicode bidirectional overrides are written as `\\uXXXX` escapes, so a file name, a value or
a log line cannot set the terminal title, clear the screen, hide text, add a link or start an
output line (`::set-output` in a CI log).

`one_line` is for a value placed inside a line (a newline is escaped too); `stream_safe` is
the net under every command's standard output (cli.main): it keeps line breaks (and CRLF), tabs
and servefit's own colour codes (SGR), and escapes everything else. In JSON output the escapes
are valid JSON escapes of the same characters."""

from __future__ import annotations

import re
from typing import IO, Any

_CTRL = "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_ONE_LINE = re.compile(f"[{_CTRL}\t\n]")
_STREAM = re.compile(f"(\x1b\\[[0-9;]{{0,16}}m)|(\r(?=\n))|([{_CTRL}])")


def _u(ch: str) -> str:
    return f"\\u{ord(ch):04x}"


def one_line(text: str) -> str:
    """`text` as one line: every control character (newline and tab included) escaped."""
    return _ONE_LINE.sub(lambda m: _u(m.group()), text) if _ONE_LINE.search(text) else text


def stream_safe(text: str) -> str:
    """Output text with line breaks, tabs and SGR colour codes kept, other controls escaped."""
    return _STREAM.sub(lambda m: m.group(1) or m.group(2) or _u(m.group(3)), text)


class SafeWriter:
    """A text stream that passes everything through stream_safe."""

    def __init__(self, inner: IO[str]) -> None:
        self._inner = inner

    def write(self, s: str) -> int:
        self._inner.write(stream_safe(s))
        return len(s)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
