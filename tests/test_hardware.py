"""The GPU catalog (data/gpus.yaml) and the resolver in servefit.hardware."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from servefit.core import UsageError
from servefit.data import load
from servefit.hardware import (
    GpuSpec,
    all_gpus,
    catalog_assumption,
    lookup,
    lookup_instance,
    resolve_gpu,
    resolve_target,
    with_memory,
)
from servefit.hardware import catalog as cat_mod

SRC = Path(cat_mod.__file__).resolve().parents[2]
SCHEMA = SRC / "servefit" / "schemas" / "gpus.schema.json"
GIB = 2**30


def gib(gpu: GpuSpec) -> float:
    return round(gpu.memory_bytes / GIB, 2)


# ---------------------------------------------------------------------------- the data

def test_yaml_matches_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(load("gpus.yaml")), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:10])


def test_catalog_size_and_order() -> None:
    gpus = all_gpus()
    assert len(gpus) >= 45
    assert [g.key for g in gpus] == [e["key"] for e in load("gpus.yaml")["gpus"]]
    assert {g.vendor for g in gpus} == {"nvidia", "amd", "apple", "intel"}


def test_anchor_memory_figures() -> None:
    l4 = resolve_gpu("L4")
    assert gib(l4) == 22.03
    assert l4.memory_bytes == 22563 * 2**20
    assert gib(resolve_gpu("NVIDIA A100-SXM4-80GB")) == 79.15
    h100 = resolve_gpu("NVIDIA H100 80GB HBM3")
    assert gib(h100) == 79.19  # what vLLM logs as the total (cudaMemGetInfo)
    assert h100.smi_memory_bytes == 85520809984  # nvidia-smi's 81559 MiB
    assert gib(resolve_gpu("Tesla T4")) == 14.58
    assert gib(resolve_gpu("NVIDIA A10G")) == 22.06
    assert gib(resolve_gpu("NVIDIA A100-SXM4-40GB")) == 39.49
    assert gib(resolve_gpu("NVIDIA L40S")) == 44.39
    assert gib(resolve_gpu("NVIDIA H200")) == 139.81
    assert gib(resolve_gpu("AMD Instinct MI300X")) == 191.98
    assert gib(resolve_gpu("NVIDIA GeForce RTX 5090")) == 31.35
    assert resolve_gpu("GH200 144GB").memory_bytes == 153008209920


def test_memory_is_the_driver_total_not_the_marketing_size() -> None:
    for gpu in all_gpus():
        assert gpu.memory_bytes % 2**20 == 0, gpu.key
        assert gpu.source == "catalog"
        assert gpu.memory_source, gpu.key
        if gpu.smi_memory_bytes:
            assert gpu.memory_bytes <= gpu.smi_memory_bytes, gpu.key
        if gpu.vendor == "nvidia" and not gpu.unified_memory:
            # a few hundred MiB to ~3% below nvidia-smi's / the board's size
            nominal = gpu.smi_memory_bytes or gpu.memory_bytes
            assert gpu.memory_bytes >= 0.95 * nominal, gpu.key


def test_feature_flags_follow_compute_capability() -> None:
    for gpu in all_gpus():
        if gpu.vendor == "nvidia":
            assert gpu.compute_capability >= 60, gpu.key  # Pascal (P100, P40, GTX 1080 Ti) and up
            assert gpu.fp8 == (gpu.compute_capability >= 89), gpu.key
            assert gpu.bf16 == (gpu.compute_capability >= 80), gpu.key
        else:
            assert gpu.compute_capability == 0, gpu.key
    cc = {k: resolve_gpu(k).compute_capability for k in
          ("T4", "V100", "A100", "A10G", "RTX 3090", "L4", "RTX 4090", "H100", "H200", "GH200",
           "B200", "RTX 5090", "RTX PRO 6000", "DGX Spark", "RTX 2080 Ti")}
    assert cc == {"T4": 75, "V100": 70, "A100": 80, "A10G": 86, "RTX 3090": 86, "L4": 89,
                  "RTX 4090": 89, "H100": 90, "H200": 90, "GH200": 90, "B200": 100, "RTX 5090": 120,
                  "RTX PRO 6000": 120, "DGX Spark": 121, "RTX 2080 Ti": 75}
    assert resolve_gpu("MI300X").fp8 and resolve_gpu("MI325X").fp8 and not resolve_gpu("MI250X").fp8
    assert resolve_gpu("MI210").bf16


def test_unified_memory_devices() -> None:
    unified = {g.key for g in all_gpus() if g.unified_memory}
    assert {"dgx-spark", "m2-ultra-192gb", "m3-max-128gb", "m4-max-128gb", "m3-ultra-512gb"} <= unified
    assert all(g.vendor == "apple" or g.key == "dgx-spark" or g.key.startswith(("jetson-", "radeon-80"))
               for g in all_gpus() if g.unified_memory)
    m2 = resolve_gpu("M2 Ultra")
    assert m2.smi_memory_bytes == 192 * GIB
    assert m2.memory_bytes == 144 * GIB  # Metal's recommendedMaxWorkingSetSize (75%)


def test_older_and_edge_cards_as_the_driver_reports_them() -> None:
    """A2, A16, P100, P40, GTX 1080 Ti and the Jetson Orin modules: the totals quoted in their
    memory_source lines (torch banners in MiB), not the 16/24/11/64 GB on the box."""
    mib = {k: resolve_gpu(k).memory_bytes // 2**20 for k in (
        "Tesla P100-PCIE-16GB", "Tesla P100-SXM2-16GB", "Tesla P40", "NVIDIA GeForce GTX 1080 Ti",
        "jetson-agx-orin-32gb", "Jetson Orin NX", "Jetson Orin Nano", "NVIDIA A2", "NVIDIA A16")}
    assert mib == {"Tesla P100-PCIE-16GB": 16269, "Tesla P100-SXM2-16GB": 16276, "Tesla P40": 24446,
                   "NVIDIA GeForce GTX 1080 Ti": 11177, "jetson-agx-orin-32gb": 30697, "Jetson Orin NX": 15655,
                   "Jetson Orin Nano": 7620, "NVIDIA A2": 14926, "NVIDIA A16": 14926}
    for key, cc in (("P100", 60), ("P40", 61), ("GTX 1080 Ti", 61), ("A2", 86), ("A16", 86), ("Orin", 87)):
        assert resolve_gpu(key).compute_capability == cc, key
    assert resolve_gpu("nvidia-tesla-p100").key == "p100-pcie-16gb"
    assert resolve_gpu("NVIDIA-A2").key == "a2" and resolve_gpu("nvidia-tesla-p40").key == "p40"
    # CUDA calls every Jetson Orin "Orin": that name is the AGX Orin 64GB, by assumption, said so
    orin = resolve_gpu("Orin")
    assert orin.key == "jetson-agx-orin-64gb" and orin.unified_memory
    note = catalog_assumption(orin, "Orin")
    assert note is not None and "AGX Orin 64GB" in note and "jetson-orin-nano-8gb" in note
    for key in ("jetson-agx-orin-32gb", "jetson-orin-nx-16gb", "jetson-orin-nano-8gb"):
        g = resolve_gpu(key)
        assert g.name == "Orin" and g.unified_memory and g.memory_bytes < g.smi_memory_bytes
    # the A2 / A16 figures are estimates and say so in the plan
    assert "catalog estimate" in (catalog_assumption(resolve_gpu("A2")) or "")


def test_rtx_a4500_as_cuda_reports_it() -> None:
    """GA102 workstation card, 20 GB: nvidia-smi's 20470 MiB, CUDA's total the A5000's 316 MiB below it
    (an estimate, said so), Ampere flags."""
    g = resolve_gpu("NVIDIA RTX A4500")
    assert g.key == "rtx-a4500" and g.smi_memory_bytes == 20470 * 2**20
    assert g.memory_bytes == 20154 * 2**20
    a5000 = resolve_gpu("RTX A5000")
    assert g.smi_memory_bytes - g.memory_bytes == 24564 * 2**20 - a5000.memory_bytes
    assert (g.compute_capability, g.bf16, g.fp8, g.unified_memory) == (86, True, False, False)
    assert "catalog estimate" in (catalog_assumption(g) or "")


def test_keys_names_and_aliases_are_unique() -> None:
    raw = load("gpus.yaml")["gpus"]
    keys = [e["key"] for e in raw]
    assert len(keys) == len(set(keys))
    owner: dict[str, str] = {}
    for e in raw:
        names = [e["key"], *map(str, e.get("aliases", []))]
        if not e.get("variant_of"):
            names.append(e["name"])
        for name in names:
            form = cat_mod.normalize(name)
            assert owner.setdefault(form, e["key"]) == e["key"], f"{name!r}: {owner[form]} and {e['key']}"
            assert lookup(name) is not None and lookup(name).key == e["key"], name  # type: ignore[union-attr]
    # the nvidia-smi names are unique except where an entry says it shares one
    names = [e["name"] for e in raw if not e.get("variant_of")]
    assert len(names) == len(set(names))
    for e in raw:
        if e.get("variant_of"):
            assert resolve_gpu(e["name"]).key == e["variant_of"]


def test_assumption_data_is_consistent() -> None:
    for e in load("gpus.yaml")["gpus"]:
        for alias in e.get("assumed_aliases", []):
            assert resolve_gpu(alias).key == e["key"], alias


# ---------------------------------------------------------------------------- names

NAMES = {
    # nvidia-smi / torch.cuda.get_device_name
    "NVIDIA GeForce RTX 3090": "rtx-3090",
    "Tesla T4": "t4",
    "NVIDIA A100-SXM4-40GB": "a100-sxm4-40gb",
    "NVIDIA A100 80GB PCIe": "a100-pcie-80gb",
    "NVIDIA A100-PCIE-40GB": "a100-pcie-40gb",
    "Tesla V100-SXM2-16GB": "v100-sxm2-16gb",
    "Tesla V100-SXM2-32GB": "v100-sxm2-32gb",
    "NVIDIA H100 80GB HBM3": "h100-sxm",
    "NVIDIA H100 PCIe": "h100-pcie",
    "NVIDIA H100 NVL": "h100-nvl",
    "NVIDIA L4": "l4",
    "NVIDIA A10G": "a10g",
    "NVIDIA A10": "a10",
    "NVIDIA L40S": "l40s",
    "NVIDIA L40": "l40",
    "NVIDIA H200": "h200",
    "NVIDIA H200 NVL": "h200-nvl",
    "NVIDIA GH200 480GB": "gh200-96gb",
    "NVIDIA GH200 144G HBM3e": "gh200-144gb",
    "NVIDIA B200": "b200",
    "NVIDIA RTX 6000 Ada Generation": "rtx-6000-ada",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "rtx-pro-6000",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "rtx-pro-6000",
    "NVIDIA GeForce RTX 4090": "rtx-4090",
    "NVIDIA GeForce RTX 4090 D": "rtx-4090-d",
    "NVIDIA GeForce RTX 4080 SUPER": "rtx-4080-super",
    "AMD Instinct MI300X": "mi300x",
    "AMD Instinct MI250X/MI250": "mi250x",
    "Radeon RX 7900 XTX": "rx-7900-xtx",
    "NVIDIA GB10": "dgx-spark",
    "Apple M3 Max": "m3-max-128gb",
    # short names
    "A100-80GB": "a100-sxm4-80gb",
    "A100 80GB": "a100-sxm4-80gb",
    "a100-80g": "a100-sxm4-80gb",
    "a100": "a100-sxm4-80gb",
    "A100-40GB": "a100-sxm4-40gb",
    "h100": "h100-sxm",
    "H100 SXM": "h100-sxm",
    "H100 NVL": "h100-nvl",
    "4090": "rtx-4090",
    "rtx4090": "rtx-4090",
    "RTX 4090": "rtx-4090",
    "GeForce RTX 4090": "rtx-4090",
    "rtx_4090": "rtx-4090",
    "L40S": "l40s",
    "l40s": "l40s",
    "V100": "v100-sxm2-16gb",
    "3080 12GB": "rtx-3080-12gb",
    "RTX 3080": "rtx-3080",
    "3060 Ti": "rtx-3060-ti",
    "4060 Ti 16GB": "rtx-4060-ti-16gb",
    "5070 Ti": "rtx-5070-ti",
    "MI325X": "mi325x",
    "7900 XTX": "rx-7900-xtx",
    "M2 Ultra 192GB": "m2-ultra-192gb",
    "M3 Ultra": "m3-ultra-512gb",
    "DGX Spark": "dgx-spark",
    "H20": "h20",
    "H800": "h800",
    "L20": "l20",
    "A800": "a800-sxm4-80gb",
    "A30": "a30",
    "A40": "a40",
    "RTX A6000": "rtx-a6000",
    "A5000": "rtx-a5000",
    "RTX A4000": "rtx-a4000",
    "NVIDIA RTX A4500": "rtx-a4500",
    "A4500": "rtx-a4500",
    "2080 Ti": "rtx-2080-ti",
    "RTX 2060": "rtx-2060",
    "h100-sxm": "h100-sxm",  # catalog keys
    "rtx-pro-6000": "rtx-pro-6000",
    # Kubernetes nvidia.com/gpu.product (GPU feature discovery)
    "NVIDIA-A100-SXM4-80GB": "a100-sxm4-80gb",
    "NVIDIA-A100-SXM4-40GB": "a100-sxm4-40gb",
    "Tesla-T4": "t4",
    "NVIDIA-L4": "l4",
    "NVIDIA-H100-80GB-HBM3": "h100-sxm",
    "NVIDIA-GeForce-RTX-4090": "rtx-4090",
    "NVIDIA-A100-80GB-PCIe": "a100-pcie-80gb",
    "Tesla-V100-SXM2-16GB": "v100-sxm2-16gb",
    "NVIDIA-H100-80GB-HBM3-SHARED": "h100-sxm",  # time-slicing rename
    "nvidia.com/gpu.product=NVIDIA-L40S": "l40s",
    # GKE cloud.google.com/gke-accelerator
    "nvidia-tesla-t4": "t4",
    "nvidia-l4": "l4",
    "nvidia-tesla-a100": "a100-sxm4-40gb",
    "nvidia-a100-80gb": "a100-sxm4-80gb",
    "nvidia-h100-80gb": "h100-sxm",
    "nvidia-h100-mega-80gb": "h100-sxm",
    "nvidia-h200-141gb": "h200",
    "nvidia-tesla-v100": "v100-sxm2-16gb",
    "nvidia-b200": "b200",
    "nvidia-rtx-pro-6000": "rtx-pro-6000",
    # nvidia-smi's table truncates long names
    "NVIDIA A100 80G...": "a100-pcie-80gb",
    "NVIDIA GeForce RTX 3090 T...": "rtx-3090-ti",
    "NVIDIA RTX PRO 6000 Blac...": "rtx-pro-6000",
}


@pytest.mark.parametrize(("name", "key"), sorted(NAMES.items()))
def test_names_resolve(name: str, key: str) -> None:
    gpu = lookup(name)
    assert gpu is not None and gpu.key == key
    assert resolve_gpu(name).key == key
    assert resolve_target(name) == (gpu, None)


@pytest.mark.parametrize("name", ["NVIDIA GEFORCE RTX 3090", "nvidia geforce rtx 3090", "Nvidia_GeForce_RTX_3090",
                                  "  NVIDIA   GeForce RTX 3090 ", "GeForce-RTX-3090", "rtx3090"])
def test_matching_ignores_case_and_separators(name: str) -> None:
    assert resolve_gpu(name).key == "rtx-3090"


def test_lookup_misses_return_none() -> None:
    for name in ("", "   ", "RTX 9090", "NVIDIA A100-SXM...", "NVIDIA H100...", "NVIDIA GeForce RTX 4090 ...", "H100 PCIe 40GB", "..."):
        assert lookup(name) is None, name


def test_catalog_assumption() -> None:
    a100 = resolve_gpu("A100")
    assert "80 GB" in (catalog_assumption(a100, "A100") or "")
    assert catalog_assumption(a100, "NVIDIA A100-SXM4-80GB") is None  # exact name: nothing assumed
    assert catalog_assumption(a100) is None
    assert "H100 SXM" in (catalog_assumption(resolve_gpu("h100"), "h100") or "")
    assert "10 GB" in (catalog_assumption(resolve_gpu("NVIDIA GeForce RTX 3080"), "NVIDIA GeForce RTX 3080") or "")
    l20 = resolve_gpu("L20")
    assert "estimate" in (catalog_assumption(l20) or "")
    assert catalog_assumption(with_memory(l20, 40 * GIB)) is None


# ---------------------------------------------------------------------------- instances

INSTANCES = {
    "g4dn.xlarge": ("t4", 1), "g4dn.12xlarge": ("t4", 4), "g4dn.metal": ("t4", 8),
    "g5.xlarge": ("a10g", 1), "g5.16xlarge": ("a10g", 1), "g5.12xlarge": ("a10g", 4),
    "g5.24xlarge": ("a10g", 4), "g5.48xlarge": ("a10g", 8),
    "g6.2xlarge": ("l4", 1), "g6.12xlarge": ("l4", 4), "g6.48xlarge": ("l4", 8),
    "g6e.xlarge": ("l40s", 1), "g6e.12xlarge": ("l40s", 4), "g6e.24xlarge": ("l40s", 4),
    "g6e.48xlarge": ("l40s", 8),
    "p3.2xlarge": ("v100-sxm2-16gb", 1), "p3.8xlarge": ("v100-sxm2-16gb", 4),
    "p3.16xlarge": ("v100-sxm2-16gb", 8), "p3dn.24xlarge": ("v100-sxm2-32gb", 8),
    "p4d.24xlarge": ("a100-sxm4-40gb", 8), "p4de.24xlarge": ("a100-sxm4-80gb", 8),
    "p5.48xlarge": ("h100-sxm", 8), "p5e.48xlarge": ("h200", 8), "p5en.48xlarge": ("h200", 8),
    "p6-b200.48xlarge": ("b200", 8),
    "ml.g5.2xlarge": ("a10g", 1), "ml.p4d.24xlarge": ("a100-sxm4-40gb", 8),  # SageMaker
    "a2-highgpu-1g": ("a100-sxm4-40gb", 1), "a2-highgpu-2g": ("a100-sxm4-40gb", 2),
    "a2-highgpu-4g": ("a100-sxm4-40gb", 4), "a2-highgpu-8g": ("a100-sxm4-40gb", 8),
    "a2-megagpu-16g": ("a100-sxm4-40gb", 16),
    "a2-ultragpu-1g": ("a100-sxm4-80gb", 1), "a2-ultragpu-8g": ("a100-sxm4-80gb", 8),
    "a3-highgpu-1g": ("h100-sxm", 1), "a3-highgpu-8g": ("h100-sxm", 8), "a3-megagpu-8g": ("h100-sxm", 8),
    "a3-ultragpu-8g": ("h200", 8),
    "g2-standard-4": ("l4", 1), "g2-standard-8": ("l4", 1), "g2-standard-12": ("l4", 1),
    "g2-standard-16": ("l4", 1), "g2-standard-32": ("l4", 1), "g2-standard-24": ("l4", 2),
    "g2-standard-48": ("l4", 4), "g2-standard-96": ("l4", 8),
    "Standard_NC24ads_A100_v4": ("a100-pcie-80gb", 1), "Standard_NC96ads_A100_v4": ("a100-pcie-80gb", 4),
    "Standard_ND96isr_H100_v5": ("h100-sxm", 8), "standard_nd96isr_h100_v5": ("h100-sxm", 8),
    "ND96isr_H100_v5": ("h100-sxm", 8), "Standard_NC40ads_H100_v5": ("h100-nvl", 1),
    "Standard_ND96is_MI300X_v5": ("mi300x", 8),
}


@pytest.mark.parametrize(("instance", "expected"), sorted(INSTANCES.items()))
def test_instances(instance: str, expected: tuple[str, int]) -> None:
    hit = lookup_instance(instance)
    assert hit is not None and (hit[0].key, hit[1]) == expected
    gpu, count = resolve_target(instance)
    assert (gpu.key, count) == expected
    assert resolve_gpu(instance).key == expected[0]


def test_instance_misses() -> None:
    for name in ("", "g5.3xlarge", "g2-standard-20", "p4d", "g5.xlarge.extra", "A100"):
        assert lookup_instance(name) is None, name


def test_each_instance_type_matches_one_entry() -> None:
    raw = load("gpus.yaml")["instances"]
    keys = {g.key for g in all_gpus()}
    catalog = cat_mod._catalog()
    for inst in raw:
        assert inst["gpu"] in keys
        for name in inst.get("types", []):
            norm = cat_mod._instance_norm(name)
            assert not any(p.fullmatch(norm) for p, _, _ in catalog.instance_patterns), name
    patterns = [p for p, _, _ in catalog.instance_patterns]
    for candidate in [f"{fam}.{size}" for fam in ("g4dn", "g5", "g6", "g6e", "gr6")
                      for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge")] + \
                     [f"g2-standard-{n}" for n in (4, 8, 12, 16, 24, 32, 48, 96)]:
        assert sum(bool(p.fullmatch(candidate)) for p in patterns) <= 1, candidate


@pytest.mark.parametrize(("text", "key", "count"), [
    ("8xH100", "h100-sxm", 8), ("8 x H100", "h100-sxm", 8), ("H100x8", "h100-sxm", 8),
    ("2×L40S", "l40s", 2), ("4 * A100-80GB", "a100-sxm4-80gb", 4), ("RTX 4090 x2", "rtx-4090", 2),
])
def test_count_forms(text: str, key: str, count: int) -> None:
    gpu, n = resolve_target(text)
    assert (gpu.key, n) == (key, count)


# ---------------------------------------------------------------------------- errors

def test_unknown_name_suggests_nearest() -> None:
    with pytest.raises(UsageError) as info:
        resolve_gpu("H100 SMX")
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith("unknown GPU 'H100 SMX'; did you mean: ")
    assert "h100-sxm" in msg.split("did you mean:")[1].split("?")[0]
    assert msg.endswith("(servefit gpus lists them; --gpu-memory SIZE sets the memory of an unlisted card)")


@pytest.mark.parametrize(("name", "hint"), [
    ("A100-81GB", "a100-sxm4-80gb"), ("RTX 4900", "rtx-4090"), ("L40SS", "l40s"),
    ("g5.xlarg", "g5.12xlarge"), ("Standard_NC24ads_A100", "Standard_NC24ads_A100_v4"),
])
def test_unknown_suggestions(name: str, hint: str) -> None:
    with pytest.raises(UsageError, match="did you mean") as info:
        resolve_target(name)
    assert hint in str(info.value)


def test_unknown_without_neighbours_and_multiline_input() -> None:
    with pytest.raises(UsageError) as info:
        resolve_gpu("zzzz\nqqqq")
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("unknown GPU 'zzzz qqqq'")
    with pytest.raises(UsageError, match="unknown GPU ''"):
        resolve_gpu("")


def test_mig_slice_is_explained() -> None:
    with pytest.raises(UsageError, match="MIG slice"):
        resolve_gpu("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb")


# ---------------------------------------------------------------------------- --gpu-memory

def test_with_memory() -> None:
    d = resolve_gpu("RTX 4090 D")
    modded = with_memory(d, 48 * GIB)
    assert modded.memory_bytes == 48 * GIB and modded.memory_gib == 48.0
    assert modded.source == modded.memory_source == "--gpu-memory override"
    assert (modded.key, modded.name, modded.compute_capability, modded.fp8) == (d.key, d.name, 89, True)
    assert modded.aliases == d.aliases and modded.aliases is not d.aliases
    # the catalog entry is untouched
    assert resolve_gpu("RTX 4090 D").memory_bytes == 24111 * 2**20
    assert resolve_gpu("RTX 4090 D").source == "catalog"
    for bad in (0, -1, True, 1.5):
        with pytest.raises(UsageError):
            with_memory(d, bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- cost

def test_import_and_resolve_stay_light() -> None:
    code = (
        "import sys, time\n"
        "t = time.perf_counter()\n"
        "import servefit.hardware as h\n"
        "h.resolve_gpu('NVIDIA-A100-SXM4-80GB'); h.resolve_target('g5.12xlarge')\n"
        "t = time.perf_counter() - t\n"
        "heavy = [m for m in ('jsonschema', 'pydantic', 'optuna') if m in sys.modules]\n"
        "print(heavy, t)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    heavy, seconds = out.stdout.rsplit(" ", 1)
    assert heavy == "[]"
    assert float(seconds) < 0.5  # a few ms on a laptop; generous for slow CI machines
