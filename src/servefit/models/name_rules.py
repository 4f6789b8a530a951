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
def _generic_words() -> frozenset[str]:
    return frozenset(str(w) for w in rules().get("generic_words") or ())


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
    return frozenset(k for k in _kind_words() for w in ws
                     if (k in w if len(k) >= 5 else w.startswith(k) and w[len(k):].replace(".", "").isdigit()
                         or w == k))


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
