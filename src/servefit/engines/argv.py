"""Read an engine's command line and environment against its option table (engines/options.py).

The parser follows argparse the way the engines use it: `--flag value`, `--flag=value`,
`--no-flag` for negatable booleans, short aliases, unique-prefix abbreviations, and (where the
table says so) `_` and `-` being the same in long names (vLLM's FlexibleArgumentParser
normalises them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from servefit.core import Finding, Span, Token
from servefit.engines.options import Option, OptionTable, version_in
from servefit.rules.catalog import finding
from servefit.units import human_int


class ValueProblem(ValueError):
    pass


# C++'s std::stoi / std::stof read the number at the start of the text and ignore the rest
# (llama.cpp common/arg.cpp: `opt.handler_int(params, std::stoi(val))`, floats through std::stof):
# "0.0" is 0, "8k" is 8; text that does not start with a number is an error.
_CPP_INT = re.compile(r"\s*[+-]?\d+")
_CPP_FLOAT = re.compile(r"\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)", re.I)


def _cpp_number(t: str, text: str) -> int | float:
    m = (_CPP_INT if t == "int" else _CPP_FLOAT).match(text)
    if m is None:
        raise ValueError(text)
    return int(m.group()) if t == "int" else float(m.group())


def convert(opt: Option, text: str, numbers: str = "python", version: str | None = None) -> Any:
    """Turn one value as written into what the engine will hold, or raise ValueProblem with
    the engine's own complaint. `numbers="cpp"`: ints and floats are read the way C++'s
    std::stoi / std::stof read them (a numeric prefix)."""
    t = opt.type
    try:
        if numbers == "cpp" and t in ("int", "float"):
            return _cpp_number(t, text)
        if t == "int":
            return int(text)
        if t == "float":
            value = float(text)
            if value != value or value in (float("inf"), float("-inf")):  # argparse takes them; no engine can
                raise ValueError(text)
            return value
        if t == "human_int":
            return human_int(text)
        if t == "human_int_or_auto":
            if text.strip().lower() in ("auto", "-1"):
                return "auto"
            return human_int(text)
        if t == "bool":
            low = text.strip().lower()
            if low in ("1", "true", "yes", "on", "y"):
                return True
            if low in ("0", "false", "no", "off", "n"):
                return False
            raise ValueError(text)
        if t == "json":
            import json  # only for a json-typed option: most command lines have none

            if opt.kvs_until and version and _older(version, opt.kvs_until) and not re.match("^{.*}$", text):
                return _kvs(text)
            return json.loads(text)
    except ValueError as exc:
        raise ValueProblem(f"invalid {t.replace('_', ' ')} value: {text!r}") from exc
    if opt.choices and text not in opt.choices:
        raise ValueProblem(f"invalid choice: {text!r} (choose from {', '.join(opt.choices)})")
    return text


def _older(version: str, than: str) -> bool:
    from servefit.engines.options import _vkey

    return _vkey(version) < _vkey(than)


def _kvs(text: str) -> dict[str, int]:
    """`image=16,video=2` as vLLM read a dict option before 0.10 (vllm/engine/arg_utils.py
    parse_type: a value not written as `{...}` went to nullable_kvs, which wants an int per key)."""
    out: dict[str, int] = {}
    for item in text.split(","):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(text)
        out[key.strip()] = int(value)
    return out


@dataclass
class Parsed:
    """An engine command line read against the engine's option table: each setting's value and where it is
    written, the positionals, the flags the engine would reject, and the findings."""

    values: dict[str, Any] = field(default_factory=dict)
    spans: dict[str, Span] = field(default_factory=dict)
    flag_spans: dict[str, Span] = field(default_factory=dict)  # span of the flag word itself
    positionals: list[Token] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    unknown: list[Token] = field(default_factory=list)
    used: dict[str, Span | None] = field(default_factory=dict)  # each known flag as the table spells it -> where


def _is_flag(text: str) -> bool:
    if not text.startswith("-") or text == "-" or text == "--":
        return False
    try:
        float(text)
        return False
    except ValueError:
        return True


def _span_after(tok: Token, offset: int) -> Span | None:
    """The part of a `--flag=value` token after `offset` characters (the values line a chart's
    `--flag={{ .Values.x }}` took it from, where the render traced it)."""
    if tok.value_span is not None and offset == tok.text.find("=") + 1:
        return tok.value_span
    s = tok.span
    if s is None:
        return None
    if s.line != s.end_line or s.start < 0:
        return s
    return Span(s.file, s.line, s.col + offset, s.end_line, s.end_col, s.start + offset, s.end)


def parse_argv(table: OptionTable, args: list[Token], version: str | None = None,
               site: str = "", unpinned: str = "") -> Parsed:
    """Parse engine arguments (after the command words) against `table`. `unpinned`: why the
    newest release is modelled when no version was given, for the findings that depend on it."""
    out = Parsed()
    i = 0
    n = len(args)
    while i < n:
        tok = args[i]
        text = tok.text
        if text == "--":
            out.positionals.extend(args[i + 1:])
            break
        if not _is_flag(text):
            out.positionals.append(tok)
            i += 1
            continue
        flag, eq, inline = text.partition("=")
        opt, negated, canon = table.resolve(flag, version)
        dotted = table.dotted(flag, version) if opt is None else None
        if dotted is not None:
            i = _dotted_value(out, dotted, tok, flag, eq, inline, args, i, table, site)
            continue
        if opt is None and not eq and not flag.startswith("--") and len(flag) > 2 and table.glued_short_values:
            # -O3 / -tp4 style: a short flag glued to its value
            for k in sorted(table.by_flag, key=len, reverse=True):
                if not k.startswith("--") and flag.startswith(k) and len(k) >= 2:
                    opt, negated, inline, eq = table.by_flag[k], False, flag[len(k):], "="
                    flag = canon = k
                    break
        if opt is None:
            out.unknown.append(tok)
            hint = table.suggest(flag)
            msg = f"unrecognized argument: {flag}"
            if hint:
                msg += f" (did you mean {hint}?)"
            if table.unknown_code:
                out.findings.append(finding(table.unknown_code, msg, span=tok.span, site=site))
            i += 1
            # skip its value if the next word is not a flag: the engine would fail anyway
            if not eq and i < n and not _is_flag(args[i].text):
                i += 1
            continue
        out.used.setdefault(canon, tok.span)
        problem = table.release_problem(canon, version, unpinned) if canon in table.history else None
        if problem is not None and problem[0]:
            out.findings.append(finding(problem[0], problem[1], span=tok.span, site=site))
        elif canon not in table.history and not version_in(version, opt.since, opt.until) and table.unknown_code:
            when = f"added in {opt.since}" if opt.since and not version_in(version, opt.since, None) \
                else f"removed after {opt.until}"
            out.findings.append(finding(
                table.unknown_code, f"unrecognized argument: {flag} ({when}; {table.release_shown(version, unpinned)})",
                span=tok.span, site=site))
        if tok.span is not None:
            out.flag_spans[opt.name] = tok.span
        if negated:
            out.values[opt.name] = False
            out.spans[opt.name] = tok.span  # type: ignore[assignment]
            i += 1
            continue
        if not opt.takes_value:
            if eq:
                vtok = Token(inline, _span_after(tok, len(flag) + 1))
                try:
                    out.values[opt.name] = convert(opt, inline, table.numbers, version)
                except ValueProblem as exc:
                    out.findings.append(_bad_value(table, flag, str(exc), vtok, site))
            else:
                out.values[opt.name] = True
            if tok.span is not None:
                out.spans[opt.name] = tok.span
            i += 1
            continue
        # options with values
        values: list[Token] = []
        if eq:
            values.append(Token(inline, _span_after(tok, len(flag) + 1)))
            i += 1
        else:
            i += 1
            if opt.nargs in ("*", "+"):
                while i < n and not _is_flag(args[i].text):
                    values.append(args[i])
                    i += 1
            elif i < n and (not _is_flag(args[i].text) or opt.type in ("int", "float", "human_int_or_auto")):
                values.append(args[i])
                i += 1
        if not values:
            if opt.nargs in ("?", "*"):
                out.values[opt.name] = True if opt.type == "bool" else []
                continue
            out.findings.append(_bad_value(table, flag, "expected one argument", tok, site))
            continue
        if opt.nargs in ("*", "+") or opt.type == "list":
            out.values[opt.name] = [v.text for v in values]
            sp = values[0].span
        else:
            v = values[0]
            sp = v.span
            try:
                out.values[opt.name] = convert(opt, v.text, table.numbers, version)
            except ValueProblem as exc:
                out.findings.append(_bad_value(table, flag, str(exc), v, site))
                continue
        if sp is not None:
            out.spans[opt.name] = sp
    return out


def _dotted_value(out: Parsed, dotted: tuple[Option, str, str], tok: Token, flag: str, eq: str, inline: str,
                  args: list[Token], i: int, table: OptionTable, site: str) -> int:
    """`--compilation-config.cudagraph_mode NONE`: one key of a JSON option, merged into the value
    the option holds (vllm FlexibleArgumentParser: each value is read as JSON where it parses, else
    kept as a string; `key+` appends to a list). Returns the index of the next word."""
    import json

    opt, canon, path = dotted
    out.used.setdefault(canon, tok.span)
    if eq:
        vtok = Token(inline, _span_after(tok, len(flag) + 1))
        i += 1
    elif i + 1 < len(args) and not _is_flag(args[i + 1].text):
        vtok, i = args[i + 1], i + 2
    else:
        out.findings.append(_bad_value(table, flag, "expected one argument", tok, site))
        return i + 1
    keys = path.split(".")
    append = keys[-1].endswith("+")
    keys[-1] = keys[-1].rstrip("+")
    items = vtok.text.split(",") if append else [vtok.text]
    parsed: list[Any] = []
    for text in items:
        try:
            parsed.append(json.loads(text))
        except ValueError:
            parsed.append(text)
    held = out.values.get(opt.name)
    node = held if isinstance(held, dict) else {}
    out.values[opt.name] = node
    for k in keys[:-1]:
        nxt = node.get(k)
        node[k] = nxt if isinstance(nxt, dict) else {}
        node = node[k]
    if append:
        have = node.get(keys[-1])
        node[keys[-1]] = (have if isinstance(have, list) else []) + parsed
    else:
        node[keys[-1]] = parsed[0]
    if tok.span is not None:
        out.flag_spans[opt.name] = tok.span
    if vtok.span is not None:
        out.spans[opt.name] = vtok.span
    return i


def _bad_value(table: OptionTable, flag: str, why: str, tok: Token, site: str) -> Finding:
    return finding(table.invalid_code, f"argument {flag}: {why}", span=tok.span, site=site)


def parse_env(table: OptionTable, env: dict[str, Token], parsed: Parsed, site: str = "",
              version: str | None = None) -> None:
    """Fill options from their environment twins (TGI, llama.cpp LLAMA_ARG_*); flags win. A twin
    the release does not read is left out (the engine ignores it) and, where the table has a code
    for it, reported."""
    for var, tok in env.items():
        opt = table.by_env.get(var)
        if opt is None or opt.name in parsed.values:
            continue
        h = table.env_history.get(var)
        if h is not None and version is not None and not h.present(version):
            if table.unread_env_code:
                parsed.findings.append(finding(
                    table.unread_env_code, f"{var} has no effect: this release does not read it "
                    f"({h.why_absent(version)}; this is {version})", span=tok.span, site=site, setting=opt.name))
            continue
        try:
            parsed.values[opt.name] = convert(opt, tok.text, table.numbers) if opt.type != "list" else tok.text.split(",")
        except ValueProblem as exc:
            parsed.findings.append(finding(table.invalid_code, f"{var}: {exc}", span=tok.span, site=site))
            continue
        if tok.span is not None:
            parsed.spans[opt.name] = tok.span
