"""Cutting a model name into words: quantization and file words dropped, each family word
joined to its version (`llama3.1`, `qwen2.5`), and the size key (`8b`, `30b-a3b`, `8x7b`,
`mini`). What models/names.py matches against the catalog."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

_SIZE = re.compile(r"^(\d+(?:\.\d+)?[bm]|\d+x\d+(?:\.\d+)?b|e\d+b)$")  # 8b, 125m, 8x7b, e4b
_PART = re.compile(r"^(a\d+(?:\.\d+)?b|\d+e)$")  # a3b (active), 16e (experts): part of the size
SIZE_WORDS = {"mini", "small", "medium", "large", "nano", "tiny", "micro"}  # Phi-3-mini
_V_VERSION = re.compile(r"^v\d{1,2}(?:\.\d+)*$")  # a family's version written with a v, right before the size
_VERSION = re.compile(r"^(\d{1,2}(?:\.\d+)*|\d+n)$")  # joins the family word before it: llama 3.1, gemma 3n
STOP_WORDS = {"instruct", "it", "chat", "base", "hf", "pt", "latest"}
_GGUF = re.compile(r"(?:^|[-_.])(?:ud[-_]|i1[-_])?(?:i?q[1-8](?:_[a-z0-9]+)*|q[2-6]k[sml]?|tq[12]_0|bf16|f16|f32|fp16)"
                   r"(?=$|[-_.])")
_SHARD = re.compile(r"-\d{5}-of-\d{5}$")
# qwen2_5 folders; ModelScope's download cache writes a dot as three underscores (Qwen3___5-35B-A3B)
_UNDERSCORE_VERSION = re.compile(r"(?<=[a-z])(\d+)_(\d+)(?=$|[-_])|(\d+)___(\d+)")
# a size with an underscore for its decimal point (Qwen-1_8B, stablelm-2-1_6b, OpenELM-1_1B): only as a word of
# its own, so that saiga_llama3_8b stays llama3 at 8B
_UNDERSCORE_SIZE = re.compile(r"(?<![\w.])(\d)_(\d)(?=[bm](?:$|[-_.\s]))")
_DOT_WORD = re.compile(r"\.(?=[a-z])")
SEP = re.compile(r"[-_\s]+")
_DROP = {"gguf", "awq", "gptq", "int4", "int8", "int3", "fp8", "fp4", "nvfp4", "mxfp4", "bnb", "dynamic", "static",
         "2bit", "3bit", "4bit", "5bit", "6bit", "8bit", "w4a16", "w8a8", "w8a16", "w4a8", "quantized", "mlx",
         "exl2", "marlin", "calibrated", "g128", "128g", "g32", "32g", "dwq", "ud", "i1", "imat", "imatrix", "unsloth", "qat",
         "bf16", "fp16", "f16", "fp32", "f32"}


# path components that do not name the model: the folder above them does
_GENERIC = re.compile(r"^([0-9a-f]{40}|snapshots|main|final|model|models|hf|merged|weights|latest|"
                      r"checkpoint-\d+|step-?\d+|global_step\d+|export|output|safetensors)$", re.I)
_HUB_PREFIX = re.compile(r"^(https?://)?(hf\.co|huggingface\.co)/")


def file_name(path: str) -> str:
    """The last part of a path written with `/` or with Windows' `\\` (F:\\models\\x.gguf in a
    llama-swap config run on Windows): os.path.basename splits only on this machine's separator."""
    return re.split(r"[\\/]", path)[-1]


@lru_cache(maxsize=8192)
def split_ref(ref: str) -> tuple[str, str, bool]:
    """(organization or parent folder, last name, is a local path) of a reference."""
    s = ref.strip().rstrip("/")
    if "co/" in s:
        s = _HUB_PREFIX.sub("", s)
    path = s.startswith(("/", ".", "~")) or s.count("/") > 1 or "\\" in s
    parts = s.replace("\\", "/").split("/")
    while path and len(parts) > 2 and (_GENERIC.match(parts[-1]) or parts[-2] == "snapshots"):
        parts.pop()  # .../Qwen2-7B-Instruct/snapshots/<hash>
    return (parts[-2] if len(parts) >= 2 else ""), parts[-1], path


def words(name: str) -> list[str]:
    """Lower-case words of a model name without quantization or file words, each family word
    joined to its version: `Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf` -> meta llama3.1 8b instruct."""
    return list(word_tuple(name))


@lru_cache(maxsize=8192)
def word_tuple(name: str) -> tuple[str, ...]:
    s = name.lower()
    if s.endswith(".gguf"):
        s = _SHARD.sub("", s[:-5])
    s = s.replace(":", "-")  # Ollama name:tag
    s = _GGUF.sub("-", s)
    if "_" in s:
        s = _UNDERSCORE_SIZE.sub(r"\1.\2", s)  # Qwen-1_8B is 1.8B, not Qwen1 at 8B
        s = _UNDERSCORE_VERSION.sub(lambda m: f"{m[1] or m[3]}.{m[2] or m[4]}", s)  # qwen2_5 folders
    if "." in s:
        s = _DOT_WORD.sub("-", s)  # ...-quantized.w4a16
    toks = [t for t in SEP.split(s) if t and t not in _DROP]
    out: list[str] = []
    for i, t in enumerate(toks):
        if out and _VERSION.match(t) and out[-1].isalpha() and out[-1] not in STOP_WORDS:
            out[-1] += t
        elif (out and _V_VERSION.match(t) and out[-1].isalpha() and out[-1] not in STOP_WORDS
              and i + 1 < len(toks) and _SIZE.match(toks[i + 1])):
            out[-1] += t[1:]  # llava-v1.5-7b is llava-1.5-7b, starcoder-v2-15b starcoder2-15b
        else:
            out.append(t)
    return tuple(out)


_SIZE_WORD: dict[str, bool] = {}  # word -> whether it is a size: asked for every word of every name
_PART_WORD: dict[str, bool] = {}


def remembered_match(table: dict[str, bool], pattern: re.Pattern[str], word: str) -> bool:
    """Whether `pattern` matches `word`, remembered in `table` (asked for every word of every name)."""
    got = table.get(word)
    if got is None:
        if len(table) > 65536:
            table.clear()
        got = table[word] = pattern.match(word) is not None
    return got


def size_at(ws: list[str], i: int) -> str | None:
    """The size key starting at word i (`30b` + `a3b` -> `30b-a3b`), or None."""
    if i >= len(ws) or not remembered_match(_SIZE_WORD, _SIZE, ws[i]):
        return None
    if i + 1 < len(ws) and remembered_match(_PART_WORD, _PART, ws[i + 1]):
        return f"{ws[i]}-{ws[i + 1]}"
    return ws[i]


@dataclass(frozen=True)
class Parsed:
    """A catalog name cut for matching: its family words, its size key, and the words after the size."""

    family: tuple[str, ...]
    size: str | None
    rest: tuple[str, ...]  # words after the size


def parse(name: str) -> Parsed:
    """Family words, size key and the words after it, of a catalog repo name."""
    ws = words(split_ref(name)[1])
    if ws and ws[0] == "meta":
        ws = ws[1:]
    for i in range(len(ws)):
        sz = size_at(ws, i)
        if sz:
            return Parsed(tuple(ws[:i]), sz, tuple(ws[i + 1 + sz.count("-"):]))
    for i, w in enumerate(ws):
        if w in SIZE_WORDS and i > 0:
            return Parsed(tuple(ws[:i]), w, tuple(ws[i + 1:]))
    cut = next((i for i, w in enumerate(ws) if w in STOP_WORDS or re.fullmatch(r"v?\d[\d.]*", w)), len(ws))
    return Parsed(tuple(ws[:cut]), None, tuple(ws[cut:]))
