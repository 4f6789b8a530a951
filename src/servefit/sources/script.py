"""Shell scripts: every command that starts an engine, directly or through `exec`, `nohup ... &`,
`env`, `VAR=1` prefixes, `docker run ... IMAGE args`, or `bash -c "..."`.

Variables assigned earlier in the script (`X=1`, `export X=1`, `${X:=d}`) expand later
commands; only exported ones (and `VAR=1 cmd` prefixes) reach the engine's environment.
`ollama pull/run MODEL` lines are kept as the models an Ollama server in the same script loads.
"""

from __future__ import annotations

from servefit.sources.base import FileCtx
from servefit.sources.launch import from_commands
from servefit.sources.shell import Vars, split_commands


def scan(fc: FileCtx) -> None:
    env = Vars()
    cmds = split_commands(fc.src, env)
    ctx = fc.ctx(exported_only=True)
    launches = from_commands(cmds, ctx, env)
    for launch in launches:
        fc.add([launch], f"script:{launch.line}", None, None, ctx.ollama_models)
