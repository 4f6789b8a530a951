"""Resolve what a user writes for a GPU (an nvidia-smi name, a Kubernetes label, a GKE
accelerator, a short name, a cloud instance type) to a catalog `GpuSpec`.

The catalog is `data/gpus.yaml`, read and indexed once per process on first use; importing
this module costs nothing. Names are compared after normalising: lower case, a size such as
"80G" / "80 GiB" written "80gb", every run of characters other than letters and digits
dropped (so space, '-', '_' are alike and "rtx4090" equals "RTX 4090"). A second, looser
form also drops vendor words (NVIDIA, GeForce, Tesla, RTX, AMD, Instinct, Radeon, Apple, Intel), so
"GeForce RTX 4090", "nvidia-tesla-t4" and "NVIDIA-L4" resolve without being listed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from servefit.core import UsageError
from servefit.hardware.spec import GpuSpec

__all__ = [
    "all_gpus",
    "catalog_assumption",
    "lookup",
    "lookup_instance",
    "resolve_gpu",
    "resolve_target",
    "with_memory",
]

MIB = 2**20
OVERRIDE_SOURCE = "--gpu-memory override"

# Intel's device names: "Intel(R) Arc(TM) A770 Graphics"
_NOISE_WORDS = frozenset({"nvidia", "geforce", "tesla", "rtx", "amd", "instinct", "radeon", "apple", "gpu",
                          "intel", "r", "tm", "graphics"})
# "80G", "80 GB", "80GiB" -> "80gb"; a digit run glued to a letter ("A10G") is a model name.
_SIZE_RE = re.compile(r"(?<![a-z0-9])(\d+)\s*(?:gib|gb|g)(?![a-z0-9])")
_SPLIT_RE = re.compile(r"[^a-z0-9]+")
# "nvidia.com/gpu.product=NVIDIA-L4", "cloud.google.com/gke-accelerator: nvidia-l4"
_LABEL_RE = re.compile(r"^[\w.\-]+/[\w.\-]+\s*[=:]\s*(.+)$")
_MIG_RE = re.compile(r"(?:^|[^a-z0-9])mig[^a-z0-9]|\d+g\.\d+gb")
_LEADING_COUNT_RE = re.compile(r"^\s*(\d{1,4})\s*[x×*]\s*(.+?)\s*$", re.IGNORECASE)
_TRAILING_COUNT_RE = re.compile(r"^\s*(.+?)\s*[x×*]\s*(\d{1,4})\s*$", re.IGNORECASE)
_ELLIPSES = ("...", "…")


# ---------------------------------------------------------------------------- normalising

def _tokens(text: str) -> list[str]:
    s = " ".join(text.split()).lower()
    m = _LABEL_RE.match(s)
    if m:
        s = m.group(1)
    s = _SIZE_RE.sub(r"\1gb", s)
    toks = [t for t in _SPLIT_RE.split(s) if t]
    if len(toks) > 1 and toks[-1] == "shared":  # GPU feature discovery's time-slicing suffix
        toks.pop()
    return toks


def normalize(text: str) -> str:
    """The exact form names are compared in ("NVIDIA-A100-SXM4-80GB" -> "nvidiaa100sxm480gb")."""
    return "".join(_tokens(text))


def _core(text: str) -> str:
    """The loose form: vendor words dropped ("NVIDIA GeForce RTX 4090" -> "4090")."""
    return "".join(t for t in _tokens(text) if t not in _NOISE_WORDS)


def _instance_norm(text: str) -> str:
    s = "".join(text.split()).lower()
    for prefix in ("ml.", "standard_", "standard-"):
        if s.startswith(prefix):
            s = s[len(prefix):]
    return s


# ---------------------------------------------------------------------------- the index

@dataclasses.dataclass(frozen=True)
class _Catalog:
    """The GPU catalog with its name indexes, built once per process so that every spelling of a GPU resolves
    by dictionary look-up."""

    gpus: tuple[GpuSpec, ...]
    by_key: dict[str, GpuSpec]
    exact: dict[str, str]  # normalize(alias) -> key
    loose: dict[str, str]  # _core(alias) -> key
    smi_names: dict[str, str]  # normalize(nvidia-smi name) -> key
    assumptions: dict[str, tuple[frozenset[str], str]]  # key -> (normalised ambiguous names, sentence)
    instance_types: dict[str, tuple[str, int]]  # normalised type -> (key, count)
    instance_names: dict[str, str]  # normalised type -> type as the catalog spells it
    instance_patterns: tuple[tuple[re.Pattern[str], str, int], ...]


def _add(index: dict[str, str], form: str, key: str, alias: str, what: str) -> None:
    if not form:
        return
    other = index.get(form)
    if other is not None and other != key:
        raise ValueError(f"gpus.yaml: {what} form {form!r} of {alias!r} names both {other} and {key}")
    index[form] = key


def _add_loose(index: dict[str, str], derived: dict[str, str | None], form: str, owns: bool,
               alias: str, key: str) -> None:
    """An alias with no vendor word ("A100") owns its loose form and two such aliases of
    different GPUs are a data error; a loose form only derived by dropping vendor words
    ("nvidia-tesla-a100" -> "a100") yields to an owner and is dropped when two GPUs derive it."""
    if not form:
        return
    if owns:
        _add(index, form, key, alias, "loose")
    elif derived.setdefault(form, key) != key:
        derived[form] = None


def _build(raw: dict[str, Any]) -> tuple[Any, ...]:
    """The catalog as plain data (kept in the data cache): each GPU's GpuSpec fields, then the
    name indexes; gpus.yaml's consistency errors raise ValueError."""
    gpus: list[dict[str, Any]] = []
    by_key: dict[str, dict[str, Any]] = {}
    exact: dict[str, str] = {}
    loose: dict[str, str] = {}
    derived: dict[str, str | None] = {}
    smi_names: dict[str, str] = {}
    assumptions: dict[str, tuple[frozenset[str], str]] = {}
    for entry in raw["gpus"]:
        key = entry["key"]
        if key in by_key:
            raise ValueError(f"gpus.yaml: duplicate key {key!r}")
        aliases = [str(a) for a in entry.get("aliases", [])]
        smi = entry.get("smi_memory_mib")
        gpu = dict(
            key=key,
            name=entry["name"],
            vendor=entry["vendor"],
            memory_bytes=int(entry["memory_mib"]) * MIB,
            compute_capability=int(entry.get("compute_capability", 0)),
            fp8=bool(entry.get("fp8", False)),
            bf16=bool(entry.get("bf16", True)),
            unified_memory=bool(entry.get("unified_memory", False)),
            nvls=bool(entry.get("nvls", False)),
            aliases=aliases,
            source="catalog",
            memory_source=entry.get("memory_source", ""),
            smi_memory_bytes=int(smi) * MIB if smi else 0,
        )
        gpus.append(gpu)
        by_key[key] = gpu
        names = [key, *aliases]
        if not entry.get("variant_of"):
            names.append(entry["name"])
            smi_names[normalize(entry["name"])] = key
        for alias in names:
            toks = _tokens(alias)
            full = "".join(toks)
            core = "".join(t for t in toks if t not in _NOISE_WORDS)
            _add(exact, full, key, alias, "exact")
            _add_loose(loose, derived, core, core == full, alias, key)
        if entry.get("assumed_aliases"):
            forms = frozenset(f for a in entry["assumed_aliases"] for f in (normalize(a), _core(a)) if f)
            assumptions[key] = (forms, entry["assumption"])
    for form, owner in derived.items():
        if owner is not None:
            loose.setdefault(form, owner)
    for entry in raw["gpus"]:
        variant_of = entry.get("variant_of")
        if variant_of and variant_of not in by_key:
            raise ValueError(f"gpus.yaml: {entry['key']} is a variant of unknown {variant_of!r}")

    types: dict[str, tuple[str, int]] = {}
    spelled: dict[str, str] = {}
    patterns: list[tuple[str, str, int]] = []
    for inst in raw.get("instances", []):
        key, count = inst["gpu"], int(inst["count"])
        if key not in by_key:
            raise ValueError(f"gpus.yaml: instance entry names unknown GPU {key!r}")
        for name in inst.get("types", []):
            norm = _instance_norm(name)
            if norm in types and types[norm] != (key, count):
                raise ValueError(f"gpus.yaml: instance type {name!r} listed twice")
            types[norm] = (key, count)
            spelled[norm] = name
        if inst.get("pattern"):
            patterns.append((inst["pattern"], key, count))
    return gpus, exact, loose, smi_names, assumptions, types, spelled, patterns


@lru_cache(maxsize=1)
def _catalog() -> _Catalog:
    from servefit import data  # deferred: reading the data is the only cost, paid on first use

    fields, exact, loose, smi_names, assumptions, types, spelled, patterns = data.derived(
        "gpus", [data.DATA_DIR / "gpus.yaml", __file__], lambda: _build(data.load("gpus.yaml")))
    gpus = tuple(GpuSpec(**f) for f in fields)
    return _Catalog(gpus, {g.key: g for g in gpus}, exact, loose, smi_names, assumptions, types, spelled,
                    tuple((re.compile(p, re.IGNORECASE), key, count) for p, key, count in patterns))


# ---------------------------------------------------------------------------- public API

def all_gpus() -> list[GpuSpec]:
    """Every catalog GPU, in catalog order. The specs are shared: treat them as read-only."""
    return list(_catalog().gpus)


def lookup(name: str) -> GpuSpec | None:
    """The GPU a name means (nvidia-smi name, alias, k8s gpu.product label, GKE accelerator,
    catalog key, short forms such as "a100-80g"), or None."""
    if not name or not name.strip():
        return None
    cat = _catalog()
    if name.strip().endswith(_ELLIPSES):
        key = _truncated(cat, name)
    else:
        key = cat.exact.get(normalize(name)) or cat.loose.get(_core(name)) or _sized(cat, name)
    return cat.by_key[key] if key else None


_SIZED = re.compile(r"^(.+?)[\s_-]+(\d+)\s*(?:gib|gb|g)$", re.IGNORECASE)


def _sized(cat: _Catalog, name: str) -> str | None:
    """"RTX 4070 12GB", "T4 16GB": a card's name with its board's memory written after it, where no alias says
    so: the card the name means, when its board holds that many GB (a 12 GB board shows 12282 MiB), else None."""
    m = _SIZED.match(name.strip())
    if m is None:
        return None
    base = cat.exact.get(normalize(m.group(1))) or cat.loose.get(_core(m.group(1)))
    if base is None:
        return None
    g = cat.by_key[base]
    board = (g.smi_memory_bytes or g.memory_bytes) / 2**30
    return base if round(board) == int(m.group(2)) else None


def _truncated(cat: _Catalog, name: str) -> str | None:
    """nvidia-smi's table cuts long names ("NVIDIA A100 80G..." is the 80GB PCIe card):
    accept a prefix of exactly one GPU's nvidia-smi name."""
    form = normalize(name.strip().rstrip(".…"))
    if len(form) < 4:
        return None
    hits = {key for smi, key in cat.smi_names.items() if smi.startswith(form)}
    return hits.pop() if len(hits) == 1 else None


def lookup_instance(instance_type: str) -> tuple[GpuSpec, int] | None:
    """(GPU, count) for a cloud instance type (AWS incl. SageMaker "ml." types, GCP, Azure),
    or None."""
    if not instance_type or not instance_type.strip():
        return None
    cat = _catalog()
    norm = _instance_norm(instance_type)
    hit = cat.instance_types.get(norm)
    if hit is None:
        for pattern, key, count in cat.instance_patterns:
            if pattern.fullmatch(norm):
                hit = (key, count)
                break
    if hit is None:
        return None
    return cat.by_key[hit[0]], hit[1]


def resolve_target(name: str) -> tuple[GpuSpec, int | None]:
    """Like `resolve_gpu`, plus the GPU count when the name carries one: an instance type
    ("p4d.24xlarge" -> 8) or a count form ("8xH100", "L4 x 2"); "local" reads this machine's
    GPUs through NVML (hardware/local.py). Raises UsageError."""
    if (name or "").strip().lower() == "local":
        from servefit.hardware import local

        return local.target()
    gpu = lookup(name)
    if gpu is not None:
        return gpu, None
    inst = lookup_instance(name)
    if inst is not None:
        return inst
    for regex, count_group, name_group in ((_LEADING_COUNT_RE, 1, 2), (_TRAILING_COUNT_RE, 2, 1)):
        m = regex.match(name or "")
        if m and int(m.group(count_group)) > 0:
            gpu = lookup(m.group(name_group))
            if gpu is not None:
                return gpu, int(m.group(count_group))
    raise _unknown(name)


def resolve_gpu(name: str) -> GpuSpec:
    """The GPU a name or an instance type means; raises UsageError with the nearest names."""
    return resolve_target(name)[0]


def with_memory(gpu: GpuSpec, memory_bytes: int) -> GpuSpec:
    """A copy of `gpu` with `memory_bytes` as its total (--gpu-memory: modded cards such as a
    48 GB 4090 D, MIG slices, a raised Metal wired limit)."""
    if isinstance(memory_bytes, bool) or not isinstance(memory_bytes, int) or memory_bytes <= 0:
        raise UsageError(f"--gpu-memory must be a positive size, got {memory_bytes!r}")
    return dataclasses.replace(
        gpu,
        memory_bytes=memory_bytes,
        aliases=list(gpu.aliases),
        source=OVERRIDE_SOURCE,
        memory_source=OVERRIDE_SOURCE,
        smi_memory_bytes=0,
    )


def catalog_assumption(gpu: GpuSpec, name: str | None = None) -> str | None:
    """A short sentence for the plan's assumptions, or None: which card an ambiguous `name`
    ("A100", "H100", "RTX 3080") was taken as, and whether the catalog's memory figure for
    `gpu` is an estimate rather than a logged value."""
    if gpu.source in (OVERRIDE_SOURCE, "local"):
        return None
    parts: list[str] = []
    entry = _catalog().assumptions.get(gpu.key)
    if name and entry is not None:
        forms, sentence = entry
        if normalize(name) in forms or _core(name) in forms:
            parts.append(sentence)
    if gpu.memory_source.startswith("estimated"):
        parts.append(
            f"{gpu.name} memory {gpu.memory_bytes / 2**30:.2f} GiB is a catalog estimate"
            f" ({gpu.memory_source.removeprefix('estimated: ')}); --gpu-memory SIZE sets the real figure"
        )
    return "; ".join(parts) if parts else None


# ---------------------------------------------------------------------------- errors

def _unknown(name: str) -> UsageError:
    shown = " ".join((name or "").split())
    if _MIG_RE.search(shown.lower()):
        return UsageError(
            f"GPU '{shown}' is a MIG slice; servefit has no catalog entry for slices"
            " (--gpu-memory SIZE sets the memory of the slice)"
        )
    hints = ", ".join(_suggestions(shown))
    tail = "(servefit gpus lists them; --gpu-memory SIZE sets the memory of an unlisted card)"
    if hints:
        return UsageError(f"unknown GPU '{shown}'; did you mean: {hints}? {tail}")
    return UsageError(f"unknown GPU '{shown}' {tail}")


def _suggestions(name: str, limit: int = 3) -> list[str]:
    """Catalog keys (and instance types) nearest to `name`, best first."""
    import difflib  # error path only

    cat = _catalog()
    scored: list[tuple[float, bool, str]] = []

    def score(query: str, choices: Iterable[tuple[str, str]]) -> None:
        if not query:
            return
        matcher = difflib.SequenceMatcher(b=query)
        letters = sorted(query)
        for form, label in choices:
            matcher.set_seq1(form)
            if matcher.real_quick_ratio() >= 0.5 and matcher.quick_ratio() >= 0.5:
                ratio = matcher.ratio()
                if ratio >= 0.5:
                    # among equal ratios a transposition ("4900" for "4090") is the likelier typo
                    scored.append((ratio, sorted(form) == letters, label))

    score(_core(name), ((form, key) for form, key in cat.loose.items()))
    score(normalize(name), ((form, key) for form, key in cat.exact.items()))
    score(_instance_norm(name), cat.instance_names.items())
    scored.sort(key=lambda item: (-item[0], not item[1]))
    out: list[str] = []
    for _, _, label in scored:
        if label not in out:
            out.append(label)
        if len(out) == limit:
            break
    return out
