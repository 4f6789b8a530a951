"""A release the catalog does not hold, sized as the nearest catalogued release of its line.

Families ship point releases faster than any catalog follows (`Qwen3.8-27B` after Qwen3.6-27B,
`NVIDIA-Nemotron-3.5-Lightning-30B-A3B` after Nemotron-3-Nano-30B-A3B) and mostly keep the
architecture of the release before at the same size. A name whose versioned family word
(`qwen3.8`) and size (`27b`, `30b-a3b`: total and active) match no catalog entry is taken as the
newest catalogued release of the same line: the same family word, the same major version, an
older version than the name's, the same size, and no other family word the name lacks
(Devstral-Small-2 is not Mistral-Small-3's line). Never across a version of
data/derivatives.yaml `release_breaks` (where the catalog knows the family changed architecture,
Qwen3 -> Qwen3.5), never for a name that carries another architecture's word (`-VL-`), never
for a catalogued fine-tune, never for a release the catalog holds at other sizes (Llama 3.2 has
no 8B: `Llama-3.2-8B` stays unknown). models/names.py calls this only when nothing else explains the name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable

_LINE_WORD = re.compile(r"^([a-z]{3,})(\d{1,2}(?:\.\d{1,2})*)$")  # qwen3.8, nemotron3, llama3.1
_MAX_BETWEEN = 3  # words between the family word and the size: Nemotron-3.5-Lightning-30B-A3B

Version = tuple[int, ...]
Lines = dict[tuple[str, str], list[tuple[Version, int, tuple[str, ...], tuple[str, ...]]]]


def line_word(word: str) -> tuple[str, Version] | None:
    """(family root, version) of a versioned family word: `qwen3.8` -> ("qwen", (3, 8))."""
    m = _LINE_WORD.match(word)
    if not m:
        return None
    return m.group(1), tuple(int(x) for x in m.group(2).split("."))


def add_entry(lines: Lines, known: dict[str, set[Version]], entry: int, family: tuple[str, ...], size: str | None,
              rest: tuple[str, ...]) -> None:
    """Index one catalog name (its family words, size and the words after the size): every
    versioned word of its family, by (root, size), and in `known` the releases the catalog has at
    some size (a sizeless name such as `Qwen3.8-Flash-Next` says nothing of the line's sizes)."""
    if not size or not size[0].isdigit():
        return
    for k, w in enumerate(family):
        lw = line_word(w)
        if lw is None:
            continue
        known.setdefault(lw[0], set()).add(lw[1])
        row = (lw[1], entry, family[:k] + family[k + 1:], rest)
        bucket = lines.setdefault((lw[0], size), [])
        if row not in bucket:
            bucket.append(row)


def _segment(version: Version, breaks: Iterable[Version]) -> Version:
    """The last break at or below `version` (its major version when none): releases of one segment
    share an architecture."""
    below = [b for b in breaks if b[0] == version[0] and b <= version]
    return max(below) if below else version[:1]


def nearest_release(lines: Lines, known: dict[str, set[Version]], ws: list[str], size_at: Callable[[list[str], int], str | None],
                    loose: Collection[str], breaks: dict[str, list[Version]],
                    skip: Collection[int], ruled: dict[str, set[str]]) -> tuple[list[tuple[int, tuple[str, ...]]], str, str, int] | None:
    """(entries of the nearest catalogued release of the name's line, the name's family word, the
    size, the index after the size in `ws`), or None. `loose` are words a catalog name may carry
    that the reference need not (size classes such as `nano`, release words); `skip` are
    catalogued fine-tunes; `ruled` are, per family root, the words of data/derivatives.yaml sibling
    rules (`qwen2.5-math`): such a sub-line is the rule's to resolve, never stretched here."""
    have = set(ws)
    for s in range(len(ws)):
        size = size_at(ws, s)
        if not size:
            continue
        for k in range(max(0, s - 1 - _MAX_BETWEEN), s):
            lw = line_word(ws[k])
            rows = lines.get((lw[0], size)) if lw else None
            if not lw or not rows:
                continue
            root, version = lw
            if version in known.get(root, ()) or ruled.get(root, set()).intersection(ws[k + 1:s]):
                continue
            seg = _segment(version, breaks.get(root, ()))
            fits = [(cver, (entry, rest)) for cver, entry, others, rest in rows
                    if entry not in skip and cver[0] == version[0] and cver < version
                    and _segment(cver, breaks.get(root, ())) == seg
                    and all(o in have or o in loose or o.isdigit() for o in others)]
            if fits:
                top = max(v for v, _ in fits)
                return [e for v, e in fits if v == top], ws[k], size, s + 1 + size.count("-")
    return None
