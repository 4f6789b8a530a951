"""Where and how a new setting goes into a file, in the file's own style: a new item of a k8s
`args:` block list (same indentation and quoting), a new element of a flow list / JSON exec form,
` --flag value` on a shell command line (continuation style kept), a new env entry shaped like
its siblings (k8s `- name:/value:`, compose map or list, Dockerfile ENV, shell assignment,
systemd Environment=, .env line), a new Modelfile PARAMETER line; and how a token is removed.

Every helper returns (start, end, text): replace [start, end) of the file text with text.
None means the place could not be recognised; the caller then shows the change for the user
to make by hand (display-only) instead of guessing.
"""

from __future__ import annotations

import re

from servefit.core import Span

Piece = tuple[int, int, str]
DQ = '"'
WINDOWS_SCRIPTS = (".bat", ".cmd", ".ps1")
PLAIN_SHELL = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")
YAML_AMBIGUOUS = re.compile(r"^(?:[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|0x[0-9a-fA-F]+|"
                            r"true|false|yes|no|on|off|y|n|null|~|)$", re.I)
YAML_SPECIAL_START = set("?:,[]{}#&*!|>'\"%@`")


def exact(text: str, span: Span | None, value: str) -> bool:
    return span is not None and 0 <= span.start <= span.end <= len(text) and text[span.start:span.end] == value


def line_bounds(text: str, pos: int) -> tuple[int, int, int]:
    """(line start, end of content, end including the newline) of the line holding pos."""
    a = text.rfind("\n", 0, pos) + 1
    nl = text.find("\n", pos)
    if nl < 0:
        return a, len(text), len(text)
    b = nl - 1 if nl > a and text[nl - 1] == "\r" else nl
    return a, b, nl + 1


def eol_of(text: str, pos: int) -> str:
    """The line ending the file uses at pos (CRLF files stay CRLF)."""
    nl = text.find("\n", pos)
    if nl < 0:
        nl = text.rfind("\n", 0, pos)
    if nl > 0 and text[nl - 1] == "\r":
        return "\r\n"
    return "\n"


def _after_line(text: str, pos: int) -> tuple[int, str]:
    """Insertion point just after pos's line, and a prefix when that line has no newline."""
    _, _, end = line_bounds(text, pos)
    if end == len(text) and not text.endswith("\n"):
        return end, eol_of(text, pos)
    return end, ""


def yaml_quote(value: str, quote: str) -> str:
    """A YAML scalar for value, quoted like its neighbours, and quoted anyway when a plain
    scalar would not be a string."""
    if not quote and (YAML_AMBIGUOUS.match(value) or value[:1] in YAML_SPECIAL_START or ": " in value
                      or " #" in value or value in ("-", "") or value.startswith("- ") or value != value.strip()):
        quote = '"'
    if quote == "'":
        return "'" + value.replace("'", "''") + "'"
    if quote == '"':
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return value


def quote_of(text: str, span: Span) -> str:
    if span.start > 0 and span.end < len(text) and text[span.start - 1] in "'\"" \
            and text[span.end] == text[span.start - 1]:
        return text[span.start - 1]
    return ""


def block_item(text: str, span: Span) -> tuple[str, str] | None:
    """For a token that is a whole item of a YAML block list: (prefix up to the value, quote)."""
    a, _, _ = line_bounds(text, span.start)
    q = quote_of(text, span)
    head = text[a:span.start - len(q)]
    if re.fullmatch(r"[ \t]*-[ \t]+", head):
        return head, q
    return None


def in_flow(text: str, span: Span) -> bool:
    q = quote_of(text, span)
    i = span.start - len(q) - 1
    while i >= 0 and text[i] in " \t\r\n":
        i -= 1
    j = span.end + len(q)
    while j < len(text) and text[j] in " \t\r\n":
        j += 1
    return i >= 0 and text[i] in "[," and j < len(text) and text[j] in ",]"


def _shell_quoted(text: str, anchor: Span, q: str, prev: Span | None) -> bool:
    """Whether the quotes around the anchor are a shell word's (`-ot ".ffn_.*_exps.=CPU"` at the end of
    the command) and not a YAML scalar's (`command: "--jinja"`): the word before it in the command ends
    just before the opening quote, only blanks (or a line break of the same command) between them."""
    if prev is None or prev.file != anchor.file or prev.end > anchor.start - len(q):
        return False
    gap = text[prev.end:anchor.start - len(q)]
    return re.fullmatch(r"['\"]?[ \t]*(?:\\?\r?\n[ \t]*)?", gap) is not None


def insert_words(text: str, anchor: Span, groups: list[list[str]],
                 quotes: tuple[str | None, str | None] = (None, None), spread: bool = False,
                 prev: Span | None = None) -> Piece | None:
    """Insert argv words (one group per setting) after the anchor token, the last word of the
    command. `quotes`: the quote characters the file's flags and values use (None: the anchor's);
    `prev`: the word before the anchor in the command (tells a shell-quoted last word)."""
    q = quote_of(text, anchor)
    words = [w for g in groups for w in g]

    def quoted(w: str, default: str) -> str:
        pick = quotes[0] if w.startswith("-") else quotes[1]
        return yaml_quote(w, default if pick is None else pick)

    item = block_item(text, anchor)
    if item is not None:
        head, _ = item
        at, pre = _after_line(text, anchor.end)
        eol = eol_of(text, anchor.start)
        return at, at, pre + "".join(f"{head}{quoted(w, q)}{eol}" for w in words)
    if in_flow(text, anchor):
        qq = q or '"'
        at = anchor.end + len(q)
        a, _, _ = line_bounds(text, anchor.start)
        j = at
        while j < len(text) and text[j] in " \t":
            j += 1
        multiline = j < len(text) and text[j] in "\r\n" or (j < len(text) and text[j] == "," and
                                                             text[j + 1:j + 2] in ("\r", "\n"))
        if multiline:
            indent = re.match(r"[ \t]*", text[a:]).group(0)  # type: ignore[union-attr]
            eol = eol_of(text, anchor.start)
            return at, at, "".join(f",{eol}{indent}{quoted(w, qq)}" for w in words)
        return at, at, "".join(f", {quoted(w, qq)}" for w in words)
    listed = _ps_array_item(text, anchor, q, words) if q and anchor.file.lower().endswith(".ps1") else None
    if listed is not None:
        return listed
    # a shell command line: the anchor is a bare word, or a whole shell-quoted word (the new
    # words go after its closing quote)
    if (q and not _shell_quoted(text, anchor, q, prev)) or not all(PLAIN_SHELL.match(w) for w in words):
        return None
    start, end = anchor.start - len(q), anchor.end + len(q)
    if start > 0 and text[start - 1] not in " \t\n=":
        return None
    a, _, _ = line_bounds(text, anchor.start)
    prev_a, prev_b, _ = line_bounds(text, a - 1) if a > 0 else (0, 0, 0)
    continued = a > 0 and text[prev_a:prev_b].rstrip(" \t").endswith("\\")
    _, line_end, _ = line_bounds(text, end)
    last_on_line = text[end:line_end].strip() in ("", "\\")
    # a command written over several lines (backslash continuations; llama-swap's `cmd: |`
    # joins its lines without them): one setting per line, as the file does, unless the anchor
    # has words after it on its line (the new ones join them there)
    if (continued or spread) and last_on_line:
        indent = re.match(r"[ \t]*", text[a:]).group(0)  # type: ignore[union-attr]
        eol = eol_of(text, anchor.start)
        cont = " \\" if continued else ""
        return end, end, "".join(f"{cont}{eol}{indent}{' '.join(g)}" for g in groups)
    return end, end, " " + " ".join(words)


def _ps_array_item(text: str, anchor: Span, q: str, words: list[str]) -> Piece | None:
    """The anchor is an element of a PowerShell array (`$extra = @("-ngl", "99")`, splatted into the
    command): the new words become more elements, quoted alike."""
    start = text.rfind("@(", 0, anchor.start)
    if start < 0 or re.search(r"[()]", text[start + 2:anchor.start]) or not all(PLAIN_SHELL.match(w) for w in words):
        return None
    end = anchor.end + len(q)
    if not re.match(r"[ \t,\r\n]*\)", text[end:]) and not re.match(r"[ \t]*,", text[end:]):
        return None
    return end, end, "".join(f", {q}{w}{q}" for w in words)


GAP = re.compile(r"['\"]?(?:[ \t\\\r\n]|\$?\{[\w.-]+\})*['\"]?")


def spans_lines(text: str, spans: list[Span]) -> bool:
    """Whether the words ending with the last of `spans` run over several lines of one text (only
    blanks, backslashes, newlines and `${NAME}` references between them), as in llama-swap's
    `cmd: |` (a `--port ${PORT}` line is a word of the command: its macro is not a written word)."""
    multi = False
    for prev, cur in zip(reversed(spans[:-1]), reversed(spans), strict=False):
        gap = text[prev.end:cur.start]
        if not GAP.fullmatch(gap):
            # the words before come from a macro written elsewhere (llama-swap `${llamacpp}` on a line of
            # its own, then `-m ...` on the next): the command still runs over lines when this word opens
            # a line right below the macro's
            return multi or _below_macro_line(text, cur.start)
        multi = multi or "\n" in gap
    return multi


MACRO_LINE = re.compile(r"[ \t]*\$\{[\w.-]+\}[ \t]*\r?\n[ \t]*")


def _below_macro_line(text: str, at: int) -> bool:
    """Whether the word at `at` starts a line whose line above holds only a `${NAME}` reference."""
    a = text.rfind("\n", 0, at)
    b = text.rfind("\n", 0, max(a, 0))
    return a >= 0 and MACRO_LINE.fullmatch(text[b + 1:at]) is not None


def remove_word(text: str, span: Span) -> Piece | None:
    """Delete one argv word with the syntax around it."""
    q = quote_of(text, span)
    s, e = span.start - len(q), span.end + len(q)
    if block_item(text, span) is not None:
        a, _, end = line_bounds(text, span.start)
        return a, end, ""
    if in_flow(text, span):
        i = s - 1
        while i >= 0 and text[i] in " \t\r\n":
            i -= 1
        if text[i] == ",":
            return i, e, ""
        j = e
        while j < len(text) and text[j] in " \t\r\n":
            j += 1
        return s, (j + 1 if j < len(text) and text[j] == "," else e), ""
    a, b, end = line_bounds(text, span.start)
    line = text[a:b]
    if line.strip() == text[s:e] or re.fullmatch(r"[ \t]*" + re.escape(text[s:e]) + r"[ \t]*\\", line):
        return a, end, ""
    i = s
    while i > 0 and text[i - 1] in " \t":
        i -= 1
    return i, e, ""


def remove_words(text: str, spans: list[Span]) -> list[Piece] | None:
    """Delete a flag and its value (argv words in order): each as remove_word does, except that a
    shell line holding nothing else (a continuation backslash aside) goes whole."""
    pieces = [remove_word(text, sp) for sp in spans]
    if any(p is None for p in pieces):
        return None
    a, b, end = line_bounds(text, spans[0].start)
    if all(a <= sp.start and sp.end <= b for sp in spans):
        rest = text[a:b]
        for sp in reversed(spans):
            q = quote_of(text, sp)
            rest = rest[:sp.start - len(q) - a] + rest[sp.end + len(q) - a:]
        if re.fullmatch(r"[ \t]*\\?[ \t]*", rest) and pieces[0] != (a, end, ""):
            before = text[:a].rstrip("\r\n")
            if "\\" not in rest and before.endswith("\\"):  # the command's last line: the one above ends it now
                return [(len(before[:-1].rstrip(" \t")), b, "")]
            return [(a, end, "")]
    first, last = pieces[0], pieces[-1]
    assert first is not None and last is not None
    if len(pieces) == 2 and last[0] < first[1]:  # the first items of a flow list: the comma after the value goes too
        j = e = spans[-1].end + len(quote_of(text, spans[-1]))
        while j < len(text) and text[j] in " \t\r\n":
            j += 1
        if j < len(text) and text[j] == ",":
            e = j + 1
            while e < len(text) and text[e] in " \t":
                e += 1
        return [(first[0], e, "")]
    return list(dict.fromkeys(p for p in pieces if p is not None))


def env_entry(text: str, sib: Span, name: str, value: str) -> Piece | None:
    """A new environment variable shaped like the sibling whose value sits at `sib`."""
    a, b, _ = line_bounds(text, sib.start)
    line = text[a:b].lstrip("\ufeff")  # a byte-order mark (PowerShell 5.1 writes one) opens the file, not the line
    q = quote_of(text, sib)
    eol = eol_of(text, sib.start)
    at, pre = _after_line(text, sib.start)
    m = re.search(r"(?:^|[ \t])(-e|--env)([ \t]+|=)(['\"]?)[A-Za-z_][A-Za-z0-9_]*=$", text[a:sib.start])
    if m and text.startswith(m.group(3), sib.end):  # `docker run -e X=1`: a new option after this one
        end = sib.end + len(m.group(3))
        return end, end, f" {m.group(1)}{m.group(2)}{m.group(3)}{name}={value}{m.group(3)}"
    m = re.match(r"([ \t]*)value:[ \t]*", line)
    if m:  # k8s env list: `- name: X` then `value: "Y"`
        pa, pb, _ = line_bounds(text, a - 1) if a > 0 else (0, 0, 0)
        n = re.match(r"([ \t]*-[ \t]+)name:", text[pa:pb])
        if n is None:
            return None
        return at, at, f"{pre}{n.group(1)}name: {name}{eol}{m.group(1)}value: {yaml_quote(value, q or DQ)}{eol}"
    m = re.match(r"([ \t]*-[ \t]+)\{([ \t]*)name:[ \t]*[^,}]+,([ \t]*)value:[ \t]*[^}]*\}[ \t]*$", line)
    if m:  # `- {name: X, value: "Y"}`: a new flow item on its own line, spaced the same way
        sp, mid = m.group(2), m.group(3)
        return at, at, f"{pre}{m.group(1)}{{{sp}name: {name},{mid}value: {yaml_quote(value, q or DQ)}{sp}}}{eol}"
    if re.match(r"[ \t]*-[ \t]+\{", line):
        return None  # another flow shape: not guessed
    m = re.match(r"([ \t]*-[ \t]+)(['\"]?)[A-Za-z_][A-Za-z0-9_]*=", line)
    if m:  # compose environment list
        return at, at, f"{pre}{m.group(1)}{m.group(2)}{name}={value}{m.group(2)}{eol}"
    m = re.match(r"([ \t]*)(['\"]?)[A-Za-z_][A-Za-z0-9_]*\2:[ \t]", line)
    if m and re.fullmatch(r"[ \t]*(['\"]?)[A-Za-z_][A-Za-z0-9_]*\1:[ \t]*['\"]?", text[a:sib.start].lstrip("\ufeff")):
        # compose environment map: the sibling is the key's own value, not a word further on (`entrypoint:
        # ["env", "LLM_NAME=llama3.1", ...]`, whose line is no variable's entry)
        return at, at, f"{pre}{m.group(1)}{name}: {yaml_quote(value, q or DQ)}{eol}"
    m = re.match(r"([ \t]*)(ENV[ \t]+)[A-Za-z_][A-Za-z0-9_]*([= ])", line, re.I)
    if m:  # Dockerfile
        return at, at, f"{pre}{m.group(1)}{m.group(2)}{name}{m.group(3)}{value}{eol}"
    m = re.match(r"([ \t]*)(Environment=)(['\"]?)", line)
    if m:  # systemd: `Environment="A=1"` quotes the whole assignment; a new one is quoted the same way
        return at, at, f"{pre}{m.group(1)}{m.group(2)}{m.group(3)}{name}={value}{m.group(3)}{eol}"
    m = re.match(r"([ \t]*)(set[ \t]+)(\"?)[A-Za-z_][A-Za-z0-9_]*=", line, re.I)
    if m:  # batch file: `set NAME=value`, or `set "NAME=value"` quoted the same way
        return at, at, f"{pre}{m.group(1)}{m.group(2)}{m.group(3)}{name}={value}{m.group(3)}{eol}"
    m = re.match(r"([ \t]*)(\$env:)[A-Za-z_][A-Za-z0-9_]*([ \t]*=[ \t]*)(['\"]?)", line, re.I)
    if m:  # PowerShell: `$env:NAME = "value"`
        return at, at, f"{pre}{m.group(1)}{m.group(2)}{name}{m.group(3)}{m.group(4)}{value}{m.group(4)}{eol}"
    m = re.match(r"([ \t]*)(export[ \t]+)?[A-Za-z_][A-Za-z0-9_]*=", line)
    if m:  # shell assignment or .env line
        rest = line[m.end():]
        if re.search(r"[ \t]\S", rest.strip().strip("'\"")) and not rest.strip().startswith(("'", '"')):
            return None  # `VAR=1 vllm serve ...`: a prefix; handled by prefix_env
        return at, at, f"{pre}{m.group(1)}{m.group(2) or ''}{name}={value}{eol}"
    return None


def prefix_env(text: str, command: Span, name: str, value: str) -> Piece | None:
    """`NAME=value ` in front of a shell command word (not in a batch or PowerShell script, where it
    would be read as the program's name)."""
    if not PLAIN_SHELL.match(value) or quote_of(text, command) or command.file.lower().endswith(WINDOWS_SCRIPTS):
        return None
    if command.start > 0 and text[command.start - 1] not in " \t\n":
        return None
    return command.start, command.start, f"{name}={value} "


def parameter_line(text: str, after: Span, name: str, value: str) -> Piece:
    """A Modelfile `PARAMETER name value` line after the given instruction's line."""
    at, pre = _after_line(text, after.start)
    return at, at, f"{pre}PARAMETER {name} {value}{eol_of(text, after.start)}"
