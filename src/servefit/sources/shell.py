"""One word splitter for every command line servefit reads: shell scripts, Dockerfile shell
form, `sh -c` strings, systemd ExecStart, compose string commands, SkyPilot `run`, llama-swap
`cmd`, and list items (k8s `$(VAR)`, compose `${VAR:-d}`).

Bash rules followed: quotes and escapes, backslash-newline continuations, a `#` that starts a
word is a comment to the end of the line even inside a continuation (so the command ends
there, as bash would end it), `;`/`&&`/`||`/`|`/`&`/newline separate commands, redirections
and heredocs are dropped, `$VAR`, `${VAR}`, `${VAR:-d}`, `${VAR-d}`, `${VAR:=d}`, `${VAR:+a}`,
`${VAR:?}` expand from the variables known at that point, unquoted expansions are split on
whitespace, assignments (`X=1`, `export X=1`) update the variables for later commands, and
arrays (`ARGS=( ... )` over several lines, `ARGS+=(...)`) expand element by element in
`"${ARGS[@]}"`, `${ARGS[*]}` and `${ARGS[N]}`; `source FILE` / `. FILE` of a file in the repository
sets what that file sets.

Spans. A word's span covers the characters it was written with in the original file. When a
whole word comes from one expansion (`$MAX_LEN`, `$(MAX_LEN)`, `${MAX_LEN}`), its span is the
place the value is *defined* (the env value, the assignment, the `.env` line), because that is
where a fix must go; a default (`${LEN:-8192}`) is literal text, so its span is the default as
written. A word that mixes text and an expansion (`--max-model-len=$LEN`) keeps the span of
the word as written. A variable that is not known stays as written (`${LEN}`) and is listed in
the word's `unresolved`, never guessed.
"""

from __future__ import annotations

import re

from servefit.core import Span
from servefit.sources.shell_cond import Branches
from servefit.sources.shell_expand import Expansions
from servefit.sources.shell_source import sourced_file
from servefit.sources.text import LineIndex, Src
from servefit.sources.words import ASSIGN, Command, Piece, Vars, Word, apply_assignments

__all__ = ["Command", "Piece", "Scanner", "Vars", "Word", "expand_word", "split_commands", "split_words"]

RUN_SHELL = re.compile(r"[^\s'\"\\$;&|<>()`]+")
RUN_SPLIT = re.compile(r"[^\s'\"\\$]+")
RUN_WORD = re.compile(r"[^$]+")
# `<model-path>`: a placeholder docs and samples ask the reader to fill in. Bash would read it as two
# redirections (`<model-path` then `>` taking the next word), so the words around it would shift;
# servefit keeps it as the one unknown word it stands for (SF001 says it), never as a value.
PLACEHOLDER = re.compile(r"<[A-Za-z][A-Za-z0-9_.:/@-]*>(?=[\s;|&)\"']|$)")


# `python -m sglang.launch_server ...` in notes and READMEs: `...` as a whole word stands for arguments
# the text leaves out; like "$@" it is no word the engine gets, and SF001 says the arguments are unknown.
ELIDED = re.compile(r"\.\.\.(?=[\s;|&)]|$)")


def placeholder(text: str) -> bool:
    """Whether text is a whole `<placeholder>` word."""
    m = PLACEHOLDER.match(text)
    return m is not None and m.end() == len(text)


ARRAY_START = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+)?=")
OPENERS = {"if", "while", "until", "for", "case", "select"}
CLOSERS = {"fi", "done", "esac"}


class Scanner(Expansions):
    """mode: "shell" (operators, comments, heredocs), "split" (quotes and whitespace only:
    compose string commands, systemd, shlex-like), "word" (no splitting: a list item).

    `env`: the variables `$X` / `${X}` read (None: that syntax is not expanded, as in a k8s
    list item). `k8s`: container env for `$(X)`. `compose`: `$$` is an escaped `$`.
    `provided`: names the runtime fills in itself (llama-swap `${PORT}`): kept as written."""

    def __init__(self, src: Src, env: Vars | None, *, mode: str = "shell", k8s: Vars | None = None,
                 compose: bool = False, provided: frozenset[str] = frozenset(),
                 sourced: frozenset[str] = frozenset()) -> None:
        self.src = src
        self.sourced = sourced | {src.li.file}  # the files `source` has read into this one (none twice)
        self.t = src.text
        self.env = env
        self.mode = mode
        self.k8s = k8s
        self.compose = compose
        self.provided = provided
        self.assign = mode == "shell"
        self.cmds: list[Command] = []
        self.words: list[Word] = []
        self.cur: list[Piece] | None = None
        self.unres: list[tuple[str, Span | None]] = []
        self.cont = False
        self.broken: Span | None = None
        self.skip_next = False
        self.heredoc_next: bool | None = None
        self.heredocs: list[tuple[str, bool]] = []
        self.cmd_unres: list[tuple[str, Span | None]] = []
        self.at_seen = False
        self.depth = 0  # inside if / while / for / case: assignments there may not run
        self.branches = Branches()  # ... unless a string test on known values says they do not
        self.prev_sep = ""
        self.array: tuple[str, bool, int] | None = None  # inside `NAME=(`: name, `+=`, its first word

    # ---- entry points
    def commands(self) -> list[Command]:
        self._scan()
        self._end_word()
        self._end_cmd("")
        return self.cmds

    def word(self) -> Word:
        self.mode = "word"
        self._scan()
        w = Word(self.cur or [], self.src.li, self.unres)
        if not w.pieces:
            w.pieces = [Piece("", self.src.off(0), self.src.off(0))]
        return w

    def _end_word(self) -> None:
        if self.cur is None:
            return
        pieces, self.cur = self.cur, None
        unres, self.unres = self.unres, []
        li = self.src.li
        out: list[Word] = []
        if any(p.split for p in pieces) and not (pieces[0].exp is None and ASSIGN.match(pieces[0].text)):
            acc: list[Piece] = []
            for p in pieces:
                if not p.split:
                    acc.append(p)
                    continue
                if p.text[:1].isspace() and acc:
                    out.append(Word(acc, li))
                    acc = []
                ms = list(re.finditer(r"\S+", p.text))
                for k, m in enumerate(ms):
                    if k and acc:
                        out.append(Word(acc, li))
                        acc = []
                    acc.append(Piece(m.group(), p.start, p.end, p.exp, p.vstart + m.start(), None, True))
                if p.text[-1:].isspace() and acc:
                    out.append(Word(acc, li))
                    acc = []
            if acc:
                out.append(Word(acc, li))
        elif not pieces or all(p.split and not p.text for p in pieces):
            out = []
        else:
            out = [Word(pieces, li)]
        for w in out:
            w.unresolved = list(unres)
        if not out and unres:
            self.cmd_unres.extend(unres)
        if self.skip_next:
            self.skip_next = False
            if self.heredoc_next is not None and out:
                self.heredocs.append((out[0].text, self.heredoc_next))
            self.heredoc_next = None
            return
        self.words.extend(out)

    def _end_cmd(self, sep: str) -> None:
        words, self.words = self.words, []
        broken, self.broken = self.broken, None
        unres, self.cmd_unres = self.cmd_unres, []
        self.cont = False
        if not words:
            return
        cmd = Command(words, sep, broken, self.env.copy() if self.env is not None and self.mode == "shell" else None,
                      unres)
        self.cmds.append(cmd)
        first = words[0].text
        conditional = self.depth > 0 or self.prev_sep in ("&&", "||")
        prev, self.prev_sep = self.prev_sep, sep
        dead = self.branches.dead(words, prev)
        if first in OPENERS:
            self.depth += 1
            self.branches.opened(first, words, sep)
            if first in ("for", "select") and len(words) > 1 and self.env is not None and self.assign \
                    and re.fullmatch(r"[A-Za-z_]\w*", words[1].text):
                # `for i in $(seq 1 7)`: the loop sets the name to each value in turn (not one value here)
                tok = words[1].token()
                self.env.set(words[1].text, type(tok)(f"${words[1].text}", tok.span),
                             [(f"for {words[1].text}", tok.span)])
            elif first in ("while", "until") and self.env is not None and self.assign:
                self._read_names(words[1:])
        elif first in CLOSERS:
            self.depth = max(0, self.depth - 1)
            self.branches.closed()
        else:
            if self.assign and self.env is not None and not dead:
                apply_assignments(cmd, self.env, conditional)
                if first in ("source", ".") and len(words) > 1:
                    self._source(words[1])
            self.branches.other(first, words, sep)

    def _read_names(self, words: list[Word]) -> None:
        """`while read -r model; do ... done < models.txt`: read sets each name to a line's words in turn (bash's
        `read` builtin; -a -d -i -n -N -p -t -u take a value), not one value here."""
        texts = [w.text for w in words]
        if texts[:1] != ["read"]:
            return
        k = 1
        while k < len(texts) and texts[k].startswith("-"):
            k += 2 if texts[k] in ("-a", "-d", "-i", "-n", "-N", "-p", "-t", "-u") else 1
        for w in words[k:]:
            if not re.fullmatch(r"[A-Za-z_]\w*", w.text):
                break
            tok = w.token()
            assert self.env is not None
            self.env.set(w.text, type(tok)(f"${w.text}", tok.span), [(f"read {w.text}", tok.span)])

    def _source(self, word: Word) -> None:
        """`source ./settings.sh`, `. lib/env.sh`: bash runs the file in this shell, so its variables are set
        here (sources/shell_source.py: which file); its own servers are read when that file is."""
        got = sourced_file(word, self.src.li.file, self.sourced, self.env)
        if got is not None and self.env is not None:
            path, text = got
            Scanner(Src(text, LineIndex(text, path)), self.env, sourced=self.sourced).commands()

    # ---- the scanner
    def _scan(self) -> None:
        t = self.t
        n = len(t)
        i = 0
        mode = self.mode
        shell = mode == "shell"
        run = RUN_SHELL if shell else RUN_SPLIT
        while i < n:
            c = t[i]
            if c == "<" and self.cur is None and (ph := PLACEHOLDER.match(t, i)) is not None \
                    and (mode != "word" or ph.end() == n):
                self._unresolved(ph.group(), i, ph.end(), False)
                i = ph.end()
                continue
            if c == "." and mode != "word" and self.cur is None and ELIDED.match(t, i) is not None:
                self.cur = []  # a word of no pieces: it vanishes, and its SF001 stays with the command
                self._unresolved("...", i, i + 3, False, keep=False)  # `serve ...`: arguments left out
                i += 3
                continue
            if mode == "word":
                if c == "$":
                    i = self._dollar(i, False)
                else:
                    m = RUN_WORD.match(t, i)
                    j = m.end() if m else i + 1
                    self._lit(i, j)
                    i = j
                continue
            if c in " \t\r":
                self._end_word()
                i += 1
            elif c == "\n":
                self._end_word()
                if self.array is not None:  # newlines inside `args=( ... )` only separate elements
                    i += 1
                elif shell:
                    self._end_cmd("\n")
                    i = self._skip_heredocs(i + 1)
                else:
                    i += 1
            elif c == "\\":
                nxt = t[i + 1:i + 2]
                if nxt == "\n":
                    i += 2
                    self.cont = True
                elif nxt == "\r" and t[i + 2:i + 3] == "\n":
                    i += 3
                    self.cont = True
                elif nxt:
                    self._lit(i + 1, i + 2)
                    i += 2
                else:
                    i += 1
            elif c == "#" and shell and self.cur is None:
                j = t.find("\n", i)
                j = n if j < 0 else j
                # a comment breaks the continuation when it takes a continued line's place or ends in `\`;
                # a note after the last argument (`--x 1  # was 2`) just ends the command, as meant
                alone = not t[t.rfind("\n", 0, i) + 1:i].strip()
                if self.cont and self.words and (alone or t[i:j].rstrip("\r").endswith("\\")):
                    self.broken = self.src.span(i, j)
                i = j
            elif shell and c == "(" and self.array is None and self._array_start():
                i += 1
            elif shell and c == ")" and self.array is not None:
                self._array_end()
                i += 1
            elif shell and c in ";&|<>()":
                i = self._operator(i)
            elif c == "'" and self.compose:
                i = self._dquote(i + 1, "'")  # compose interpolates before splitting: quotes do not protect
            elif c == "'":
                j = t.find("'", i + 1)
                j = n if j < 0 else j
                self._lit(i + 1, j, True)
                i = j + 1
            elif c == '"':
                i = self._dquote(i + 1)
            elif c == "$":
                i = self._dollar(i, False)
            elif c == "`" and shell:
                i = self._backtick(i, False)
            else:
                m = run.match(t, i)
                j = m.end() if m else i + 1
                self._lit(i, j)
                i = j

    def _array_start(self) -> bool:
        """`NAME=(` or `NAME+=(` just read: the words up to `)` are the array's elements."""
        cur = self.cur
        if not cur or any(p.exp is not None or p.quoted for p in cur):
            return False
        m = ARRAY_START.fullmatch("".join(p.text for p in cur))
        if not m:
            return False
        self.cur = None
        self.array = (m.group(1), bool(m.group(2)), len(self.words))
        return True

    def _array_end(self) -> None:
        """`)`: the elements become the array's value (each word's token: where it is written), under
        the same rule as a plain assignment inside a condition (sources/words.py Vars.set_array)."""
        self._end_word()
        assert self.array is not None
        name, append, first = self.array
        self.array = None
        elems = [w.token() for w in self.words[first:]]
        taints = [list(w.unresolved) for w in self.words[first:]]
        del self.words[first:]
        if not self.assign or self.env is None or self.branches.dead(self.words, self.prev_sep):
            return
        self.env.set_array(name, elems, taints, append, self.depth > 0 or self.prev_sep in ("&&", "||"))

    def _operator(self, i: int) -> int:
        t = self.t
        c = t[i]
        two = t[i:i + 2]
        if c in "<>" or two == "&>":
            cur = self.cur
            if cur is not None and "".join(p.text for p in cur).isdigit() and i > 0 and not t[i - 1].isspace():
                self.cur = None  # `2>`: the fd number is not a word
                self.unres = []
            else:
                self._end_word()
            if t.startswith("<<<", i):
                i += 3
            elif two == "<<":
                dash = t[i + 2:i + 3] == "-"
                i += 3 if dash else 2
                self.heredoc_next = dash
            elif two in (">>", ">&", "<&", ">|", "<>", "&>"):
                i += 2
                if t[i:i + 1] == ">":
                    i += 1
            else:
                i += 1
            self.skip_next = True
            return i
        self._end_word()
        if two in ("&&", "||"):
            self._end_cmd(two)
            return i + 2
        if two == "|&":
            self._end_cmd("|")
            return i + 2
        self._end_cmd(c)
        return i + 1

    def _skip_heredocs(self, i: int) -> int:
        if not self.heredocs:
            return i
        t = self.t
        for delim, dash in self.heredocs:
            while i < len(t):
                j = t.find("\n", i)
                j = len(t) if j < 0 else j
                line = t[i:j].rstrip("\r")
                i = j + 1
                if (line.lstrip("\t") if dash else line) == delim:
                    break
        self.heredocs = []
        return i


def split_commands(src: Src, env: Vars | None = None, **kw: object) -> list[Command]:
    """Shell-tokenize `src` into simple commands (variables assigned on the way land in env)."""
    return Scanner(src, env if env is not None else Vars(), **kw).commands()  # type: ignore[arg-type]


def split_words(src: Src, env: Vars | None, **kw: object) -> list[Word]:
    """Split like shlex (quotes, whitespace), expanding variables: compose/systemd strings."""
    cmds = Scanner(src, env, mode="split", **kw).commands()  # type: ignore[arg-type]
    return [w for c in cmds for w in c.words]


def expand_word(src: Src, env: Vars | None, **kw: object) -> Word:
    """One list item: expansions only, no splitting or quote removal."""
    return Scanner(src, env, mode="word", **kw).word()  # type: ignore[arg-type]
