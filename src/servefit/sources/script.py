"""Shell scripts: every command that starts an engine, directly or through `exec`, `nohup ... &`,
`env`, `VAR=1` prefixes, `docker run ... IMAGE args`, or `bash -c "..."`.

Variables assigned earlier in the script (`X=1`, `export X=1`, `${X:=d}`) expand later
commands; only exported ones (and `VAR=1 cmd` prefixes) reach the engine's environment.
`ollama pull/run MODEL` lines are kept as the models an Ollama server in the same script loads.
A Slurm batch script's `#SBATCH` GPU request is the hardware of the servers it starts (sources/slurm.py).
"""

from __future__ import annotations

from servefit.core import GpuHint
from servefit.sources.base import FileCtx
from servefit.sources.launch import Facts, from_commands
from servefit.sources.shell import Vars, split_commands
from servefit.sources.slurm import gpu_request


def scan(fc: FileCtx) -> None:
    env = Vars()
    cmds = split_commands(fc.src, env)
    ctx = fc.ctx(exported_only=True)
    launches = from_commands(cmds, ctx, env)
    slurm = gpu_request(fc.text, fc.li.span) if "#SBATCH" in fc.text else None
    for launch in launches:
        gpu = slurm
        if slurm is not None and launch.gpu is not None and launch.gpu.count is not None:
            # CUDA_VISIBLE_DEVICES set in the script narrows the allocation
            gpu = GpuHint(slurm.name, launch.gpu.count, f"{slurm.source}; count from {launch.gpu.source}",
                          slurm.span)
        # a batch script's task variables (SLURM_NODEID, SLURM_PROCID) are Slurm's (sources/slurm.py)
        facts = Facts(runtime="slurm") if slurm is not None or "#SBATCH" in fc.text else None
        fc.add([launch], f"script:{launch.line}", gpu, facts, ctx.ollama_models)
