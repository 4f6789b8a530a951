"""The model catalog (data/models/*.yaml, one file per family): lookup by repo id, and name heuristics that map
quantized or re-uploaded variants (`hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4`,
`unsloth/Llama-3.2-3B-Instruct-bnb-4bit`, `llama3.1:8b`) onto the catalogued architecture. The entries
themselves (read, parsed once, made ModelSpecs) are models/catalog_entries.py's."""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from servefit import data
from servefit.models.catalog_entries import (
    _chunks,
    _entry,
    _exact,
    _fresh_spec,
    _name,
    catalog_files,
    spec_from_entry,
)
from servefit.models.spec import ModelSpec

if TYPE_CHECKING:
    from servefit.models.name_variant import Variant

# Name heuristics (models/name_variant.py cuts a name into its stem and quantization: imported where a name
# the catalog does not list is looked up, so that an exact lookup stays light)

def parse_variant(ref: str) -> Variant:
    """The stem of `ref` and the quantization, variant and dtype words of its name (models/name_variant.py)."""
    from servefit.models import name_variant

    return name_variant.parse_variant(ref)


@dataclass(frozen=True)
class _Index:
    """The name heuristics' indexes (an exact name or alias is found through _exact)."""

    base: dict[str, list[int]]  # lower-case name without org -> entries
    stem: dict[str, list[tuple[int, frozenset[str]]]]  # stem -> (entry, variant words)
    names: Any  # name_index.Index: families and sizes, for derivatives and suggestions


def _index_inputs() -> list[str | os.PathLike[str]]:
    from servefit.models import (
        catalog_entries,
        name_assume,
        name_index,
        name_rules,
        name_variant,
        name_words,
        names,
        quant_names,
        release_lines,
    )

    return [*(data.DATA_DIR / f for f in (*catalog_files(), "derivatives.yaml")), __file__, names.__file__,
            catalog_entries.__file__, name_index.__file__, name_words.__file__, quant_names.__file__,
            name_assume.__file__, release_lines.__file__, name_variant.__file__, name_rules.__file__]


@lru_cache(maxsize=1)
def _index() -> _Index:
    """The name indexes, kept in the data cache (keyed by the catalog files and this code):
    building them is ~20 ms, a good part of a small lint."""
    from servefit.models import name_index

    base, stem, by_name = data.derived("catalog-index", _index_inputs(), _index_data)
    return _Index(base=base, stem=stem, names=name_index.Index(*by_name))


def _index_data() -> tuple[Any, ...]:
    from servefit.models import name_index
    from servefit.models.name_variant import parse_variant

    base: dict[str, list[int]] = {}
    stem: dict[str, list[tuple[int, frozenset[str]]]] = {}
    for i, (name, aliases, _) in enumerate(_chunks()):
        for rid in (name, *aliases):
            base.setdefault(rid.split("/")[-1].lower(), []).append(i)
            v = parse_variant(rid)
            stem.setdefault(v.stem, []).append((i, v.variants))
    by_name = name_index.build_index(_chunks())
    return base, stem, tuple(getattr(by_name, f.name) for f in fields(by_name))


@dataclass(frozen=True)
class _Recipe:
    """How a reference maps onto a catalog entry (cached per reference; lookup() applies it to a
    fresh spec)."""

    entry: int
    assumption: str = ""  # empty for an exact match
    quant: Any = None  # the quantization the name implies (shared: copied when applied)
    dtype: str | None = None  # an unquantized re-upload's dtype
    context: int = 0  # max_position_embeddings of a sibling family
    guess: bool = False  # the nearest catalogued release of its line stands in for it


def _derived(entry: int, ref: str, why: str, v: Variant, ollama: bool, sibling: bool,
             context: int = 0, guess: bool = False) -> _Recipe:
    """The quantization the name implies and the sentence that says what was assumed, and why."""
    quant, label = v.quant, v.quant_label
    if quant is None and ollama:
        own = _entry(entry).get("quantization")
        if own:  # gpt-oss ships in its native mxfp4
            label = f"the checkpoint's own {own.get('quant_method')} weights"
            quant = own
        else:  # an Ollama tag without a quantization suffix pulls its default 4-bit GGUF
            quant = {"quant_method": "gguf", "type": "Q4_K_M", "bits": 4}
            label = "Ollama's default GGUF Q4_K_M"
    what = "the same architecture"
    dtype = None
    if quant is not None:
        what = label
    elif v.dtype:
        dtype = v.dtype
        what = f"an unquantized {v.dtype} checkpoint"
    if sibling:
        what += " (a base/instruct sibling: same architecture, max_position_embeddings may differ)"
    name = _name(entry)
    return _Recipe(entry, f"resolved '{ref}' to catalog entry '{name}' by name ({why}); assumed {what}",
                   quant, dtype, context, guess)


def lookup(ref: str) -> ModelSpec | None:
    """The catalogued ModelSpec for `ref`: exact repo id or alias (case-insensitive), then the
    name without its organization, then name heuristics for quantized and variant names, then
    the base a derivative's name carries (models/names.py). Every match by name sets
    `quantization`, `resolved_from = "derivative"` and says what was assumed. None when nothing
    matches."""
    if not ref or not ref.strip():
        return None
    r = _recipe(ref)
    if r is None:
        return None
    spec = _fresh_spec(r.entry)
    if not r.assumption:
        return spec
    if r.quant is not None:
        spec.quantization = copy.deepcopy(r.quant)
        if r.quant.get("quant_method") == "awq":
            # AutoAWQ loads the model to quantize in float16 (awq/models/base.py from_pretrained, torch_dtype
            # default torch.float16) and saves its config so: the checkpoint's dtype, which the engines'
            # auto dtype follows (vLLM config/model.py::_get_and_verify_dtype -> _resolve_auto_dtype)
            spec.torch_dtype = "float16"
    elif r.dtype:
        spec.quantization = None
        spec.torch_dtype = r.dtype
    if r.context:
        spec.max_position_embeddings = r.context
    spec.resolved_from = "derivative"
    spec.assumptions.append(r.assumption)
    return spec


@lru_cache(maxsize=4096)
def _recipe(ref: str) -> _Recipe | None:
    key = ref.strip().rstrip("/").lower()
    exact = _exact()[0].get(key)
    if exact is not None:
        return _Recipe(exact)
    from servefit.models import (  # the name heuristics: only for a name the catalog does not list
        name_rules,
        names,
    )
    from servefit.models.name_variant import _split, parse_variant

    idx = _index()
    org, base = _split(ref)
    local = names.split_ref(ref)[2]
    hits = idx.base.get(base.lower())
    if (hits and org and not local and parse_variant(base).quant
            and _split(_name(hits[0]))[0].lower() != org.lower()):
        # a quantized name under another Hub organization is that quantizer's own checkpoint
        # (RedHatAI's ...-FP8 quantizes every layer, Meta's keeps attention in bf16): by variant.
        # A local directory of that name (/models/Meta-Llama-3.1-405B-Instruct-FP8) is a download.
        hits = None
    if hits and ":" not in base:
        if not org and not local:  # the repo's own name without its organization; `/NAME` is a local folder
            return _Recipe(hits[0])
        where = f"{_folder(ref)} of that name" if local else "a copy under another organization"
        return _Recipe(hits[0], f"resolved '{ref}' to catalog entry '{_name(hits[0])}' by name ({where}); "
                                f"assumed the same checkpoint")
    v = parse_variant(ref)
    ollama = ":" in base and "/" not in ref.strip()
    cands = idx.stem.get(v.stem) if v.stem else None
    if cands:
        # prefer the entry whose instruct/base words match the reference's
        best, best_variants = min(cands, key=lambda c: (len(c[1] ^ v.variants), c[0]))
        org_as_written = names.split_ref(ref)[0]
        if local:
            why = f"{_folder(ref)} named after it"
        elif ollama:
            why = "an Ollama tag of that model"
        elif org and name_rules.repacker(org) and v.quant and org.lower() != _split(_name(best))[0].lower():
            kind = re.sub(r"\s*\(.*?\)", "", v.quant_label.split(",")[0].replace(" weights", ""))
            why = f"a{'n' if kind[:1] in 'AEFHIMNORSX' else ''} {kind} repack by {org_as_written}"
        else:
            why = "its name is the base's with " + ("quantization words" if v.quant or v.dtype else "variant words")
        sibling = not ollama and v.variants - {"hf", "latest"} != best_variants - {"hf", "latest"}
        return _derived(best, ref, why, v, ollama, sibling)
    d = names.derive(ref, idx.names)
    if d is None:
        return None if ollama or ref.lower().endswith(".gguf") else _close(ref, v, local)
    why = f"{_folder(ref)} named after it; {d.why}" if local else d.why
    return _derived(d.entry, ref, why, v, ollama, False, d.context, d.guess)


def _close(ref: str, v: Variant, local: bool) -> _Recipe | None:
    """A family word at a size whose catalogued releases differ in layers but not in memory
    (models/name_close.py): the one that needs the most memory, said as a guess."""
    from servefit.models import name_close, name_index, name_rules

    idx = _index().names
    ws = list(name_index.name_key(ref))
    word, size, from_library, pool = name_close.candidates(idx, ws, name_rules._other_words(),
                                                           name_rules.generic_words(), name_index._root,
                                                           name_rules.kinds(ws))
    hit = name_close.pick(pool, lambda i: spec_from_entry(_entry(i)), v.quant, idx.names) if pool else None
    if hit is None:
        return None
    why = name_close.why(word, size, from_library, hit[0], pool, hit[1], idx.names)
    return _derived(hit[0], ref, f"{_folder(ref)} named after it; {why}" if local else why, v, False, False, guess=True)


OBJECT_STORES = frozenset({"gs", "gcs", "s3", "s3a", "az", "abfs", "abfss", "wasb", "wasbs", "oss", "r2", "cos", "obs"})


def _folder(ref: str) -> str:
    """What a path-like model reference is: an object-store path (`gs://bucket/...`, `s3://...`), which the
    server or an init step downloads, another URL's location, or a local folder."""
    m = re.match(r"([a-z][a-z0-9+.-]*)://", ref.strip(), re.I)
    if m is None:
        return "a local folder"
    scheme = m.group(1).lower()
    return "an object-store path" if scheme in OBJECT_STORES else f"a {scheme}:// location"


def names_a_model(name: str) -> bool:
    """Whether `name` is a catalogued checkpoint's name (`deepseek-r1`), or carries a catalogued
    family and a size the catalog has for it, matched by name and not as the nearest release of
    its line: a name a deployment gives a server (a service, a llama-swap key) counts as evidence
    of its model only then (`llm`, `vllm-server`, `qwen`, `llm-8b` never do)."""
    r = _recipe(name) if name and name.strip() else None
    if r is None or r.guess:
        return False
    from servefit.models import names

    return not r.assumption or names.has_size(name)


def names_a_family(ref: str) -> bool:
    """Whether the last part of a path carries a catalogued family word (`mixtral.gguf` does,
    `model.gguf` and `/data` do not)."""
    from servefit.models import name_index

    return name_index.carries_family(ref or "", _index().names)


def nearest(ref: str, n: int = 3) -> list[str]:
    """Up to `n` catalog names of the same family as `ref`, same size first (for "did you
    mean" messages); none when no catalogued family is in the name. Cached: a lint run asks for
    the same unknown names many times."""
    from servefit.models import name_index

    return list(_nearest(name_index.name_key(ref or ""), n))


def family_sizes(ref: str) -> list[str]:
    """The sizes the catalog holds for the family `ref` names (`14b`), for an unknown name without
    suggestions: empty when no catalogued family is in the name."""
    from servefit.models import name_index, name_suggest

    return name_suggest.family_sizes(name_index.name_key(ref or ""), _index().names)


@lru_cache(maxsize=1024)
def _nearest(key: tuple[str, ...], n: int) -> tuple[str, ...]:
    from servefit.models import name_suggest

    return tuple(_name(i) for i in name_suggest.nearest(key, n, _index().names))
