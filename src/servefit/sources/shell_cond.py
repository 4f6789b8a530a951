"""Which `if` / `elif` / `else` branch (and which `test && ...`) a script takes, where the test is a
string test on values servefit knows: `if [[ -n "$GPU_UTIL" ]]; then ARGS+=(--gpu-memory-utilization
"$GPU_UTIL"); fi` with `GPU_UTIL="${GPU_UTIL:-}"` adds nothing, as bash runs it. Any other test is
unknown, and its branches are read as before (see shell.py: assignments there may not run)."""

from __future__ import annotations

from servefit.sources.words import Word

_BRACKETS = {"[": "]", "[[": "]]"}


def string_test(words: list[Word]) -> bool | None:
    """The value of `[ -n W ]`, `[[ -z W ]]`, `test -n W`, `[[ W ]]`, `[[ A == B ]]` / `[ A != B ]` (and `!`
    before them) when the values are known; None for any other command or a value servefit does not know."""
    texts = [w.text for w in words]
    negate = False
    while texts[:1] == ["!"]:
        negate, texts, words = not negate, texts[1:], words[1:]
    if texts[:1] == ["test"]:
        body = words[1:]
    elif texts and texts[0] in _BRACKETS and texts[-1] == _BRACKETS[texts[0]]:
        body = words[1:-1]
    else:
        return None
    if len(body) == 3 and body[1].text in ("=", "==", "!=") and not body[1].unresolved:
        # `[[ "$SECURE" == "1" ]]`, `[ "$A" = x ]`: a string comparison of two known values (an unquoted glob on
        # the right is a pattern in [[ ]]: not compared here)
        if any(_unknown(w) for w in (body[0], body[2])):
            return None
        equal = (body[0].text == body[2].text) != (body[1].text == "!=")
        return equal != negate
    if len(body) == 2 and body[0].text in ("-n", "-z"):
        op, w = body[0].text, body[1]
    elif len(body) == 1 and body[0].text not in ("-n", "-z"):
        op, w = "-n", body[0]
    else:
        return None
    if _unknown(w):
        return None
    value = bool(w.text) if op == "-n" else not w.text
    return value != negate


def _unknown(w: Word) -> bool:
    """A value servefit does not know, or an unquoted glob (a pattern, not a string)."""
    return bool(w.unresolved) or any(p.exp is None and p.text and not p.quoted and any(c in p.text for c in "*?[")
                                     for p in w.pieces)


class Branches:
    """The branch state of each open `if` a scanner is inside: whether the branch being read is
    known not to run, and whether an earlier branch is known to run (so later ones do not)."""

    def __init__(self) -> None:
        self.levels: list[tuple[bool, bool]] = []  # per open block: (this branch dead, an earlier one taken)
        self.last_test: bool | None = None  # the previous command's value, for `test && ...`

    def opened(self, first: str, words: list[Word], sep: str) -> None:
        """A command starting with an opener (`if`, `while`, `for`, `case`...) ended (`sep` after it:
        `if [ -n "$A" ] || [ -n "$B" ]` is not known from its first test)."""
        r = string_test(words[1:]) if first == "if" and sep not in ("||", "&&", "|") else None
        self.levels.append((r is False, r is True))
        self.last_test = None

    def closed(self) -> None:
        if self.levels:
            self.levels.pop()
        self.last_test = None

    def other(self, first: str, words: list[Word], sep: str) -> None:
        """Any other command ended: `elif TEST` / `else` move to the block's next branch."""
        if self.levels and first in ("elif", "else"):
            self.levels[-1] = self._next(first, words, sep)
        self.last_test = string_test(words)

    def _next(self, first: str, words: list[Word], sep: str = "") -> tuple[bool, bool]:
        _, taken = self.levels[-1]
        if taken or first == "else":
            return taken, taken
        r = string_test(words[1:]) if sep not in ("||", "&&", "|") else None
        return r is False, r is True

    def dead(self, lead: list[Word], prev_sep: str) -> bool:
        """Whether the command being read (its words so far: `lead`) is known not to run."""
        levels = list(self.levels)
        if levels and lead and lead[0].text == "else":
            levels[-1] = self._next("else", lead)
        if any(d for d, _ in levels):
            return True
        return (prev_sep == "&&" and self.last_test is False) or (prev_sep == "||" and self.last_test is True)
