"""PowerShell scripts (.ps1): the servers they start, read the way PowerShell reads them.

Why a reader of its own: Windows users start llama-server.exe and `ollama serve` from .ps1 files,
whose quoting, variables and continuations are not the shell's.

Statements end at a newline or `;` (a backtick at the end of a line continues it; inside `@( )`
newlines separate elements); `#` and `<# #>` are comments. `$env:NAME = "v"` sets an environment
variable (every program started later gets it); `$name = "v"`, `$name = @("-m", "x")` or
`"-m", "x"` set script variables, which do not reach the engine's environment. In double quotes and
bare arguments, `$name`, `${name}` and `$env:NAME` expand (`$(...)` is computed when the script runs:
not known here); single quotes are literal. A bare `$name` holding an array and a splat `@name` give
one argument per element. `& "C:\\llama\\llama-server.exe" args`, a bare program, `Start-Process
[-FilePath] X [-ArgumentList] "..." | "a","b" | $array` (the elements joined and split again by
the C runtime's rules, as Start-Process passes them: sources/ps_args.py) and `wsl ...` start servers; a statement
that starts with a string, a variable or `(` is an expression (no program runs without `&`), and a `( )` group is one
argument whose pipeline runs apart. Statements inside `{ }` (if, foreach, functions) are conditional: a variable
already set keeps its value.
`[Environment]::SetEnvironmentVariable("NAME", "v")` (the Process target) sets one too. `Invoke-Expression`,
`cmd /c`, other .NET calls and the User or Machine targets are not run: one
that names an engine is said not read (SF108).

Spans: a whole `$name` / `$env:NAME` argument points at the value where it is assigned (a fix goes
there, sources/shell.py says why); a variable not set here stays as written and gives SF001.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from servefit.core import Span, Token
from servefit.sources.base import FileCtx
from servefit.sources.launch import Ctx
from servefit.sources.ps_args import args_of, elements, join_path, start_process, subexpressions
from servefit.sources.shell import Piece, Vars, Word
from servefit.sources.text import Src
from servefit.sources.winbatch import _wsl, assign, launch_words, lookup, unread, wsl_env

VAR = re.compile(r"\$(?:\{([^}]+)\}|((?:env|script|global|local|private|using):)?([A-Za-z_][A-Za-z0-9_]*))", re.I)
BARE_STOP = set(" \t\r\n;,(){}|&\"'`")
# cmdlets and tools that name a program without starting it
NOT_RUN = {"write-host", "write-output", "echo", "write-verbose", "stop-process", "get-process", "taskkill",
           "where", "test-path", "set-location", "cd", "push-location", "pop-location", "get-command",
           "remove-item", "copy-item", "move-item", "new-item", "invoke-webrequest", "invoke-restmethod", "iwr",
           "irm", "curl", "wait-process", "get-content", "out-file", "out-null", "start-sleep", "tasklist"}
# cmdlets (and functions named in their style) of these verbs take a program's path as a string, not start it:
# `$server = Join-Path $root "cuda\Release\llama-server.exe"`, `Write-Log "started llama-server"`
NAMING_VERBS = {"join", "split", "resolve", "test", "get", "set", "add", "copy", "move", "remove", "rename", "new",
                "write", "out", "format", "select", "where", "sort", "measure", "compare", "convertto", "convertfrom",
                "export", "import", "read", "clear"}
UNREAD = {"invoke-expression", "iex", "cmd"}  # a `{ }` block (Start-Job, ForEach-Object) is read as statements
KEYWORDS = {"if", "elseif", "else", "foreach", "for", "while", "do", "switch", "function", "filter", "try", "catch",
            "finally", "param", "until", "trap"}


@dataclass
class Tok:
    """A word of a statement (`word`), a lone `$name` (`var`), a splat `@name`, or an operator (`op`)."""

    kind: str
    text: str
    start: int
    word: Word | None = None
    name: str = ""
    quoted: bool = False


@dataclass
class PsVars:
    """The environment (Vars, names case-insensitive) and the script's own variables (a word or a list)."""

    env: Vars = field(default_factory=Vars)
    own: dict[str, Word | list[Word]] = field(default_factory=dict)


class Scanner:
    """Reads one statement at a time, expanding with the variables set by the statements before it."""

    def __init__(self, src: Src, vs: PsVars) -> None:
        self.src, self.t, self.vs = src, src.text, vs
        self.i = 0
        self.depth = 0  # `{ }` nesting
        self.parens = 0

    def lit(self, pieces: list[Piece], a: int, b: int, quoted: bool, text: str | None = None) -> None:
        s = self.src
        if text is None:
            pieces.append(Piece(self.t[a:b], s.off(a), s.end_off(b), None, 0, s.slice_offs(a, b), False, quoted))
        else:
            pieces.append(Piece(text, s.off(a), s.end_off(b), None, 0, [s.off(a)] * len(text), False, quoted))

    def value(self, name: str) -> tuple[Token | list[Word] | None, list[tuple[str, Span | None]]]:
        """A variable's value and the unset variables it is written with."""
        low = name.lower()
        if low.startswith("env:"):
            found = lookup(self.vs.env, name[4:])
            return (found[1], self.vs.env.taint.get(found[0], [])) if found else (None, [])
        low = low.split(":", 1)[-1]
        v = self.vs.own.get(low)
        if isinstance(v, Word):
            return v.token(), list(v.unresolved)
        return v, [u for w in v or [] for u in w.unresolved]

    def ref(self, pieces: list[Piece], unres: list[tuple[str, Span | None]], a: int, quoted: bool) -> int:
        """`$...` at a: its value as a piece (or as written, unresolved); returns the index after it."""
        t = self.t
        if t.startswith("$(", a):
            b = self._close(a + 1)
            self.lit(pieces, a, b, quoted)
            unres.append((t[a:b], self.src.span(a, b)))
            return b
        m = VAR.match(t, a)
        if m is None:
            self.lit(pieces, a, a + 1, quoted)
            return a + 1
        name = m.group(1) or (m.group(2) or "") + m.group(3)
        fixed = {"psscriptroot": ".", "true": "True", "false": "False", "null": ""}.get(name.lower())
        if fixed is not None:
            self.lit(pieces, a, m.end(), quoted, fixed)
            return m.end()
        val, taint = self.value(name)
        if val is None:
            self.lit(pieces, a, m.end(), quoted)
            unres.append((m.group(), self.src.span(a, m.end())))
            return m.end()
        if isinstance(val, list):  # an array inside a string: its elements joined by spaces
            val = Token(" ".join(w.text for w in val), self.src.span(a, m.end()))
        pieces.append(Piece(val.text, self.src.off(a), self.src.end_off(m.end()), val, 0, None, False, quoted))
        unres.extend(taint)
        return m.end()

    def _close(self, i: int) -> int:
        """The index after the `)` that closes the `(` at i."""
        depth = 0
        while i < len(self.t):
            depth += {"(": 1, ")": -1}.get(self.t[i], 0)
            i += 1
            if depth == 0:
                break
        return i

    def word(self, a: int) -> tuple[Word, int, bool]:
        """A bare or quoted word at a (quoted parts joined to bare ones, as in `--x="a b"`)."""
        t, n = self.t, len(self.t)
        pieces: list[Piece] = []
        unres: list[tuple[str, Span | None]] = []
        i = a
        quoted = False
        while i < n:
            c = t[i]
            if (c in BARE_STOP and c not in "\"'`") or (c == "`" and t[i + 1:i + 3].lstrip("\r").startswith("\n")):
                break
            if c == "'":
                quoted = True
                j = i + 1
                while j < n:
                    if t[j] == "'" and t[j + 1:j + 2] == "'":
                        self.lit(pieces, i + 1, j, True)
                        self.lit(pieces, j, j + 1, True, "'")
                        i, j = j + 1, j + 2
                        continue
                    if t[j] == "'":
                        break
                    j += 1
                self.lit(pieces, i + 1, j, True)
                i = j + 1
            elif c == '"':
                quoted = True
                i = self._dquote(pieces, unres, i + 1)
            elif c == "`":
                self.lit(pieces, i + 1, i + 2, False)
                i += 2
            elif c == "$":
                i = self.ref(pieces, unres, i, False)
            else:
                j = i + 1
                while j < n and t[j] not in BARE_STOP and t[j] != "$":
                    j += 1
                self.lit(pieces, i, j, False)
                i = j
        if not pieces:
            self.lit(pieces, a, a, quoted, "")
        return Word(pieces, self.src.li, unres), i, quoted

    def _dquote(self, pieces: list[Piece], unres: list[tuple[str, Span | None]], i: int) -> int:
        t, n = self.t, len(self.t)
        esc = {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}
        start = len(pieces)
        while i < n:
            c = t[i]
            if c == '"' and t[i + 1:i + 2] == '"':
                self.lit(pieces, i, i + 1, True)
                i += 2
            elif c == '"':
                i += 1
                break
            elif c == "`" and i + 1 < n:
                ch = t[i + 1]
                self.lit(pieces, i + 1, i + 2, True, esc.get(ch, ch))
                i += 2
            elif c == "$":
                i = self.ref(pieces, unres, i, True)
            else:
                j = i + 1
                while j < n and t[j] not in '"`$':
                    j += 1
                self.lit(pieces, i, j, True)
                i = j
        if len(pieces) == start:
            self.lit(pieces, i - 1, i - 1, True, "")
        return i

    def statement(self) -> tuple[list[Tok], bool] | None:
        """The next statement's tokens and whether it is under a condition; None at the end."""
        t, n = self.t, len(self.t)
        toks: list[Tok] = []
        while self.i < n:
            i, c = self.i, t[self.i]
            if c in " \t\r":
                self.i += 1
            elif c == "`" and t[i + 1:i + 3].lstrip("\r").startswith("\n"):
                self.i = t.index("\n", i) + 1
            elif t.startswith("<#", i):
                end = t.find("#>", i + 2)
                self.i = n if end < 0 else end + 2
            elif c == "#":
                end = t.find("\n", i)
                self.i = n if end < 0 else end
            elif c == "\n" or c == ";":
                self.i += 1
                if self.parens and c == "\n":
                    if toks and toks[-1].text not in (",", "@(", "("):
                        toks.append(Tok("op", ",", i))
                elif toks and not (c == "\n" and toks[-1].kind == "op" and toks[-1].text in ("=", "+=", ",", "|")):
                    self.parens = 0
                    return toks, self.depth > 0
            elif c in "{}":
                self.i += 1
                cond = self.depth > 0
                self.depth = max(0, self.depth + (1 if c == "{" else -1))
                if toks and not (toks[0].kind == "word" and toks[0].text.lower() in KEYWORDS):
                    return toks, cond
                toks = []
            elif t.startswith(("&&", "||"), i) or c == "|":
                self.i += 1 if c == "|" and not t.startswith("||", i) else 2
                if toks:
                    return toks, self.depth > 0
            elif c in "&,)" or t.startswith("@(", i) or c == "(":
                op = "@(" if t.startswith("@(", i) else c
                self.parens = max(0, self.parens + (op in ("(", "@(")) - (op == ")"))
                toks.append(Tok("op", op, i))
                self.i += len(op)
            elif c == "@" and re.match(r"[A-Za-z_]", t[i + 1:i + 2]):
                m = re.compile(r"[A-Za-z_][A-Za-z0-9_:]*").match(t, i + 1)
                end = m.end() if m else i + 1
                toks.append(Tok("splat", t[i:end], i, name=t[i + 1:end]))
                self.i = end
            elif c == "$" and not toks and (m := VAR.match(t, i)) and re.match(r"[ \t]*\+?=(?!=)", t[m.end():]):
                toks.append(Tok("var", m.group(), i, name=m.group(1) or (m.group(2) or "") + m.group(3)))
                eq = re.match(r"[ \t]*(\+?=)", t[m.end():])
                assert eq is not None
                toks.append(Tok("op", eq.group(1), m.end()))
                self.i = m.end() + eq.end()
            else:
                w, self.i, quoted = self.word(i)
                if self.i == i:  # nothing a word can start with: passed over, never read again
                    self.i += 1
                    continue
                m = VAR.fullmatch(t, i, self.i)
                kind = "var" if m is not None and not quoted else "word"
                name = (m.group(1) or (m.group(2) or "") + m.group(3)) if m is not None else ""
                toks.append(Tok(kind, w.text, i, w, name, quoted))
        return (toks, self.depth > 0) if toks else None


def scan(fc: FileCtx) -> None:
    vs = PsVars()
    ctx = fc.ctx(exported_only=True)
    sc = Scanner(fc.src, vs)
    while (st := sc.statement()) is not None:
        toks, conditional = st
        _run(fc, ctx, sc, toks, conditional)


def _run(fc: FileCtx, ctx: Ctx, sc: Scanner, toks: list[Tok], conditional: bool) -> None:
    call = toks[0].kind == "op" and toks[0].text in ("&", ".")
    if call:
        toks = toks[1:]
    if len(toks) > 1 and toks[0].kind == "var" and toks[1].kind == "op" and toks[1].text in ("=", "+="):
        _assign(fc, ctx, sc, toks, conditional)
        return
    if toks and not call and (toks[0].kind in ("op", "var") or toks[0].quoted or toks[0].text.startswith("$")):
        # `'llama-server' -eq $x`, `$cfg.macros['srv'] = $parts -join ' '`: an expression; its `( )` groups still run
        for inner in subexpressions(toks, sc)[1]:
            _run(fc, ctx, sc, inner, conditional)
        return
    if not toks or toks[0].word is None:
        return
    from servefit.engines.base import program

    head = program(toks[0].text).lower()
    if head.endswith("]::setenvironmentvariable") and _set_environment(sc, toks, conditional):
        return
    if head in UNREAD or head.startswith("["):
        _unread(fc, sc, toks, f"`{toks[0].text}`" if not head.startswith("[") else
                "a User or Machine variable (it reaches programs started in new sessions, not the ones this script "
                "starts)" if head.endswith("::setenvironmentvariable") else "a .NET method call")
        return
    if head in NOT_RUN or ("-" in head and head.split("-", 1)[0] in NAMING_VERBS):
        return
    if head in ("start-process", "start", "saps"):
        words = start_process(toks[1:], sc)
    else:
        flat, groups = subexpressions(toks, sc)
        for inner in groups:  # `( ... )` runs its own pipeline to give one argument
            _run(fc, ctx, sc, inner, conditional)
        words = [w for tk in flat for w in args_of(tk, sc)]
    env = sc.vs.env
    if words and program(words[0].text).lower() == "wsl":
        words, env = _wsl(words[1:]), wsl_env(env)
    launch_words(fc, ctx, words, env, [], sc.src.li.pos(sc.src.off(toks[0].start))[0])


def _assign(fc: FileCtx, ctx: Ctx, sc: Scanner, toks: list[Tok], conditional: bool) -> None:
    """`$env:NAME = value`, `$name = value | array`, `$name += array`; a command on the right runs."""
    name, op, rhs = toks[0].name, toks[1].text, toks[2:]
    span = sc.src.span(toks[0].start, toks[0].start + len(toks[0].text))
    is_array = any(tk.kind == "op" and tk.text in (",", "@(") for tk in rhs)
    first = rhs[0] if rhs else None
    command = first is not None and first.kind == "word" and not first.quoted and \
        not re.fullmatch(r"[-+]?[0-9.]+|\[.*", first.text)
    joined = join_path(rhs, sc) if command and first is not None and first.text.lower() == "join-path" else None
    if joined is not None:  # `$server = Join-Path $root "bin\llama-server.exe"`: the path, for `& $server ...`
        command = False
        rhs = []
    if joined is None and first is not None and (command or (first.kind == "op" and first.text in ("&", "("))):
        _run(fc, ctx, sc, rhs[1:] if first.text == "(" else rhs, conditional)  # `$p = Start-Process ...`
        words: list[Word] = []
        taint: list[tuple[str, Span | None]] = [("$(" + sc.t[rhs[0].start:].split("\n")[0].strip() + ")", span)]
    else:
        words = [joined] if joined is not None else elements(subexpressions(rhs, sc)[0], sc)
        taint = []
    low = name.lower()
    if low.startswith("env:"):
        if len(words) == 1 and not taint:
            w = words[0]
            assign(sc.vs.env, name[4:], w.token(), list(w.unresolved), conditional)
        else:
            text = " ".join(w.text for w in words)
            assign(sc.vs.env, name[4:], Token(text, span), taint or [(f"$env:{name[4:]}", span)], conditional)
        return
    low = low.split(":")[-1]
    if conditional and low in sc.vs.own:
        return
    if taint:
        sc.vs.own[low] = Word([Piece(toks[0].text, span.start, span.end)], sc.src.li, taint)
    elif op == "+=" and isinstance(have := sc.vs.own.get(low), list):
        sc.vs.own[low] = have + words
    elif is_array or len(words) != 1:
        sc.vs.own[low] = words
    else:
        sc.vs.own[low] = words[0]


def _set_environment(sc: Scanner, toks: list[Tok], conditional: bool) -> bool:
    """`[Environment]::SetEnvironmentVariable("NAME", "v"[, "Process"])` sets the variable for the programs this
    script starts; the User and Machine targets only change new sessions (.NET Environment.SetEnvironmentVariable),
    so those are left to the note that the line was not read."""
    vals = [tk.word for tk in toks[1:] if tk.word is not None]
    if len(vals) not in (2, 3) or (len(vals) == 3 and vals[2].text.lower() not in ("process", "[environmentvariabletarget]::process")):
        return False
    assign(sc.vs.env, vals[0].text, vals[1].token(), list(vals[1].unresolved), conditional)
    return True


def _unread(fc: FileCtx, sc: Scanner, toks: list[Tok], what: str) -> None:
    a = toks[0].start
    end = sc.t.find("\n", a)
    text = sc.t[a:len(sc.t) if end < 0 else end].rstrip()
    unread(fc, text, sc.src.span(a, a + len(text)), what)
