"""Scripts a script runs with arguments (`bash production_scripts/service.sh $MODEL_PATH $PORT $TP_SIZE`: a
Slurm job that hands a model and a tensor-parallel size to the service script that starts the server). The
called script, when the repository holds it, is read as run with those words as its $1, $2, ... and the
variables the caller exports: each call is a server of the caller (its #SBATCH GPUs, its values), and the
called script read alone (SF001: "argument 1 the script is called with is not known") gives way to them
(docker_scripts.drop_run_scripts)."""

from __future__ import annotations

import os

from servefit.sources.base import FileCtx, read_text
from servefit.sources.launch import Launch, from_commands
from servefit.sources.shell import Vars, split_commands
from servefit.sources.text import LineIndex, Src
from servefit.sources.words import Command

SHELLS = {"bash", "sh", "dash", "zsh"}


def called_scripts(fc: FileCtx, cmds: list[Command], env: Vars) -> list[tuple[Launch, str]]:
    """(the server, the called script's path) for each command that runs a script of the repository with
    arguments; the launch's line is the calling command's."""
    out: list[tuple[Launch, str]] = []
    for cmd in cmds:
        t = cmd.texts
        k = 1 if t and os.path.basename(t[0]) in SHELLS else 0
        while 0 < k < len(t) and t[k].startswith("-") and t[k] not in ("-c", "-s"):  # `bash -x script.sh`
            k += 1
        if k >= len(t) or not t[k].endswith(".sh") or len(t) == k + 1 or cmd.words[k].unresolved or \
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
        found = from_commands(split_commands(Src(text, LineIndex(text, path)), inner), ctx, inner)
        for launch in found:
            launch.line = cmd.words[0].line
            for w in cmd.words[k + 1:]:
                launch.unresolved.extend(u for u in w.unresolved if u not in launch.unresolved)
            out.append((launch, path))
    return out
