"""The pieces of a word and the `$` expansions of the shell word splitter (sources/shell.py):
`$VAR`, `${VAR}`, `${VAR:-d}`, `${VAR-d}`, `${VAR:=d}`, `${VAR:+a}`, `${VAR:?}`, `"${ARR[@]}"`, `$(VAR)`
for k8s, compose's `$$`, the inside of `"..."`, and command substitutions, which stay as written and
unresolved. See shell.py's docstring for where a word's span points."""

from __future__ import annotations

import re

from servefit.budget import charge
from servefit.core import Span, Token
from servefit.sources.text import Src
from servefit.sources.words import NAME, Piece, Vars, element_key

BRACE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!])(:?[-=+?])?")
ARRAY_REF = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\[([@*]|[0-9]+)\]")
K8S_REF = re.compile(r"\(([A-Za-z_][A-Za-z0-9_]*)\)")
RUN_DQ = re.compile(r"[^\"\\$`]+")
RUN_SQ = re.compile(r"[^'$]+")


def _substitutions(text: str, unres: object) -> list[tuple[int, int]]:
    """Where the command substitutions a variable's value kept as written (`$(...)`, backticks) sit in it."""
    out: list[tuple[int, int]] = []
    k = 0
    for name, _span in unres:  # type: ignore[attr-defined]
        if not name.startswith(("$(", "`")):
            continue
        at = text.find(name, k)
        if at >= 0:
            out.append((at, at + len(name)))
            k = at + len(name)
    return out


class Expansions:
    """What the Scanner (sources/shell.py) does with the text of one word: literal pieces,
    expansions from the variables known, and what could not be expanded."""

    src: Src
    t: str
    env: Vars | None
    mode: str
    k8s: Vars | None
    compose: bool
    provided: frozenset[str]
    cur: list[Piece] | None
    unres: list[tuple[str, Span | None]]
    at_seen: bool

    # ---- pieces and words
    def _lit(self, a: int, b: int, quoted: bool = False, text: str | None = None) -> None:
        src = self.src
        if text is None:
            text = self.t[a:b]
            offs = src.slice_offs(a, b)
        else:
            offs = [src.off(a)] * len(text) if len(text) != b - a else src.slice_offs(a, b)
        if self.cur is None:
            self.cur = []
        self.cur.append(Piece(text, src.off(a), src.end_off(b) if b > a else src.off(a), None, 0, offs,
                              False, quoted))

    def _exp(self, tok: Token, a: int, b: int, quoted: bool, name: str, env: Vars | None) -> None:
        charge(len(tok.text))  # budget.Exhausted past the bound: the file is reported, the run goes on
        if self.cur is None:
            self.cur = []
        split = not quoted and self.mode != "word"
        start, end = self.src.off(a), self.src.end_off(b)
        k = 0
        for sa, sb in _substitutions(tok.text, env.taint.get(name, ()) if split and env is not None else ()):
            if sa > k:
                self.cur.append(Piece(tok.text[k:sa], start, end, tok, k, None, True, quoted))
            # `D=$(cd "$(dirname "$0")"; pwd)` then `$D/x`: the command's output is one unknown word, not its text split
            self.cur.append(Piece(tok.text[sa:sb], start, end, tok, sa, None, False, quoted))
            k = sb
        if k < len(tok.text) or not tok.text:
            self.cur.append(Piece(tok.text[k:], start, end, tok, k, None, split, quoted))
        if env is not None and name in env.taint:
            self.unres.extend(env.taint[name])

    def _unresolved(self, name: str, a: int, b: int, quoted: bool, keep: bool = True) -> None:
        self.unres.append((name, self.src.span(a, b)))
        if keep:
            self._lit(a, b, quoted)


    def _backtick(self, i: int, quoted: bool) -> int:
        j = self.t.find("`", i + 1)
        j = len(self.t) if j < 0 else j + 1
        self._unresolved(self.t[i:j], i, j, quoted)
        return j

    def _match(self, i: int, open_: str, close: str) -> int:
        """Index just after the bracket closing the one at i (quotes skipped), or len."""
        t = self.t
        depth = 0
        k = i
        n = len(t)
        while k < n:
            c = t[k]
            if c == "\\":
                k += 2
                continue
            if c == "'" and open_ == "(":
                e = t.find("'", k + 1)
                k = n if e < 0 else e + 1
                continue
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    return k + 1
            k += 1
        return n

    def _dollar(self, i: int, quoted: bool) -> int:
        t = self.t
        nxt = t[i + 1:i + 2]
        shell = self.mode == "shell"
        if nxt == "$" and self.compose:
            self._lit(i + 1, i + 2, quoted)
            return i + 2
        if nxt == "$" and self.k8s is not None and t[i + 2:i + 3] == "(":
            self._lit(i + 1, i + 3, quoted)  # `$$(X)` is a literal `$(X)`
            return i + 3
        if nxt == "(":
            if self.k8s is not None:
                m = K8S_REF.match(t, i + 1)
                if m:
                    tok = self.k8s.get(m.group(1))
                    if tok is not None:
                        self._exp(tok, i, m.end(), quoted, m.group(1), self.k8s)
                    else:
                        self._unresolved(m.group(1), i, m.end(), quoted)
                    return m.end()
            if shell or self.mode == "split":
                j = self._match(i + 1, "(", ")")
                self._unresolved(t[i:j], i, j, quoted)
                return j
            self._lit(i, i + 1, quoted)
            return i + 1
        if self.env is None:
            self._lit(i, i + 1, quoted)
            return i + 1
        if nxt == "{":
            return self._brace(i, quoted, self.env)
        m = NAME.match(t, i + 1)
        if m:
            return self._var(m.group(), i, m.end(), quoted, self.env)
        if nxt and nxt in "@*#?$!-0123456789" and not self.compose:
            return self._var(nxt, i, i + 2, quoted, self.env)
        if nxt == "'" and shell:
            j = t.find("'", i + 2)
            j = len(t) if j < 0 else j
            self._lit(i + 2, j, True)
            return j + 1
        self._lit(i, i + 1, quoted)
        return i + 1

    def _dquote(self, i: int, close: str = '"') -> int:
        """The text from just after an opening quote to its close: `"..."` (escapes and expansions
        inside, no splitting), or compose's `'...'`, which compose interpolates as well."""
        t = self.t
        n = len(t)
        if self.cur is None:
            self.cur = []
        start_len = len(self.cur)
        self.at_seen = False
        while i < n:
            c = t[i]
            if c == close:
                i += 1
                break
            if c == "\\" and close == '"':
                nxt = t[i + 1:i + 2]
                if nxt == "\n":
                    i += 2
                elif nxt in ('"', "\\", "$", "`"):
                    self._lit(i + 1, i + 2, True)
                    i += 2
                else:
                    self._lit(i, i + 1, True)
                    i += 1
            elif c == "$":
                i = self._dollar(i, True)
            elif c == "`" and self.mode == "shell":
                i = self._backtick(i, True)
            else:
                m = (RUN_DQ if close == '"' else RUN_SQ).match(t, i)
                j = m.end() if m else i + 1
                self._lit(i, j, True)
                i = j
        if len(self.cur) == start_len and not self.at_seen:  # "" is an empty word, not nothing
            self._lit(i - 1, i - 1, True, "")
        return i

    def _var(self, name: str, a: int, b: int, quoted: bool, env: Vars) -> int:
        tok = env.get(name)
        if tok is not None:
            self._exp(tok, a, b, quoted, name, env)
        elif name in self.provided:
            self._lit(a, b, quoted)
        elif name in ("@", "*") and self.cur:
            # `NNODES=$@`, `--pp=$@`: text before it makes a word that stays, its value unknown;
            # vanishing would let the next word take the flag's place (`--pp $NNODES --x ray`)
            self._unresolved("$" + name, a, b, quoted)
        elif name in ("@", "*"):
            self._unresolved("$" + name, a, b, quoted, keep=False)
            self.at_seen = True
        else:
            self._unresolved(name if NAME.fullmatch(name) else "$" + name, a, b, quoted)
        return b

    def _brace(self, i: int, quoted: bool, env: Vars) -> int:
        t = self.t
        j = self._match(i + 1, "{", "}")  # just after the closing brace
        inner_a, inner_b = i + 2, j - 1
        inner = t[inner_a:inner_b]
        arr = ARRAY_REF.fullmatch(inner)
        if arr:
            return self._array(arr.group(1), arr.group(2), i, j, quoted, env)
        m = BRACE.match(inner)
        if not m:
            self._unresolved(t[i:j], i, j, quoted)
            return j
        name, op = m.group(1), m.group(2)
        if not op:
            if m.end() != len(inner):  # ${X/a/b}, ${X:0:3}, ${X%.*}: not evaluated
                # ${CONFIGS[${PRESET}_port]}: an element picked by a key the script computes, named as written
                # (the array may well be set: "CONFIGS is not set" would be untrue)
                self._unresolved(t[i:j] if inner[m.end()] == "[" else name, i, j, quoted)
                return j
            return self._var(name, i, j, quoted, env)
        tok = env.get(name)
        is_set = tok is not None and (not op.startswith(":") or tok.text != "")
        kind = op[-1]
        arg_a = inner_a + m.end()
        if kind in "-=":
            if is_set and tok is not None:
                self._exp(tok, i, j, quoted, name, env)
            else:
                before = len(self.cur or [])
                self._default(arg_a, inner_b, quoted, env)
                if kind == "=":
                    got = (self.cur or [])[before:]
                    text = "".join(p.text for p in got)
                    span = self.src.span(arg_a, inner_b) if got else None
                    env.set(name, Token(text, span))
        elif kind == "+":
            if is_set:
                self._default(arg_a, inner_b, quoted, env)
        else:  # ?
            if is_set and tok is not None:
                self._exp(tok, i, j, quoted, name, env)
            else:
                self._unresolved(name, i, j, quoted)
        return j

    def _array(self, name: str, which: str, a: int, b: int, quoted: bool, env: Vars) -> int:
        """`"${args[@]}"`: each element its own word (an unquoted one split again), as bash does;
        `${args[*]}` and `${args[N]}` likewise from the elements. An unknown array stays as written."""
        elems = env.arrays.get(name)
        if elems is None:
            self._unresolved(name, a, b, quoted)
            return b
        first = int(which) if which.isdigit() else 0
        if which.isdigit():
            elems = elems[first:first + 1]
        for k, tok in enumerate(elems):
            if k and (which == "@" or not quoted):
                self._end_word()  # type: ignore[attr-defined]
            elif k:
                self._lit(b, b, quoted, " ")
            self._exp(tok, a, b, quoted, element_key(name, first + k), env)
        if not elems:
            self.at_seen = True
        return b

    def _default(self, a: int, b: int, quoted: bool, env: Vars) -> None:
        """The word inside `${X:-...}`: quotes and nested expansions, no splitting."""
        t = self.t
        i = a
        if self.cur is None:
            self.cur = []
        while i < b:
            c = t[i]
            if c == "'" and not quoted:
                j = t.find("'", i + 1, b)
                j = b if j < 0 else j
                self._lit(i + 1, j, True)
                i = j + 1
            elif c == '"':
                i += 1
            elif c == "\\" and i + 1 < b:
                self._lit(i + 1, i + 2, quoted)
                i += 2
            elif c == "$":
                i = self._dollar(i, True)
            else:
                k = i + 1
                while k < b and t[k] not in "'\"\\$":
                    k += 1
                self._lit(i, k, quoted)
                i = k
