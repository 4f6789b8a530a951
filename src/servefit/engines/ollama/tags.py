"""Ollama model names (`llama3.1:8b-instruct-q4_K_M`, `hf.co/ORG/REPO:QUANT`) -> the checkpoint
they are built from, its quantization and the library's context (data/ollama_tags.yaml)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from servefit import data
from servefit.models.gguf_names import canonical_quant, parse_ref


@dataclass(frozen=True)
class Tag:
    """What an Ollama model name stands for: the checkpoint and quantization it is built from, the library's
    context, and whether it runs on Ollama's cloud instead of this GPU."""

    model: str | None  # Hugging Face id the tag is built from; None when not in the table
    quant: str | None  # llama.cpp file type (Q4_K_M, Q4_0, MXFP4_MOE, F16 ...)
    context: int  # the library's context window (0: the checkpoint's own)
    note: str  # what was read, for the assumptions
    cloud: bool = False  # runs on ollama.com: no local memory


def table() -> dict[str, Any]:
    return data.load("ollama_tags.yaml")  # type: ignore[no-any-return]


def _suffix_quant(parts: list[str]) -> str | None:
    """The quantization a tag ends with: `8b-instruct-q4_K_M` -> Q4_K_M, `-fp16` -> F16."""
    for i in range(len(parts)):
        q = canonical_quant("_".join(parts[i:]).replace("fp16", "f16"))
        if q:
            return q
    return None


def library_size(name: str, tag: str) -> Tag | None:
    """The table's answer for `name:tag` only where `name` is a library name and the tag's leading
    words name one of its sizes (`deepseek-r1`, `8b-llama-distill-q4_K_M`); None otherwise. For a
    file named after an Ollama model, where the colon could not be written."""
    lib = table()["library"].get(name.lower())
    low = [p.lower() for p in re.split(r"[-:]", tag) if p]
    if lib is None or not low or _size(lib, low) is None:
        return None
    found = lookup(f"{name.lower()}:{tag}")
    return found if found.model else None


_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


def lookup(ref: str) -> Tag:
    """The table's answer for an Ollama model reference."""
    if _DRIVE.match(ref.strip()):  # FROM F:/models/X: a local folder, not name:tag
        return Tag(None, None, 0, f"{ref.strip()} is a local path, not an Ollama library name")
    r = re.sub(r"^(https?://)?(registry\.ollama\.ai/|ollama\.com/)?(library/)?", "", ref.strip())
    if r.startswith(("hf.co/", "huggingface.co/")):
        base, quant, _ = parse_ref(r.split("/", 1)[1])
        return Tag(None, quant, 0, f"Hugging Face GGUF {base}")
    t = table()
    name, _, tag = r.partition(":")
    name = name.rsplit("/", 1)[-1].lower()
    tag = tag or "latest"
    parts = [p for p in re.split(r"[-:]", tag) if p]
    cloud_word = str(t.get("cloud_suffix") or "cloud")
    if cloud_word in (p.lower() for p in parts):
        return Tag(None, None, 0, f"{name}:{tag} runs on Ollama's cloud (ollama.com), not on this GPU", cloud=True)
    quant = _suffix_quant(parts)
    low = [p.lower() for p in parts]
    lib = t["library"].get(name)
    if lib is None:
        return _carried(t, name, r if ":" in r else f"{r}:{tag}", low, quant)
    size = _size(lib, low)
    if size is None and low and low[0] not in ("latest",) and _SIZE.fullmatch(low[0]):
        return Tag(None, quant, 0, f"{name}:{tag}: the library has no {low[0]} size "
                                   f"(it has {', '.join(str(s) for s in lib['sizes'])})")
    return _tag(t, lib, size or str(lib["default"]), quant, f"{name}:{tag}")


_SIZE = re.compile(r"(\d+(\.\d+)?[bm]|\d+x\d+b|e\d+b)")


def _size(lib: dict[str, Any], low: list[str]) -> str | None:
    """The size the tag's leading words name (the longest: micro-h, 30b-a3b), or None."""
    sizes, aliases = lib["sizes"], {str(k).lower(): str(v) for k, v in (lib.get("aliases") or {}).items()}
    for n in range(len(low), 0, -1):
        key = "-".join(low[:n])
        if key in sizes or key in aliases:
            return aliases.get(key, key)
    return None


def _tag(t: dict[str, Any], lib: dict[str, Any], size: str, quant: str | None, shown: str, why: str = "") -> Tag:
    entry = lib["sizes"][size]
    model = entry["model"] if isinstance(entry, dict) else entry
    context = int((entry.get("context") if isinstance(entry, dict) else 0) or lib.get("context") or 0)
    quant = quant or (entry.get("quant") if isinstance(entry, dict) else None) or lib.get("quant") \
        or t["defaults"]["quant"]
    return Tag(str(model), str(quant), context, f"{shown} -> {model} ({quant}){why}")


def _carried(t: dict[str, Any], name: str, shown: str, low: list[str], quant: str | None) -> Tag:
    """A name outside the table whose leading words are a library name and whose tag names one of
    its sizes (`huihui_ai/deepseek-r1-abliterated:8b`: a fine-tune published under a user's
    namespace) is sized as that library model, and says so; anything else stays unknown."""
    words = name.split("-")
    for n in range(len(words) - 1, 0, -1):
        lib = t["library"].get("-".join(words[:n]))
        size = _size(lib, low) if lib is not None else None
        if lib is not None and size is not None:
            base = "-".join(words[:n])
            return _tag(t, lib, size, quant, shown,
                        f"; not a library name: its name carries the library's {base} and the tag its size "
                        f"{size}, and a fine-tune keeps its base's architecture")
    return Tag(None, quant, 0, f"{name} is not in servefit's Ollama tag table")
