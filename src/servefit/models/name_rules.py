"""The tables of data/derivatives.yaml that name resolution asks for every name (sibling families, words of
other architectures and kinds, generic words, release breaks, repackers), read once per process and kept
in the shapes the lookups want (rules by their first word)."""

from __future__ import annotations

from collections.abc import Collection
from functools import lru_cache
from typing import Any

from servefit import data


@lru_cache(maxsize=1)
def rules() -> dict[str, Any]:
    return data.load("derivatives.yaml")  # type: ignore[no-any-return]


@lru_cache(maxsize=1)
def _sibling_rules() -> list[tuple[list[str], list[str], frozenset[str], str, int]]:
    """(from words, to words, sizes, why, context) of every same-architecture rule."""
    return [([str(w) for w in r["from"]], [str(w) for w in r["to"]], frozenset(str(x) for x in r["sizes"]),
             str(r["why"]), int(r.get("context") or 0)) for r in rules().get("same_architecture") or ()]


@lru_cache(maxsize=1)
def _rules_by_first_word() -> dict[str, list[int]]:
    """Sibling rules by the first word of their family (a name is checked against the few that can apply)."""
    out: dict[str, list[int]] = {}
    for k, r in enumerate(_sibling_rules()):
        out.setdefault(r[0][0], []).append(k)
    return out


@lru_cache(maxsize=1)
def generic_words() -> frozenset[str]:
    """Words of data/derivatives.yaml `generic_words`: no family's (coder, instruct, agent)."""
    return frozenset(str(w) for w in rules().get("generic_words") or ())


@lru_cache(maxsize=1)
def _ruled_by_first_word() -> dict[str, list[tuple[str, ...]]]:
    """The families sibling rules govern, by their first word (a name is checked against those it has)."""
    out: dict[str, list[tuple[str, ...]]] = {}
    for r in _ruled_families():
        out.setdefault(r[0], []).append(r)
    return out


def _ruled_with(ws: list[str]) -> list[tuple[str, ...]]:
    """The ruled families whose first word the name has (for `any` over them: their order does not matter)."""
    first = _ruled_by_first_word()
    return [r for w in set(ws) for r in first.get(w, ())]


@lru_cache(maxsize=1)
def _ruled_families() -> frozenset[tuple[str, ...]]:
    return frozenset(tuple(r[0]) for r in _sibling_rules())


@lru_cache(maxsize=1)
def _other_words() -> frozenset[str]:
    return frozenset(str(w) for w in rules().get("other_architecture") or ())


@lru_cache(maxsize=1)
def _kind_words() -> tuple[str, ...]:
    return tuple(str(w) for w in rules().get("other_kind") or ())


def kinds(ws: Collection[str]) -> frozenset[str]:
    """The words of data/derivatives.yaml `other_kind` that the name's words carry (`qwen3guard` ->
    guard, `embeddings` -> embed)."""
    found: frozenset[str] = frozenset()
    for w in ws:
        found |= _word_kinds(w)
    return found


_WORD_KINDS: dict[str, frozenset[str]] = {}  # word -> its kinds: the same words come up for every name


def _word_kinds(w: str) -> frozenset[str]:
    got = _WORD_KINDS.get(w)
    if got is None:
        if len(_WORD_KINDS) > 65536:
            _WORD_KINDS.clear()
        got = _WORD_KINDS[w] = frozenset(
            k for k in _kind_words()
            if (k in w if len(k) >= 5 else w.startswith(k) and w[len(k):].replace(".", "").isdigit() or w == k))
    return got


@lru_cache(maxsize=1)
def _breaks() -> dict[str, list[tuple[int, ...]]]:
    table = rules().get("release_breaks") or {}
    return {str(k): [tuple(int(x) for x in str(v).split(".")) for v in vs] for k, vs in table.items()}


@lru_cache(maxsize=1)
def _repackers() -> frozenset[str]:
    return frozenset(str(o).lower() for o in rules().get("repackers") or ())


def repacker(org: str) -> bool:
    """Whether `org` publishes quantized or converted copies of other checkpoints."""
    return org.lower() in _repackers()
