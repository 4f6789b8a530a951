"""The values the shell splitter works with: `Vars` (variables with where each value is
written), `Piece` / `Word` (a word as the engine receives it, remembering which characters of
the file produced each part), `Command`, and assignment handling. See shell.py for the rules."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from servefit.budget import charge_entries
from servefit.core import Span, Token
from servefit.sources.text import LineIndex, Src

ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def element_key(name: str, k: int) -> str:
    """Where Vars.taint keeps the unset variables of element k of array `name`."""
    return f"{name}[{k}]"


class Vars:
    """Variables known at a point: name -> value Token (span = where the value is written),
    plus the unresolved names each value carries, and which names are exported."""

    def __init__(self, values: dict[str, Token] | None = None) -> None:
        self.values: dict[str, Token] = dict(values or {})
        self.taint: dict[str, list[tuple[str, Span | None]]] = {}
        self.exported: set[str] = set()
        self.arrays: dict[str, list[Token]] = {}  # bash arrays: `args=(vllm serve ...)`, `args+=(...)`

    def get(self, name: str) -> Token | None:
        return self.values.get(name)

    def set(self, name: str, tok: Token, unresolved: list[tuple[str, Span | None]] | None = None) -> None:
        self.values[name] = tok
        if unresolved:
            self.taint[name] = list(unresolved)
        else:
            self.taint.pop(name, None)

    def set_array(self, name: str, elems: list[Token], taints: list[list[tuple[str, Span | None]]], append: bool,
                  conditional: bool) -> None:
        """`NAME=(...)` / `NAME+=(...)`: each element a Token (where it is written) with its own unset
        variables (`ARGS+=(--port "$PORT")`: PORT not set here), found where the element is expanded.
        Under a condition, an array that already has a value keeps it, as apply_assignments does for
        a plain variable; `+=` appends either way."""
        have = self.arrays.get(name)
        if append:
            base = len(have or [])
            self.arrays[name] = (have or []) + elems
        elif not (conditional and have is not None):
            base = 0
            for key in [k for k in self.taint if k.startswith(name + "[")]:
                del self.taint[key]
            self.arrays[name] = elems
        else:
            return
        for k, taint in enumerate(taints):
            if taint:
                self.taint[element_key(name, base + k)] = taint

    def copy(self) -> Vars:
        charge_entries(len(self.values))  # a snapshot per command: commands x variables, bounded per file
        out = Vars(self.values)
        out.taint = dict(self.taint)
        out.exported = set(self.exported)
        out.arrays = dict(self.arrays)
        return out


@dataclass
class Piece:
    """Characters of a word that came from one place (literal text, or one variable's value), so each can be
    traced to where it is written."""

    text: str
    start: int  # file offset where it is written (an expansion: the `${...}` reference)
    end: int
    exp: Token | None = None  # the value this text came from
    vstart: int = 0  # offset of `text` inside exp.text
    offs: list[int] | None = None  # per-character offsets when not contiguous from start
    split: bool = False  # unquoted expansion: subject to word splitting
    quoted: bool = False

    def char_off(self, k: int) -> int:
        if self.offs is not None and self.offs:
            return self.offs[min(k, len(self.offs) - 1)]
        return self.start + k


def _exact(tok: Token) -> bool:
    s = tok.span
    return (s is not None and s.start >= 0 and s.line == s.end_line
            and s.end - s.start == len(tok.text))


@dataclass
class Word:
    """A shell word as the engine receives it, made of pieces that remember where they are written; its token
    carries the span a finding should point at."""

    pieces: list[Piece]
    li: LineIndex
    unresolved: list[tuple[str, Span | None]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.pieces)

    @property
    def start(self) -> int:
        return self.pieces[0].char_off(0) if self.pieces else 0

    @property
    def line(self) -> int:
        return self.li.pos(self.start)[0]

    def token(self) -> Token:
        ps = self.pieces
        if not ps:
            return Token("", None)
        text = self.text
        first = ps[0].exp
        if first is not None and all(p.exp is first for p in ps):
            s = first.span
            if s is None:
                return Token(text, self.li.span(ps[0].start, ps[-1].end))
            if _exact(first):
                v0, v1 = ps[0].vstart, ps[-1].vstart + len(ps[-1].text)
                return Token(text, Span(s.file, s.line, s.col + v0, s.line, s.col + v1, s.start + v0, s.start + v1))
            return Token(text, s)
        a = ps[0].char_off(0) if ps[0].exp is None else ps[0].start
        last = ps[-1]
        b = (last.char_off(len(last.text) - 1) + 1 if last.text else last.end) if last.exp is None else last.end
        return Token(text, self.li.span(a, max(a, b)))

    def _substituted(self, p: Piece) -> str | None:
        """The unresolved command substitution (`X=$(awk ...)`) a piece's text is the value of, or None."""
        e = p.exp
        if e is None or e.span is None:
            return None
        return next((var for var, sp in self.unresolved if sp is not None and var.startswith(("$(", "`"))
                     and (sp.file, sp.start) == (e.span.file, e.span.start)), None)

    def to_src(self) -> Src:
        """This word as text to scan again (an `sh -c` payload), each character mapped back. The
        value of an unresolved command substitution is not known: it is rescanned as the one word
        `$(...)` written where the variable is used (its quotes and spaces would split it)."""
        offs: list[int] = []
        text: list[str] = []
        for p in self.pieces:
            e = p.exp
            if self._substituted(p) is not None:
                text.append("$(...)")
                offs.extend([p.start] * 6)
                continue
            text.append(p.text)
            if e is None:
                offs.extend(p.char_off(k) for k in range(len(p.text)))
            elif e.span is not None and e.span.file == self.li.file and _exact(e):
                offs.extend(e.span.start + p.vstart + k for k in range(len(p.text)))
            else:
                offs.extend([p.start] * len(p.text))
        offs.append(offs[-1] + 1 if offs else self.start)
        return Src("".join(text), self.li, offs=offs)

    def substituted_refs(self) -> list[tuple[str, Span | None]]:
        """(command substitution, where its variable is used) for each piece to_src wrote as `$(...)`:
        what the engine reads there is that unknown value."""
        out: list[tuple[str, Span | None]] = []
        for p in self.pieces:
            var = self._substituted(p)
            if var is not None:
                out.append((var, self.li.span(p.start, p.end)))
        return out

    def assignment(self) -> tuple[str, Word] | None:
        """`NAME=value` written as an assignment (unquoted name): (name, value word)."""
        if not self.pieces:
            return None
        p0 = self.pieces[0]
        if p0.exp is not None or p0.quoted:
            return None
        m = ASSIGN.match(p0.text)
        if not m:
            return None
        return m.group(1), self.after(m.end())

    def cut(self, a: int, b: int) -> Word:
        """Characters a to b of the word, each piece still traced to where it is written."""
        pieces: list[Piece] = []
        at = 0
        for p in self.pieces:
            x, y = max(a - at, 0), min(b - at, len(p.text))
            if x < y:
                if p.exp is None:
                    offs = p.offs[x:y] if p.offs is not None else None
                    pieces.append(Piece(p.text[x:y], p.char_off(x), p.char_off(y - 1) + 1, None, 0, offs, p.split,
                                        p.quoted))
                else:
                    pieces.append(Piece(p.text[x:y], p.start, p.end, p.exp, p.vstart + x, None, p.split, p.quoted))
            at += len(p.text)
        return Word(pieces, self.li, list(self.unresolved))

    def split_on(self, sep: str) -> list[Word]:
        """The word split at each `sep` (gcloud's list flags: `--args=a,b`), empty parts dropped."""
        text, out, start = self.text, [], 0
        for i, ch in enumerate(text + sep):
            if ch == sep:
                if i > start:
                    out.append(self.cut(start, i))
                start = i + 1
        return out

    def after(self, n: int) -> Word:
        """The word without its first n characters (n inside the first piece)."""
        p0 = self.pieces[0]
        rest = p0.text[n:]
        if p0.exp is None:
            offs = p0.offs[n:] if p0.offs is not None else None
            head = Piece(rest, p0.char_off(n) if rest else p0.end, p0.end, None, 0, offs, p0.split, p0.quoted)
        else:
            head = Piece(rest, p0.start, p0.end, p0.exp, p0.vstart + n, None, p0.split, p0.quoted)
        pieces = ([head] if rest or len(self.pieces) == 1 else []) + self.pieces[1:]
        return Word(pieces, self.li, list(self.unresolved))


@dataclass
class Command:
    """One simple command from the shell splitter: its words, what ended it (`;`, `&&`, a newline...), and the
    variables in effect when it ran."""

    words: list[Word]
    sep: str  # what ended it: "\n", ";", "&&", "||", "|", "&", "(", ")", "" at the end
    broken: Span | None = None  # a comment that ended a backslash continuation
    env: Vars | None = None  # the variables as they were when the command ran
    unresolved: list[tuple[str, Span | None]] = field(default_factory=list)  # from words that vanished ("$@")

    @property
    def texts(self) -> list[str]:
        return [w.text for w in self.words]


KEYWORDS = {"then", "do", "else", "elif", "{", "!"}


_COMPGEN = re.compile(r"\$\(\s*compgen\s+(?:-v|-A\s+variable)\s+(\w+)\s*\)|`\s*compgen\s+(?:-v|-A\s+variable)\s+(\w+)\s*`")


def apply_assignments(cmd: Command, env: Vars, conditional: bool = False) -> None:
    """`X=1`, `export X=1 Y`, `readonly`, `declare -x`, `unset X`: update the variables. Under
    a condition servefit does not evaluate (inside `if`, after `&&`), a variable that already
    has a value keeps it: the unconditional value is what runs unless the condition says
    otherwise."""
    words = cmd.words
    while words and words[0].text in KEYWORDS:
        words = words[1:]
    if not words:
        return
    first = words[0].text

    def put(name: str, tok: Token, unres: list[tuple[str, Span | None]]) -> None:
        if not (conditional and env.get(name) is not None):
            env.set(name, tok, unres)

    if first in ("export", "readonly", "declare", "typeset", "local"):
        for w in words[1:]:
            a = w.assignment()
            if a is not None:
                name, val = a
                put(name, val.token(), val.unresolved or w.unresolved)
                if first == "export" or first in ("declare", "typeset"):
                    env.exported.add(name)
            elif NAME.fullmatch(w.text) and first == "export":
                env.exported.add(w.text)
            elif first == "export" and (m := _COMPGEN.fullmatch(w.text)) is not None:
                # `export $(compgen -v LLAMA_)`: bash lists the names of the variables set with that prefix
                env.exported.update(n for n in env.values if n.startswith(m.group(1) or m.group(2)))
        return
    if first == "unset" and not conditional:
        for w in words[1:]:
            env.values.pop(w.text, None)
        return
    pairs = [w.assignment() for w in words]
    if all(p is not None for p in pairs):
        for w, p in zip(words, pairs, strict=True):
            assert p is not None
            put(p[0], p[1].token(), w.unresolved)


