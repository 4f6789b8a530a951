"""Shell scripts: every command that starts an engine, directly or through `exec`, `nohup ... &`,
`env`, `VAR=1` prefixes, `docker run ... IMAGE args`, or `bash -c "..."`.

Variables assigned earlier in the script (`X=1`, `export X=1`, `${X:=d}`) expand later
commands; only exported ones (and `VAR=1 cmd` prefixes) reach the engine's environment.
`ollama pull/run MODEL` lines are kept as the models an Ollama server in the same script loads.
A Slurm batch script's `#SBATCH` GPU request is the hardware of the servers it starts (sources/slurm.py).
A systemd unit the script writes from a heredoc (`cat > x.service <<EOF`) is read as that unit.
"""

from __future__ import annotations

import os
import re

from servefit.core import GpuHint
from servefit.sources.base import FileCtx
from servefit.sources.launch import Facts, from_commands
from servefit.sources.shell import Vars, split_commands
from servefit.sources.slurm import gpu_request
from servefit.sources.text import Src


def scan(fc: FileCtx) -> None:
    env = Vars()
    cmds = split_commands(fc.src, env)
    ctx = fc.ctx(exported_only=True)
    launches = from_commands(cmds, ctx, env)
    if ".service" in fc.text and "<<" in fc.text:
        heredoc_units(fc, env)
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


# `cat > /etc/systemd/system/x.service <<EOF`, `sudo tee x.service > /dev/null << 'EOF'`: a unit the
# script writes from a heredoc
_UNIT_HEREDOC = re.compile(r"^[^\n]*?(?:cat|tee)\b[^\n]*?([\w./${}-]+\.service)\b[^\n]*?<<(-?)[ \t]*(['\"]?)(\w+)\3[^\n]*\n",
                           re.M)


def heredoc_units(fc: FileCtx, env: Vars) -> None:
    """systemd units the script writes from heredocs, read as the units they become: an unquoted
    delimiter lets the shell expand `$VAR` and undo `\\\\` / `\\$` first (bash: Here Documents)."""
    from servefit.sources.systemd import entries, scan_unit

    for m in _UNIT_HEREDOC.finditer(fc.text):
        delim, dash, quoted = m.group(4), m.group(2) == "-", bool(m.group(3))
        start = m.end()
        end = start
        while end < len(fc.text):
            nl = fc.text.find("\n", end)
            line_end = len(fc.text) if nl < 0 else nl
            line = fc.text[end:line_end]
            if (line.lstrip("\t") if dash else line) == delim:
                break
            end = line_end + 1
        body = _heredoc_text(fc, start, min(end, len(fc.text)), quoted)
        scan_unit(fc, entries(body), os.path.basename(m.group(1)), None if quoted else env)


def _heredoc_text(fc: FileCtx, start: int, end: int, quoted: bool) -> Src:
    """The heredoc's text as the command reads it, each character mapped to where it is written."""
    if quoted:
        return Src(fc.text[start:end], fc.li, base=start)
    out: list[str] = []
    offs: list[int] = []
    i = start
    t = fc.text
    while i < end:
        if t[i] == "\\" and i + 1 < end and t[i + 1] in "\\$`":
            out.append(t[i + 1])
            offs.append(i + 1)
            i += 2
        elif t[i] == "\\" and i + 1 < end and t[i + 1] == "\n":
            i += 2  # a line continuation inside the heredoc: the lines are joined
        else:
            out.append(t[i])
            offs.append(i)
            i += 1
    offs.append(end)
    return Src("".join(out), fc.li, offs=offs)
