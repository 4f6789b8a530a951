"""Suggestions for a model name the catalog cannot size: catalogued names of the same family and,
where the name has a size, that size; none otherwise (a suggestion of another size or another
architecture is noise). The index (models/names.py) holds the families by root word; difflib only
ranks the short list, since a lint of many files with unknown models asks this a lot."""

from __future__ import annotations

import re
from collections.abc import Collection

from servefit.models import name_assume
from servefit.models.name_index import Index, _root
from servefit.models.name_rules import _other_words, kinds  # data/derivatives.yaml's word rules
from servefit.models.name_words import size_at


def _family_pool(roots: list[str], other: Collection[str], idx: Index, have: frozenset[str]) -> dict[int, None]:
    """Entries of the families `roots` whose names carry none of the words in `other`, nor a kind
    (an embedding model, a guard) the name's own kinds `have` lack."""
    pool: dict[int, None] = {}
    kind = idx.kinds
    for r in roots:
        pool.update(dict.fromkeys(i for i in idx.by_root[r] if not idx.words[i].intersection(other)
                                  and (i not in kind or kind[i] <= have)))
    return pool


def family_sizes(key: tuple[str, ...], idx: Index) -> list[str]:
    """The sizes the catalog has for the name's own family (catalogued names that start with the
    name's family words: `llama3.1` -> 8b, 70b, 405b), smallest first, for a name whose own size it
    lacks: said instead of suggestions of another size."""
    roots = [r for r in (_root(w) for w in key) if r in idx.by_root]
    lead = "-".join(w for w in key if _root(w) in roots)
    pool = _family_pool(roots, _other_words() - set(key), idx, kinds(key))
    sizes = {sz for i in pool if (sz := idx.sizes.get(i)) and sz[0].isdigit() and idx.keys[i].startswith(lead)}

    def params(sz: str) -> float:
        m = re.match(r"(\d+(?:\.\d+)?)(?:x(\d+(?:\.\d+)?))?([bm])", sz)
        if not m:
            return 0.0
        n = float(m[1]) * float(m[2] or 1)
        return n / 1000 if m[3] == "m" else n

    return sorted(sizes, key=lambda sz: (params(sz), sz))


def _by_root_size(idx: Index) -> dict[str, dict[str, list[int]]]:
    """Each family root's entries by size (`=8b`), by MoE total (`~30b`) and by rounded parameter count
    (`#24`, a release named by its size class): built once per index, so that a name's suggestions look at
    the entries of its size only."""
    got = idx.__dict__.get("_by_root_size")
    if got is None or got[0] is not idx.by_root:
        table: dict[str, dict[str, list[int]]] = {}
        for r, entries in idx.by_root.items():
            t = table[r] = {}
            for i in entries:
                if sz := idx.sizes.get(i):
                    t.setdefault(f"={sz}", []).append(i)
                    t.setdefault(f"~{sz.split('-')[0]}", []).append(i)
                if i in idx.billions:
                    t.setdefault(f"#{idx.billions[i]}", []).append(i)
        got = idx.__dict__["_by_root_size"] = (idx.by_root, table)
    return got[1]  # type: ignore[no-any-return]


def nearest(key: tuple[str, ...], n: int, idx: Index) -> list[int]:
    """Entries of the name's family (a catalogued family root) and, where the name has a size, of
    that size (or MoE total; a release named by its size class, Devstral-Small-2505, by its parameter
    count), ranked by difflib on that short list. For a name of no catalogued
    family, the catalogued models of its version and MoE size (`Qwopus3-30B-A3B`: Qwen3 and
    Nemotron 3 Nano, models/name_assume.py pair_pool), each family's first before the rest. Empty
    when no catalogued family is in the name or the family has no entry at that size: a suggestion
    of another size or another architecture (`-VL-`, `llava`) the name does not carry is noise."""
    roots = [r for r in (_root(w) for w in key) if r in idx.by_root]
    if not roots:
        by_pair = name_assume.pair_pool(idx, list(key), _other_words(), _root, kinds(key))[2]
        first: dict[str, int] = {}
        for i in sorted(by_pair):
            first.setdefault(by_pair[i], i)
        heads = sorted(first.values())
        return (heads + [i for i in sorted(by_pair) if i not in heads])[:n]
    ws = list(key)
    sizes = {sz for i in range(len(ws)) if (sz := size_at(ws, i))}
    sizes |= {s.split("-")[0] for s in sizes}
    have = set(ws)
    other = _other_words() - have
    own_kinds = kinds(ws)

    billions = {round(float(s[:-1])) for s in sizes if re.fullmatch(r"\d+(?:\.\d+)?b", s)}

    def same_size(i: int) -> bool:  # or a release named by its size class of that many parameters
        sz = idx.sizes.get(i)
        return bool(sz and (sz in sizes or sz.split("-")[0] in sizes) or idx.billions.get(i, 0) in billions)

    lead = tuple(w for w in ws if _root(w) in roots)

    def cheap(i: int) -> tuple[int, int, int, int]:  # the family's own releases, base releases, shared words
        return (int(not idx.keys[i].startswith(lead)), int(i in idx.finetunes), -len(have & idx.words[i]), i)

    # the family's entries of that size (the size first: it leaves few), ranked (`cheap` ends with the entry,
    # so the order they are found in does not matter)
    if sizes and 0 not in billions:
        table = _by_root_size(idx)
        look = [f"={s}" for s in sizes] + [f"~{s}" for s in sizes] + [f"#{b}" for b in billions]
        family = {i for r in roots for k in look for i in table[r].get(k, ())}
    else:  # without a size (or at 0.5B, which every entry without a parameter count matches), the whole family
        family = {i for r in roots for i in idx.by_root[r] if not sizes or same_size(i)}
    kind = idx.kinds
    short = sorted((i for i in family if not idx.words[i].intersection(other)
                    and (i not in kind or kind[i] <= own_kinds)), key=cheap)[:n + 2]
    if not short:
        return []
    ranks = [cheap(i)[:2] for i in short]
    if len(set(ranks)) == len(ranks):  # no two share a rank: difflib would not change the order
        return short[:n]
    text = "-".join(ws)
    import difflib  # only for a name the catalog does not know

    def ratio(i: int) -> float:
        return difflib.SequenceMatcher(None, text, idx.keys[i]).ratio()

    return sorted(short, key=lambda i: (cheap(i)[:2], -ratio(i), i))[:n]
