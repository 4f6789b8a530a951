"""A family word whose catalogued releases at the name's size have different layouts, but memory
plans that agree: `Devstral-24B-AWQ` (Devstral-Small-2505 is text only, Devstral-Small-2-24B carries
a vision tower), or a family word with no size where Ollama's library lists that family at one size
only (`laura-mistral`: Mistral is 7B; v0.1 has sliding-window attention, v0.2 and v0.3 do not).

models/name_assume.py takes such a name only where every candidate has the same layers. Here the
candidates may differ, but a linter needs their memory, not their layers: where every candidate's
weight bytes (at the quantization the name implies, else the checkpoint's own) and KV-cache bytes per
token lie within TOLERANCE of the largest, the candidate that needs the most memory (weights plus one
sequence's KV cache at its own context) is sized, so the plan errs towards "does not fit", and the
assumption names the others and how to pin one. Where they differ more (Devstral without a
quantization word: 2505 is bf16, 2512 ships FP8), the name stays unknown with the candidates as
suggestions. A sizeless name is sized only where Ollama's library has one size for its one family
word: the library lists every size of a family, the catalog may not (`wizardlm`, four sizes, one
catalogued), and a family with several sizes (`/models/qwen3`) tells nothing of which.

TOLERANCE (10%): vLLM leaves a tenth of the GPU out of its plan by default (gpu_memory_utilization
0.9, vllm/config/cache.py), so a plan over-estimated by less than that still lands inside the
headroom every default deployment keeps. It is also what a name cannot tell in any case: a 16-bit
vision tower kept or dropped is 2% of a bf16 24B checkpoint and 6% of its AWQ repack. Releases that
differ more are different models to a memory plan (Falcon-7B's multi-query KV cache is 1/28 of
Falcon3-7B's), and the name stays unknown.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import Any

from servefit.models.name_words import SIZE_WORDS, STOP_WORDS, size_at
from servefit.models.release_lines import line_word

TOLERANCE = 0.10
_NUMERIC = re.compile(r"^\d+(?:\.\d+)?[bm]$")  # 24b, 7b, 125m: one dense size (not 8x7b, 30b-a3b, e4b)
_RELEASE = re.compile(r"^v?\d[\d.]*$")  # v2, 0.3: a release, not a word of the name's own
_NEAR = 4  # the family word at most three words from the size, as models/name_assume.py allows


def _billions(size: str) -> float:
    return float(size[:-1]) / (1000 if size.endswith("m") else 1)


def _library_name(ws: list[str]) -> str | None:
    """The one Ollama library name among the name's words (the longest first: mistral-nemo before
    mistral), or None where there is none or more than one."""
    from servefit.engines.ollama.tags import table

    lib = table()["library"]
    found: list[tuple[str, range]] = []
    covered: set[int] = set()
    for n in range(min(len(ws), 4), 0, -1):
        for i in range(len(ws) - n + 1):
            name = "-".join(ws[i:i + n])
            if name in lib and not covered.intersection(range(i, i + n)):
                found.append((name, range(i, i + n)))
                covered.update(range(i, i + n))
    return found[0][0] if len(found) == 1 else None


def _library_size(name: str) -> str | None:
    """The one size Ollama's library lists for `name` (its tag table, with the sizes it leaves out), or None
    where it lists several."""
    from servefit.engines.ollama.tags import table

    lib = table()["library"][name]
    sizes = [*(lib.get("sizes") or {}), *(lib.get("uncatalogued") or ())]
    return sizes[0] if len(sizes) == 1 else None


_ROOTS: dict[int, frozenset[str]] = {}


def _catalogued_roots(idx: Any, root_of: Callable[[str], str]) -> frozenset[str]:
    """The roots of every word of every catalogued name (`small` of Mistral-Small-3.1), built once per index."""
    if id(idx) not in _ROOTS:
        _ROOTS.clear()
        _ROOTS[id(idx)] = frozenset({*idx.by_root, *(root_of(w) for ws in idx.words.values() for w in ws)})
    return _ROOTS[id(idx)]


def candidates(idx: Any, ws: list[str], other: Collection[str], generic: Collection[str], root_of: Callable[[str], str],
               have: frozenset[str]) -> tuple[str, str, bool, list[int]]:
    """(family word, size, whether the size was the library's, the catalogued releases of that family at
    that size) for a name with one catalogued family word and one dense size near it, or no size and
    a family word Ollama's library lists at one size; empty where the name is not such a name, carries
    another architecture's or kind's word, or another family's. Catalogued fine-tunes are left out."""
    if any(w in other for w in ws):
        return "", "", False, []
    sizes = [(k, sz) for k in range(len(ws)) if (sz := size_at(ws, k))]
    fams = [(k, w) for k, w in enumerate(ws) if w not in generic and len(root_of(w)) >= 3 and root_of(w) in idx.by_root]
    if len({root_of(w) for _, w in fams}) != 1 or len({w for _, w in fams}) != 1:
        return "", "", False, []
    word = fams[0][1]
    # another catalogued family's versioned word (phi3 beside mistral) names another base; a versioned word of
    # no catalogued family is a fine-tune's own series (DeepHermes-3-Mistral-24B: Nous's series on Mistral Small)
    if any(line_word(w) and root_of(w) != root_of(word) and root_of(w) in _catalogued_roots(idx, root_of)
           and not _RELEASE.match(w) for w in ws):
        return "", "", False, []
    from_library = False
    if sizes:
        if len(sizes) != 1 or not _NUMERIC.match(sizes[0][1]) or not any(0 < abs(k - sizes[0][0]) <= _NEAR
                                                                           for k, _ in fams):
            return "", "", False, []
        size = sizes[0][1]
    else:
        if any(w in SIZE_WORDS for w in ws):
            return "", "", False, []
        lib = _library_name(ws)
        if lib is None or root_of(lib.split("-")[0]) != root_of(word):
            return "", "", False, []
        own = [w for w in ws if w not in generic and w not in STOP_WORDS and w not in lib.split("-")
               and not _RELEASE.match(w)]
        if len(own) > 1:  # a fine-tune's own name beside its family (laura-mistral), not a phrase (my-solar-panel)
            return "", "", False, []
        size = _library_size(lib) or ""
        if not _NUMERIC.match(size):
            return "", "", False, []
        word, from_library = lib, True
    billions = round(_billions(size))
    # named by that family first (not DeepSeek-R1-Distill-Llama-70B for llama); a word without its version
    # (llama, qwen) is any catalogued version of it (llama2, llama3.1), as models/name_assume.py reads it
    unversioned = word == root_of(word)
    if unversioned and not any((idx.lines.get(word) or {}).get(word, ())):
        return "", "", False, []  # the first release's sizes are not catalogued: MiniCPM-2B is no MiniCPM5-2B
    lead = tuple(f"{w}-" for w in ({word, *idx.lines.get(word, ())} if unversioned else {word}))
    pool = []
    for i in idx.by_root[root_of(word)]:
        sz = idx.sizes.get(i)
        same = sz == size or (sz in SIZE_WORDS and idx.billions.get(i) == billions)
        if (same and i not in idx.finetunes and (idx.keys[i] + "-").startswith(lead)
                and not idx.words[i].intersection(other) and not idx.foreign(i, have)):
            pool.append(i)
    return word, size, from_library, pool


def _figures(spec: Any, quant: dict[str, Any] | None) -> tuple[int, int, int]:
    """(weight bytes, KV-cache bytes per token at 16 bits, both plus one sequence at the model's own context)."""
    from servefit.memory.dtypes import dtype_bytes
    from servefit.memory.kv import full_kv_bytes_per_token
    from servefit.memory.weights import scheme_for, weight_bytes

    weights = weight_bytes(spec, dtype_bytes(spec.torch_dtype), scheme_for(quant if quant is not None else spec.quantization))
    kv = full_kv_bytes_per_token(spec, 2)
    return weights, kv, weights + kv * spec.max_position_embeddings


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


def pick(pool: list[int], spec_of: Callable[[int], Any], quant: dict[str, Any] | None,
         names: list[str]) -> tuple[int, str] | None:
    """(the candidate that needs the most memory, what the plans are) where every candidate's weights and
    KV bytes per token lie within TOLERANCE of the largest; None where they do not."""
    if not pool:
        return None
    if len(pool) == 1:
        return pool[0], ""
    figs = {i: _figures(spec_of(i), quant) for i in pool}
    top_w = max(f[0] for f in figs.values())
    top_kv = max(f[1] for f in figs.values())
    if top_w <= 0 or any(f[0] < (1 - TOLERANCE) * top_w or f[1] < (1 - TOLERANCE) * top_kv for f in figs.values()):
        return None
    best = max(pool, key=lambda i: (figs[i][2], figs[i][0], -i))
    ctx = {i: spec_of(i).max_position_embeddings for i in pool}
    others = sorted((i for i in pool if i != best), key=lambda i: names[i])
    shown = "; ".join(f"{names[i]}: {_gb(figs[i][0])}" + (f", context {ctx[i]}" if ctx[i] != ctx[best] else "")
                      for i in others)
    kv_same = len({f[1] for f in figs.values()}) == 1
    kv = f"the same KV cache per token ({figs[best][1] // 1024} KiB at 16 bits)" if kv_same else \
        f"KV cache per token within {TOLERANCE:.0%}"
    plans = (f"weights {_gb(figs[best][0])}, context {ctx[best]} (the others: {shown}), {kv}")
    return best, plans


def why(word: str, size: str, from_library: bool, best: int, pool: list[int], plans: str, names: list[str]) -> str:
    """The assumption, said to the user: what the name carries, the candidates, what was sized, how to pin it."""
    big = size.upper()
    pin = "`# servefit: model=ORG/NAME` beside the server or map the name in [tool.servefit.models]"
    if from_library and len(pool) == 1:
        return (f"its name carries the family word '{word}' and no size; Ollama's library has {word} at {big} only, "
                f"catalogued as {names[best]}, so that was sized; to size another model, write {pin}")
    if len(pool) == 1:  # a dated release the name leaves out (OLMo-2-13B: OLMo-2-1124-13B)
        return (f"its name carries the family word '{word}' and the size {big}, and the catalog has one release of "
                f"that family at that size, {names[best]}; a fine-tune or repack keeps its base's architecture (to size "
                f"another model, write {pin})")
    if from_library:
        head = (f"its name carries the family word '{word}' and no size; Ollama's library has {word} at {big} only, "
                f"and the catalog has {len(pool)} releases of it at {big}")
    else:
        head = f"its name carries the family word '{word}' and the size {big}, which {len(pool)} catalogued releases share"
    return (f"{head}, whose memory plans lie within {TOLERANCE:.0%} of each other, so the one that needs the most "
            f"memory was sized: {names[best]}, {plans}; to size another, write {pin}")
