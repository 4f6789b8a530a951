"""A card the GPU catalog does not know, sized by --gpu-memory: what its name shows of its vendor
decides what it is taken to support (an AMD, Apple or Intel part is not a CUDA card)."""

from __future__ import annotations

import re

from servefit.hardware.catalog import _tokens, with_memory
from servefit.hardware.spec import GpuSpec

UNLISTED_CC = 80  # what an unlisted card is assumed to support: bf16, no native FP8 (Ampere)

# The vendor a name the catalog does not know shows (its words after normalising): an AMD, Apple
# or Intel part is not a CUDA card, whatever its memory. The first vendor that matches wins.
_VENDOR_WORDS = (
    ("apple", re.compile(r"\bapple\b|^m[1-9]( (pro|max|ultra))?( \d+gb)?$")),
    ("amd", re.compile(r"\b(amd|radeon|ryzen|instinct|rocm|strix|gfx\d{3,4}[a-z]?|mi\d{3}[a-z]*|rx ?\d{3,4}[a-z]*)\b")),
    ("intel", re.compile(r"\b(intel|arc|xpu|iris|lunar lake|meteor lake|battlemage|alchemist)\b")),
)
# an AMD APU (Ryzen, Strix, Radeon 890M / 8060S): its GPU shares the board's memory
_AMD_APU = re.compile(r"\b(ryzen|strix|\d{3}m|\d{4}s)\b")
_VENDOR_TEXT = {
    "apple": "an Apple silicon GPU (Metal, unified memory; bf16, no native FP8)",
    "amd": "an AMD GPU (ROCm / Vulkan; bf16, no native FP8)",
    "amd-apu": "an AMD APU (ROCm / Vulkan, memory shared with the host; bf16, no native FP8)",
    "intel": "an Intel GPU (SYCL / Level Zero; bf16, no native FP8)",
}


def _vendor_of(name: str) -> str | None:
    """The vendor an unlisted name shows ("Radeon 890M" -> amd), or None for a name that shows none."""
    words = " ".join(_tokens(name))
    return next((vendor for vendor, regex in _VENDOR_WORDS if regex.search(words)), None)


def unlisted(name: str, memory_bytes: int) -> GpuSpec:
    """A card the catalog does not know, sized by --gpu-memory ("My Card" 48GiB). A name that
    shows its vendor (AMD, Apple, Intel) is taken as that vendor's part (no CUDA compute
    capability); any other as an Ampere CUDA card (bf16, no native FP8). `memory_source` says which."""
    shown = " ".join((name or "").split()) or "unlisted GPU"
    vendor = _vendor_of(shown)
    apu = vendor == "amd" and bool(_AMD_APU.search(" ".join(_tokens(shown))))
    cc = 0 if vendor else UNLISTED_CC
    gpu = GpuSpec(key="unlisted", name=shown, vendor=vendor or "nvidia", memory_bytes=1, compute_capability=cc,
                  fp8=False, bf16=True, unified_memory=vendor == "apple" or apu, aliases=[], source="unlisted")
    out = with_memory(gpu, memory_bytes)
    taken = _VENDOR_TEXT["amd-apu" if apu else vendor] if vendor else (
        f"a CUDA card with compute capability {UNLISTED_CC / 10:.1f} (bf16, no native FP8)")
    out.memory_source = f"--gpu-memory override; '{shown}' is not in the catalog: taken as {taken}"
    return out
