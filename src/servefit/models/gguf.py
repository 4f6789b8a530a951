"""GGUF model files: the header (metadata + tensor table) without reading any tensor data.

One small header-only parser reads complete files and truncated or partial downloads alike
(gguf.GGUFReader memory-maps the whole file and builds an array per token: ~200 bytes of memory
per file byte on a hostile vocabulary, so it is not used). Layout per gguf-py/gguf/gguf_reader.py and
  ggml/src/gguf.cpp::gguf_init_from_file_impl: magic "GGUF", u32 version, u64 tensor_count,
  u64 kv_count, the KV pairs, then per tensor: name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset.

Weight bytes come from the tensor table (`n_elements / block_size * type_size`, ggml.c::ggml_nbytes),
never from `general.file_type`. Without a file, `resolve_gguf_ref` maps a GGUF file name or an
HF-style `repo:QUANT` reference to the catalog by name (and says so in the assumptions).
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from servefit import data
from servefit.core import UsageError

MAGIC = b"GGUF"
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
BIG_ARRAY = 4096  # arrays longer than this keep only their length (tokenizer vocab, merges)


@lru_cache(maxsize=1)
def type_table() -> dict[int, tuple[str, int, int]]:
    """GGML type id -> (name, block size, bytes per block), ggml.c::type_traits."""
    return {int(k): (v[0], int(v[1]), int(v[2])) for k, v in data.load("gguf_quants.yaml")["types"].items()}


@lru_cache(maxsize=1)
def type_by_name() -> dict[str, tuple[int, int, int]]:
    return {name.upper(): (tid, blk, size) for tid, (name, blk, size) in type_table().items()}


def row_bytes(type_name: str, n: int) -> int:
    """ggml.c::ggml_row_size: n elements of a type (n a multiple of its block)."""
    _, blk, size = type_by_name()[type_name.upper()]
    return (n // blk) * size if n % blk == 0 else -(-n // blk) * size


def tensor_bytes(type_name: str, n_elements: int) -> int:
    return row_bytes(type_name, n_elements)


@dataclass(frozen=True)
class TensorInfo:
    """One entry of a GGUF tensor table: name, ggml shape, type and the bytes of its data."""

    name: str
    shape: tuple[int, ...]  # ggml order: ne[0] is the row length
    type: str  # F16, Q4_K, ...
    nbytes: int

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass
class GgufInfo:
    """A GGUF file's header (metadata and tensor table), and whether the file or the header itself was cut
    short, as partial downloads are."""

    path: str
    version: int
    kv: dict[str, Any]
    tensors: list[TensorInfo]
    truncated: bool = False  # the header itself ended early
    complete: bool = True  # tensor data present up to the last tensor
    reader: str = "header"  # header | gguf

    @property
    def arch(self) -> str:
        return str(self.kv.get("general.architecture", ""))

    def get(self, key: str, default: Any = None) -> Any:
        """`{arch}.key` or a general key."""
        if key in self.kv:
            return self.kv[key]
        return self.kv.get(f"{self.arch}.{key}", default)

    @property
    def n_vocab(self) -> int:
        v = self.get("vocab_size")
        if v:
            return int(v)
        toks = self.kv.get("tokenizer.ggml.tokens")
        if isinstance(toks, ArrayLen):
            return toks.n
        return len(toks) if isinstance(toks, list) else 0

    @property
    def weight_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)


@dataclass(frozen=True)
class ArrayLen:
    """A long array whose elements were skipped; only its length is kept."""

    n: int
    item_type: int = 8


class _Truncated(Exception):
    pass


# Bounds on what a header may ask servefit to hold or walk (real files: ~50 keys, <2,000 tensors
# per shard, vocabularies up to 262k tokens and ~500k merges, strings under 1 KB but chat
# templates of tens of KB). Past a bound the header is refused with a message naming it.
MAX_KV = 1 << 16
MAX_TENSORS = 1 << 16
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_DIM = 1 << 40
MAX_STRING = 1 << 20  # one string value kept in memory
MAX_KEPT = 32 << 20  # all kept strings together
MAX_ARRAY = 1 << 24  # elements of a numeric array (skipped by seeking)
MAX_STRING_ARRAY = 1 << 22  # strings in one array (walked one by one to skip them)
_CHUNK = 1 << 16


class _Reader:
    """Sequential reads through a small buffer; only what is kept is allocated."""

    def __init__(self, fh: Any, path: str) -> None:
        self.fh = fh
        self.path = path
        self.kept = 0

    def take(self, n: int) -> bytes:
        b = self.fh.read(n)
        if len(b) < n:
            raise _Truncated()
        return bytes(b)

    def scalar(self, t: int) -> Any:
        fmt = _SCALAR[t]
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self, what: str = "a string") -> str:
        (n,) = struct.unpack("<Q", self.take(8))
        if n > MAX_STRING:
            raise ValueError(f"{what} of {n:,} bytes, over the {MAX_STRING >> 20} MiB bound on one string")
        self.kept += n
        if self.kept > MAX_KEPT:
            raise ValueError(f"metadata strings over {MAX_KEPT >> 20} MiB in all")
        return self.take(n).decode("utf-8", errors="replace")

    def skip_strings(self, count: int) -> None:
        """Skip `count` length-prefixed strings, parsing lengths out of buffered chunks."""
        buf = b""
        pos = 0
        left = count
        unpack = struct.unpack_from
        while left:
            if len(buf) - pos < 8:
                more = self.fh.read(_CHUNK)
                if not more:
                    raise _Truncated()
                buf = buf[pos:] + more
                pos = 0
                continue
            (n,) = unpack("<Q", buf, pos)
            if n > MAX_DIM:
                raise ValueError(f"a string of {n:,} bytes in an array")
            end = pos + 8 + n
            left -= 1
            if end <= len(buf):
                pos = end
                continue
            skip = end - len(buf)
            buf, pos = b"", 0
            here = self.fh.tell()
            self.fh.seek(skip, os.SEEK_CUR)
            if self.fh.tell() != here + skip:
                raise _Truncated()
        if pos < len(buf):  # give back what was read ahead
            self.fh.seek(pos - len(buf), os.SEEK_CUR)

    def value(self, t: int, key: str) -> Any:
        if t == 8:
            return self.string(key)
        if t == 9:
            (it,) = struct.unpack("<I", self.take(4))
            (n,) = struct.unpack("<Q", self.take(8))
            if it == 8 and n > MAX_STRING_ARRAY:
                raise ValueError(f"array {key} holds {n:,} strings, over the bound of {MAX_STRING_ARRAY:,}")
            if n > MAX_ARRAY:
                raise ValueError(f"array {key} holds {n:,} entries, over the bound of {MAX_ARRAY:,}")
            if n > BIG_ARRAY:
                if it == 8:
                    self.skip_strings(n)
                elif it in _SCALAR:
                    self.fh.seek(n * struct.calcsize(_SCALAR[it]), os.SEEK_CUR)
                else:
                    raise ValueError(f"{key}: array of type {it} is not supported")
                return ArrayLen(n, it)
            if it == 9:
                raise ValueError(f"{key}: nested arrays are not read")
            return [self.value(it, key) for _ in range(n)]
        if t in _SCALAR:
            return self.scalar(t)
        raise ValueError(f"{key}: unknown GGUF value type {t}")


def read_header(path: str) -> GgufInfo:
    """Parse the GGUF header of a possibly truncated file (no tensor data read), in memory
    proportional to the fields kept; every count is bounded (see MAX_*)."""
    from servefit.safe_io import open_regular

    types = type_table()
    try:
        fh = open_regular(path)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    with fh:
        size = os.fstat(fh.fileno()).st_size
        r = _Reader(fh, path)
        try:
            if r.take(4) != MAGIC:
                raise UsageError(f"{path}: not a GGUF file (bad magic)")
            (version,) = struct.unpack("<I", r.take(4))
        except _Truncated:
            raise UsageError(f"{path}: not a GGUF file (too short)") from None
        if version not in (2, 3):
            raise UsageError(f"{path}: GGUF version {version} is not supported (2 and 3 are)")
        kv: dict[str, Any] = {}
        tensors: list[TensorInfo] = []
        truncated = False
        try:
            n_tensors, n_kv = struct.unpack("<QQ", r.take(16))
            if n_tensors > MAX_TENSORS or n_kv > MAX_KV:
                raise UsageError(f"{path}: implausible GGUF header ({n_tensors:,} tensors, {n_kv:,} keys; the bounds "
                                 f"are {MAX_TENSORS:,} and {MAX_KV:,})")
            for _ in range(n_kv):
                key = r.string("a key")
                (vt,) = struct.unpack("<I", r.take(4))
                kv[key] = r.value(vt, key[:80])
            offsets = []
            for _ in range(n_tensors):
                name = r.string("a tensor name")
                (nd,) = struct.unpack("<I", r.take(4))
                if nd > MAX_DIMS:
                    raise ValueError(f"tensor {name[:80]}: {nd} dimensions (at most {MAX_DIMS})")
                shape = struct.unpack(f"<{nd}Q", r.take(8 * nd))
                (tid,) = struct.unpack("<I", r.take(4))
                (off,) = struct.unpack("<Q", r.take(8))
                tname, blk, tsize = types.get(tid, (f"TYPE{tid}", 1, 0))
                n = 1
                for d in shape:
                    if d > MAX_DIM:
                        raise ValueError(f"tensor {name[:80]}: dimension {d:,} over 2^40")
                    n *= d
                if n > 1 << 50:
                    raise ValueError(f"tensor {name[:80]}: {n:,} elements")
                tensors.append(TensorInfo(name, tuple(shape), tname, n // blk * tsize))
                offsets.append(off)
            header_end = fh.tell()
        except _Truncated:
            truncated = True
            header_end = 0
        except (ValueError, struct.error, OverflowError) as exc:
            raise UsageError(f"{path}: malformed GGUF header ({exc})") from None
    check_fields(path, kv)
    complete = False
    if not truncated:
        align = kv.get("general.alignment", 32) or 32
        data_start = -(-header_end // align) * align
        end = max((o + t.nbytes for o, t in zip(offsets, tensors, strict=True)), default=0)
        complete = size >= data_start + end
    return GgufInfo(path=path, version=version, kv=kv, tensors=tensors, truncated=truncated, complete=complete)


# Header fields read as counts: suffix after `{arch}.` -> (bound kind, smallest valid value).
# Per-layer keys may be arrays (one value per layer).
_GGUF_COUNTS: dict[str, tuple[str, int]] = {
    "block_count": ("layers", 0), "context_length": ("positions", 0), "embedding_length": ("hidden", 0),
    "feed_forward_length": ("intermediate", 0), "attention.head_count": ("heads", 0),
    "attention.head_count_kv": ("heads", 0), "attention.key_length": ("head_dim", 0),
    "attention.value_length": ("head_dim", 0), "attention.key_length_swa": ("head_dim", 0),
    "attention.value_length_swa": ("head_dim", 0), "attention.key_length_mla": ("head_dim", 0),
    "expert_count": ("experts", 0), "expert_used_count": ("experts", 0), "expert_shared_count": ("experts", 0),
    "expert_feed_forward_length": ("intermediate", 0), "leading_dense_block_count": ("layers", 0),
    "attention.kv_lora_rank": ("rank", 0), "attention.q_lora_rank": ("rank", 0),
    "rope.dimension_count": ("head_dim", 0), "attention.sliding_window": ("window", 0),
    "vocab_size": ("vocab", 0), "ssm.conv_kernel": ("small", 0), "ssm.inner_size": ("intermediate", 0),
    "ssm.state_size": ("rank", 0), "ssm.group_count": ("heads", 0), "ssm.time_step_rank": ("rank", 0),
    "attention.shared_kv_layers": ("layers", 0), "token_shift_count": ("small", 0), "wkv.head_size": ("head_dim", 0),
    "shortconv.l_cache": ("small", 0), "attention.sliding_window_pattern": ("layers", 0),
}


def check_fields(path: str, kv: dict[str, Any]) -> None:
    """Every header field servefit reads, by type and range: one UsageError naming the field."""
    from servefit.budget import BadValue, count

    arch = kv.get("general.architecture")
    if arch is not None and not isinstance(arch, str):
        raise UsageError(f"{path}: general.architecture is not a string")
    try:
        align = kv.get("general.alignment")
        if align is not None:
            a = count(align, "general.alignment", "small", minimum=1)
            if a & (a - 1):
                raise BadValue(f"general.alignment is {a}, not a power of two")
        if kv.get("general.file_type") is not None:
            count(kv["general.file_type"], "general.file_type", "small")
        for key, v in kv.items():
            suffix = key[len(arch) + 1:] if isinstance(arch, str) and key.startswith(arch + ".") else None
            if suffix not in _GGUF_COUNTS:
                continue
            kind, low = _GGUF_COUNTS[suffix]  # type: ignore[index]
            if isinstance(v, ArrayLen):
                raise BadValue(f"{key} is an array of {v.n:,} entries")
            for i, x in enumerate(v if isinstance(v, list) else [v]):
                if suffix == "attention.sliding_window_pattern" and isinstance(x, bool):
                    continue
                count(x, key if not isinstance(v, list) else f"{key}[{i}]", kind, minimum=low)
    except BadValue as exc:
        raise UsageError(f"{path}: {exc}") from None


@lru_cache(maxsize=32)
def _read_cached(path: str, mtime: float, size: int) -> GgufInfo:
    return read_header(path)


def read_gguf(path: str) -> GgufInfo:
    """Header facts of a local GGUF, all split shards summed (`-00001-of-00003.gguf`)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from None
    info = _read_cached(path, st.st_mtime, st.st_size)
    m = _SPLIT.search(path)
    if m and int(m.group(2)) > 1:
        tensors = list(info.tensors)
        for i in range(1, min(int(m.group(2)), 512) + 1):
            shard = path[: m.start()] + f"-{i:05d}-of-{m.group(2)}.gguf"
            if shard != path and os.path.exists(shard):
                s = os.stat(shard)
                tensors.extend(_read_cached(shard, s.st_mtime, s.st_size).tensors)
        info = GgufInfo(info.path, info.version, info.kv, tensors, info.truncated, info.complete, info.reader)
    return info


_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.I)


def _max(v: Any, default: int = 0) -> int:
    if isinstance(v, list):
        return max((int(x) for x in v), default=default)
    return int(v) if v is not None else default


def swa_layers(info: GgufInfo, n_layer: int) -> tuple[list[bool], int]:
    """Which layers use sliding-window attention, and the window (llama_hparams::set_swa_pattern
    with the per-arch defaults of src/models/<arch>.cpp; the GGUF key overrides the pattern)."""
    arch_swa = data.load("gguf_quants.yaml")["swa_arch"].get(info.arch)
    if not arch_swa:
        return [False] * n_layer, 0
    window = int(info.get("attention.sliding_window", 0) or arch_swa["window"] or 0)
    if window <= 0:
        return [False] * n_layer, 0
    pat = info.get("attention.sliding_window_pattern")
    if isinstance(pat, list):
        return [bool(x) for x in pat][:n_layer] + [False] * max(0, n_layer - len(pat)), window
    n_pattern = int(pat) if isinstance(pat, int) and pat > 0 else int(arch_swa["pattern"])
    return [(il % n_pattern) < (n_pattern - 1) for il in range(n_layer)], window


def spec_from_gguf(info: GgufInfo) -> Any:
    """A ModelSpec (config.json terms) from a GGUF header (resolved_from="gguf")."""
    from servefit.models.spec import ModelSpec

    n_layer = int(info.get("block_count", 0) or 0)
    if not info.arch or n_layer <= 0:
        raise UsageError(f"{info.path}: GGUF header has no architecture/block_count"
                         + (" (the file is truncated inside its header)" if info.truncated else ""))
    n_embd = int(info.get("embedding_length", 0) or 0)
    n_head = _max(info.get("attention.head_count"), 1) or 1
    kv_raw = info.get("attention.head_count_kv", n_head)
    n_head_kv = _max(kv_raw, n_head)
    head_dim = int(info.get("attention.key_length", 0) or (n_embd // n_head if n_head else 0))
    swa, window = swa_layers(info, n_layer)
    kv_list = kv_raw if isinstance(kv_raw, list) else [n_head_kv] * n_layer
    kinds = []
    for il in range(n_layer):
        if il < len(kv_list) and int(kv_list[il]) == 0:
            kinds.append("mamba")
        else:
            kinds.append("sliding" if swa[il] else "full")
    names = {t.name for t in info.tensors}
    hf = {v: k for k, v in reversed(list(data.load("gguf_quants.yaml")["hf_arch"].items()))}
    mla = "attention.key_length_mla" in info.kv or f"{info.arch}.attention.key_length_mla" in info.kv
    rope = int(info.get("rope.dimension_count", 0) or 0)
    spec = ModelSpec(
        name=str(info.kv.get("general.name") or os.path.basename(info.path)),
        architecture=info.arch, model_type=hf.get(info.arch, info.arch),
        num_hidden_layers=n_layer, hidden_size=n_embd, num_attention_heads=n_head,
        num_key_value_heads=n_head_kv, head_dim=head_dim,
        intermediate_size=_max(info.get("feed_forward_length"), 0), vocab_size=info.n_vocab,
        max_position_embeddings=int(info.get("context_length", 0) or 0),
        tie_word_embeddings=bool(names) and "output.weight" not in names,
        torch_dtype="gguf", params=sum(t.n_elements for t in info.tensors),
        num_experts=int(info.get("expert_count", 0) or 0),
        num_experts_per_tok=int(info.get("expert_used_count", 0) or 0),
        num_shared_experts=int(info.get("expert_shared_count", 0) or 0),
        moe_intermediate_size=int(info.get("expert_feed_forward_length", 0) or 0),
        first_k_dense_replace=int(info.get("leading_dense_block_count", 0) or 0),
        kv_lora_rank=int(info.get("attention.kv_lora_rank", 0) or 0) if mla else 0,
        q_lora_rank=int(info.get("attention.q_lora_rank", 0) or 0),
        qk_rope_head_dim=rope if mla else 0,
        sliding_window=window, layer_types=kinds if any(k != "full" for k in kinds) else [],
        resolved_from="gguf",
    )
    ftype = info.kv.get("general.file_type")
    spec.quantization = {"quant_method": "gguf", "file_type": ftype}
    if info.truncated:
        spec.assumptions.append(f"{os.path.basename(info.path)}: header truncated; tensor table incomplete")
    return spec
