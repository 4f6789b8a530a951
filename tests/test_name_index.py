"""The name resolver's precomputed tables (built once per index) give the answers of the scans they
replace: for names made from the catalog's own names with the words derivatives add (organizations,
fine-tune words, dates, MoE sizes, glued organizations), each indexed lookup is checked against the
full scan over the catalog written out here. And a spec handed out by lookup() is the caller's own."""

from __future__ import annotations

import difflib
import re

import pytest
from fuzzkit import fuzz
from hypothesis import given
from hypothesis import strategies as st

from servefit.models import (
    catalog,
    catalog_entries,
    name_assume,
    name_dates,
    name_index,
    name_rules,
    name_suggest,
    names,
)
from servefit.models.name_words import SIZE_WORDS, STOP_WORDS, size_at, split_ref, words

IDX = catalog._index().names
CATALOG = [n for n, *_ in catalog_entries._spans()]
BASES = [n.split("/")[-1] for n in CATALOG]
ORGS = sorted({n.split("/")[0] for n in CATALOG if "/" in n})
PREFIX = ["", "", "Hermes-3-", "OpenHermes-", "dolphin-2.9-", "sql-", "Qwopus3.6-", "x-"]
SUFFIX = ["", "-Instruct", "-dpo-v7", "-0731", "-2507", "-AWQ", "-GGUF", "-abliterated", "-35B-A3B", "-30B-A3B",
          "-8b-llama", "-Q4_K_M.gguf", "-Coder-7B", "-Distill-Qwen-7B"]


PAIRS = sorted({sz for _, sz in IDX.by_key if sz and name_assume._PAIR.match(sz)})


@st.composite
def model_names(draw: st.DrawFn) -> str:
    """A catalog name as a derivative writes it: another organization or a glued one, words before and after;
    or a distill of no catalogued family with a version and an MoE size (`Qwopus3.6-35B-A3B`)."""
    if draw(st.integers(0, 5)) == 0:
        fake = draw(st.sampled_from(["Qwopus", "Zorb", "Kestrel-", "nano-"])) + draw(st.sampled_from(["3", "3.5", "3.6", "2.5", "4", "1"]))
        return f"{draw(st.sampled_from(['', 'acme/']))}{fake}-{draw(st.sampled_from(PAIRS)).upper()}{draw(st.sampled_from(SUFFIX[:4]))}"
    base = draw(st.sampled_from(BASES))
    if draw(st.booleans()):  # a release the catalog lacks: one of the name's numbers changed
        base = re.sub(r"\d+", lambda m: str(int(m.group()) + draw(st.integers(0, 2))), base, count=1)
    name = draw(st.sampled_from(PREFIX)) + base + draw(st.sampled_from(SUFFIX))
    org = draw(st.sampled_from(["", "acme/", "/models/", *(o + "/" for o in ORGS[:40])]))
    if draw(st.integers(0, 4)) == 0:  # QwenQwen2.5-7B: a download tool dropped the /
        return draw(st.sampled_from(ORGS)).replace("-", "") + name
    return org + name


def _ws(ref: str) -> list[str]:
    return words(split_ref(ref)[1])


# -- the full scans, as the resolver ran them before it kept tables ---------------------------------------

def scan_pair_pool(idx, ws, other, root_of, have=frozenset()):  # type: ignore[no-untyped-def]
    word, size, _ = name_assume.pair_pool(idx, ws, other, root_of, have)
    if not size:
        return {}
    version = name_assume._version(word)
    pool: dict[int, str] = {}
    for (fam, sz), cands in idx.by_key.items():  # every family of the catalog
        if sz != size:
            continue
        w = next((x for x in fam if x not in idx.org_words), "")
        if not name_assume.line_word(w) or name_assume._version(w) != version:
            continue
        for i, _ in cands:
            if i not in idx.finetunes and not (idx.words[i] & set(other)) and not idx.foreign(i, have):
                pool.setdefault(i, w)
    return pool


def scan_orgs(idx, word):  # type: ignore[no-untyped-def]
    return [o for o in sorted(idx.org_words, key=len, reverse=True) if word.startswith(o)]


def scan_dated(ws, keys):  # type: ignore[no-untyped-def]
    key = "-".join(w for w in ws if not name_dates._DATE.match(w))
    return next((i for i, k in keys.items() if k == key), None)


def scan_rules(ws):  # type: ignore[no-untyped-def]
    return [k for k, r in enumerate(name_rules._sibling_rules()) if r[0][0] in ws]


def scan_kinds(ws):  # type: ignore[no-untyped-def]
    return frozenset(k for k in name_rules._kind_words() for w in ws
                     if (k in w if len(k) >= 5 else w.startswith(k) and w[len(k):].replace(".", "").isdigit() or w == k))


def scan_pick(cands, ws, finetunes):  # type: ignore[no-untyped-def]
    have = set(ws)

    def tuned(x):  # type: ignore[no-untyped-def]
        return {"instruct" if w in ("chat", "it") else "base" if w == "pt" else w for w in x & STOP_WORDS}

    def score(c):  # type: ignore[no-untyped-def]
        rest = set(c[1])
        overlap = len(rest & have - STOP_WORDS)
        return (-overlap, int(c[0] in finetunes and not overlap), len(tuned(rest) ^ tuned(have)), c[0])

    return min(cands, key=score)[0]


def scan_nearest(key, n, idx):  # type: ignore[no-untyped-def]
    roots = [r for r in (name_index._root(w) for w in key) if r in idx.by_root]
    ws = list(key)
    if not roots:  # no catalogued family: the models of its version and MoE size, each family's first first
        by_pair = scan_pair_pool(idx, ws, name_rules._other_words(), name_index._root, name_rules.kinds(key))
        heads = sorted({w: i for i, w in sorted(by_pair.items(), reverse=True)}.values())
        return (heads + [i for i in sorted(by_pair) if i not in heads])[:n]
    sizes = {sz for i in range(len(ws)) if (sz := size_at(ws, i))}
    sizes |= {s.split("-")[0] for s in sizes}
    have = set(ws)
    pool = name_suggest._family_pool(roots, name_rules._other_words() - have, idx, name_rules.kinds(ws))
    billions = {round(float(s[:-1])) for s in sizes if re.fullmatch(r"\d+(?:\.\d+)?b", s)}

    def same_size(i):  # type: ignore[no-untyped-def]
        sz = idx.sizes.get(i)
        return bool(sz and (sz in sizes or sz.split("-")[0] in sizes) or idx.billions.get(i, 0) in billions)

    lead = tuple(w for w in ws if name_index._root(w) in roots)

    def cheap(i):  # type: ignore[no-untyped-def]
        return (int(not idx.keys[i].startswith(lead)), int(i in idx.finetunes), -len(have & idx.words[i]), i)

    short = sorted((i for i in pool if not sizes or same_size(i)), key=cheap)[:n + 2]
    text = "-".join(ws)
    return sorted(short, key=lambda i: (cheap(i)[:2], -difflib.SequenceMatcher(None, text, idx.keys[i]).ratio(), i))[:n]


# -- the tables against the scans ------------------------------------------------------------------------

@fuzz(300)
@given(model_names())
def test_each_table_answers_as_the_full_scan(ref: str) -> None:
    ws = _ws(ref)
    if not ws:
        return
    other = name_rules._other_words()
    assert name_assume.pair_pool(IDX, ws, other, name_index._root)[2] == scan_pair_pool(IDX, ws, other, name_index._root)
    tried = [o for o in names._orgs_starting(IDX, ws[0]) if ws[0].startswith(o)]
    assert tried == scan_orgs(IDX, ws[0])
    if any(name_dates._DATE.match(w) for w in ws):
        assert name_dates._first_by_key(IDX.keys).get(
            "-".join(w for w in ws if not name_dates._DATE.match(w))) == scan_dated(ws, IDX.keys)
    first = name_rules._rules_by_first_word()
    assert sorted({k for w in set(ws) for k in first.get(w, ())}) == scan_rules(ws)
    assert sorted(name_rules._ruled_with(ws)) == sorted(r for r in name_rules._ruled_families() if r[0] in ws)
    assert name_rules.kinds(ws) == scan_kinds(ws)
    for s in range(len(ws)):  # every family + size the name spells: the candidate picked
        size = size_at(ws, s) or (ws[s] if s and ws[s] in SIZE_WORDS else None)
        for j in range(max(0, s - IDX.longest), s):
            cands = IDX.by_key.get((tuple(ws[j:s]), size))
            if cands:
                assert names._pick(cands, ws[s + 1:], IDX.finetunes) == scan_pick(cands, ws[s + 1:], IDX.finetunes)
    key = name_index.name_key(ref)
    assert name_suggest.nearest(key, 3, IDX) == scan_nearest(key, 3, IDX)


def test_the_tables_cover_every_bucket_of_the_index() -> None:
    """Not only what the sample reaches: every size's families, every organization word, every rule, every key."""
    table = name_assume._by_size(IDX)
    for size in {sz for _, sz in IDX.by_key if sz}:
        assert table[size] == [(f, c) for (f, sz), c in IDX.by_key.items() if sz == size], size
    for org in IDX.org_words:
        assert org in names._orgs_starting(IDX, org), org
        assert [o for o in names._orgs_starting(IDX, org) if org.startswith(o)] == scan_orgs(IDX, org)
    first = name_rules._rules_by_first_word()
    assert sorted(k for ks in first.values() for k in ks) == list(range(len(name_rules._sibling_rules())))
    for r in name_rules._ruled_families():
        assert r in name_rules._ruled_with(list(r))
    for word in ["qwen3guard", "embeddings", "guardian3.1", "tts", "neutts", "attstuff", *name_rules._kind_words()]:
        assert name_rules.kinds([word]) == scan_kinds([word]), word
    for i, b in IDX.billions.items():  # a release named by its size class, asked for by its parameter count
        for ref in (f"{IDX.names[i].split('/')[-1].split('-')[0]}-{b}B-sft", f"acme/{IDX.keys[i].split('-')[0]}-0.5B"):
            key = name_index.name_key(ref)
            assert name_suggest.nearest(key, 3, IDX) == scan_nearest(key, 3, IDX), ref
    rev = name_dates._first_by_key(IDX.keys)
    assert all(rev[k] == next(i for i, key in IDX.keys.items() if key == k) for k in set(IDX.keys.values()))


def test_the_table_sees_a_changed_index() -> None:
    """A table is kept for the index it was built from: another index gets its own."""
    other = name_index.Index(*(getattr(IDX, f) for f in ("by_key", "by_total", "by_root", "sizes", "names", "words", "keys")))
    other.org_words = {"acmecorp"}
    assert names._orgs_starting(other, "acmecorpqwen2.5") == ["acmecorp"]
    assert names._orgs_starting(IDX, "acmecorpqwen2.5") == scan_orgs(IDX, "acmecorpqwen2.5")
    other.org_words = {"ab", "abcd"}  # a word shorter than four letters: the whole list
    assert names._orgs_starting(other, "abcdqwen") == ["abcd", "ab"]


# -- entries and specs -------------------------------------------------------------------------------------

def test_every_entry_from_the_cache_is_its_own_lines_parsed() -> None:
    import yaml

    blobs = catalog_entries._entry_blobs()
    assert len(blobs) == len(CATALOG) and all(blobs)
    for i in range(len(CATALOG)):
        fname, start, end = catalog_entries._exact()[1][i]
        own = yaml.load(catalog_entries._text(fname)[start:end], Loader=catalog_entries._LOADER)[0]
        assert catalog_entries._entry(i) == own and own["name"] == CATALOG[i]


@pytest.mark.parametrize("ref", ["Qwen/Qwen2.5-VL-7B-Instruct", "acme/Hermes-3-Llama-3.1-8B-AWQ",
                                 "deepseek-ai/DeepSeek-V3", "google/gemma-3-27b-it"])
def test_a_looked_up_spec_is_the_callers_own(ref: str) -> None:
    first = catalog.lookup(ref)
    assert first is not None
    fresh = catalog.spec_from_entry(catalog_entries._entry(catalog._recipe(ref).entry))  # type: ignore[union-attr]
    for f in ("name", "params", "num_hidden_layers", "layer_types", "vision", "vision_params", "mamba", "layout",
              "rope_scaling", "aliases"):
        assert getattr(first, f) == getattr(fresh, f), f
    first.layer_types.append("x")
    first.aliases.append("x")
    first.assumptions.append("x")
    first.layout["x"] = 1
    first.vision["x"] = 1
    if first.quantization:
        first.quantization["bits"] = 99
    first.num_hidden_layers = -1
    again = catalog.lookup(ref)
    assert again is not None and again is not first
    assert "x" not in again.layer_types and "x" not in again.aliases and "x" not in again.assumptions
    assert "x" not in again.layout and "x" not in again.vision and again.num_hidden_layers > 0
    assert not again.quantization or again.quantization.get("bits") != 99


def test_the_cached_index_is_keyed_on_the_code_that_builds_it() -> None:
    """The index lives in the data cache, keyed by its input files: the module that builds it and
    every servefit.models module it imports, so a change to any of them rebuilds it."""
    import importlib
    import os

    text = open(name_index.__file__, encoding="utf-8").read()
    used = set(re.findall(r"from servefit\.models\.(\w+) import", text))
    used |= {m.strip() for line in re.findall(r"from servefit\.models import ([\w, ]+)", text) for m in line.split(",")}
    files = {os.path.abspath(importlib.import_module(f"servefit.models.{m}").__file__ or "") for m in used}
    inputs = {os.path.abspath(str(f)) for f in catalog._index_inputs()}
    assert used >= {"name_assume", "release_lines", "name_rules", "name_words"}
    # catalog._index_data builds it from catalog_entries' chunks and name_variant's stems
    from servefit.models import name_variant

    built = {os.path.abspath(m.__file__ or "") for m in (name_index, catalog_entries, name_variant, catalog)}
    assert files | built <= inputs
