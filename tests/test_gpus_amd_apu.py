"""AMD Strix Halo (Ryzen AI Max+ 395 / 390 / 385) in the catalog, and a card the catalog does not
know but is given --gpu-memory for: an AMD, Apple or Intel name is not taken as a CUDA card."""

from __future__ import annotations

import json

import pytest

from servefit.cli import main
from servefit.hardware import resolve_target
from servefit.hardware.catalog import catalog_assumption
from servefit.hardware.unlisted import unlisted

MIB = 2**20


@pytest.mark.parametrize(("written", "key", "mib"), [
    ("AMD Radeon(TM) 8060S Graphics", "radeon-8060s-128gb", 114575),  # rocminfo / Windows Vulkan name
    ("AMD Radeon Graphics (RADV GFX1151)", "radeon-8060s-128gb", 114575),  # Linux RADV's name
    ("Radeon 8060S", "radeon-8060s-128gb", 114575),
    ("Ryzen AI Max+ 395", "radeon-8060s-128gb", 114575),
    ("Strix Halo", "radeon-8060s-128gb", 114575),
    ("Ryzen AI Max+ 395 64GB", "radeon-8060s-64gb", 57344),
    ("Radeon 8060S 96GB", "radeon-8060s-96gb", 86016),
    ("Ryzen AI Max 385", "radeon-8050s-64gb", 57344),
    ("AMD Radeon(TM) 8050S Graphics", "radeon-8050s-64gb", 57344),
    ("Ryzen AI Max 390 128GB", "radeon-8050s-128gb", 114688),
])
def test_strix_halo_names_resolve(written, key, mib):
    gpu, _ = resolve_target(written)
    assert (gpu.key, gpu.memory_bytes // MIB, gpu.vendor, gpu.unified_memory, gpu.compute_capability) == (
        key, mib, "amd", True, 0)


def test_strix_halo_says_which_carve_out_it_assumed():
    gpu, _ = resolve_target("Ryzen AI Max+ 395")
    assert catalog_assumption(gpu, "Ryzen AI Max+ 395") == (
        "'Radeon 8060S' taken as the 128 GB Ryzen AI Max+ 395 with the 96 GB BIOS carve-out; --gpu-memory sets "
        "another carve-out or GTT limit")


@pytest.mark.parametrize(("name", "vendor", "unified", "taken"), [
    ("Radeon 890M", "amd", True, "an AMD APU (ROCm / Vulkan, memory shared with the host; bf16, no native FP8)"),
    ("AMD Ryzen AI 9 HX 370", "amd", True, "an AMD APU (ROCm / Vulkan, memory shared with the host; bf16, no native FP8)"),
    ("Radeon RX 9070 XT", "amd", False, "an AMD GPU (ROCm / Vulkan; bf16, no native FP8)"),
    ("MI355X", "amd", False, "an AMD GPU (ROCm / Vulkan; bf16, no native FP8)"),
    ("Apple M6 Max", "apple", True, "an Apple silicon GPU (Metal, unified memory; bf16, no native FP8)"),
    ("M6", "apple", True, "an Apple silicon GPU (Metal, unified memory; bf16, no native FP8)"),
    ("Intel Arc 140V", "intel", False, "an Intel GPU (SYCL / Level Zero; bf16, no native FP8)"),
    ("My Card", "nvidia", False, "a CUDA card with compute capability 8.0 (bf16, no native FP8)"),
])
def test_unlisted_card_takes_the_vendor_its_name_shows(name, vendor, unified, taken):
    gpu = unlisted(name, 24 * 2**30)
    cc = 80 if vendor == "nvidia" else 0
    assert (gpu.vendor, gpu.compute_capability, gpu.unified_memory, gpu.memory_bytes) == (vendor, cc, unified, 24 * 2**30)
    assert gpu.memory_source == f"--gpu-memory override; '{name}' is not in the catalog: taken as {taken}"


def test_estimate_on_an_unlisted_amd_apu_says_what_it_assumed(capsys):
    cmd = ["--", "llama-server", "-m", "Qwen/Qwen2.5-7B-Instruct-GGUF:Q4_K_M", "-c", "8192"]
    assert main(["estimate", "--gpu", "Radeon 890M", "--gpu-memory", "48GiB", "--format", "json", *cmd]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["gpu"]["name"] == "Radeon 890M" and plan["gpu"]["memory_bytes"] == 48 * 2**30
    assert plan["gpu"]["source"].endswith("taken as an AMD APU (ROCm / Vulkan, memory shared with the host; bf16, "
                                          "no native FP8)")
