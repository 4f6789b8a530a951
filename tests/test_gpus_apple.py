"""Apple silicon in the catalog: every M-series chip and its RAM sizes, each sized by Metal's
recommendedMaxWorkingSetSize (2/3 of RAM up to 32 GB, 3/4 from 64 GB, as llama.cpp logs show)."""

from __future__ import annotations

import pytest

from servefit.hardware import resolve_target
from servefit.hardware.catalog import all_gpus, catalog_assumption, lookup

MIB = 2**20


@pytest.mark.parametrize(("written", "key", "mib"), [
    ("M2 Pro", "m2-pro-16gb", 10922),  # was: "did you mean m2-ultra / rtx-pro-6000"
    ("Apple M2 Pro", "m2-pro-16gb", 10922),  # the name Metal reports
    ("Apple M1", "m1-16gb", 10922),
    ("M1 8GB", "m1-8gb", 5461),  # 5461.34 MB logged on an 8 GB Mac
    ("M3 Pro 18GB", "m3-pro-18gb", 12288),
    ("M4 24 GB", "m4-24gb", 16384),
    ("M2 Max 32GB", "m2-max-32gb", 21845),  # 21845.34 MB logged
    ("M4 Max 36GB", "m4-max-36gb", 27648),
    ("m4-max-48gb", "m4-max-48gb", 36864),
    ("M4 Max 64GB", "m4-max-64gb", 49152),  # 49152.00 MiB logged
    ("Apple M4 Max", "m4-max-128gb", 98304),
    ("M3 Ultra 96GB", "m3-ultra-96gb", 73728),  # 73728 MB logged on 96 GB
    ("M3 Ultra 256GB", "m3-ultra-256gb", 196608),
    ("M2 Ultra 64GB", "m2-ultra-64gb", 49152),
    ("Apple M5 Max", "m5-max-128gb", 110100),  # 107.52 GiB, macOS 26
    ("Apple M5", "m5-16gb", 10922),
])
def test_apple_names_resolve(written, key, mib):
    gpu, count = resolve_target(written)
    assert (gpu.key, gpu.memory_bytes // MIB, gpu.vendor, gpu.unified_memory, count) == (key, mib, "apple", True, None)


def test_every_apple_entry_follows_the_working_set_rule():
    """Every entry sized by rule is 2/3 (up to 32 GB) or 3/4 of its RAM; only a logged figure may differ."""
    apple = [g for g in all_gpus() if g.vendor == "apple"]
    assert len(apple) == 47
    for g in apple:
        ram = g.smi_memory_bytes // MIB
        rule = ram * 2 // 3 if ram <= 32 * 1024 else ram * 3 // 4
        if g.key != "m5-max-128gb":
            assert g.memory_bytes // MIB == rule, g.key
        assert g.memory_source.startswith(("metal log:", "estimated:")), g.key


def test_bare_chip_name_says_which_configuration_it_assumed():
    gpu, _ = resolve_target("M4 Pro")
    assert gpu.key == "m4-pro-24gb"
    assert catalog_assumption(gpu, "M4 Pro").startswith(
        "'M4 Pro' taken as the 24 GB configuration; --gpu-memory sets another; Apple M4 Pro memory 16.00 GiB is a"
        " catalog estimate (2/3 of 24 GB")
    gpu, _ = resolve_target("M4 Max 36GB")
    note = catalog_assumption(gpu, "M4 Max 36GB")
    assert note is not None and note.startswith("Apple M4 Max memory 27.00 GiB is a catalog estimate (3/4 of 36 GB")


def test_metal_reports_the_working_set_itself_as_free():
    """llama.cpp's Metal device reports recommendedMaxWorkingSetSize as its memory
    (ggml_backend_metal_device_get_memory) and Ollama reads the same figure (discover/gpu_darwin.go):
    the catalog already records that figure, so neither planner takes another quarter off it."""
    from servefit.engines.llamacpp.planner import device_free
    from servefit.engines.ollama.plan import gpu_free

    mac = lookup("M4 Max")
    assert mac is not None and mac.memory_bytes == 98304 * MIB
    assert device_free(mac) == gpu_free(mac) == 98304 * MIB
