"""A fine-tune whose name carries its family and size, but not the way a catalogued name writes
them: the size before the family word (`ruliad/deepthought-8b-llama`, `foo-7b-qwen2.5`), or the
family without its version (`llama` where the catalog has Llama 3 and 3.1 at 8B).

Such a name resolves only where the catalog leaves no doubt about the layer layout: every
catalogued release of that family at that size has the same layers, widths, heads and experts
(`shape`, read from the entry's own lines; vocabularies within 5%; context and rope may differ, and
the assumption says so). The newest of those releases is taken. Where the releases differ (Llama 2
and Llama 3 at 70B, Falcon and Falcon3 at 7B) models/name_close.py weighs their memory plans instead,
and where those differ too the name stays unknown and models/names.py suggests catalogued names of
the same family and size. A name without a size never resolves here: the catalog cannot tell that a
family has one public size (`wizardlm` has four sizes, one catalogued); models/name_close.py sizes
one only where Ollama's library lists the family at one size (`laura-mistral`).
models/names.py calls this only when nothing else explains the name.

A name of no catalogued family, with a version and a mixture-of-experts size (total and active
parameters: `Qwopus3.6-35B-A3B`, a distill of Qwen3.6-35B-A3B), is taken as the catalogued models
of that same version and size where they share one layout (`pair`); where they do not (Qwen3 and
Nemotron 3 Nano at 30B-A3B) it stays unknown, with those as suggestions (`pair_pool`).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from servefit.models.name_words import size_at
from servefit.models.release_lines import line_word

_SHAPE_KEYS = ("vocab_size", "model_type", "num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
               "num_key_value_heads", "head_dim", "num_experts", "moe_intermediate_size", "kv_lora_rank",
               "layer_pattern", "layer_types", "mamba", "vision", "multimodal")
_SHAPE_LINE = re.compile(r"(?m)^  (" + "|".join(_SHAPE_KEYS) + r"):(.*)$")
_NUMERIC = re.compile(r"^(\d|e\d)")  # 8b, 8x7b, 30b-a3b, e4b: not a size class (small, large)
_VERSION = re.compile(r"^v?(\d+(?:\.\d+)*)$")
_PAIR = re.compile(r"^\d+(?:\.\d+)?b-a\d+(?:\.\d+)?b$")  # 35b-a3b: total and active parameters
_ACTIVE = re.compile(r"^a\d+(?:\.\d+)?b$")
_NEAR = 4  # the family word at most three words from the size, either side (as models/names.py allows)


def shape(text: str) -> tuple[str, int]:
    """(the values of a catalog entry's own lines that fix its layer layout, its vocabulary size):
    not its context or rope, which a fine-tune may change."""
    found = {k: v.strip() for k, v in _SHAPE_LINE.findall(text)}
    try:
        found.setdefault("head_dim", str(int(found["hidden_size"]) // int(found["num_attention_heads"])))
        vocab = int(found.pop("vocab_size", 0))
    except (KeyError, ValueError, ZeroDivisionError):
        vocab = 0
    return ";".join(f"{k}:{found[k]}" for k in sorted(found)), vocab


def _one_layout(shapes: list[tuple[str, int]]) -> bool:
    """Whether the entries share one layout, and vocabularies within 5% (Mistral 7B v0.1's 32000 and
    v0.3's 32768 are; Llama 2's 32000 and Llama 3's 128256 are not)."""
    vocabs = [v for _, v in shapes]
    return len({s for s, _ in shapes}) == 1 and min(vocabs) >= 0.95 * max(vocabs)


def add_family(lines: dict[str, dict[str, list[str]]], family: tuple[str, ...], size: str | None,
               root: str) -> None:
    """Index a one-word family (`llama3.1`, `mistral`) under its root word with each size it has
    ("" for a name without one, `phi-2`)."""
    if len(family) != 1:
        return
    sizes = lines.setdefault(root, {}).setdefault(family[0], [])
    if (size or "") not in sizes:
        sizes.append(size or "")


def _version(word: str) -> tuple[int, ...]:
    found = line_word(word)
    return found[1] if found else ()


def _newest(idx: Any, entries: list[int], famword: dict[int, str]) -> int:
    """The newest release: the family's version (llama3.1 over llama3), then the release's own
    (Instruct-v0.3 over v0.1), then an instruct release, then catalog order."""
    def key(i: int) -> tuple[tuple[int, ...], tuple[int, ...], int, int]:
        rel = max((tuple(int(x) for x in m.group(1).split(".")) for w in idx.words[i]
                   if (m := _VERSION.match(w)) and "." in w), default=())
        tuned = int(bool(idx.words[i] & {"instruct", "chat", "it"}))
        return (_version(famword[i]), rel, tuned, -i)

    return max(entries, key=key)


def assume(idx: Any, ws: list[str], other: Collection[str], generic: Collection[str],
           root_of: Any, have: frozenset[str] = frozenset()) -> tuple[int, str, str] | None:
    """(entry, words shown, why) for a name whose family word and size leave one catalogued layer
    layout, or None. Entries of another kind (an embedding model, a guard) than the name's own
    kinds `have` are none of its candidates."""
    sizes = {sz for i in range(len(ws)) if (sz := size_at(ws, i))}
    if len(sizes) != 1 or any(w in other for w in ws):
        return None
    size = sizes.pop()
    if not _NUMERIC.match(size):
        return None
    at = next(i for i in range(len(ws)) if size_at(ws, i))
    fams: dict[str, str] = {}  # family word -> the name's word it was found by
    for k, w in enumerate(ws):
        root = root_of(w)
        if w in generic or len(root) < 3 or not 0 < abs(k - at) <= _NEAR:
            continue
        line = idx.lines.get(root) or {}
        if w in line and w != root:  # a versioned family as the catalog writes it (llama3.1, qwen2.5)
            fams[w] = w
        elif w == root and any(_NUMERIC.match(x) for x in line.get(w, ())):
            # an unversioned family word (llama): its own release and the later ones at that size (LLaMA
            # has no 8B; Llama 3 and 3.1 have), where the catalog knows the first release's sizes
            fams.update(dict.fromkeys(line, w))
    if not fams or len({root_of(f) for f in fams}) != 1 or len(set(fams.values())) != 1:
        return None
    word = next(iter(fams.values()))
    if any(line_word(w) and root_of(w) != root_of(word) for w in ws):
        return None  # another versioned word (granite-speech-4.1-2b): the name is of another line
    entries: list[int] = []
    famword: dict[int, str] = {}
    for f in fams:
        for i, _ in idx.by_key.get(((f,), size)) or ():
            if i not in famword and not (idx.words[i] & set(other)) and not idx.foreign(i, have):
                famword[i] = f
                entries.append(i)
    pool = [i for i in entries if i not in idx.finetunes] or entries
    if not pool or not _one_layout([tuple(idx.shapes[i]) for i in pool]):
        return None
    best = _newest(idx, pool, famword)
    others = sorted({idx.names[i] for i in pool} - {idx.names[best]})
    also = f" (the others: {', '.join(others[:3])}{', ...' if len(others) > 3 else ''})" if others else ""
    odd = [x for x, yes in (("it has no version", word == root_of(word)),
                            ("it follows the size", ws.index(word) > at)) if yes] or ["not as a catalogued name writes them"]
    why = (f"its name carries the family word '{word}' and the size {size.upper()}, though {' and '.join(odd)}; "
           f"the catalogued {word} releases at {size.upper()} have the same layers, "
           f"widths and heads{also}, so the newest was taken, and a fine-tune keeps its base's architecture (its "
           f"context and vocabulary may differ: pass --model-config for the checkpoint's own)")
    return best, f"{word}-{size}", why


def pair_pool(idx: Any, ws: list[str], other: Collection[str], root_of: Any,
              have: frozenset[str] = frozenset()) -> tuple[str, str, dict[int, str]]:
    """(the name's versioned word, its MoE size, {entry: family word} of the catalogued models of
    that version and size) for a name of no catalogued family whose one versioned word (`qwopus3.6`)
    comes before its one MoE size (`35b-a3b`); empty where the name is not such a name, carries
    another architecture's word, or no catalogued model has that version and size. Catalogued
    fine-tunes and models of another kind than the name's (`have`) are left out."""
    if not any(_ACTIVE.match(w) for w in ws):
        return "", "", {}
    sizes = [(k, sz) for k in range(len(ws)) if (sz := size_at(ws, k))]
    if len(sizes) != 1 or not _PAIR.match(sizes[0][1]) or any(w in other for w in ws):
        return "", "", {}
    at, size = sizes[0]
    versioned = [(k, lw) for k, w in enumerate(ws) if (lw := line_word(w))]
    if (len(versioned) != 1 or not 0 < at - versioned[0][0] <= _NEAR
            or any(root_of(w) in idx.by_root for w in ws)):  # a catalogued family: the name is its
        return "", "", {}
    version = versioned[0][1][1]
    pool: dict[int, str] = {}
    for fam, cands in _by_size(idx).get(size, ()):
        word = next((w for w in fam if w not in idx.org_words), "")  # nvidia-nemotron3-nano: nemotron3
        if not line_word(word) or _version(word) != version:  # not Nemotron-Cascade-2's sub-line version
            continue
        for i, _ in cands:
            if i not in idx.finetunes and not (idx.words[i] & set(other)) and not idx.foreign(i, have):
                pool.setdefault(i, word)
    return ws[versioned[0][0]], size, pool


def _by_size(idx: Any) -> dict[str, list[tuple[tuple[str, ...], Any]]]:
    """The index's (family, entries) by size, in the index's order: grouped once per index, not
    scanned per name."""
    got = idx.__dict__.get("_by_size")
    if got is None or got[0] is not idx.by_key:
        table: dict[str, list[tuple[tuple[str, ...], Any]]] = {}
        for (fam, sz), cands in idx.by_key.items():
            if sz:
                table.setdefault(sz, []).append((fam, cands))
        got = idx.__dict__["_by_size"] = (idx.by_key, table)
    return got[1]  # type: ignore[no-any-return]


def pair(idx: Any, ws: list[str], other: Collection[str], root_of: Any,
         have: frozenset[str] = frozenset()) -> tuple[int, str, str] | None:
    """(entry, words shown, why) for a name of no catalogued family whose version and MoE size
    leave one catalogued layout (pair_pool), or None."""
    word, size, pool = pair_pool(idx, ws, other, root_of, have)
    if not pool or not _one_layout([tuple(idx.shapes[i]) for i in pool]):
        return None
    best = _newest(idx, list(pool), pool)
    others = sorted({idx.names[i] for i in pool} - {idx.names[best]})
    also = f" (and {', '.join(others[:3])}{', ...' if len(others) > 3 else ''}, of the same layout)" if others else ""
    big = size.upper()
    why = (f"'{word}' is no catalogued family, but its version and its size {big} (total and active parameters) are "
           f"those of {idx.names[best]}{also}, so its architecture was assumed, as a fine-tune or distill keeps its "
           f"base's (its context and vocabulary may differ: pass --model-config for the checkpoint's own)")
    return best, f"{word}-{size}", why
