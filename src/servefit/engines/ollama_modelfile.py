"""The Ollama Modelfile grammar, with a span for every value.

Follows parser/parser.go::ParseFile (a rune state machine): an instruction is letters only and
case-insensitive; `#` starts a comment only where an instruction could start; a value runs to the
end of the line and is trimmed, unless it opens a `"` or `\"\"\"` quote, which may span lines until
it closes; `PARAMETER <name> <value>` with the name in [A-Za-z0-9_] (case-sensitive); `MESSAGE
<role> <text>` with role system|user|assistant; at least one FROM. PARAMETER values are then
checked as `ollama create` does (api/types.go::FormatParams): unknown name -> "unknown parameter 'X'",
bad int/float/bool -> "invalid int value [X]"; deprecated names warn and are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from servefit import data
from servefit.core import Finding, LaunchSite, ModelDefinition, Span, Token
from servefit.rules.catalog import finding
from servefit.rules.registry import rule

INSTRUCTIONS = ("from", "license", "template", "system", "adapter", "draft", "renderer", "parser", "parameter",
                "message", "requires")
INVALID_COMMAND = ('command must be one of "from", "license", "template", "system", "adapter", "draft", '
                   '"renderer", "parser", "parameter", "message", or "requires"')
GO_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
GO_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


@rule("OLLM002")
def unknown_parameter(message: str, **where: Any) -> Finding:
    """A PARAMETER (or API option) Ollama does not know."""
    return finding("OLLM002", message, **where)


@rule("OLLM003")
def invalid_parameter(message: str, **where: Any) -> Finding:
    """A PARAMETER value of the wrong type."""
    return finding("OLLM003", message, **where)


@dataclass
class Instruction:
    """One Modelfile instruction with the spans of its keyword, parameter name and value, so findings and
    tune's edits point at what is written."""

    name: str  # lower case; "from" for FROM
    keyword: Token  # the instruction word as written
    value: Token  # the value (unquoted text, span of the value as written)
    param: Token | None = None  # PARAMETER name / MESSAGE role
    line: int = 0


@dataclass
class ModelfileDoc(ModelDefinition):
    """A parsed Modelfile: its instructions in order, and the findings `ollama create` would report on it."""

    file: str
    instructions: list[Instruction] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def from_ref(self) -> Token | None:
        for ins in self.instructions:
            if ins.name == "from":
                return ins.value
        return None

    @property
    def parameters(self) -> dict[str, list[Token]]:
        out: dict[str, list[Token]] = {}
        for ins in self.instructions:
            if ins.name == "parameter" and ins.param is not None:
                out.setdefault(ins.param.text, []).append(ins.value)
        return out

    def parameter_names(self) -> dict[str, Token]:
        return {ins.param.text: ins.param for ins in self.instructions if ins.name == "parameter" and ins.param}

    def values(self) -> dict[str, str]:
        """PARAMETER name -> last value as a string (lists joined by newlines)."""
        return {k: (v[-1].text if len(v) == 1 else "\n".join(t.text for t in v)) for k, v in self.parameters.items()}


def modelfile_of(site: LaunchSite) -> ModelfileDoc | None:
    """The Modelfile linked to a server (sources/modelfile.py, engines/ollama_link.py), if any."""
    doc = site.inputs.definition
    return doc if isinstance(doc, ModelfileDoc) else None


class _Text:
    def __init__(self, text: str, file: str) -> None:
        self.text, self.file = text, file
        self.line_starts = [0]
        for i, ch in enumerate(text):
            if ch == "\n":
                self.line_starts.append(i + 1)

    def pos(self, off: int) -> tuple[int, int]:
        lo, hi = 0, len(self.line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.line_starts[mid] <= off:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, off - self.line_starts[lo] + 1

    def span(self, start: int, end: int) -> Span:
        line, col = self.pos(start)
        eline, ecol = self.pos(end)
        return Span(self.file, line, col, eline, ecol, start, end)

    def token(self, start: int, end: int, text: str | None = None) -> Token:
        return Token(self.text[start:end] if text is None else text, self.span(start, end))


def _unquote(s: str) -> tuple[str, bool]:
    if s.startswith('"""'):
        return (s[3:-3], True) if len(s) >= 6 and s.endswith('"""') else ("", False)
    if s.startswith('"'):
        return (s[1:-1], True) if len(s) >= 2 and s.endswith('"') else ("", False)
    return s, True


def _read_value(t: _Text, i: int) -> tuple[int, int, int]:
    """(value start, value end, next index) from just after the separating space: to the end of the
    line, or across lines while a quote is open (parseRuneForState + unquote)."""
    src, n = t.text, len(t.text)
    while i < n and src[i] in " \t":
        i += 1
    start = i
    while True:
        j = src.find("\n", i)
        end = n if j < 0 else j
        raw = src[start:end].rstrip(" \t\r")
        _, ok = _unquote(raw)
        if ok or j < 0:
            return start, start + len(raw), end
        i = j + 1


@rule("OLLM001")
def parse_modelfile(text: str, file: str) -> ModelfileDoc:
    t = _Text(text.lstrip("\ufeff") if text.startswith("\ufeff") else text, file)
    doc = ModelfileDoc(file=file)
    src, n, i = t.text, len(t.text), 0
    while i < n:
        ch = src[i]
        if ch in " \t\r\n":
            i += 1
            continue
        if ch == "#":
            j = src.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        k = i
        while k < n and src[k].isalpha():
            k += 1
        word = src[i:k]
        kw = t.token(i, k)
        if not word or k >= n or src[k] not in " \t" or word.lower() not in INSTRUCTIONS:
            doc.findings.append(finding("OLLM001", f"(line {t.pos(i)[0]}): {INVALID_COMMAND}", span=kw.span or
                                        t.span(i, min(n, i + 1))))
            j = src.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        name = word.lower()
        param: Token | None = None
        p = k
        if name in ("parameter", "message"):
            while p < n and src[p] in " \t":
                p += 1
            q = p
            while q < n and (src[q].isalnum() or src[q] == "_" if name == "parameter" else src[q].isalpha()):
                q += 1
            param = t.token(p, q)
            if q >= n or src[q] not in " \t" or p == q:
                doc.findings.append(finding("OLLM001", f"(line {t.pos(p)[0]}): unexpected EOF in {word} "
                                            "(expected a name and a value)", span=param.span))
                j = src.find("\n", q)
                i = n if j < 0 else j + 1
                continue
            if name == "message" and param.text not in ("system", "user", "assistant"):
                doc.findings.append(finding("OLLM001", f"(line {t.pos(p)[0]}): message role must be one of "
                                            '"system", "user", or "assistant"', span=param.span))
            p = q
        vs, ve, nxt = _read_value(t, p)
        raw = src[vs:ve]
        val, ok = _unquote(raw)
        if not ok:
            doc.findings.append(finding("OLLM001", f"unexpected EOF: unterminated quote in {word}",
                                        span=t.span(vs, ve)))
        doc.instructions.append(Instruction(name=name, keyword=kw, value=t.token(vs, ve, val), param=param,
                                            line=t.pos(i)[0]))
        i = nxt
    if not any(ins.name == "from" for ins in doc.instructions) and not any(f.code == "OLLM001" for f in doc.findings):
        doc.findings.append(finding("OLLM001", "no FROM line", span=t.span(0, 0)))
    doc.findings.extend(check_parameters(doc, None))
    return doc


def _vkey(v: str | None) -> tuple[int, ...]:
    from servefit.engines.ollama.versions import vtuple

    return vtuple(v)


def param_table() -> dict[str, dict[str, Any]]:
    return dict(data.load("engines/ollama.yaml")["parameters"])


@rule("OLLM004")
def check_parameters(doc: ModelfileDoc, version: str | None) -> list[Finding]:
    """`ollama create`'s checks on PARAMETER names and values for `version` (None: the newest)."""
    table = param_table()
    out: list[Finding] = []
    v = _vkey(version)
    for ins in doc.instructions:
        if ins.name != "parameter" or ins.param is None:
            continue
        name = ins.param.text
        spec = table.get(name)
        known = spec is not None and (not spec.get("since") or v >= _vkey(spec["since"])) and \
            (not spec.get("until") or v <= _vkey(spec["until"]))
        dep = spec is not None and spec.get("deprecated_since") and v >= _vkey(spec["deprecated_since"])
        if dep:
            out.append(finding("OLLM004", f"warning: parameter {name} is deprecated", span=ins.param.span,
                               setting=name))
            continue
        if not known:
            out.append(unknown_parameter(f"unknown parameter '{name}'", span=ins.param.span, setting=name))
            continue
        bad = value_problem(str(spec.get("type") if spec else "string"), ins.value.text)  # type: ignore[union-attr]
        if bad:
            out.append(invalid_parameter(bad, span=ins.value.span, setting=name))
    return out


def value_problem(typ: str, text: str) -> str | None:
    """strconv.ParseInt / ParseFloat / ParseBool as FormatParams applies them."""
    if typ == "int":
        try:
            int(text.strip() if text.strip() == text else "x", 10)
            if "_" in text:
                raise ValueError
        except ValueError:
            return f"invalid int value [{text}]"
    elif typ == "float":
        try:
            if "_" in text:
                raise ValueError
            float(text)
        except ValueError:
            return f"invalid float value [{text}]"
    elif typ == "bool" and text not in GO_TRUE | GO_FALSE:
        return f"invalid bool value [{text}]"
    return None
