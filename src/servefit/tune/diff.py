"""Unified diffs of tune's patches, with credentials masked in every displayed line (the file
written keeps them, of course)."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable

from servefit.redact import MASK, redact_text


def redact_line(line: str, secrets: set[str]) -> str:
    for s in sorted(secrets, key=len, reverse=True):
        if s in line:
            line = line.replace(s, MASK)
    return redact_text(line)


def display_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _range(start: int, length: int) -> str:
    """A hunk range as diff writes it: `start,length`, `start` for one line, `start-1,0` for none."""
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"


Op = tuple[str, int, int, int, int]


def _opcodes(a: list[str], b: list[str]) -> list[Op]:
    """difflib's opcodes of the lines between the common head and tail only: a patch edits a few
    places, and a file of repeated blocks (one per model) otherwise lets the matcher align a block
    with its neighbour and show the whole block removed and added."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    mid = difflib.SequenceMatcher(None, a[head:len(a) - tail], b[head:len(b) - tail], autojunk=False).get_opcodes()
    ops: list[Op] = [("equal", 0, head, 0, head)] if head else []
    ops += [(tag, i1 + head, i2 + head, j1 + head, j2 + head) for tag, i1, i2, j1, j2 in mid]
    if tail:
        ops.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    return ops


def _grouped(ops: list[Op], n: int) -> list[list[Op]]:
    """Hunks with n lines of context, as difflib.SequenceMatcher.get_grouped_opcodes makes them."""
    if not any(op[0] != "equal" for op in ops):
        return []
    ops = list(ops)
    if ops[0][0] == "equal":
        tag, i1, i2, j1, j2 = ops[0]
        ops[0] = (tag, max(i1, i2 - n), i2, max(j1, j2 - n), j2)
    if ops[-1][0] == "equal":
        tag, i1, i2, j1, j2 = ops[-1]
        ops[-1] = (tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n))
    groups: list[list[Op]] = []
    group: list[Op] = []
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal" and i2 - i1 > 2 * n:  # a long unchanged stretch ends one hunk and starts the next
            group.append((tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n)))
            groups.append(group)
            group = []
            i1, j1 = max(i1, i2 - n), max(j1, j2 - n)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        groups.append(group)
    return groups


def _unified_lines(a: list[str], b: list[str], fromfile: str, tofile: str, n: int) -> Iterable[str]:
    """difflib.unified_diff's output, matched without its "popular line" heuristic: in a file of over
    200 lines a line that repeats (`-fa on` in every llama-swap model) would otherwise be junk, and
    an unchanged line would show as removed and added again."""
    groups = _grouped(_opcodes(a, b), n)
    if not groups:
        return
    yield f"--- {fromfile}\n"
    yield f"+++ {tofile}\n"
    for group in groups:
        first, last = group[0], group[-1]
        yield f"@@ -{_range(first[1], last[2] - first[1])} +{_range(first[3], last[4] - first[3])} @@\n"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                yield from (" " + line for line in a[i1:i2])
                continue
            yield from ("-" + line for line in a[i1:i2])
            yield from ("+" + line for line in b[j1:j2])


def unified(path: str, old: str, new: str, secrets: set[str] | None = None) -> str:
    """A unified diff (git style a/ b/ names) of one file; empty when nothing changes. Context
    lines that would show a credential are left out by narrowing the context (3 lines, else 2,
    then 1), so the masked diff still applies; only a credential on a changed line itself, or
    one no narrower context avoids, is shown masked."""
    if old == new:
        return ""
    name = display_path(path)
    a = old.splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    best: list[str] = []
    for n in (3, 2, 1):
        out: list[str] = []
        clean = True
        for line in _unified_lines(a, b, f"a/{name.lstrip('/')}", f"b/{name.lstrip('/')}", n):
            if line.startswith(("---", "+++", "@@")):
                out.append(line if line.endswith("\n") else line + "\n")
                continue
            shown = redact_line(line, secrets or set())
            if shown != line and line.startswith(" "):
                clean = False
            if not shown.endswith("\n"):
                shown += "\n\\ No newline at end of file\n"
            out.append(shown)
        if n == 3:
            best = out
        if clean:
            return "".join(out)
    return "".join(best)
