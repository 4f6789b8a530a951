"""Positions in a file: a line index (character offset -> line/column) and `Src`, a string
whose every character knows the file offset it was read from.

Every wrapper reads its file with `newline=""`, so offsets count a CRLF as two characters and
a patch on [start, end) changes exactly the characters a span names.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from servefit.core import Span


class LineIndex:
    """Character offset -> (line, column), both 1-based, for one file's text. A UTF-8 byte-order
    mark is counted in offsets (a patch keeps it) but not in line 1's columns, as editors show them."""

    __slots__ = ("file", "text", "starts", "bom")

    def __init__(self, text: str, file: str) -> None:
        self.file = file
        self.text = text
        self.bom = text.startswith("\ufeff")
        starts = [0]
        find = text.find
        i = find("\n")
        while i >= 0:
            starts.append(i + 1)
            i = find("\n", i + 1)
        self.starts = starts

    def pos(self, off: int) -> tuple[int, int]:
        line = max(bisect_right(self.starts, off) - 1, 0)
        col = off - self.starts[line] + 1
        if self.bom and line == 0 and off > 0:
            col -= 1
        return line + 1, col

    def line_of(self, off: int) -> int:
        return bisect_right(self.starts, off)

    def span(self, start: int, end: int) -> Span:
        if end < start:
            end = start
        line, col = self.pos(start)
        end_line, end_col = self.pos(end)
        return Span(self.file, line, col, end_line, end_col, start, end)


@dataclass
class Src:
    """Text to scan plus where each character sits in the file: `base + i` when the text is
    a verbatim slice of the file, else `offs[i]` (len(text) + 1 entries, the last one the
    end offset)."""

    text: str
    li: LineIndex
    base: int = 0
    offs: list[int] | None = None

    def off(self, i: int) -> int:
        if self.offs is None:
            return self.base + i
        if not self.offs:
            return self.base
        return self.offs[min(max(i, 0), len(self.offs) - 1)]

    def end_off(self, j: int) -> int:
        """File offset just after character j-1 (the exclusive end of a slice [i, j))."""
        if self.offs is None:
            return self.base + j
        if j <= 0:
            return self.off(0)
        return self.off(j - 1) + 1

    def span(self, i: int, j: int) -> Span:
        start = self.off(i)
        return self.li.span(start, max(start, self.end_off(j)) if j > i else start)

    def slice_offs(self, i: int, j: int) -> list[int] | None:
        """Per-character offsets of text[i:j], or None when they are contiguous."""
        if self.offs is None:
            return None
        part = [self.off(k) for k in range(i, j)]
        if part and part[-1] - part[0] == len(part) - 1:
            return None
        return part


def whole(text: str, file: str) -> Src:
    return Src(text, LineIndex(text, file))


def align(value: str, text: str, start: int, end: int) -> list[int]:
    """Offsets of `value`'s characters inside text[start:end] when the value was decoded from
    it (YAML quoting, folding, escapes): each character is matched to the next occurrence in
    the source; one that does not occur nearby (an escape's result) keeps the current place."""
    offs: list[int] = []
    j = start
    find = text.find
    for ch in value:
        k = find(ch, j, min(end, j + 48))
        if k < 0 and ch == "\n":
            k = find("\n", j, end)
        if k < 0:
            offs.append(min(j, max(end - 1, start)))
        else:
            offs.append(k)
            j = k + 1
    offs.append(j)
    return offs


def logical_lines(src: Src, escape: str = "\\", drop_comments: bool = True) -> list[Src]:
    """Instruction lines of a Dockerfile / systemd unit / llama-swap cmd: a line ending in the
    escape character continues on the next, whose comment lines (`#`) are dropped as Docker and
    systemd drop them. Each result maps its characters back to the file."""
    text = src.text
    out: list[Src] = []
    parts: list[tuple[int, int]] = []
    pos = 0
    n = len(text)
    while pos <= n:
        nl = text.find("\n", pos)
        end = n if nl < 0 else nl
        b = end - 1 if end > pos and text[end - 1] == "\r" else end
        line = text[pos:b]
        if parts and drop_comments and line.lstrip().startswith("#"):
            pass
        else:
            body = line.rstrip(" \t")
            if body.endswith(escape):
                parts.append((pos, pos + len(body) - 1))
            else:
                parts.append((pos, b))
                out.append(_join(src, parts))
                parts = []
        if nl < 0:
            break
        pos = nl + 1
    if parts:
        out.append(_join(src, parts))
    return [s for s in out if s.text.strip()]


def _join(src: Src, parts: list[tuple[int, int]]) -> Src:
    text = "".join(src.text[a:b] for a, b in parts)
    if len(parts) == 1 and src.offs is None:
        return Src(text, src.li, base=src.base + parts[0][0])
    offs = [src.off(k) for a, b in parts for k in range(a, b)]
    offs.append(src.end_off(parts[-1][1]))
    return Src(text, src.li, offs=offs)


def sub(src: Src, i: int, j: int | None = None) -> Src:
    """src.text[i:j] keeping the mapping."""
    j = len(src.text) if j is None else j
    if src.offs is None:
        return Src(src.text[i:j], src.li, base=src.base + i)
    return Src(src.text[i:j], src.li, offs=[src.off(k) for k in range(i, j)] + [src.end_off(j)])
