"""Numbers as users and engines write them: 1k / 1K / 8G / 48GiB / 10%."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from servefit.core import UsageError

if TYPE_CHECKING:
    from fractions import Fraction

_HUMAN = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kKmMgGtT]?)\s*$")
_DEC = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BIN = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def human_int(text: str) -> int:
    """vLLM's human-readable integers (argparse_utils.py::human_readable_int):
    lowercase suffix is decimal (1k = 1000), uppercase binary (1K = 1024); decimals allowed
    with a suffix (25.6k)."""
    m = _HUMAN.match(text)
    if not m:
        raise ValueError(f"not a number: {text!r}")
    num, suffix = m.groups()
    if not suffix:
        if "." in num:
            raise ValueError(f"not an integer: {text!r}")
        return int(num)
    mult = _DEC[suffix] if suffix.islower() else _BIN[suffix]
    return int(float(num) * mult)


_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kKmMgGtT]?)(i?)([bB]?)\s*$")


def parse_size(text: str) -> int:
    """A memory size: 48GiB, 48G, 48GB, 4096MiB, 1.5T, or bytes. G and GiB are binary
    (as nvidia-smi and vLLM print them); GB is decimal."""
    m = _SIZE.match(text)
    if not m:
        raise UsageError(f"not a memory size: {text!r} (try 48GiB, 24G or 24000MiB)")
    num, unit, i, b = m.groups()
    if not unit:
        return int(float(num))
    u = unit.upper()
    if b and not i and unit:  # "GB": decimal
        return int(float(num) * _DEC[u.lower()])
    return int(float(num) * _BIN[u])


def parse_tokens(text: str) -> int:
    """Token counts as users write them on servefit's own CLI: 32k and 32K both mean 32768."""
    m = _HUMAN.match(text)
    if not m:
        raise UsageError(f"not a token count: {text!r} (try 32768 or 32k)")
    num, suffix = m.groups()
    mult = _BIN[suffix.upper()] if suffix else 1
    return int(float(num) * mult)


_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_QUANTITY_MULT: dict[str, int | tuple[int, int]] = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60, "n": (1, 10**9), "u": (1, 10**6),
    "m": (1, 1000), "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}


def k8s_quantity(text: str | None) -> Fraction | None:
    """A Kubernetes resource quantity (apimachinery resource.Quantity): binary suffixes Ki..Ei,
    decimal n u m k M G T P E, or an exponent (1e3). Case matters: `m` is milli (1/1000),
    `M` is 10**6 and `Mi` 2**20, so `sizeLimit: 1000m` is one byte, not 1000 MiB.
    None when the text is not a quantity."""
    if text is None:
        return None
    m = _QUANTITY.match(text.strip().strip("\"'"))
    if not m:
        return None
    from fractions import Fraction  # here, not at import: ~2 ms of start-up for the few files that say

    num, suffix = Fraction(m.group(1)), m.group(2) or ""
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        return num * Fraction(10) ** int(suffix[1:])
    mult = _QUANTITY_MULT[suffix]
    return num * (Fraction(*mult) if isinstance(mult, tuple) else mult)


def gib(n: float) -> float:
    return n / 2**30


def fmt_gib(n: float) -> str:
    """GiB the way vLLM's format_gib rounds them: two decimals."""
    return f"{n / 2**30:.2f}"


_VERSION = re.compile(r"^v?[0-9]+(\.[0-9]+)*([.+-]?[0-9A-Za-z.+-]*)$")


def engine_version(text: str | None, what: str = "--engine-version") -> str | None:
    """An engine version as users write it (`0.11.0`, `v3.3.4`, `0.6.3.post1`, `b5000` for a
    llama.cpp build); anything else is refused, since a word that is not a version would be
    modelled as the oldest release."""
    if text is None:
        return None
    if not (_VERSION.match(text.strip()) or re.fullmatch(r"b[0-9]+", text.strip())):
        raise UsageError(f"{what}: not a version: {text!r} (try 0.11.0, or b5000 for a llama.cpp build)")
    return text.strip()

