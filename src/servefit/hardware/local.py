"""`--gpu local`: this machine's GPUs read through NVML (nvidia-ml-py, imported only here), as
vLLM's memory profiler will see them.

vLLM budgets against `cudaMemGetInfo` (vllm/utils/mem_utils.py::MemorySnapshot.measure, via
torch): the total CUDA hands out and what is free now. NVML's memory info v2 gives the board
total, the driver's reserve, free and used; CUDA's total is the board total less that reserve
(the catalog's memory_mib / smi_memory_mib pairs are the same figures from logs). With MIG on,
each MIG instance is its own device with its own memory, and a CUDA process sees one of them
(the first, unless CUDA_VISIBLE_DEVICES names one). CUDA_VISIBLE_DEVICES is honoured: indices,
GPU-/MIG- UUIDs. Memory in use by other processes is kept (GpuSpec.in_use_bytes): vLLM refuses
to start when free memory is below its budget.
"""

from __future__ import annotations

import dataclasses
import os
from functools import lru_cache
from typing import Any

from servefit.core import UsageError
from servefit.hardware.spec import GpuSpec

NAME = "local"


@dataclasses.dataclass(frozen=True)
class Device:
    """One GPU (or MIG instance) of this machine as CUDA will see it: total and free memory, and NVML's board
    total (nvidia-smi's figure)."""

    index: str  # "0", or "0:1" for MIG instance 1 of GPU 0
    name: str
    uuid: str
    total: int  # bytes CUDA reports as total
    free: int  # bytes free now
    board_total: int  # NVML's total (nvidia-smi's figure)
    compute_capability: int  # 89 for 8.9; 0 when NVML does not say
    mig: bool = False
    system_memory: bool = False  # NVML gives no memory (GB10): the OS's figures, as vLLM reads them

    @property
    def in_use(self) -> int:
        return max(self.total - self.free, 0)


def _nvml() -> Any:
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        raise UsageError("--gpu local reads the GPUs through NVML: pip install 'servefit[nvml]' "
                         "(nvidia-ml-py)") from None
    return pynvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


MEMINFO = "/proc/meminfo"


def _memory(nv: Any, handle: Any) -> tuple[int, int, int] | None:
    """(CUDA's total, free, the board total) in bytes; None where NVML gives no memory for the device."""
    try:
        m = nv.nvmlDeviceGetMemoryInfo(handle, version=nv.nvmlMemory_v2)
        return int(m.total) - int(m.reserved), int(m.free), int(m.total)
    except (AttributeError, TypeError, nv.NVMLError):  # an old driver or binding: v1, no reserve
        try:
            m = nv.nvmlDeviceGetMemoryInfo(handle)
        except nv.NVMLError:  # "Not Supported" on a unified-memory GB10 (DGX Spark)
            return None
        return int(m.total), int(m.free), int(m.total)


def system_memory(path: str | None = None) -> tuple[int, int]:
    """(MemTotal, MemAvailable) in bytes: on a unified-memory GPU CUDA's total is MemTotal, and from
    0.11.1 vLLM takes MemAvailable as the free memory (vllm/utils/mem_utils.py::MemorySnapshot.measure,
    psutil.virtual_memory().available)."""
    fields: dict[str, int] = {}
    try:
        with open(path or MEMINFO, encoding="ascii") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if parts and parts[0].isdigit():
                    fields[key] = int(parts[0]) * (1024 if parts[1:2] == ["kB"] else 1)
    except OSError:
        pass
    if "MemTotal" not in fields or "MemAvailable" not in fields:
        raise UsageError(f"--gpu local: NVML reports no memory for this GPU and {path or MEMINFO} gives no "
                         "MemTotal / MemAvailable; pass --gpu NAME instead")
    return fields["MemTotal"], fields["MemAvailable"]


def _cc(nv: Any, handle: Any) -> int:
    try:
        major, minor = nv.nvmlDeviceGetCudaComputeCapability(handle)
        return int(major) * 10 + int(minor)
    except nv.NVMLError:
        return 0


def _device(nv: Any, handle: Any, index: str, name: str | None = None, cc: int | None = None,
            mig: bool = False) -> Device:
    mem = _memory(nv, handle)
    if mem is None:
        total, free = system_memory()
        board = total
    else:
        total, free, board = mem
    return Device(index, name or _text(nv.nvmlDeviceGetName(handle)), _text(nv.nvmlDeviceGetUUID(handle)),
                  total, free, board, _cc(nv, handle) if cc is None else cc, mig, system_memory=mem is None)


@lru_cache(maxsize=1)
def devices() -> tuple[Device, ...]:
    """Every GPU, or every MIG instance of a GPU in MIG mode, in NVML order."""
    nv = _nvml()
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        raise UsageError(f"--gpu local: NVML could not start ({exc}); is the NVIDIA driver installed "
                         "and a GPU visible here?") from None
    try:
        out: list[Device] = []
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            try:
                current, _pending = nv.nvmlDeviceGetMigMode(h)
            except nv.NVMLError:  # not MIG-capable
                current = 0
            if current != getattr(nv, "NVML_DEVICE_MIG_ENABLE", 1):
                out.append(_device(nv, h, str(i)))
                continue
            parent, cc = _text(nv.nvmlDeviceGetName(h)), _cc(nv, h)
            for k in range(nv.nvmlDeviceGetMaxMigDeviceCount(h)):
                try:
                    mh = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, k)
                except nv.NVMLError:  # an empty slot
                    continue
                out.append(_device(nv, mh, f"{i}:{k}", f"{parent} MIG {_text(nv.nvmlDeviceGetName(mh))}", cc, True))
        return tuple(out)
    finally:
        try:
            nv.nvmlShutdown()
        except nv.NVMLError:
            pass


def visible(devs: tuple[Device, ...], env: str | None = None) -> list[Device]:
    """The devices a CUDA process sees, CUDA_VISIBLE_DEVICES applied."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES") if env is None else env
    if env is None:
        whole = [d for d in devs if not d.mig]
        mig = [d for d in devs if d.mig]
        return whole + mig[:1]  # CUDA enumerates one MIG instance per process
    out: list[Device] = []
    for item in (p.strip() for p in env.split(",")):
        if not item:
            continue
        hit = [d for d in devs if d.uuid == item or (item.startswith(("GPU-", "MIG-")) and d.uuid.startswith(item))]
        if not hit and item.isdigit():
            hit = [d for d in devs if d.index == item]
        if not hit:
            break  # CUDA stops at the first entry it cannot match
        out.append(hit[0])
    return out


def target() -> tuple[GpuSpec, int]:
    """The GPU spec a server here will run on (the first visible device) and how many there are."""
    from servefit.hardware.catalog import lookup

    devs = visible(devices())
    if not devs:
        raise UsageError("--gpu local: NVML lists no GPU this process can use (check CUDA_VISIBLE_DEVICES)")
    d = devs[0]
    known = lookup(d.name.split(" MIG ")[0])
    cc = d.compute_capability or (known.compute_capability if known else 0)
    others = {x.name for x in devs[1:]} - {d.name}
    note = f"; the other visible GPUs differ ({', '.join(sorted(others))}): sized as the first" if others else ""
    where = ("the system's memory (NVML reports none for this unified-memory GPU): "
             f"{d.total / 2**30:.2f} GiB total, {d.in_use / 2**30:.2f} GiB not available (MemTotal - MemAvailable)"
             if d.system_memory else
             f"{d.total / 2**30:.2f} GiB as CUDA reports it, {d.in_use / 2**30:.2f} GiB in use")
    source = f"--gpu local: NVML device {d.index} ({d.uuid}), {where}{note}"
    spec = GpuSpec(key=known.key if known and not d.mig else NAME, name=d.name, vendor="nvidia",
                   memory_bytes=d.total, compute_capability=cc, fp8=cc >= 89, bf16=cc >= 80,
                   unified_memory=bool((known and known.unified_memory) or d.system_memory), nvls=bool(known and known.nvls),
                   aliases=[], source=NAME, memory_source=source, smi_memory_bytes=d.board_total,
                   in_use_bytes=d.in_use)
    return spec, len(devs)
