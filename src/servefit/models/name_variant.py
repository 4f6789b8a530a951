"""What a model name says beyond its architecture: the quantization its words imply (`-AWQ`, `-GPTQ-Int4`,
`Q4_K_M`, `-bnb-4bit`), its instruct/base words, an unquantized dtype re-upload (`-bf16`), and the stem
left, which models/catalog.py looks up (`Meta-Llama-3.1-8B-Instruct-AWQ-INT4` is Llama-3.1-8B-Instruct's)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from servefit.models import quant_names
from servefit.models.name_words import remembered_match

_VARIANT = {"instruct", "it", "chat", "hf", "base", "pt", "latest"}
_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "f16": "float16", "fp32": "float32", "f32": "float32"}
_GGUF_TYPE = re.compile(r"^(i?q[1-8](_[a-z0-9]+)*|tq[12]_0)$")


@dataclass(frozen=True)
class Variant:
    """What a model name says beyond its architecture."""

    stem: str  # tokens of the base name without variant / quantization words, joined
    variants: frozenset[str]  # instruct / it / chat / base ...
    quant: dict[str, Any] | None
    quant_label: str  # "AWQ 4-bit, group 128"
    dtype: str | None  # "-bf16" / "-fp16" re-uploads


def _split(ref: str) -> tuple[str, str]:
    """(org, base name) of a repo id, local path, GGUF file name or Ollama tag."""
    s = ref.strip().rstrip("/")
    parts = s.split("/")
    base = parts[-1]
    org = parts[-2].lower() if len(parts) >= 2 else ""
    return org, base


_SHARD_GGUF = re.compile(r"(-\d{5}-of-\d{5})?\.gguf$")  # split GGUF shards
_QUANTIZED = re.compile(r"[-._]quantized[._]")  # RedHatAI ...-quantized.w4a16


_DOT_WORD = re.compile(r"\.(?=[a-z])")  # Llama-3.1-8B-Instruct.FP8, ...-v0.2.Q4_K_M (not a version's dot)
_UNDERSCORE_VERSION = re.compile(r"(?<=[a-pr-z])(\d+)_(\d+)(?=$|[-_])")  # qwen2_5, not q4_0
_GGUF_TAIL = re.compile(r"(?:^|_)((?:i?q[1-8]|tq[12])(?:_[a-z0-9]+)*)$")


def _tokens(base: str) -> list[str]:
    """Name words, split at `-`, `:`, a dot before a letter, and `_` outside a version (qwen2_5) or
    a GGUF file type (q4_k_m): `Qwen2.5_7B_Instruct_AWQ` and `Qwen2.5-7B-Instruct-AWQ` agree."""
    s = base.lower()
    if ".gguf" in s:  # each pattern only where its text is (a name is cut for every lookup)
        s = _SHARD_GGUF.sub("-gguf", s)
    s = s.replace(":", "-")  # Ollama name:tag
    if "quantized" in s:
        s = _QUANTIZED.sub("-quantized-", s)
    if "_" in s:
        s = _UNDERSCORE_VERSION.sub(r"\1.\2", s)
    else:
        return [t for t in (_DOT_WORD.sub("-", s) if "." in s else s).split("-") if t]
    if "." in s:
        s = _DOT_WORD.sub("-", s)
    out: list[str] = []
    for t in s.split("-"):
        tail = _GGUF_TAIL.search(t) if "_" in t else None
        if tail:  # model_q4_k_m: the file type stays one word
            out.extend(t[:tail.start()].split("_") + [tail.group(1)])
        else:
            out.extend(t.split("_"))
    return [t for t in out if t]


_GGUF_TYPES: dict[str, bool] = {}  # word -> whether it is a GGUF file type (asked twice for every word)


def _gguf_type(word: str) -> bool:
    return remembered_match(_GGUF_TYPES, _GGUF_TYPE, word)


def parse_variant(ref: str) -> Variant:
    """Split a model reference into its architecture stem and the quantization its name implies
    (cached: a lint asks for the same names many times; `quant` is shared, copy before changing)."""
    return _parse_variant(ref)


@lru_cache(maxsize=4096)
def _parse_variant(ref: str) -> Variant:
    org, base = _split(ref)
    toks = _tokens(base)
    ts = set(toks)
    gguf_type = dtype = None
    for x in toks:  # the first GGUF file type and the first dtype word
        if gguf_type is None and _gguf_type(x):
            gguf_type = x
        if dtype is None and x in _DTYPE:
            dtype = _DTYPE[x]
    quant, label = quant_names.scheme(toks, org, gguf_type, dtype)  # -AWQ, -autoawq, GPTQ-Int8, exl2 ...
    variants = frozenset(x for x in toks if x in _VARIANT)
    stem_toks = [x for x in toks if x not in _VARIANT and not quant_names.is_quant_word(x, ts) and x not in _DTYPE
                 and not _gguf_type(x)]
    if stem_toks and stem_toks[0] == "meta":  # Meta-Llama-3.1-8B == Llama-3.1-8B
        stem_toks = stem_toks[1:]
    return Variant(stem="".join(stem_toks), variants=variants, quant=quant, quant_label=label, dtype=dtype)
