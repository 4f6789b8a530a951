"""Turing Quadro, Ada workstation, GeForce laptop and later GeForce cards users named in logs
(data/gpus.yaml, data/gpu_sms.yaml): each name resolves to exactly one card with its figures, and the
desktop names next to them keep meaning what they meant."""

from __future__ import annotations

import pytest

from servefit.core import UsageError
from servefit.engines.vllm.non_torch import resident_threads
from servefit.hardware import catalog_assumption, lookup, resolve_gpu, resolve_target

MIB = 2**20

# name as written -> (key, memory_mib, smi_memory_mib or 0, compute capability, bf16, fp8, SMs)
CARDS = {
    "Quadro RTX 8000": ("quadro-rtx-8000", 48380, 0, 75, False, False, 72),
    "RTX 8000": ("quadro-rtx-8000", 48380, 0, 75, False, False, 72),
    "Quadro RTX 6000": ("quadro-rtx-6000", 23804, 24576, 75, False, False, 72),
    "Quadro RTX 5000": ("quadro-rtx-5000", 15612, 16384, 75, False, False, 48),
    "NVIDIA RTX 2000 Ada Generation": ("rtx-2000-ada", 15915, 16380, 89, True, True, 22),
    "NVIDIA RTX 4000 Ada Generation": ("rtx-4000-ada", 20010, 20475, 89, True, True, 48),
    "NVIDIA RTX 4000 SFF Ada Generation": ("rtx-4000-sff-ada", 20010, 20475, 89, True, True, 48),
    "NVIDIA GeForce RTX 3060 Laptop GPU": ("rtx-3060-laptop", 6003, 6144, 86, True, False, 30),
    "3060 Laptop": ("rtx-3060-laptop", 6003, 6144, 86, True, False, 30),
    "NVIDIA GeForce RTX 3070 Laptop GPU": ("rtx-3070-laptop", 8004, 8192, 86, True, False, 40),
    "NVIDIA GeForce RTX 3080 Laptop GPU": ("rtx-3080-laptop", 16008, 16384, 86, True, False, 48),
    "RTX 3080 Laptop 8GB": ("rtx-3080-laptop-8gb", 8004, 8192, 86, True, False, 48),
    "NVIDIA GeForce RTX 4060": ("rtx-4060", 7805, 8188, 89, True, True, 24),
    "NVIDIA GeForce RTX 4060 Laptop GPU": ("rtx-4060-laptop", 7805, 8188, 89, True, True, 24),
    "NVIDIA GeForce RTX 4070 Laptop GPU": ("rtx-4070-laptop", 7805, 8188, 89, True, True, 36),
    "RTX 4060 Ti 8GB": ("rtx-4060-ti-8gb", 7805, 8188, 89, True, True, 34),
    "RTX 4070 Super": ("rtx-4070-super", 12036, 12282, 89, True, True, 56),
    "NVIDIA GeForce RTX 4070 SUPER": ("rtx-4070-super", 12036, 12282, 89, True, True, 56),
    "NVIDIA GeForce RTX 4070 Ti SUPER": ("rtx-4070-ti-super", 16048, 16376, 89, True, True, 66),
    "4070 Ti Super": ("rtx-4070-ti-super", 16048, 16376, 89, True, True, 66),
    "RTX 4070 8GB": ("rtx-4070-laptop", 7805, 8188, 89, True, True, 36),
    "NVIDIA GeForce RTX 5060 Ti": ("rtx-5060-ti-16gb", 15848, 16311, 120, True, True, 36),
    "NVIDIA GeForce RTX 5070": ("rtx-5070", 11755, 0, 120, True, True, 48),
    "5070": ("rtx-5070", 11755, 0, 120, True, True, 48),
}


@pytest.mark.parametrize(("name", "want"), sorted(CARDS.items()))
def test_card_figures(name: str, want: tuple[str, int, int, int, bool, bool, int]) -> None:
    key, mib, smi, cc, bf16, fp8, sms = want
    gpu = resolve_gpu(name)
    assert gpu.key == key
    assert gpu.memory_bytes == mib * MIB
    assert gpu.smi_memory_bytes == smi * MIB
    assert (gpu.compute_capability, gpu.bf16, gpu.fp8, gpu.vendor) == (cc, bf16, fp8, "nvidia")
    threads = {75: 1024, 86: 1536, 89: 1536, 120: 1536}[cc]  # resident threads per SM
    assert resident_threads(gpu) == sms * threads


# the desktop and Ada names next to the new ones mean what they meant before the new entries
UNCHANGED = {
    "RTX 3060": ("rtx-3060", 12042),
    "NVIDIA GeForce RTX 3060": ("rtx-3060", 12042),
    "GeForce RTX 3060": ("rtx-3060", 12042),
    "3060": ("rtx-3060", 12042),
    "rtx3060": ("rtx-3060", 12042),
    "RTX 3060 Ti": ("rtx-3060-ti", 8004),
    "NVIDIA GeForce RTX 3070": ("rtx-3070", 8004),
    "NVIDIA GeForce RTX 3080": ("rtx-3080", 10002),
    "RTX 3080 12GB": ("rtx-3080-12gb", 12054),
    "RTX 4060 Ti": ("rtx-4060-ti-16gb", 16052),
    "NVIDIA GeForce RTX 4070": ("rtx-4070", 12036),
    "RTX 5070 Ti": ("rtx-5070-ti", 15840),
    "NVIDIA GeForce RTX 5080": ("rtx-5080", 15840),
    "RTX 6000 Ada": ("rtx-6000-ada", 48520),
    "NVIDIA RTX 6000 Ada Generation": ("rtx-6000-ada", 48520),
    "RTX PRO 6000": ("rtx-pro-6000", 97250),
    "A6000": ("rtx-a6000", 48676),
}


@pytest.mark.parametrize(("name", "want"), sorted(UNCHANGED.items()))
def test_neighbouring_names_unchanged(name: str, want: tuple[str, int]) -> None:
    gpu = resolve_gpu(name)
    assert (gpu.key, gpu.memory_bytes) == (want[0], want[1] * MIB)


def test_laptop_name_is_not_the_desktop_card() -> None:
    laptop = resolve_gpu("NVIDIA GeForce RTX 3060 Laptop GPU")
    assert laptop.key == "rtx-3060-laptop" and laptop.name == "NVIDIA GeForce RTX 3060 Laptop GPU"
    for form in ("nvidia-geforce-rtx-3060-laptop-gpu", "RTX 3060 Laptop GPU", "rtx 3060 mobile", "3060 laptop",
                 "GeForce RTX 3060 Laptop", "NVIDIA RTX 3060 Laptop GPU", "Nvidia 3060 laptop gpu"):
        assert resolve_gpu(form).key == "rtx-3060-laptop", form
    assert resolve_gpu("RTX 3060").key == "rtx-3060"
    # nvidia-smi's table cuts the laptop names; "RTX 3060 ..." / "RTX 4060 ..." could be three cards
    assert lookup("NVIDIA GeForce RTX 3060 ...") is None
    assert lookup("NVIDIA GeForce RTX 4060 ...") is None
    assert lookup("NVIDIA GeForce RTX 4070 Lap...").key == "rtx-4070-laptop"  # type: ignore[union-attr]


def test_count_forms_with_new_cards() -> None:
    gpu, count = resolve_target("4x Quadro RTX 8000")
    assert (gpu.key, count) == ("quadro-rtx-8000", 4)
    gpu, count = resolve_target("RTX 5070 x 2")
    assert (gpu.key, count) == ("rtx-5070", 2)


def test_ambiguous_short_names_say_which_card() -> None:
    # "RTX 6000" / "RTX 5000" also name the Ada cards (48 / 32 GB, bf16, fp8): left unresolved, not guessed
    assert lookup("RTX 6000") is None and lookup("RTX 5000") is None
    assert resolve_gpu("RTX 6000 24GB").key == "quadro-rtx-6000"
    assert resolve_gpu("RTX 5000 16GB").key == "quadro-rtx-5000"
    assert catalog_assumption(resolve_gpu("Quadro RTX 6000"), "Quadro RTX 6000") == (
        "Quadro RTX 6000 memory 23.25 GiB is a catalog estimate (24576 MiB board (a run log 'Quadro RTX 6000, 24576 "
        "MiB') minus 772 MiB, the Quadro RTX 8000's gap between its 48 GiB board and CUDA's 48380 MiB on the same "
        "TU102 under torch 2.12 / CUDA 13); --gpu-memory SIZE sets the real figure")
    assert catalog_assumption(resolve_gpu("RTX 3080 Laptop"), "RTX 3080 Laptop").startswith(  # type: ignore[union-attr]
        "'RTX 3080 Laptop' taken as the 16 GB card; use rtx-3080-laptop-8gb")
    assert catalog_assumption(resolve_gpu("RTX 5060 Ti"), "RTX 5060 Ti").startswith(  # type: ignore[union-attr]
        "'RTX 5060 Ti' taken as the 16 GB card; an 8 GB version exists")
    # a measured card written in full carries no assumption
    assert catalog_assumption(resolve_gpu("Quadro RTX 8000"), "Quadro RTX 8000") is None
    assert catalog_assumption(resolve_gpu("RTX 6000 Ada"), "RTX 6000 Ada") is None


@pytest.mark.parametrize(("name", "first"), [("RTX 4900", "rtx-4090"), ("RTX 5700", "rtx-5070")])
def test_transposed_digits_come_first(name: str, first: str) -> None:
    with pytest.raises(UsageError) as info:
        resolve_gpu(name)
    assert str(info.value).split("did you mean: ")[1].split(",")[0] == first


@pytest.mark.parametrize(("name", "key"), [
    ("RTX 4070 12GB", "rtx-4070"), ("rtx-4070-12gb", "rtx-4070"), ("RTX 3060 12GB", "rtx-3060"),
    ("RTX 4080 16G", "rtx-4080"), ("A100 81GB", None), ("RTX 4090 24 GB", "rtx-4090"),
    ("RTX 4070 16GB", None), ("RTX 3060 8GB", None), ("RTX 6000 48GB", None)])
def test_a_name_with_its_boards_memory_after_it(name: str, key: str | None) -> None:
    """'RTX 4070 12GB': the card the name means where its board holds that many GB; a size the card does not
    come in (the 8 GB RTX 3060 is not catalogued) or an ambiguous name stays unknown, not guessed."""
    gpu = lookup(name)
    assert (gpu.key if gpu else None) == key
    if key is None:
        with pytest.raises(UsageError):
            resolve_gpu(name)


def test_the_8gb_rtx_4070_is_the_laptop_card_and_says_so() -> None:
    assert catalog_assumption(resolve_gpu("RTX 4070 8GB"), "RTX 4070 8GB") == (
        "'RTX 4070 8GB' taken as the RTX 4070 Laptop GPU: the desktop RTX 4070 has 12 GB")
    assert resolve_gpu("RTX 4060 Ti").key == "rtx-4060-ti-16gb"  # unchanged: the 16 GB card, said
