"""supervisord program files (`supervisord.conf`, `conf.d/*.conf`): each `[program:NAME]` whose `command=`
starts an engine. supervisord splits the command like shlex, with no shell (supervisor/options.py
ProcessConfig.get_execv_args: shlex.split), and passes `environment=KEY="val",KEY2=val2` (supervisor/datatypes.py
dict_of_key_value_pairs) to the process on top of its own environment. `%(ENV_X)s` expansions are left as
written: the environment supervisord starts in is not known here.
"""

from __future__ import annotations

import re

from servefit.core import Token
from servefit.sources.base import FileCtx, give_names
from servefit.sources.launch import from_words
from servefit.sources.shell import Vars, split_words
from servefit.sources.systemd import entries
from servefit.sources.text import Src

PROGRAM = re.compile(r"program:(.+)")
PAIR = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)=(\"([^\"]*)\"|'([^']*)'|[^,]*)")


def scan(fc: FileCtx) -> None:
    programs: dict[str, dict[str, Src]] = {}
    for section, key, val in entries(fc.src):
        m = PROGRAM.fullmatch(section.strip())
        if m:
            programs.setdefault(m.group(1).strip(), {})[key.lower()] = val
    for name, keys in programs.items():
        cmd = keys.get("command")
        if cmd is None:
            continue
        env = Vars()
        envs = keys.get("environment")
        if envs is not None:
            for m in PAIR.finditer(envs.text):  # KEY="a b",K2=c
                g = 3 if m.group(3) is not None else 4 if m.group(4) is not None else 2
                a, b = m.start(g), m.end(g)
                env.set(m.group(1), Token(envs.text[a:b], envs.span(a, b)))
        env.exported = set(env.values)
        ctx = fc.ctx()
        launches = from_words(split_words(cmd, None), ctx, env)  # no shell: `$X` reaches the engine as written
        first = len(fc.sites)
        fc.add(launches, f"supervisor/{name}", None, None, ctx.ollama_models)
        give_names(fc.sites[first:], [(name, "its supervisord program name")])
