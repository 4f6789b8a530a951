"""The model catalog indexed for matching names: by family and size, by total size (MoE), by family
root word, with each entry's words, release line, layer layout and kinds. models/names.py matches
a derivative's name against it; models/name_suggest.py finds "did you mean" names in it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from servefit.models import name_assume, release_lines
from servefit.models.name_rules import kinds, rules
from servefit.models.name_words import SEP, SIZE_WORDS, STOP_WORDS, parse, split_ref, word_tuple, words


@dataclass
class Index:
    """The catalog indexed by family, size and family root, built once, so a derivative name is matched and
    suggestions found without comparing every entry."""

    by_key: dict[tuple[tuple[str, ...], str | None], list[tuple[int, tuple[str, ...]]]]
    by_total: dict[tuple[tuple[str, ...], str], list[tuple[int, tuple[str, ...], str]]]  # MoE by total size (30b)
    by_root: dict[str, list[int]]  # family root word (qwen, llama) -> entries
    sizes: dict[int, str | None]
    names: list[str]  # entry -> catalog name
    words: dict[int, set[str]]  # entry -> the words of its names
    keys: dict[int, str]  # entry -> its name's words, joined (what difflib compares)
    longest: int = 1  # the most words a catalogued family has
    finetunes: set[int] = field(default_factory=set)  # entries with a `base_model`: never a base for others
    by_line: release_lines.Lines = field(default_factory=dict)  # (root, size) -> releases (models/release_lines.py)
    releases: dict[str, set[tuple[int, ...]]] = field(default_factory=dict)  # root -> catalogued versions
    org_words: set[str] = field(default_factory=set)  # words of catalogued organizations (qwen, google, llama)
    shapes: dict[int, tuple[str, int]] = field(default_factory=dict)  # entry -> its layer layout (models/name_assume.py)
    lines: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # root -> one-word family -> sizes
    kinds: dict[int, frozenset[str]] = field(default_factory=dict)  # entry -> its other_kind words, where it has any
    billions: dict[int, int] = field(default_factory=dict)  # entry named by a size class (small) -> its rounded size

    def foreign(self, i: int, have: frozenset[str]) -> bool:
        """Whether entry i is of a kind (an embedding model, a guard) the name's own kinds `have` lack."""
        return bool(self.kinds.get(i, have) - have)


_ROOT_TAIL = re.compile(r"[\d.]+[a-z]?$")
_ROOTS: dict[str, str] = {}  # word -> root: the same words come up for every name of a lint


def _root(word: str) -> str:
    root = _ROOTS.get(word)
    if root is None:
        if len(_ROOTS) > 65536:
            _ROOTS.clear()
        root = _ROOTS[word] = _ROOT_TAIL.sub("", word)
    return root


_BASE_MODEL = re.compile(r"(?m)^  base_model: ")
_PARAMS = re.compile(r"(?m)^  params: (\d+)")


def build_index(chunks: list[tuple[str, tuple[str, ...], str]]) -> Index:
    implied = {k.lower(): str(v) for k, v in (rules().get("implied_size") or {}).items()}
    generic = frozenset(str(w) for w in rules().get("generic_words") or ())
    idx = Index({}, {}, {}, {}, [], {}, {})
    for i, (name, aliases, text) in enumerate(chunks):
        if _BASE_MODEL.search(text):
            idx.finetunes.add(i)
        idx.names.append(name)
        idx.words[i] = set()
        idx.keys[i] = "-".join(name_key(name))
        for rid in (name, *aliases):
            p = parse(rid)
            size = p.size or implied.get(name.lower())
            idx.by_key.setdefault((p.family, size), []).append((i, p.rest))
            idx.longest = max(idx.longest, len(p.family))
            if p.size is None and size:  # phi-4 is also found as phi-4-14b
                idx.by_key.setdefault((p.family, None), []).append((i, p.rest))
            if size and "-" in size:
                idx.by_total.setdefault((p.family, size.split("-")[0]), []).append((i, p.rest, size))
            idx.sizes.setdefault(i, size)
            release_lines.add_entry(idx.by_line, idx.releases, i, p.family, size, p.rest)
            for w in p.family:
                r = _root(w)
                if len(r) >= 3 and r not in STOP_WORDS and r not in generic and i not in idx.by_root.setdefault(r, []):
                    idx.by_root[r].append(i)
            idx.words[i].update(words(split_ref(rid)[1]))
            org = rid.split("/")[0].lower() if "/" in rid else ""
            idx.org_words.update(w for w in SEP.split(org) if len(w) >= 4)
        idx.shapes[i] = name_assume.shape(text)
        if idx.sizes.get(i) in SIZE_WORDS and (m := _PARAMS.search(text)) and int(m.group(1)) >= 2e9:
            idx.billions[i] = round(int(m.group(1)) / 1e9)  # Devstral-Small-2505: 24 (for suggestions only)
        if own := frozenset.intersection(*(kinds(words(split_ref(rid)[1])) for rid in (name, *aliases))):
            idx.kinds[i] = own  # of that kind by every name (granite-3.1-8b's alias granite-guardian-3.1-8b is not)
    for fam, size in idx.by_key:
        if fam:
            name_assume.add_family(idx.lines, fam, size, _root(fam[0]))
    return idx



def carries_family(ref: str, idx: Index) -> bool:
    """Whether the last part of `ref` has a word of a catalogued family (`mixtral`, `qwen2.5`)."""
    return any(_root(w) in idx.by_root for w in name_key(ref))


def name_key(ref: str) -> tuple[str, ...]:
    """The words that suggestions for `ref` depend on (`org/X`, `/models/X` and `Meta-X` agree)."""
    ws = word_tuple(split_ref(ref)[1])
    return ws[1:] if ws[:1] == ("meta",) else ws
