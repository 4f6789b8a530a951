"""The arguments PowerShell passes a program (sources/powershell.py): a word, an array variable or
a splat `@name` (one argument per element), a list written `"a", "b"` / `@("a" "b")` with `+`
joining strings, and `Start-Process`'s `-FilePath` / `-ArgumentList`, whose elements Start-Process
joins with spaces for the program to split again by the C runtime's rules (sources/winsplit.py).
`Join-Path` and `( )` groups (subexpressions) are read here too. A module of its own to keep the statement
reader short."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.sources.shell import Piece, Word
from servefit.sources.winsplit import split_windows

if TYPE_CHECKING:
    from servefit.sources.powershell import Scanner, Tok

START_FLAGS = {"filepath": "file", "path": "file", "pspath": "file", "argumentlist": "args", "args": "args"}
START_VALUE = {"workingdirectory", "windowstyle", "redirectstandardoutput", "redirectstandarderror",
               "redirectstandardinput", "verb", "credential", "environment"}


def subexpressions(toks: list[Tok], sc: Scanner) -> tuple[list[Tok], list[list[Tok]]]:
    """The statement with each `( ... )` group as one token whose value is computed when the script runs
    (`Assert "x" ((Get-ExeName 'llama-server' -Os windows) -eq 'y')`: one argument, not the words inside),
    and the groups' own statements, which PowerShell runs to compute them. `@( )` arrays keep their elements."""
    from servefit.sources.powershell import Tok

    out: list[Tok] = []
    groups: list[list[Tok]] = []
    k = 0
    while k < len(toks):
        tk = toks[k]
        if not (tk.kind == "op" and tk.text == "("):
            out.append(tk)
            k += 1
            continue
        depth, j = 0, k
        while j < len(toks):
            depth += (toks[j].kind == "op" and toks[j].text in ("(", "@(")) - (toks[j].kind == "op" and toks[j].text == ")")
            if depth == 0:
                break
            j += 1
        inner = toks[k + 1:j]
        if inner:
            groups.append(inner)
        end = toks[j].start + 1 if j < len(toks) else len(sc.t)
        text = sc.t[tk.start:end]
        span = sc.src.span(tk.start, end)
        word = Word([Piece(text, sc.src.off(tk.start), sc.src.end_off(end))], sc.src.li, [(f"${text}", span)])
        out.append(Tok("word", text, tk.start, word, "", True))
        k = j + 1
    return out, groups


def args_of(tk: Tok, sc: Scanner) -> list[Word]:
    """The arguments one token gives a program: an array variable or a splat, one per element."""
    v = sc.vs.own.get(tk.name.lower().split(":")[-1]) if tk.kind in ("splat", "var") else None
    if tk.kind == "splat" or isinstance(v, list):
        if isinstance(v, list):
            return list(v)
        if v is not None:
            return [v]
        return [Word([Piece(tk.text, sc.src.off(tk.start), sc.src.end_off(tk.start + len(tk.text)))], sc.src.li,
                     [(tk.text, sc.src.span(tk.start, tk.start + len(tk.text)))])]
    return [tk.word] if tk.word is not None else []


def elements(toks: list[Tok], sc: Scanner) -> list[Word]:
    """The words of `"a", "b"` / `@("a" "b")` / `$array` (operators left out); `"-c " + $ctx` is one string."""
    out: list[Word] = []
    join = False
    for tk in toks:
        if tk.kind == "word" and tk.text == "+" and not tk.quoted:
            join = bool(out)
            continue
        for w in args_of(tk, sc) if tk.kind != "op" else []:
            if join:
                last = out.pop()
                w = Word(last.pieces + w.pieces, w.li, last.unresolved + w.unresolved)
            out.append(w)
            join = False
    return out


def start_process(toks: list[Tok], sc: Scanner) -> list[Word]:
    """`Start-Process [-FilePath] PROG [-ArgumentList] ARGS [-NoNewWindow -Wait ...]`: PROG and its arguments,
    the list's elements joined by spaces and split again by the C runtime's rules."""
    prog: list[Word] = []
    args: list[Tok] = []
    slot = ""
    positional = ["file", "args"]
    k = 0
    while k < len(toks):
        tk = toks[k]
        low = tk.text.lower().lstrip("-") if tk.kind == "word" and not tk.quoted and tk.text.startswith("-") else ""
        full = next((v for f, v in START_FLAGS.items() if low and f.startswith(low)), None)
        if full is not None:
            slot = full
            positional = [p for p in positional if p != full]
        elif low and any(f.startswith(low) for f in START_VALUE):
            k += 2
            slot = ""
            continue
        elif low:
            slot = ""
        elif slot == "args" or (not slot and positional and positional[0] == "args"):
            depth = 0  # the list runs on through `,` and `+`, and to the `)` of `@(` / `(`
            while k < len(toks):
                cur = toks[k]
                depth += (cur.text in ("(", "@(")) - (cur.text == ")") if cur.kind == "op" else 0
                args.append(cur)
                k += 1
                nxt = toks[k].text if k < len(toks) else ""
                if depth <= 0 and nxt not in (",", "+", ")") and cur.text not in (",", "+", "(", "@("):
                    break
            slot = ""
            positional = [p for p in positional if p != "args"]
            continue
        elif slot == "file" or (not slot and positional and positional[0] == "file"):
            prog = args_of(tk, sc)
            slot = ""
            positional = [p for p in positional if p != "file"]
        k += 1
    out = list(prog)
    for w in elements(args, sc):
        out.extend(split_windows(w.to_src()) if any(c in w.text for c in ' \t"') else [w])
    return out


def join_path(rhs: list[Tok], sc: Scanner) -> Word | None:
    """`Join-Path A B [C...]` (positional, or -Path / -ChildPath / -AdditionalChildPath): A\\B as one word, its
    pieces where each part is written; None for any other form (a parenthesised command, -Resolve, a pipeline)."""
    parts: list[Word] = []
    for tk in rhs[1:]:
        if tk.kind == "op" or (tk.kind == "word" and not tk.quoted and tk.text.startswith("-")
                               and tk.text.lower() not in ("-path", "-childpath", "-additionalchildpath")):
            return None
        if not (tk.kind == "word" and not tk.quoted and tk.text.startswith("-")):
            parts.extend(args_of(tk, sc))
    if len(parts) < 2:
        return None
    pieces: list[Piece] = []
    for k, w in enumerate(parts):
        if k:
            end = pieces[-1].end if pieces else 0
            pieces.append(Piece("\\", end, end))
        pieces.extend(w.pieces)
    return Word(pieces, sc.src.li, [u for w in parts for u in w.unresolved])
