"""Windows batch scripts (.bat, .cmd): the servers they start, read the way cmd.exe reads them.

Why a reader of its own: Windows users start llama-server.exe and `ollama serve` from batch files,
and cmd's rules are not the shell's (sources/shell.py would read `C:\\llama\\x.exe`'s backslashes
as escapes and `set X=1` as a command).

cmd.exe, line by line: a `^` at the end of a line continues it on the next; `%NAME%` expands from
the variables set so far, the whole line before any of it runs (`%%` is `%`; `%~dp0` is the script's
folder, read as `.\\`; `%1`, `%*` are the script's arguments, not known here); `!NAME!` too under
`setlocal enabledelayedexpansion`; outside quotes `^` escapes the next character and `&`, `&&`,
`||`, `|` separate commands, `>`/`<` redirect; `REM`, `::` and `:label` lines run nothing.
`set NAME=value` / `set "NAME=value"` set environment variables (every one reaches the programs the
script starts; a trailing blank is left out, as the engines trim it); under `if` and inside `( )`
blocks a variable already set keeps its value, as scripts' conditions are not evaluated.
`start ["title"] [/b /min /d DIR ...] prog args`, `call prog args` and `wsl [options] cmd` are
unwrapped; a program splits its command line by the C runtime's rules (sources/winsplit.py).
`for` loops, `cmd /c` and `powershell -Command` are not run: one that names an engine is said not
read (SF108).

Spans: a word that is one whole `%NAME%` points at the value in its `set` line, where a fix goes
(sources/shell.py says why); a variable not set here stays as written and gives SF001.
"""

from __future__ import annotations

import re

from servefit.core import Span, Token
from servefit.sources.base import FileCtx
from servefit.sources.launch import Ctx, from_words
from servefit.sources.problems import not_read
from servefit.sources.shell import Vars, Word
from servefit.sources.text import Src, logical_lines, sub
from servefit.sources.winsplit import split_windows

# `%%`, `%~dp0` / `%~1`, `%1` / `%*`, `%NAME%` / `%NAME:~0,4%`, and `!NAME!` (delayed expansion)
PCT = re.compile(r"%%|%~([a-zA-Z$:]*)([0-9])|%([0-9*])|%([^%\s=:^&|<>\"]+)(:[^%\r\n]*)?%")
BANG = re.compile(r"!([^!\s=:^&|<>\"]+)(:[^!\r\n]*)?!")
COMMENT = re.compile(r"[ \t@]*(?:rem(?:[ \t.:]|$)|::|:[A-Za-z_])", re.I)
IF = re.compile(r"[ \t]*if[ \t]+(?:/i[ \t]+)?(?:not[ \t]+)?(?:defined[ \t]+\S+|exist[ \t]+(?:\"[^\"]*\"|\S+)|"
                r"errorlevel[ \t]+\S+|cmdextversion[ \t]+\S+|(?:\"[^\"]*\"|[^\s=]+)[ \t]*"
                r"(?:==|[ \t](?:equ|neq|lss|leq|gtr|geq)[ \t])[ \t]*(?:\"[^\"]*\"|\S+))[ \t]*", re.I)
SET = re.compile(r"[ \t]*set(?:[ \t]+/([aApP]))?[ \t]+", re.I)
START = re.compile(r"[ \t]*start[ \t]+(?:\"[^\"]*\"[ \t]*)?", re.I)
# cmd's own commands and tools that name a program without starting it (`taskkill /im llama-server.exe`)
NOT_RUN = {"echo", "title", "cd", "chdir", "pushd", "popd", "pause", "timeout", "goto", "exit", "cls", "color",
           "mode", "chcp", "where", "tasklist", "taskkill", "del", "erase", "copy", "xcopy", "robocopy", "move",
           "ren", "mkdir", "md", "rd", "rmdir", "type", "findstr", "find", "ping", "choice", "setlocal",
           "endlocal", "shift", "prompt", "path", "ver", "vol", "dir", "curl",
           "netsh", "sc", "schtasks", "reg", "attrib", "more", "sort"}
UNREAD = {"for": "a `for` loop", "cmd": "`cmd /c`", "powershell": "a PowerShell command",
          "pwsh": "a PowerShell command"}
START_VALUE = {"/d", "/affinity", "/node"}
WSL_VALUE = {"-d", "--distribution", "-u", "--user", "--cd", "--shell-type"}


def lookup(env: Vars, name: str) -> tuple[str, Token] | None:
    """A Windows environment variable: names are case-insensitive."""
    tok = env.get(name)
    if tok is not None:
        return name, tok
    up = name.upper()
    return next(((k, v) for k, v in env.values.items() if k.upper() == up), None)


def assign(env: Vars, name: str, tok: Token | None, taint: list[tuple[str, Span | None]],
           conditional: bool) -> None:
    """Set (or, with tok None, unset) an environment variable, under scripts' rule for conditions."""
    have = lookup(env, name)
    if conditional and have is not None:
        return
    if have is not None:
        env.values.pop(have[0], None)
        env.exported.discard(have[0])
    if tok is not None:
        env.set(name, tok, taint)
        env.exported.add(name)


def _expand(seg: Src, env: Vars, delayed: bool, unres: list[tuple[str, Span | None]]) -> Src:
    """The segment with `%NAME%` (and `!NAME!`) replaced by their values, each character mapped to
    where it is written: a reference that is a whole word maps to the value in its `set` line."""
    t = seg.text
    text: list[str] = []
    offs: list[int] = []
    pos = 0
    pat = re.compile(PCT.pattern + "|" + BANG.pattern) if delayed else PCT
    for m in pat.finditer(t):
        a, b = m.start(), m.end()
        ref = seg.span(a, b)
        rep: str | None = None
        tok: Token | None = None
        if m.group() == "%%":
            rep = "%"
        elif m.group(2) is not None:  # %~dp0: the script's folder; %~1: an argument
            rep = ".\\" if m.group(2) == "0" and "p" in m.group(1).lower() else None
            if rep is None:
                unres.append((f"%{m.group(2)}", ref))
        elif m.group(3) is not None:
            unres.append((f"%{m.group(3)}", ref))
        else:
            g = m.groups() + (None, None)
            name, modifier = (g[3], g[4]) if g[3] else (g[5], g[6])
            found = lookup(env, name) if name and not modifier else None
            if found is None:
                unres.append((m.group(), ref))
            else:
                tok = found[1]
                rep = tok.text
                unres.extend(env.taint.get(found[0], ()))
        if rep is None:
            continue
        text.append(t[pos:a])
        offs.extend(seg.off(k) for k in range(pos, a))
        s = tok.span if tok is not None else None
        whole = (a == 0 or t[a - 1] in " \t\"=") and (b == len(t) or t[b] in " \t\"")
        if s is not None and whole and s.file == seg.li.file and s.end - s.start == len(rep):
            offs.extend(s.start + k for k in range(len(rep)))
        else:
            offs.extend([seg.off(a)] * len(rep))
        text.append(rep)
        pos = b
    if not text:
        return seg
    text.append(t[pos:])
    offs.extend(seg.off(k) for k in range(pos, len(t)))
    offs.append(seg.end_off(len(t)))
    return Src("".join(text), seg.li, offs=offs)


def _segments(line: Src) -> list[tuple[Src, str]]:
    """The commands of one line: split at `&`, `&&`, `||`, `|` outside quotes, with `^` escapes
    undone and redirections (`> log.txt`, `2>&1`) left out."""
    t = line.text
    out: list[tuple[Src, str]] = []
    keep: list[int] = []
    quoted = False
    i, n = 0, len(t)

    def cut(sep: str) -> None:
        offs = [line.off(k) for k in keep]
        offs.append(offs[-1] + 1 if offs else line.off(i))
        out.append((Src("".join(t[k] for k in keep), line.li, offs=offs), sep))
        keep.clear()

    while i < n:
        c = t[i]
        if c == '"':
            quoted = not quoted
        elif quoted:
            pass
        elif c == "^" and i + 1 < n:
            keep.append(i + 1)
            i += 2
            continue
        elif c in "&|":
            two = t[i:i + 2]
            sep = two if two in ("&&", "||") else c
            cut(sep)
            i += len(sep)
            continue
        elif c in "<>":
            if keep and t[keep[-1]].isdigit() and (len(keep) < 2 or t[keep[-2]] in " \t"):
                keep.pop()  # `2>`: the stream number is not a word
            while i < n and t[i] in "<>":
                i += 1
            if t[i:i + 1] == "&":
                i += 2
                continue
            while i < n and t[i] in " \t":
                i += 1
            q = False
            while i < n and (q or t[i] not in " \t&|<>"):
                q = q != (t[i] == '"')
                i += 1
            continue
        keep.append(i)
        i += 1
    cut("")
    return [(s, sep) for s, sep in out if s.text.strip()]


def scan(fc: FileCtx) -> None:
    env = Vars()
    ctx = fc.ctx(exported_only=True)
    delayed = "enabledelayedexpansion" in fc.text.lower()
    depth = 0
    for line in logical_lines(fc.src, "^", drop_comments=False):
        segs: list[tuple[Src, list[tuple[str, Span | None]]]] = []
        for s, _sep in _segments(line):  # the whole line is expanded before any of it runs
            unres: list[tuple[str, Span | None]] = []
            segs.append((_expand(s, env, delayed, unres), unres))
        for seg, unres in segs:
            if COMMENT.match(seg.text):
                break  # REM (also after `&`) and `::` take the rest of the line; a `:label` line runs nothing
            seg, conditional, depth = _condition(seg, depth)
            _command(fc, ctx, seg, env, unres, conditional)


def _condition(seg: Src, depth: int) -> tuple[Src, bool, int]:
    """The command under an `if` / `else` and the `( )` block depth: (command, conditional, depth)."""
    t = seg.text
    i = len(t) - len(t.lstrip(" \t@"))
    conditional = depth > 0
    if t[i:i + 1] == ")":  # `)` or `) else (`: a block ends (and another opens)
        depth = max(0, depth - 1)
        i += 1
        m = re.match(r"[ \t]*else[ \t]*", t[i:], re.I)
        if m:
            i += m.end()
            conditional = True
    m = IF.match(t, i)
    if m:
        i, conditional = m.end(), True
    if t[i:i + 1] == "(":
        i += 1
        body = t[i:].rstrip()
        if body.endswith(")") and body.count("(") < body.count(")"):
            t = t[:i] + body[:-1]  # `if x (set A=1)`: the block on one line
        else:
            depth += 1
        conditional = True
    return sub(seg, i, len(t)), conditional or depth > 0, depth


def _set(seg: Src, m: re.Match[str], env: Vars, unres: list[tuple[str, Span | None]], conditional: bool) -> None:
    """`set NAME=value`, `set "NAME=value"` (the value ends at the last quote), `set /a N=4096`
    (a number; an expression is not evaluated), `set /p` (asked of the user: not known)."""
    t = seg.text
    i = m.end()
    end = len(t.rstrip(" \t"))
    if t[i:i + 1] == '"' and t.rfind('"') > i:
        i, end = i + 1, t.rfind('"')
    name, eq, _ = t[i:end].partition("=")
    if not eq or not name.strip():
        return  # `set` alone lists the variables; `set X` shows one
    k = i + len(name) + 1
    mode = (m.group(1) or "").lower()
    if mode == "a":
        name = name.strip()
        while k < end and t[k] in " \t":
            k += 1
    if mode == "p":
        assign(env, name, None, [], conditional)
        return
    val = t[k:end]
    if mode == "a" and not re.fullmatch(r"-?[0-9]+", val.strip()):
        unres = unres + [(f"set /a {name}={val}", seg.span(k, end))]
    assign(env, name, Token(val, seg.span(k, end)) if val else None, unres, conditional)


def _command(fc: FileCtx, ctx: Ctx, seg: Src, env: Vars, unres: list[tuple[str, Span | None]],
             conditional: bool) -> None:
    from servefit.engines.base import program

    m = SET.match(seg.text)
    if m:
        _set(seg, m, env, unres, conditional)
        return
    m = START.match(seg.text)
    words = split_windows(sub(seg, m.end()) if m else seg)
    while words and words[0].text.lower() in ("call", "start", "@") or (words and m and words[0].text.startswith("/")):
        w = words.pop(0).text.lower()
        if w in START_VALUE and words:
            words.pop(0)
    if not words:
        return
    head = program(words[0].text).lower()
    if head in UNREAD:
        what = UNREAD[head]
        if head == "cmd" and len(words) > 1 and words[1].text.lower() in ("/k", "/r"):
            what = f"`cmd {words[1].text.lower()}`"  # as written: /k keeps the window open, /c closes it
        unread(fc, seg.text, seg.span(0, len(seg.text.rstrip())), what)
        return
    if head in NOT_RUN or words[0].text.startswith(":"):
        return
    if head == "wsl":
        words, env = _wsl(words[1:]), wsl_env(env)
    start = len(seg.text) - len(seg.text.lstrip())
    launch_words(fc, ctx, words, env, unres, seg.li.pos(seg.off(start))[0])


def wsl_env(env: Vars) -> Vars:
    """The Windows variables a WSL command sees: only those WSLENV names (`WSLENV=OLLAMA_HOST/u:HF_HOME`,
    learn.microsoft.com/windows/wsl/filesystems, "Share environment variables between Windows and WSL")."""
    out = Vars()
    found = lookup(env, "WSLENV")
    names = {p.split("/")[0].upper() for p in found[1].text.split(":")} if found else set()
    for k, v in env.values.items():
        if k.upper() in names:
            out.set(k, v, env.taint.get(k))
            out.exported.add(k)
    return out


def _wsl(words: list[Word]) -> list[Word]:
    """`wsl [-d Ubuntu] [-u root] [--cd DIR] [-e | --exec | --] COMMAND`: the command runs in Linux."""
    while words and words[0].text.startswith("-"):
        w = words.pop(0).text
        if w in ("--", "-e", "--exec"):
            break
        if w in WSL_VALUE and words:
            words.pop(0)
    return words


def launch_words(fc: FileCtx, ctx: Ctx, words: list[Word], env: Vars, unres: list[tuple[str, Span | None]],
                 line: int) -> None:
    """The servers one command starts, named by the line it is written on (a program named by a
    variable still belongs to the line that runs it)."""
    launches = from_words(words, ctx, env.copy())
    for launch in launches:
        launch.unresolved.extend(u for u in unres if u not in launch.unresolved)
        launch.line = line
    fc.add(launches, f"script:{line}", None, None, ctx.ollama_models)


def unread(fc: FileCtx, text: str, at: Span, what: str) -> None:
    """A construct servefit does not run (`text`, at `at`): said when it names an engine, never passed over."""
    from servefit.sources.detect import markers

    if markers().search(text):
        fc.findings.append(not_read(f"{what}: servefit does not run it, so the server or setting on this line was not "
                                    "read; write the command out, or lint it with `servefit lint -- COMMAND`", span=at))
