"""A stand-in for nvidia-ml-py's `pynvml`, for tests without a GPU: the same function names
and shapes, answering from the JSON file named by FAKE_NVML (see tests/test_local_gpu.py).

{"devices": [{"name": ..., "uuid": ..., "total": B, "reserved": B, "free": B, "cc": [8, 9],
              "mig": [{"name": "3g.40gb", "uuid": "MIG-...", "total": B, "reserved": 0, "free": B}, ...]}],
 "init_error": "...", "no_v2": true}
A device with "no_memory": true answers every memory query "Not Supported", as a GB10 (DGX Spark) does.
"""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

NVML_DEVICE_MIG_ENABLE = 1
NVML_ERROR_NOT_FOUND = 6
nvmlMemory_v2 = 0x02000028
calls: list[str] = []


class NVMLError(Exception):
    pass


def _state() -> dict:
    with open(os.environ["FAKE_NVML"], encoding="utf-8") as fh:
        return json.load(fh)


def nvmlInit() -> None:
    calls.append("init")
    err = _state().get("init_error")
    if err:
        raise NVMLError(err)


def nvmlShutdown() -> None:
    calls.append("shutdown")


def nvmlDeviceGetCount() -> int:
    return len(_state()["devices"])


def nvmlDeviceGetHandleByIndex(i: int):
    return ("gpu", i, None)


def _dev(handle) -> dict:
    kind, i, k = handle
    d = _state()["devices"][i]
    return d if kind == "gpu" else d["mig"][k]


def nvmlDeviceGetName(handle) -> bytes:
    return _dev(handle)["name"].encode()  # older bindings answer bytes


def nvmlDeviceGetUUID(handle) -> str:
    return _dev(handle)["uuid"]


def nvmlDeviceGetMemoryInfo(handle, version=None):
    d = _dev(handle)
    if d.get("no_memory"):
        raise NVMLError("Not Supported")
    total, reserved, free = d["total"], d.get("reserved", 0), d["free"]
    if version is None:
        return SimpleNamespace(total=total, free=free, used=total - free)
    if _state().get("no_v2"):
        raise NVMLError("Function Not Found")
    return SimpleNamespace(version=version, total=total, reserved=reserved, free=free,
                           used=total - reserved - free)


def nvmlDeviceGetCudaComputeCapability(handle):
    kind, i, _ = handle
    return tuple(_state()["devices"][i].get("cc", [0, 0]))


def nvmlDeviceGetMigMode(handle):
    d = _dev(handle)
    if "mig" not in d:
        raise NVMLError("Not Supported")
    return [1 if d["mig"] else 0, 0]


def nvmlDeviceGetMaxMigDeviceCount(handle) -> int:
    return 7


def nvmlDeviceGetMigDeviceHandleByIndex(handle, index: int):
    _, i, _ = handle
    if index >= len(_state()["devices"][i]["mig"]):
        raise NVMLError("Not Found")
    return ("mig", i, index)
