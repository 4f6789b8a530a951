"""Scripts a script runs with arguments (`bash production_scripts/service.sh $MODEL_PATH $PORT $TP_SIZE`: a
Slurm job that hands a model and a tensor-parallel size to the service script that starts the server). The
called script, when the repository holds it, is read as run with those words as its $1, $2, ... and the
variables the caller exports: each call is a server of the caller (its #SBATCH GPUs, its values), and the
called script read alone (SF001: "argument 1 the script is called with is not known") gives way to them
(docker_scripts.drop_run_scripts)."""

from __future__ import annotations

import os
import re

from servefit.core import GpuHint
from servefit.sources.base import FileCtx, read_text
from servefit.sources.detect import SHELLS
from servefit.sources.launch import Launch, from_commands
from servefit.sources.shell import Vars, split_commands
from servefit.sources.slurm import gpu_request
from servefit.sources.text import LineIndex, Src
from servefit.sources.words import Command

SCRIPTS = (".sh", ".sbatch", ".slurm")  # `sbatch job.sbatch MODEL`: Slurm runs the batch script with those arguments


# `bash path/service.sh ARG`, `sbatch job.sbatch ARG`, `./run.sh ARG`: a script run with at least one argument
_CALL = re.compile(r"^[ \t]*(?:(?:ba|da|z)?sh[ \t]+|sbatch[ \t]+(?:-\S+[ \t]+)*)?[\"']?([\w./${}-]+\.(?:sh|sbatch|slurm))"
                   r"[\"']?[ \t]+[^\s#&|;]", re.M)


def calls_engine_script(path: str, text: str) -> bool:
    """Whether the script runs a script of the repository that mentions an engine, with arguments: read even
    when the caller itself names no engine (a Slurm job handing its model to the service script)."""
    from servefit.sources import _mentions_engine

    fc = FileCtx.of(path, text)
    for m in _CALL.finditer(text):
        ref = fc.near(m.group(1))
        if ref is not None and os.path.abspath(ref) != os.path.abspath(path) and _mentions_engine(read_text(ref) or ""):
            return True
    return False


def called_scripts(fc: FileCtx, cmds: list[Command], env: Vars) -> list[tuple[Launch, str, GpuHint | None]]:
    """(the server, the called script's path, its own #SBATCH GPU request where Slurm runs it: `sbatch`) for
    each command that runs a script of the repository with arguments; the launch's line is the calling command's."""
    out: list[tuple[Launch, str, GpuHint | None]] = []
    for cmd in cmds:
        t = cmd.texts
        k = 1 if t and os.path.basename(t[0]) in SHELLS | {"sbatch"} else 0
        while 0 < k < len(t) and t[k].startswith("-") and t[k] not in ("-c", "-s"):  # `bash -x script.sh`
            k += 1
        if k >= len(t) or not t[k].endswith(SCRIPTS) or len(t) == k + 1 or cmd.words[k].unresolved or \
                (k and t[k - 1] in ("-c", "-s")):
            continue
        path = fc.near(t[k])
        if path is None or os.path.abspath(path) == os.path.abspath(fc.path):
            continue
        text = read_text(path)
        if text is None or not any(w in text for w in ("serve", "launch", "server", "text-generation")):
            continue
        outer = cmd.env if cmd.env is not None else env
        inner = Vars({n: v for n, v in outer.values.items() if n in outer.exported})
        inner.exported = set(inner.values)
        for j, w in enumerate(cmd.words[k + 1:], 1):
            inner.set(str(j), w.token(), w.unresolved + w.substituted_refs())
        ctx = fc.ctx(exported_only=True)
        ctx.depth += 1
        li = LineIndex(text, path)
        found = from_commands(split_commands(Src(text, li), inner), ctx, inner)
        own = gpu_request(text, li.span) if t[0] == "sbatch" and "#SBATCH" in text else None
        for launch in found:
            launch.line = cmd.words[0].line
            for w in cmd.words[k + 1:]:
                launch.unresolved.extend(u for u in w.unresolved if u not in launch.unresolved)
            out.append((launch, path, own))
    return out
