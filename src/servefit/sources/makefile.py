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


def _close(text: str, i: int, end: int) -> int:
    """The index of the `)` that closes the `$(` at i, or -1."""
    depth = 0
    for j in range(i + 1, end):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _make_if(text: str, i: int, end: int, env: Vars) -> tuple[int, tuple[int, int]] | None:
    """`$(if CONDITION,THEN[,ELSE])` at i whose condition is made of variables set in the file (GNU make
    manual, 8.4 "Functions for Conditionals": the condition is expanded, and any non-empty result is
    true): (the index after it, the range of the branch make keeps); None for any other function."""
    if not text.startswith("$(if ", i):
        return None
    j = _close(text, i, end)
    if j < 0:
        return None
    commas, depth = [], 0
    for k in range(i + 5, j):
        depth += text[k] == "("
        depth -= text[k] == ")"
        if text[k] == "," and depth == 0:
            commas.append(k)
    if not commas:
        return None
    cond = text[i + 5:commas[0]]
    def value(m: re.Match[str]) -> str:
        tok = env.get(m.group(1))
        return tok.text if tok is not None else "$?"

    expanded = re.sub(r"\$[({]([A-Za-z_][\w.]*)[)}]", value, cond)
    if "$" in expanded:  # a variable not set here, or another function: not known
        return None
    then_end = commas[1] if len(commas) > 1 else j
    branch = (commas[0] + 1, then_end) if expanded.strip() else ((then_end + 1, j) if len(commas) > 1 else (j, j))
    return j + 1, branch


def _recipe_src(fc: FileCtx, start: int, end: int, env: Vars | None = None) -> Src:
    """The shell's text of the recipe lines in [start, end) of the file, with each character's offset."""
    text, out, offs = fc.text, [], []
    at_line_start = True

    def walk(i: int, end: int) -> None:
        nonlocal at_line_start
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
                cond = _make_if(text, i, end, env) if env is not None else None
                if cond is not None:  # make keeps one branch before the shell runs the line
                    walk(*cond[1])
                    i = cond[0]
                    continue
            out.append(c)
            offs.append(i)
            if c == "\n":
                at_line_start = True
            i += 1

    walk(start, end)
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
            src = _recipe_src(fc, starts[k], end, env)
            ctx = fc.ctx(exported_only=True)
            launches = from_commands(split_commands(src, env.copy()), ctx, env)
            fc.add(launches, f"make:{target}", None, None, ctx.ollama_models)
            k = j + 1
            continue
        m = _ASSIGN.match(ln)
        if m and not ln.startswith("\t"):
            a = starts[k] + m.start(2)
            # `#` starts a comment in a variable definition (GNU make manual, 6.2 "The Two Flavors of
            # Variables": `dir := /foo/bar    # directory to put the frobs in`); `\#` is a literal one
            value = re.split(r"(?<!\\)#", m.group(2), maxsplit=1)[0].rstrip().replace("\\#", "#")
            env.set(m.group(1), Token(value, fc.li.span(a, a + len(value))))
        elif (t := _TARGET.match(ln)) is not None:
            target = t.group(1).strip()
        k += 1
