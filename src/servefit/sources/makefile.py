"""Makefiles: each recipe runs its lines in a shell (`make serve` starting llama-server or vLLM).
A recipe line (and the lines its backslashes continue) is read as a shell command after make's
own expansion: `$$` is the shell's `$`, `$(VAR)` / `${VAR}` the value of a make variable set in
the file (`VAR = ...`, `:=`, `?=`), and a leading `@`, `-` or `+` is make's, not the command's."""

from __future__ import annotations

import re

from servefit.core import Token
from servefit.sources.base import FileCtx
from servefit.sources.launch import from_commands
from servefit.sources.shell import Vars, split_commands
from servefit.sources.text import Src

_ASSIGN = re.compile(r"^(?:export\s+|override\s+)?([A-Za-z_][\w.]*)\s*(?:::=|:=|\?=|=)\s*(.*?)\s*$")
_TARGET = re.compile(r"^([^\s:=#][^:=#]*?)\s*::?(?!=)")


def _recipe_src(fc: FileCtx, start: int, end: int) -> Src:
    """The shell's text of the recipe lines in [start, end) of the file, with each character's offset."""
    text, out, offs = fc.text, [], []
    i, at_line_start = start, True
    while i < end:
        c = text[i]
        if at_line_start and c == "\t":  # the recipe prefix (and a continued line's first tab)
            i += 1
            at_line_start = False
            continue
        at_line_start = False
        if c == "$" and i + 1 < end and text[i + 1] == "$":
            out.append("$")
            offs.append(i)
            i += 2
            continue
        if c == "$" and i + 1 < end and text[i + 1] == "(":
            j = text.find(")", i)
            if 0 < j < end and re.fullmatch(r"[A-Za-z_][\w.]*", text[i + 2:j]):
                out.append("${" + text[i + 2:j] + "}")
                offs.extend(range(i, j + 1))
                i = j + 1
                continue
        out.append(c)
        offs.append(i)
        if c == "\n":
            at_line_start = True
        i += 1
    s = "".join(out)
    lead = len(s) - len(s.lstrip("@-+ "))  # make's own prefixes
    s = " " * lead + s[lead:]
    return Src(s, fc.li, offs=offs + [end])


def scan(fc: FileCtx) -> None:
    env = Vars()
    lines = fc.text.split("\n")
    offset, target, k = 0, "", 0
    starts = []
    for ln in lines:
        starts.append(offset)
        offset += len(ln) + 1
    while k < len(lines):
        ln = lines[k]
        if ln.startswith("\t") and target:
            j = k
            while j < len(lines) - 1 and lines[j].endswith("\\"):
                j += 1
            end = starts[j] + len(lines[j])
            src = _recipe_src(fc, starts[k], end)
            ctx = fc.ctx(exported_only=True)
            launches = from_commands(split_commands(src, env.copy()), ctx, env)
            fc.add(launches, f"make:{target}", None, None, ctx.ollama_models)
            k = j + 1
            continue
        m = _ASSIGN.match(ln)
        if m and not ln.startswith("\t"):
            a = starts[k] + m.start(2)
            env.set(m.group(1), Token(m.group(2), fc.li.span(a, a + len(m.group(2)))))
        elif (t := _TARGET.match(ln)) is not None:
            target = t.group(1).strip()
        k += 1
