"""Command lines split the way a Windows program splits them: llama-swap on Windows splits a
model's `cmd` with `shlex.Windows` (internal/config/commands.go, SanitizeCommand), so
`C:\\llama\\llama-server.exe -m F:\\models\\x.gguf` keeps its backslashes; the POSIX rules
would read them as escapes and lose the program's name.

Rules (the Microsoft C runtime's): whitespace separates words outside double quotes; `"`
toggles quoting; backslashes are literal except before `"`, where 2n of them give n and the
quote still toggles, 2n+1 give n and a literal `"`. A single quote is an ordinary character."""

from __future__ import annotations

import re

from servefit.sources.text import Src
from servefit.sources.words import Piece, Word

RUN = re.compile(r'[^\s"\\]+')
# `C:\...`, `\\server\share`, or a first word with a backslash that names an .exe
WINDOWS_CMD = re.compile(r'\s*"?(?:[A-Za-z]:\\|\\\\|[^\s"]*\\[^\s"]*\.exe(?:\s|"|$))', re.I)


def is_windows_command(text: str) -> bool:
    """Whether a command line starts with a Windows path (then it runs on Windows)."""
    return WINDOWS_CMD.match(text) is not None


def split_windows(src: Src) -> list[Word]:
    t = src.text
    n = len(t)
    words: list[Word] = []
    cur: list[Piece] | None = None
    quoted = False

    def lit(a: int, b: int, text: str | None = None) -> None:
        nonlocal cur
        if cur is None:
            cur = []
        if text is None:
            cur.append(Piece(t[a:b], src.off(a), src.end_off(b), None, 0, src.slice_offs(a, b), False, quoted))
        elif text:
            cur.append(Piece(text, src.off(a), src.end_off(b), None, 0, [src.off(a)] * len(text), False, quoted))

    i = 0
    while i < n:
        c = t[i]
        if c.isspace() and not quoted:
            if cur:
                words.append(Word(cur, src.li))
            cur = None
            i += 1
        elif c == '"':
            quoted = not quoted
            i += 1
        elif c == "\\":
            j = i
            while j < n and t[j] == "\\":
                j += 1
            if j < n and t[j] == '"':
                k = j - i
                lit(i, j, "\\" * (k // 2))
                if k % 2:  # an escaped quote: literal
                    lit(j, j + 1)
                    j += 1
                i = j
            else:
                lit(i, j)
                i = j
        else:
            m = RUN.match(t, i)
            j = m.end() if m else i + 1
            lit(i, j)
            i = j
    if cur:
        words.append(Word(cur, src.li))
    return words
