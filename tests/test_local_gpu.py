"""`--gpu local`: the GPUs of this machine through NVML. Without a GPU the tests put a stand-in
`pynvml` (tests/fakenvml/pynvml.py) first on sys.path; servefit's own code runs unchanged and
imports it as it would nvidia-ml-py. The real call runs only where NVML and a GPU are present."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from servefit.cli import main
from servefit.hardware import local

FAKE = Path(__file__).parent / "fakenvml"
MIB, GIB = 2**20, 2**30
H100 = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-aaaa-1111", "total": 81559 * MIB, "reserved": 469 * MIB,
        "free": 81090 * MIB - 512 * MIB, "cc": [9, 0]}
CMD = ["--", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"]


@pytest.fixture
def nvml(monkeypatch, tmp_path):
    """Write the stand-in's state; returns a function that sets it."""
    state = tmp_path / "nvml.json"
    monkeypatch.setenv("FAKE_NVML", str(state))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.syspath_prepend(str(FAKE))
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    local.devices.cache_clear()

    def set_state(**kw):
        state.write_text(json.dumps(kw), encoding="utf-8")
        local.devices.cache_clear()

    yield set_state
    local.devices.cache_clear()


def estimate(capsys, *args: str) -> tuple[int, dict | str]:
    rc = main(["estimate", "--gpu", "local", "--format", "json", *args, *CMD])
    cap = capsys.readouterr()
    return rc, (json.loads(cap.out) if rc == 0 else cap.err)


def test_one_gpu_as_cuda_reports_it(nvml, capsys):
    """NVML's board total less the driver's reserve is CUDA's total: 81090 MiB on an H100, the
    catalog's figure from vLLM logs (79.19 GiB)."""
    nvml(devices=[H100])
    rc, plan = estimate(capsys)
    assert rc == 0 and plan["gpu"]["name"] == "NVIDIA H100 80GB HBM3"
    assert plan["gpu"]["memory_bytes"] == 81090 * MIB and plan["gpu"]["count"] == 1
    assert plan["gpu"]["source"].startswith("--gpu local: NVML device 0 (GPU-aaaa-1111), 79.19 GiB as CUDA "
                                            "reports it, 0.50 GiB in use")
    assert sys.modules["pynvml"].__file__ == str(FAKE / "pynvml.py")  # the stand-in, imported by servefit
    assert sys.modules["pynvml"].calls[-1] == "shutdown"


def test_memory_in_use_makes_vllm_refuse_to_start(nvml, capsys, tmp_path):
    """vLLM checks free memory against util x total at start (Worker.init_device / request_memory)."""
    nvml(devices=[dict(H100, free=40 * GIB)])
    script = tmp_path / "serve.sh"
    script.write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192\n", encoding="utf-8")
    rc = main(["lint", str(script), "--gpu", "local", "--format", "json"])
    found = json.loads(capsys.readouterr().out)
    [err] = [f for f in found if f["code"] == "VLLM020"]
    assert rc == 1 and err["message"].startswith("Free memory on device (39.")
    assert "/79.19 GiB) on startup is less than desired GPU memory utilization (0.9" in err["message"]
    nvml(devices=[H100])  # the same file with the GPU idle starts
    assert main(["lint", str(script), "--gpu", "local", "--format", "json"]) == 0
    assert not [f for f in json.loads(capsys.readouterr().out) if f["code"] == "VLLM020"]


def test_mig_instances_are_devices_with_their_own_memory(nvml, capsys, monkeypatch):
    a100 = {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-bbbb", "total": 81920 * MIB, "reserved": 869 * MIB,
            "free": 80000 * MIB, "cc": [8, 0],
            "mig": [{"name": "3g.40gb", "uuid": "MIG-1111", "total": 40192 * MIB, "reserved": 0, "free": 40000 * MIB},
                    {"name": "2g.20gb", "uuid": "MIG-2222", "total": 19968 * MIB, "reserved": 0, "free": 19900 * MIB}]}
    nvml(devices=[a100])
    rc, plan = estimate(capsys)
    assert rc == 0 and plan["gpu"]["name"] == "NVIDIA A100-SXM4-80GB MIG 3g.40gb"
    assert plan["gpu"]["memory_bytes"] == 40192 * MIB and plan["gpu"]["count"] == 1  # CUDA sees one instance
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-2222")
    rc, plan = estimate(capsys)
    assert plan["gpu"]["memory_bytes"] == 19968 * MIB and "NVML device 0:1 (MIG-2222)" in plan["gpu"]["source"]


def test_cuda_visible_devices(nvml, capsys, monkeypatch):
    l4 = {"name": "NVIDIA L4", "uuid": "GPU-cccc", "total": 23034 * MIB, "reserved": 471 * MIB,
          "free": 22000 * MIB, "cc": [8, 9]}
    nvml(devices=[H100, l4, dict(l4, uuid="GPU-dddd")])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,1")
    rc, plan = estimate(capsys)
    assert rc == 0 and plan["gpu"]["name"] == "NVIDIA L4" and plan["gpu"]["count"] == 2
    assert plan["gpu"]["memory_bytes"] == 22563 * MIB  # the catalog's L4 figure, from NVML's 23034 - 471
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    rc, plan = estimate(capsys)
    assert plan["gpu"]["name"] == "NVIDIA H100 80GB HBM3" and "differ (NVIDIA L4)" in plan["gpu"]["source"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    rc, err = estimate(capsys)
    assert rc == 2 and "NVML lists no GPU this process can use" in err


def test_an_old_binding_without_memory_v2(nvml, capsys):
    nvml(devices=[H100], no_v2=True)
    rc, plan = estimate(capsys)
    assert rc == 0 and plan["gpu"]["memory_bytes"] == 81559 * MIB  # the board total: no reserve to subtract


def test_no_driver_and_no_binding_are_one_line(nvml, capsys, monkeypatch):
    nvml(devices=[], init_error="Driver Not Loaded")
    rc, err = estimate(capsys)
    assert rc == 2 and err == ("servefit: error: --gpu local: NVML could not start (Driver Not Loaded); is the "
                               "NVIDIA driver installed and a GPU visible here?\n")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    local.devices.cache_clear()
    rc, err = estimate(capsys)
    assert rc == 2 and "pip install 'servefit[nvml]' (nvidia-ml-py)" in err


def test_gpus_local_lists_what_it_resolves_to(nvml, capsys):
    nvml(devices=[H100, dict(H100, uuid="GPU-eeee")])
    assert main(["gpus", "local", "--format", "json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["name"] == "NVIDIA H100 80GB HBM3" and row["count"] == 2 and row["memory_gib"] == 79.19


def test_nvml_is_imported_only_for_gpu_local(tmp_path):
    code = (f"import sys; sys.path.insert(0, {str(FAKE)!r}); from servefit.cli import main; "
            "main(['estimate', '--gpu', 'L4', '--', 'vllm', 'serve', 'meta-llama/Llama-3.1-8B-Instruct']); "
            "print('pynvml' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("False")


def test_the_real_nvml_where_a_gpu_is_present(monkeypatch):
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    try:
        real = importlib.import_module("pynvml")
        real.nvmlInit()
        count = real.nvmlDeviceGetCount()
        real.nvmlShutdown()
    except Exception as exc:  # noqa: BLE001 - no binding, no driver, no GPU: all mean skip
        pytest.skip(f"no NVML with a GPU here ({type(exc).__name__}: {exc})")
    if count == 0:
        pytest.skip("NVML reports no GPU")
    local.devices.cache_clear()
    gpu, n = local.target()
    assert n >= 1 and gpu.memory_bytes > 0 and 0 <= gpu.in_use_bytes <= gpu.memory_bytes
    assert gpu.memory_bytes <= gpu.smi_memory_bytes
