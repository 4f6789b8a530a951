"""The model catalog's entries (data/models/*.yaml, one file per family): where each entry's lines
are, each entry parsed once (from its own lines, or the data cache's copy of all), and the
ModelSpec an entry makes. Lookup by name, and the name heuristics, are models/catalog.py's."""

from __future__ import annotations

import copy
import marshal
import os
import re
from dataclasses import fields
from functools import cache, lru_cache
from typing import Any

import yaml

from servefit import data
from servefit.models.architecture import layer_kind, pattern_layers
from servefit.models.recurrent_state import linear_attention_state
from servefit.models.spec import ModelSpec

_SPEC_FIELDS = {f.name for f in fields(ModelSpec)}
# catalog keys that are not ModelSpec fields (or need converting)
_EXTRA = {"layer_pattern", "vision", "hf_params", "note", "mamba", "layer_types", "rope_scaling",
          "quantization", "aliases", "source"}


_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def catalog_files() -> list[str]:
    """The catalog's data files, relative to the data directory, in a fixed order."""
    return data.files("models")


def entries() -> list[dict[str, Any]]:
    """The raw catalog entries, as data/models/*.yaml hold them (do not mutate)."""
    out: list[dict[str, Any]] = []
    for name in catalog_files():
        part = data.load(name)
        if isinstance(part, list):
            out.extend(part)
    return out


@lru_cache(maxsize=1)
def _chunks() -> list[tuple[str, tuple[str, ...], str]]:
    """(name, aliases, YAML text) of every entry (the whole catalog is read to build the index)."""
    return [(name, aliases, _text(fname)[start:end]) for name, aliases, fname, start, end in _spans()]


@lru_cache(maxsize=1)
def _spans() -> list[tuple[str, tuple[str, ...], str, int, int]]:
    """(name, aliases, file, start, end) of every entry, found by scanning lines: parsing the
    whole catalog costs ~10 ms, a lookup parses only the entry it finds. The files keep `name`
    and a flow-style `aliases` list on their own lines (tests check this scan against the parse)."""
    out = []
    for fname in catalog_files():
        text = _text(fname)
        starts = [m.start() for m in re.finditer(r"(?m)^- name: ", text)]
        for k, at in enumerate(starts):
            end = starts[k + 1] if k + 1 < len(starts) else len(text)
            chunk = text[at:end]
            name = chunk[len("- name: "):chunk.index("\n")].strip()
            m = re.search(r"(?m)^  aliases: \[(.*)\]\s*$", chunk)
            aliases = tuple(a.strip() for a in m.group(1).split(",") if a.strip()) if m else ()
            out.append((name, aliases, fname, at, end))
    return out


@cache
def _text(fname: str) -> str:
    return (data.DATA_DIR / fname).read_text(encoding="utf-8")


@cache
def _entry(i: int) -> dict[str, Any]:
    """Entry `i`: the first few a process asks for parsed from their own lines (~130 us each: a lint of
    one file needs one or two), the rest from the data cache's copy of every entry (~1 ms to read,
    then ~5 us each: a lint of names the catalog does not list touches dozens)."""
    _ASKED[0] += 1
    blob = _entry_blobs()[i] if _ASKED[0] > 4 else b""
    if blob:
        return marshal.loads(blob)  # type: ignore[no-any-return]
    fname, start, end = _exact()[1][i]
    parsed = yaml.load(_text(fname)[start:end], Loader=_LOADER)
    return parsed[0] if isinstance(parsed, list) and parsed else {}


_ASKED = [0]  # entries parsed so far in this process


@lru_cache(maxsize=1)
def _entry_blobs() -> list[bytes]:
    """Each entry as marshal bytes, kept in the data cache (keyed by the catalog files and this code):
    b"" for one that its family's parse does not line up with the index, or marshal cannot hold."""
    def build() -> list[bytes]:
        out: list[bytes] = []
        at: dict[str, int] = {}
        for name, _, fname, _, _ in _spans():
            k = at[fname] = at.get(fname, -1) + 1
            part = data.load(fname)
            e = part[k] if isinstance(part, list) and k < len(part) else None
            try:
                out.append(marshal.dumps(e) if isinstance(e, dict) and e.get("name") == name else b"")
            except ValueError:
                out.append(b"")
        return out

    inputs: list[str | os.PathLike[str]] = [*(data.DATA_DIR / f for f in catalog_files()), __file__]
    return data.derived("catalog-entries", inputs, build)


def _name(i: int) -> str:
    return _exact()[2][i]


def spec_from_entry(e: dict[str, Any]) -> ModelSpec:
    """A fresh ModelSpec for a catalog entry (defaults filled, layer pattern expanded)."""
    kw: dict[str, Any] = {k: v for k, v in e.items() if k in _SPEC_FIELDS and k not in _EXTRA}
    n = int(e["num_hidden_layers"])
    if "head_dim" not in kw:
        if e.get("kv_lora_rank"):
            kw["head_dim"] = int(e["qk_nope_head_dim"]) + int(e["qk_rope_head_dim"])
        else:
            kw["head_dim"] = int(e["hidden_size"]) // int(e["num_attention_heads"])
    pat = e.get("layer_pattern")
    if pat:
        kind = layer_kind(pat["kind"])
        kw["layer_types"] = pattern_layers(n, int(pat.get("every", 0)), int(pat.get("full_at", -1)), kind)
    elif e.get("layer_types"):
        kw["layer_types"] = [layer_kind(k) for k in e["layer_types"]]
    if e.get("mamba"):
        kw["mamba"] = linear_attention_state(e["mamba"])
    rope = e.get("rope_scaling")
    if rope:
        kw["rope_scaling"] = dict(rope)
        if "original_max_position_embeddings" not in kw and rope.get("original_max_position_embeddings"):
            kw["original_max_position_embeddings"] = int(rope["original_max_position_embeddings"])
    if e.get("quantization"):
        kw["quantization"] = copy.deepcopy(e["quantization"])
    kw["aliases"] = list(e.get("aliases") or [])
    spec = ModelSpec(**kw)
    vision = e.get("vision")
    if vision:
        from servefit.models.vision import count_vision_params  # a vision tower's own counting

        spec.vision_params = count_vision_params(vision, spec.hidden_size, spec.model_type)
        spec.vision = dict(vision)
    spec.resolved_from = "catalog"
    return spec


@cache
def _spec(i: int) -> tuple[ModelSpec, tuple[str, ...]]:
    """Entry `i`'s spec, built once (a lint sizes many names as the same few entries), and its fields that
    hold a list or a dict. Never handed out: _fresh_spec copies it."""
    spec = spec_from_entry(_entry(i))
    return spec, tuple(f for f, v in spec.__dict__.items() if isinstance(v, (list, dict)))


def _fresh_spec(i: int) -> ModelSpec:
    """A copy of entry `i`'s spec the caller may change, as spec_from_entry makes it: its lists and dicts
    are new ones (what they hold is shared with the parsed entry, as spec_from_entry shares it), the
    quantization a deep copy."""
    proto, mutable = _spec(i)
    spec = ModelSpec.__new__(ModelSpec)
    own = spec.__dict__
    own.update(proto.__dict__)
    for f in mutable:
        own[f] = copy.deepcopy(own[f]) if f == "quantization" else own[f].copy()
    return spec


def all_models() -> list[ModelSpec]:
    """Every catalogued model, in catalog order."""
    return [spec_from_entry(e) for e in entries()]


@lru_cache(maxsize=1)
def _exact() -> tuple[dict[str, int], list[tuple[str, int, int]], list[str]]:
    """What an exact lookup needs, kept in the data cache: each name and alias (lower case) ->
    entry, where each entry's lines are, each entry's name. The name heuristics' index is ~6x
    larger to read and only a name the catalog does not list needs it."""
    def build() -> tuple[dict[str, int], list[tuple[str, int, int]], list[str]]:
        full: dict[str, int] = {}
        for i, (name, aliases, _, _, _) in enumerate(_spans()):
            for rid in (name, *aliases):
                full.setdefault(rid.lower(), i)
        return full, [(f, a, b) for _, _, f, a, b in _spans()], [name for name, *_ in _spans()]

    inputs: list[str | os.PathLike[str]] = [*(data.DATA_DIR / f for f in catalog_files()), __file__]
    full, spans, entry_names = data.derived("catalog-names", inputs, build)
    return full, spans, entry_names
