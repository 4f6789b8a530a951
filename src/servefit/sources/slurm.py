"""The GPUs a Slurm batch script asks for in its `#SBATCH` lines (`--gres=gpu:a100:4`,
`--gpus=2`, `--gpus-per-node=h100:8`, `-G 4`), as the hardware hint of the servers it starts.

sbatch reads `#SBATCH` lines up to the script's first command; the GPU type is kept as written
(the catalog resolves it), and the count is per node, as a server on one node sees it. Slurm
exports CUDA_VISIBLE_DEVICES naming the allocated GPUs, which engines that count visible devices
(TGI's launcher) read.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from servefit.core import GpuHint, Span

SBATCH = re.compile(r"^#SBATCH[ \t]+(.*?)[ \t]*\r?$")
OPTION = re.compile(r"(--?[A-Za-z][\w-]*)(?:[= \t]+([^\s#]+))?")
# [type:]count, for --gpus*; gres: gpu[:type][:count][(S:...)]
TYPED = re.compile(r"^(?:(?P<type>[A-Za-z][\w.-]*):)?(?P<count>\d+)$")


# what sbatch and srun set in each task's environment (sbatch(1), srun(1): OUTPUT ENVIRONMENT VARIABLES)
TASK_VARIABLES = frozenset((
    "SLURM_NODEID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODELIST", "SLURM_JOB_NODELIST", "SLURM_JOB_ID",
    "SLURM_JOBID", "SLURM_NNODES", "SLURM_JOB_NUM_NODES", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_NTASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE", "SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE", "SLURM_GPUS_ON_NODE", "SLURM_JOB_GPUS",
    "SLURM_STEP_GPUS", "SLURM_SUBMIT_DIR", "SLURM_SUBMIT_HOST", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_JOB_ID",
    "SLURM_JOB_NAME", "SLURM_JOB_PARTITION", "SLURM_STEP_ID", "SLURM_STEPID", "SLURM_LAUNCH_NODE_IPADDR",
    "SLURMD_NODENAME", "SLURM_TOPOLOGY_ADDR"))


def gpu_request(text: str, li_span: Callable[[int, int], Span]) -> GpuHint | None:
    """The GPU type and per-node count the `#SBATCH` header asks for, or None."""
    opts: dict[str, tuple[str, int, int]] = {}
    pos = 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        start, pos = pos, pos + len(line)
        if not stripped or stripped.startswith("#!"):
            continue
        if not stripped.startswith("#"):
            break  # sbatch stops reading options at the first command
        m = SBATCH.match(line)
        if not m:
            continue
        for om in OPTION.finditer(m.group(1)):
            if om.group(2) is not None:
                a = start + m.start(1) + om.start(2)
                opts[om.group(1)] = (om.group(2).strip("\"'"), a, a + len(om.group(2)))
    return _hint(opts, li_span)


def _hint(opts: dict[str, tuple[str, int, int]], li_span: Callable[[int, int], Span]) -> GpuHint | None:
    nodes = _int(opts.get("--nodes") or opts.get("-N"))
    for key in ("--gpus-per-node", "--gres", "--gpus", "-G"):
        got = opts.get(key)
        if got is None:
            continue
        value, a, b = got
        parsed = _gres(value) if key == "--gres" else _typed(value)
        if parsed is None:
            continue
        name, count = parsed
        if key in ("--gpus", "-G") and nodes and nodes > 1:
            count = count // nodes if count % nodes == 0 else count  # a total over the nodes
        return GpuHint(name, count, f"Slurm #SBATCH {key}={value}", li_span(a, b), scheduler_visible=True)
    return None


def _typed(value: str) -> tuple[str | None, int] | None:
    m = TYPED.match(value.split(",")[0])
    return (m.group("type"), int(m.group("count"))) if m else None


def _gres(value: str) -> tuple[str | None, int] | None:
    """`gpu:4`, `gpu:a100:4`, `gpu:a100` (one), `gpu:4(S:0-1)`; other resources are skipped."""
    for item in value.split(","):
        parts = re.sub(r"\(.*?\)", "", item).split(":")
        if parts[0] != "gpu":
            continue
        if len(parts) == 1:
            return None, 1
        if len(parts) == 2:
            return (None, int(parts[1])) if parts[1].isdigit() else (parts[1], 1)
        return (parts[1], int(parts[2])) if parts[2].isdigit() else None
    return None


def _int(got: tuple[str, int, int] | None) -> int | None:
    if got is None:
        return None
    m = re.match(r"^(\d+)", got[0])  # --nodes=2 or a range 2-4 (the minimum)
    return int(m.group(1)) if m else None
