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
    from servefit.models.gguf_fields import check_fields

    check_fields(path, kv)
    complete = False
    if not truncated:
        align = kv.get("general.alignment", 32) or 32
        data_start = -(-header_end // align) * align
        end = max((o + t.nbytes for o, t in zip(offsets, tensors, strict=True)), default=0)
        complete = size >= data_start + end
    return GgufInfo(path=path, version=version, kv=kv, tensors=tensors, truncated=truncated, complete=complete)


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
