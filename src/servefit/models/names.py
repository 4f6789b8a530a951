"""Derivative names -> their catalogued base, and "did you mean" suggestions.

A fine-tune, repack, GGUF or local folder usually carries its base's family and size in its
name (`NousResearch/Hermes-3-Llama-3.1-8B`, `/models/Qwen2-7B-Instruct`,
`Qwen3-30B-A3B-UD-Q4_K_XL.gguf`). Names are cut into words (models/name_words.py) with the family and its version
joined (`llama3.1`, `qwen2.5`) and a size key (`8b`, `30b-a3b`, `8x7b`, `mini`). A name
resolves when a catalogued family sits right before a size the catalog has for it, or a
versioned family does with up to three fine-tune words between (`Llama-3-Open-Ko-8B`), or a
sibling-family rule of data/derivatives.yaml applies (`Qwen2.5-Coder-7B` is Qwen2.5-7B); the
reading that explains more of the name's family words wins. Never another size of the family,
never a name that carries another architecture's word (`-VL-`, `eagle3`). A size before the family
word is models/name_assume.py's; suggestions for unknown names, models/name_suggest.py's; the
catalog index they all read, models/name_index.py's.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from functools import lru_cache

from servefit.models import name_assume, name_dates, release_lines
from servefit.models.name_index import Index, _root
from servefit.models.name_rules import (  # data/derivatives.yaml's tables
    _breaks,
    _other_words,
    _ruled_families,
    _ruled_with,
    _rules_by_first_word,
    _sibling_rules,
    generic_words,
    kinds,
)
from servefit.models.name_words import (
    SIZE_WORDS,
    STOP_WORDS,
    size_at,
    split_ref,
    words,
)


@dataclass(frozen=True)
class Derived:
    """The catalogued base a derivative name was matched to, the words the match rests on, and the reason
    shown to the user."""

    entry: int
    base: str  # the words the match was made on
    why: str
    context: int = 0  # the family's own max_position_embeddings, where a rule says
    guess: bool = False  # another release of the line stands in for it (_nearest_release)


def _blocked(ws: list[str], entry_words: set[str]) -> bool:
    other = _other_words()
    return any(w in other and w not in entry_words for w in ws)


def _spells_ruled(ws: list[str]) -> bool:
    """The name spells a family a sibling rule governs (data/derivatives.yaml)."""
    return any(tuple(ws[p:p + len(r)]) == r for r in _ruled_with(ws) for p in range(len(ws)))


def _other_family(ws: list[str], entry_words: set[str]) -> bool:
    """The name spells a family a sibling rule maps elsewhere (`DeepSeek-R1-Distill-Qwen` is a Qwen,
    data/derivatives.yaml) that the entry is not: without a size the rule does not match, and the
    words it shares with the entry (deepseek-r1, the teacher) do not make it that model."""
    return any(not set(r) <= entry_words and any(tuple(ws[p:p + len(r)]) == r for p in range(len(ws)))
               for r in _ruled_with(ws))

def _pick(cands: list[tuple[int, tuple[str, ...]]], ws: list[str], finetunes: Collection[int] = ()) -> int:
    """The candidate whose remaining words agree most with the name's (Instruct-2507 over the
    base release, v0.1 over v0.3), a base release before a catalogued fine-tune of it (a
    `-Llama-3-8B-sft` is not DeepMount00's Llama-3-8b-Ita unless its name says `ita`), then the
    catalog's first."""
    have = set(ws)
    have_tuned, plain = _tuned(have), have - STOP_WORDS
    best: tuple[tuple[int, int, int, int], int] | None = None
    for i, rest in cands:  # the first of the lowest (overlap, fine-tune, variant, entry)
        words_, tuned = _rest_words(rest)
        overlap = len(words_ & plain)
        score = (-overlap, int(i in finetunes and not overlap), len(tuned ^ have_tuned), i)
        if best is None or score < best[0]:
            best = (score, i)
    assert best is not None
    return best[1]


def _tuned(ws: Collection[str]) -> frozenset[str]:
    """The release words: chat, it and instruct are the same kind of release, pt is base."""
    return frozenset("instruct" if w in ("chat", "it") else "base" if w == "pt" else w for w in ws if w in STOP_WORDS)


_RESTS: dict[tuple[str, ...], tuple[frozenset[str], frozenset[str]]] = {}


def _rest_words(rest: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str]]:
    """(words, release words) of a catalog name's words after its size (the same few for every name)."""
    got = _RESTS.get(rest)
    if got is None:
        if len(_RESTS) > 65536:
            _RESTS.clear()
        words_ = frozenset(rest)
        got = _RESTS[rest] = (words_, _tuned(words_))
    return got


def _match(idx: Index, ws: list[str], at: list[str | None] | None = None) -> tuple[int, int, int, str] | None:
    """(entry, family start, size end, size) of the first catalogued family + size in `ws` (`at`: the size
    key at each word, where the caller has them)."""
    if at is None:
        at = _sizes(ws)
    sizes = [sz or (ws[s] if s and ws[s] in SIZE_WORDS else None) for s, sz in enumerate(at)]
    # a number size before a word one: `mistral-small-24b` is Mistral-Small at 24B, not the entry `small` names
    for s, size in sorted(enumerate(sizes), key=lambda p: bool(p[1]) and p[1] in SIZE_WORDS):
        if not size:
            continue
        end = s + 1 + size.count("-")
        for j in range(max(0, s - idx.longest), s):  # longest family first
            fam = tuple(ws[j:s])
            cands = idx.by_key.get((fam, size))
            if cands is None and "-" not in size:
                totals = idx.by_total.get((fam, size))
                if totals and len({t[2] for t in totals}) == 1:  # one MoE of that total size
                    cands = [(t[0], t[1]) for t in totals]
            if cands and size in SIZE_WORDS:  # gte-large-en-v1.5 is not gte-large: a word size keeps its release
                cands = [c for c in cands if all(w in c[1] for w in ws[end:] if _RELEASE.match(w))]
            if cands:
                return _pick(cands, ws[end:], idx.finetunes), j, end, size
    if any(sizes):
        return None
    for j in range(len(ws)):  # sizeless entries (phi-4, DeepSeek-V3) only when the name has no size
        for k in range(len(ws), j, -1):
            cands = [c for c in idx.by_key.get((tuple(ws[j:k]), None)) or () if _same_release(c[1], ws[k:])]
            if cands:
                return _pick(cands, ws[k:], idx.finetunes), j, k, ""
    return None


_RELEASE = re.compile(r"^v\d[\d.]*$")
_VERSION_WORD = re.compile(r"v?\d[\d.]*")


def _same_release(entry_rest: tuple[str, ...], rest: list[str]) -> bool:
    """Without a size, only the release itself: the entry's words after its family are in the name
    (bge-reranker-base is not bge-reranker-v2-m3) and the name's version words are the entry's
    (snowflake-arctic-embed-l-v2.0 is not -l)."""
    have = set(rest)
    return (all(w in have or w in STOP_WORDS or w.isdigit() for w in entry_rest)
            and all(w in entry_rest for w in rest if _RELEASE.match(w)))


_MAX_BETWEEN = 3


def _between(idx: Index, ws: list[str], at: list[str | None]) -> tuple[int, int, int, str, list[str]] | None:
    """A versioned family, up to three other words, then a size the family has:
    `Llama-3-Open-Ko-8B`, `qwen2.5-coder-abliterate:7b`. Words a sibling rule governs
    (`qwen2.5-math`) are left to that rule. `at`: the size key at each word."""
    ruled = _ruled_families()
    for s, size in enumerate(at):
        if not size:
            continue
        end = s + 1 + size.count("-")
        for k in range(max(1, s - _MAX_BETWEEN), s):  # family ends at k, the words k..s are between
            mid = ws[k:s]
            if any(at[x] or w in SIZE_WORDS for x, w in enumerate(mid, k)):
                continue
            for j in range(max(0, k - idx.longest), k):
                fam = tuple(ws[j:k])
                cands = idx.by_key.get((fam, size))
                if (not cands or not any(c.isdigit() for w in fam for c in w) or fam + tuple(mid) in ruled
                        or fam + tuple(mid[:1]) in ruled):
                    continue
                return _pick(cands, ws[end:], idx.finetunes), j, end, size, mid
    return None


def _by_rule(idx: Index, ws: list[str]) -> tuple[tuple[int, int, int, str], str, str, int, int] | None:
    """(match, shown, why, context, rule words) of the first sibling rule that names a catalogued base."""
    table, first = _sibling_rules(), _rules_by_first_word()
    for k in sorted({k for w in set(ws) for k in first.get(w, ())}):  # table order
        src, dst, sizes, rule_why, rule_context = table[k]
        for p in range(len(ws) - len(src) + 1):
            if ws[p:p + len(src)] != src:
                continue
            for b in range(_MAX_BETWEEN + 1):  # qwen2.5-coder-abliterate:7b: words before the size
                at = p + len(src) + b
                size = size_at(ws, at)
                if size is None:
                    if at >= len(ws) or ws[at] in SIZE_WORDS:
                        break
                    continue
                if size not in sizes:
                    break
                cand = _match(idx, ws[:p] + dst + ws[at:])
                if cand is not None:
                    mid = ws[p + len(src):at]
                    why = f"{rule_why}, per servefit's table of sibling families" + (
                        f"; '{'-'.join(mid)}' in the name is taken as a fine-tune of it" if mid else "")
                    return cand, "-".join(src + [ws[at]]), why, rule_context, len(src)
                break
    return None


def _family_len(found: tuple[int, int, int, str]) -> int:
    _, j, end, size = found
    return end - j - (1 + size.count("-") if size else 0)


def derive(ref: str, idx: Index) -> Derived | None:
    """The catalogued base a derivative name stands for, with the reason, or None. Of a direct
    match (`...-Qwen-7B`), a family with fine-tune words before its size, and a sibling rule
    (`DeepSeek-R1-Distill-Qwen-7B`), the one that explains more of the name's family words wins;
    on a tie the catalogued family does."""
    _, base, _ = split_ref(ref)
    ws = words(base)
    if not ws:
        return None
    found = _dated(ws, idx) or _derive(ws, idx) or _unglued(ws, idx)
    if found is None and len(ws[0]) >= 8:
        for org in _orgs_starting(idx, ws[0]):  # QwenQwen2.5-7B: a download tool dropped the /
            rest = ws[0][len(org):]
            if ws[0].startswith(org) and len(rest) >= 3 and _root(rest) in idx.by_root:
                found = _derive([rest, *ws[1:]], idx)
                if found is not None:
                    why = f"{found.why}; the name starts with the organization '{org}' written without a separator"
                    return Derived(found.entry, found.base, why, found.context, found.guess)
                break
    if found is None and not _spells_ruled(ws):  # deepthought-8b-llama: only where the catalog leaves one layout
        generic = generic_words()
        have = kinds(ws)
        hit = (name_assume.assume(idx, ws, _other_words(), generic, _root, have)
               or name_assume.pair(idx, ws, _other_words(), _root, have))
        if hit is not None:
            found = Derived(entry=hit[0], base=hit[1], why=hit[2], guess=True)
    return found



def _orgs_starting(idx: Index, word: str) -> list[str]:
    """The index's organization words that `word` may start with, longest first: sorted once per index
    and kept by their first four letters (build_index keeps words of four letters or more), not sorted
    and scanned per name."""
    got = idx.__dict__.get("_orgs_sorted")
    if got is None or got[0] is not idx.org_words:
        ordered = sorted(idx.org_words, key=len, reverse=True)
        by_start: dict[str, list[str]] = {}
        for org in ordered:
            by_start.setdefault(org[:4], []).append(org)
        short = any(len(org) < 4 for org in ordered)  # such a word: every name is checked against the whole list
        got = idx.__dict__["_orgs_sorted"] = (idx.org_words, ordered, None if short else by_start)
    return got[1] if got[2] is None else got[2].get(word[:4], [])


def _dated(ws: list[str], idx: Index) -> Derived | None:
    """A catalogued name with a release date added (`DeepSeek-V4-Flash-0731`): models/name_dates.py."""
    hit = name_dates.dated(ws, idx.keys, idx.names)
    return Derived(entry=hit[0], base=hit[1], why=hit[2]) if hit else None

_GLUED = re.compile(r"^([a-z]{3,})(\d)(\d)$")


def _unglued(ws: list[str], idx: Index) -> Derived | None:
    """A family version written without its dot (`qwen36-35b`, `llama31-8b`) read as the catalogued
    release it spells (qwen3.6), when the catalog has that release and the name matched nothing as
    written."""
    out, read = [], []
    for w in ws:
        m = _GLUED.match(w)
        word = f"{m.group(1)}{m.group(2)}.{m.group(3)}" if m else ""
        if m and ((int(m.group(2)), int(m.group(3))) in idx.releases.get(m.group(1), ())
                  or any(word in idx.words[i] for i in idx.by_root.get(m.group(1), ()))):
            out.append(word)
            read.append(f"'{w}' as {out[-1]}")
        else:
            out.append(w)
    if not read:
        return None
    found = _derive(out, idx)
    if found is None:
        return None
    return Derived(found.entry, found.base, f"{found.why}; the name writes the version without its dot, read "
                   + ", ".join(read), found.context, found.guess)


def _sizes(ws: list[str]) -> list[str | None]:
    """The size key starting at each word (size_at), or None."""
    return [size_at(ws, s) for s in range(len(ws))]


def _derive(ws: list[str], idx: Index) -> Derived | None:
    options: list[tuple[int, int, tuple[int, int, int, str], str, str, int]] = []
    at = _sizes(ws)
    found = _match(idx, ws, at)
    if found is not None:
        options.append((_family_len(found), 2, found, "-".join(ws[found[1]:found[2]]), "", 0))
    loose = _between(idx, ws, at)
    if loose is not None:  # catalogued family, fine-tune words, size
        mid = loose[4]
        shown = "-".join(w for w in ws[loose[1]:loose[2]] if w not in mid)
        why = (f"its name carries the base's family and size, {shown}, with '{'-'.join(mid)}' between; "
               f"a fine-tune keeps its base's architecture")
        options.append((_family_len(loose[:4]) - len(mid), 1, loose[:4], shown, why, 0))
    ruled = _by_rule(idx, ws)
    if ruled is not None:
        options.append((ruled[4], 0, ruled[0], ruled[1], ruled[2], ruled[3]))
    if not options:
        return _nearest_release(idx, ws)
    _, _, found, shown, why, context = max(options, key=lambda o: (o[0], o[1]))
    entry, j, end, _ = found
    if _blocked(ws, idx.words[entry]) or ruled is None and _other_family(ws, idx.words[entry]):
        return None
    if not why:
        extra = [w for w in ws[:j] + ws[end:] if w not in STOP_WORDS and not _VERSION_WORD.fullmatch(w)]
        if extra:
            why = f"its name carries the base's family and size, {shown}; a fine-tune keeps its base's architecture"
        else:
            why = f"its name is the base's family and size, {shown}"
    return Derived(entry=entry, base=shown, why=why, context=context)


@lru_cache(maxsize=1)
def _ruled_words() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for src, *_ in _sibling_rules():
        out.setdefault(_root(src[0]), set()).update(src[1:])
    return out


def _nearest_release(idx: Index, ws: list[str]) -> Derived | None:
    """A release the catalog lacks, as the nearest catalogued release of its line at its size
    (models/release_lines.py); never for a name with another architecture's word."""
    if any(w in _other_words() for w in ws):
        return None
    found = release_lines.nearest_release(idx.by_line, idx.releases, ws, size_at, SIZE_WORDS | STOP_WORDS, _breaks(), idx.finetunes,
                                          _ruled_words())
    if found is None:
        return None
    cands, word, size, end = found
    entry = _pick(cands, ws[end:], idx.finetunes)
    shown = f"{word}-{size}"
    big = size.upper()
    why = (f"the catalog has no {word} release at {big}; assumed the architecture of {idx.names[entry]}, "
           f"the nearest catalogued release of the family at {big}")
    return Derived(entry=entry, base=shown, why=why, guess=True)


def has_size(name: str) -> bool:
    """Whether the name carries a size word (`8b`, `30b-a3b`, `8x7b`, `e4b`, `125m`)."""
    ws = words(split_ref(name)[1])
    return any(size_at(ws, i) for i in range(len(ws)))
