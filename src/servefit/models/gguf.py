"""GGUF model files: the header (metadata + tensor table) without reading any tensor data.

Two readers give the same `GgufInfo`:
- the `gguf` package (gguf-py, `gguf.GGUFReader`) for complete local files; it is imported only
  here, only when a file is actually read (it pulls in numpy);
- a small header-only parser for truncated or partial downloads, which GGUFReader cannot open
  (it reshapes memmap views past EOF). Layout per gguf-py/gguf/gguf_reader.py and
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


class _Reader:
    def __init__(self, fh: Any) -> None:
        self.fh = fh

    def take(self, n: int) -> bytes:
        b = self.fh.read(n)
        if len(b) < n:
            raise _Truncated()
        return bytes(b)

    def scalar(self, t: int) -> Any:
        fmt = _SCALAR[t]
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        (n,) = struct.unpack("<Q", self.take(8))
        if n > 1 << 26:
            raise ValueError(f"string length {n} is not plausible")
        return self.take(n).decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        (n,) = struct.unpack("<Q", self.take(8))
        self.fh.seek(n, os.SEEK_CUR)

    def value(self, t: int) -> Any:
        if t == 8:
            return self.string()
        if t == 9:
            (it,) = struct.unpack("<I", self.take(4))
            (n,) = struct.unpack("<Q", self.take(8))
            if n > BIG_ARRAY:
                if it == 8:
                    for _ in range(n):
                        self.skip_string()
                elif it in _SCALAR:
                    self.fh.seek(n * struct.calcsize(_SCALAR[it]), os.SEEK_CUR)
                else:
                    raise ValueError(f"array of type {it} is not supported")
                return ArrayLen(n, it)
            return [self.value(it) for _ in range(n)]
        if t in _SCALAR:
            return self.scalar(t)
        raise ValueError(f"unknown GGUF value type {t}")


def read_header(path: str) -> GgufInfo:
    """Parse the GGUF header of a possibly truncated file (no tensor data read)."""
    types = type_table()
    with open(path, "rb") as fh:
        r = _Reader(fh)
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
            if n_tensors > 1 << 24 or n_kv > 1 << 20:
                raise UsageError(f"{path}: implausible GGUF header ({n_tensors} tensors, {n_kv} keys)")
            for _ in range(n_kv):
                key = r.string()
                (vt,) = struct.unpack("<I", r.take(4))
                kv[key] = r.value(vt)
            offsets = []
            for _ in range(n_tensors):
                name = r.string()
                (nd,) = struct.unpack("<I", r.take(4))
                if nd > 8:
                    raise ValueError(f"tensor {name}: {nd} dimensions")
                shape = struct.unpack(f"<{nd}Q", r.take(8 * nd))
                (tid,) = struct.unpack("<I", r.take(4))
                (off,) = struct.unpack("<Q", r.take(8))
                tname, blk, size = types.get(tid, (f"TYPE{tid}", 1, 0))
                n = 1
                for d in shape:
                    n *= d
                tensors.append(TensorInfo(name, tuple(shape), tname, n // blk * size))
                offsets.append(off)
            header_end = fh.tell()
        except _Truncated:
            truncated = True
            header_end = 0
        except (ValueError, struct.error) as exc:
            raise UsageError(f"{path}: malformed GGUF header ({exc})") from None
    complete = False
    if not truncated:
        align = int(kv.get("general.alignment", 32) or 32)
        data_start = -(-header_end // align) * align
        end = max((o + t.nbytes for o, t in zip(offsets, tensors, strict=True)), default=0)
        complete = os.path.getsize(path) >= data_start + end
    return GgufInfo(path=path, version=version, kv=kv, tensors=tensors, truncated=truncated, complete=complete)


def _read_with_gguf(path: str) -> GgufInfo:
    import gguf  # lazy: only when a .gguf file is read

    reader = gguf.GGUFReader(path, "r")
    kv: dict[str, Any] = {}
    for name, fld in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        if fld.types and fld.types[0] == gguf.GGUFValueType.ARRAY and len(fld.data) > BIG_ARRAY:
            kv[name] = ArrayLen(len(fld.data), int(fld.types[-1]))
            continue
        val = fld.contents()
        kv[name] = val.item() if hasattr(val, "item") else val
    tensors = [TensorInfo(t.name, tuple(int(d) for d in t.shape), t.tensor_type.name, int(t.n_bytes))
               for t in reader.tensors]
    version = int(reader.fields["GGUF.version"].parts[-1][0]) if "GGUF.version" in reader.fields else 3
    return GgufInfo(path=path, version=version, kv=kv, tensors=tensors, reader="gguf")


@lru_cache(maxsize=32)
def _read_cached(path: str, mtime: float, size: int) -> GgufInfo:
    info = read_header(path)
    if info.complete:
        try:
            return _read_with_gguf(path)
        except Exception:  # gguf missing, or a type this gguf version does not know
            pass
    return info


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
        for i in range(1, int(m.group(2)) + 1):
            shard = path[: m.start()] + f"-{i:05d}-of-{m.group(2)}.gguf"
            if shard != path and os.path.exists(shard):
                s = os.stat(shard)
                tensors.extend(_read_cached(shard, s.st_mtime, s.st_size).tensors)
        info = GgufInfo(info.path, info.version, info.kv, tensors, info.truncated, info.complete, info.reader)
    return info


# ---------------------------------------------------------------- names -> catalog

_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.I)
_FAMILY_ORG = [("llama", "meta-llama"), ("qwen", "Qwen"), ("qwq", "Qwen"), ("gemma", "google"),
               ("mistral", "mistralai"), ("mixtral", "mistralai"), ("ministral", "mistralai"),
               ("phi", "microsoft"), ("deepseek", "deepseek-ai"), ("gpt-oss", "openai"), ("granite", "ibm-granite"),
               ("glm", "zai-org"), ("olmo", "allenai"), ("smollm", "HuggingFaceTB")]


@lru_cache(maxsize=1)
def _quant_names() -> list[str]:
    q = data.load("gguf_quants.yaml")
    names = set(q["ftypes"]) | set(q["aliases"])
    return sorted(names, key=len, reverse=True)


def canonical_quant(text: str) -> str | None:
    """`q4_k_m` / `Q4_K_M` / `mxfp4` -> the llama.cpp file type name."""
    up = text.upper().replace("-", "_")
    q = data.load("gguf_quants.yaml")
    if up in q["ftypes"]:
        return up
    return q["aliases"].get(up)


def split_quant(name: str) -> tuple[str, str | None]:
    """(base name, quant) from a GGUF file or repo name: `Meta-Llama-3.1-8B-Instruct-Q4_K_M`."""
    base = re.sub(r"\.gguf$", "", os.path.basename(name), flags=re.I)
    base = re.sub(r"-\d{5}-of-\d{5}$", "", base)
    base = re.sub(r"[-_.]gguf$", "", base, flags=re.I)
    for q in _quant_names():
        m = re.search(rf"(?:^|[-_.])(?:UD[-_]|i1[-_])?{re.escape(q)}(?:[-_.]?(?:XL|L|M|S))?$", base, re.I)
        if m:
            stem = base[: m.start()].rstrip("-_.")
            return stem or base, canonical_quant(q)
    return base, None


def catalog_candidates(base: str) -> list[str]:
    """Names to try in the catalog for a GGUF base name, most specific first."""
    out = [base]
    short = re.sub(r"^Meta-", "", base, flags=re.I)
    if short != base:
        out.append(short)
    low = short.lower()
    for prefix, org in _FAMILY_ORG:
        if low.startswith(prefix):
            out.append(f"{org}/{short}")
            break
    return list(dict.fromkeys(out))


def parse_ref(ref: str) -> tuple[str, str | None, bool]:
    """(base model name, quant, is_local_file) for `-m PATH`, `-hf repo[:QUANT]` or a file name."""
    if os.path.isfile(ref):
        return ref, None, True
    repo, _, tag = ref.partition(":") if "/" in ref and not ref.lower().endswith(".gguf") else (ref, "", "")
    if tag:
        base, _ = split_quant(repo.split("/")[-1])
        return base, canonical_quant(tag) or tag.upper(), False
    if "/" in ref and not ref.lower().endswith(".gguf"):  # -hf repo without a tag: Q4_K_M by default
        base, q = split_quant(ref.split("/")[-1])
        return base, q or "Q4_K_M", False
    base, q = split_quant(ref)
    return base, q, False


def resolve_gguf_ref(ref: str, online: bool = False, context: Any = None, hf_repo: str | None = None) -> Any:
    """A ModelSpec for a GGUF reference: the header of a local file, the header in the model
    lock or the HF cache (`context`: models/lock.ModelContext), or the catalog model a file /
    repo name stands for (found by name; the quant is recorded in the assumptions); the Hub's
    header last, with `online`."""
    from servefit.models.spec import ModelSpec

    base, quant, local = parse_ref(ref)
    if local:
        return spec_from_gguf(read_gguf(ref))
    from servefit.models.resolve import resolve_gguf

    mapped = context.mapped(ref) if context is not None else None
    if mapped is not None and ":" not in mapped and not mapped.lower().endswith(".gguf"):
        from servefit.models.resolve import resolve_model

        return resolve_model(ref, online=online, context=context)  # the mapping names a config
    if mapped is not None:
        ref, hf_repo = mapped, None
        base, quant, _ = parse_ref(ref)
    found = resolve_gguf(ref, hf_repo, context, online=online)
    if found is not None:
        return found
    try:
        from servefit.models import resolve_model  # type: ignore[attr-defined]
    except ImportError:
        raise UsageError(f"{ref}: no model catalog to resolve {base!r} against") from None
    first: Exception | None = None
    for cand in catalog_candidates(base):
        try:
            spec: ModelSpec = resolve_model(cand, online=online)
        except Exception as exc:  # UsageError with nearest names, KeyError, ...
            first = first or exc
            continue
        spec.assumptions.append(f"GGUF {os.path.basename(ref)!r} taken as {spec.name} "
                                f"(by its name{', quant ' + quant if quant else ''}; no file to read)")
        spec.resolved_from = "derivative"
        return spec
    if online or (context is not None and context.online):
        found = resolve_gguf(ref, hf_repo, context, online=online, fetch=True)
        if found is not None:
            return found
    raise UsageError(f"{ref}: cannot tell which model this GGUF is ({first})")


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
