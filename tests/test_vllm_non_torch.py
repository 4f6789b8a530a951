"""vLLM's non-torch term per release (engines/vllm/non_torch.py): which releases charge the whole
device (CUDA context, other processes), and how a lone GPU's growth scales with its resident
threads. Values computed by hand from data/gpu_sms.yaml and the constants' definitions."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from servefit.data import load
from servefit.engines.vllm.non_torch import (
    CUDA_CONTEXT,
    LMEM_BYTES_PER_THREAD,
    device_wide,
    lmem_growth_bytes,
    non_torch_bytes,
    resident_threads,
)
from servefit.hardware.catalog import all_gpus, resolve_gpu

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import run  # noqa: E402

SCHEMA = Path(__file__).parents[1] / "src" / "servefit" / "schemas" / "gpu_sms.schema.json"


def test_bytes_per_thread_is_the_h100_figure():
    # 0.13 GiB over an H100 SXM's 132 SMs x 2048 threads, rounded down to whole bytes
    assert LMEM_BYTES_PER_THREAD == 516
    assert lmem_growth_bytes(resolve_gpu("H100")) == 132 * 2048 * 516


@pytest.mark.parametrize(("name", "threads"), [
    ("T4", 40 * 1024),  # Turing: 32 warps per SM
    ("A100-80GB", 108 * 2048),
    ("L40S", 142 * 1536),  # Ada: 48 warps per SM
    ("RTX 3090", 82 * 1536),
    ("RTX 4060 Ti 16GB", 34 * 1536),
    ("A10G", 80 * 1536),
    ("H100 PCIe", 114 * 2048),
])
def test_lone_gpu_growth_scales_with_resident_threads(name, threads):
    gpu = resolve_gpu(name)
    assert resident_threads(gpu) == threads
    assert lmem_growth_bytes(gpu) == threads * 516
    # on one GPU that is the whole term in a release that snapshots after the context (0.11)
    assert non_torch_bytes(1, 1, gpu, (0, 11, 0), v1=True) == threads * 516


def test_cards_without_a_thread_count_take_the_h100_figure():
    h100 = 132 * 2048 * 516
    assert lmem_growth_bytes(None) == h100
    mi300 = next(g for g in all_gpus() if g.vendor == "amd")
    assert resident_threads(mi300) is None and lmem_growth_bytes(mi300) == h100
    assert lmem_growth_bytes(replace(resolve_gpu("T4"), compute_capability=11)) == h100  # capability unknown


def test_device_wide_releases():
    # V0 0.6.4 (mem_get_info - allocated) and V1 up to 0.9.0 (gpu_worker.py before PR #19312)
    assert device_wide((0, 6, 4), v1=False)
    assert not device_wide((0, 6, 3), v1=False) and not device_wide((0, 6, 5), v1=False)
    assert device_wide((0, 7, 3), v1=True) and device_wide((0, 8, 5), v1=True) and device_wide((0, 9, 0), v1=True)
    assert not device_wide((0, 9, 1), v1=True)
    assert not device_wide((0, 8, 5), v1=False)  # V0 0.8 snapshots in init_device (MemorySnapshot)


def test_device_wide_releases_charge_the_context_and_other_processes():
    l40s = resolve_gpu("L40S")
    alone = 142 * 1536 * 516
    busy = replace(l40s, in_use_bytes=3 * 2**30)
    assert non_torch_bytes(1, 1, l40s, (0, 9, 0), v1=True) == alone + CUDA_CONTEXT
    assert non_torch_bytes(1, 1, busy, (0, 9, 0), v1=True) == alone + CUDA_CONTEXT + 3 * 2**30
    assert non_torch_bytes(1, 1, busy, (0, 6, 4), v1=False) == alone + CUDA_CONTEXT + 3 * 2**30
    # the baseline snapshot holds the context and the other processes: neither is charged
    assert non_torch_bytes(1, 1, busy, (0, 9, 1), v1=True) == alone
    assert non_torch_bytes(1, 1, busy, (0, 8, 5), v1=False) == alone
    # without `v1` the engine is V1 from 0.8
    assert non_torch_bytes(1, 1, l40s, (0, 8, 5)) == alone + CUDA_CONTEXT
    assert non_torch_bytes(1, 1, l40s, (0, 7, 3)) == alone


def test_plan_charges_the_context_by_the_engine_in_use():
    # V1 is the default at 0.8.5; VLLM_USE_V1=0 selects V0, whose profile snapshots after the context
    argv = "vllm serve m --max-model-len 8192"
    _, v1 = run(argv, version="0.8.5")
    _, v0 = run(argv, env={"VLLM_USE_V1": "0"}, version="0.8.5")
    _, v091 = run(argv, version="0.9.1")
    l4 = 58 * 1536 * 516
    assert v1.memory.non_torch == l4 + CUDA_CONTEXT
    assert v0.memory.non_torch == v091.memory.non_torch == l4


def test_gpu_sms_data():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    table = load("gpu_sms.yaml")
    errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(table)]
    assert not errors
    cards = {g.key: g for g in all_gpus()}
    assert set(table["sms"]) <= set(cards)  # every key is a catalog card
    for key in table["sms"]:  # and its capability has a thread count
        assert str(cards[key].compute_capability) in table["threads_per_sm"], key


def test_notes_say_what_the_release_counts_that_servefit_cannot_know():
    from servefit.engines.vllm.non_torch import notes

    l40s = resolve_gpu("L40S")
    device, cached = notes(l40s, (0, 8, 5), v1=True)
    assert "vLLM 0.8.5 counts all memory in use on the GPU" in device and "(0.30 GiB)" in device
    assert cached.startswith("vLLM 0.8.5 also counts memory PyTorch has cached but cannot release")
    spark = resolve_gpu("DGX Spark")
    assert notes(spark, (0, 8, 5), v1=True)[0].endswith("also takes in what the OS and every program hold")
    assert not device.endswith("every program hold")
    # 0.6.4 charges what else holds the card: under WSL the Windows desktop's share (1.66 GiB logged on a
    # 24 GB WSL card, 0.39 planned); said for discrete cards, not where the OS share is said already
    assert device.endswith("what the desktop and Windows hold counts too, often about 1 GiB")
    assert "WSL" not in notes(spark, (0, 8, 5), v1=True)[0]
    # a GPU whose other processes' memory is known (--gpu local) has it planned: only the cached segments
    assert notes(replace(l40s, in_use_bytes=2**30), (0, 8, 5), v1=True) == [cached]
    # memory_reserved-based releases: V1 from 0.9.1, V0 from 0.7.0; V0 up to 0.6.3 measure free memory
    assert notes(l40s, (0, 9, 1), v1=True) == notes(l40s, (0, 8, 5), v1=False) == notes(l40s, (0, 7, 0), v1=False) == []
    assert notes(l40s, (0, 6, 3), v1=False) == []
    assert notes(l40s, (0, 6, 6), v1=False) == [cached.replace("0.8.5", "0.6.6", 1)]
    assert notes(l40s, (0, 6, 4), v1=False) == [device.replace("0.8.5", "0.6.4", 1), cached.replace("0.8.5", "0.6.4", 1)]
    assert notes(l40s, (0, 9, 0), v1=True) == [device.replace("0.8.5", "0.9.0", 1), cached.replace("0.8.5", "0.9.0", 1)]
    # the plan carries them
    _, p = run("vllm serve m --max-model-len 8192", version="0.8.5")
    assert any(a.startswith("vLLM 0.8.5 counts all memory in use on the GPU") for a in p.assumptions)
