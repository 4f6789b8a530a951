"""Engine option tables (data/engines/<engine>.yaml) and the argv parser that reads them.

One table per engine serves parsing, did-you-mean, docs and tune's knobs. The parser follows
argparse the way the engines use it: `--flag value`, `--flag=value`, `--no-flag` for negatable
booleans, short aliases, unique-prefix abbreviations, and (where the table says so) `_` and `-`
being the same in long names (vLLM's FlexibleArgumentParser normalises them).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any

from servefit import data
from servefit.core import Finding, Span, Token
from servefit.rules.catalog import finding
from servefit.units import human_int


@dataclass(frozen=True)
class Option:
    name: str
    flags: tuple[str, ...]
    type: str = "str"  # str|int|float|bool|human_int|human_int_or_auto|json|list|choice|size
    env: tuple[str, ...] = ()
    default: Any = None
    choices: tuple[str, ...] = ()
    negatable: bool = False
    nargs: str | None = None  # None: one value ("0" for bool); "?", "*", "+"
    since: str | None = None
    until: str | None = None
    memory: bool = False
    help: str = ""

    @property
    def takes_value(self) -> bool:
        return self.type != "bool" or self.nargs == "?"


def _vkey(v: str) -> tuple[int, ...]:
    out = []
    for part in v.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    while len(out) < 3:
        out.append(0)
    return tuple(out)


def version_in(version: str | None, since: str | None, until: str | None) -> bool:
    """Whether an option exists in `version` (None = the newest we model)."""
    if version is None:
        return until is None
    v = _vkey(version)
    if since and v < _vkey(since):
        return False
    if until and v > _vkey(until):
        return False
    return True


@dataclass(frozen=True)
class FlagHistory:
    """One flag's life in the releases read from the engine's own parser
    (data/engines/<engine>_history.yaml): the ranges it exists in, each [since, removed_in)."""

    ranges: tuple[tuple[str | None, str | None], ...]
    deprecated_since: str | None = None
    replacement: str | None = None

    def present(self, version: str | None) -> bool:
        if version is None:
            return bool(self.ranges) and self.ranges[-1][1] is None
        v = _vkey(version)
        return any((a is None or v >= _vkey(a)) and (b is None or v < _vkey(b)) for a, b in self.ranges)

    def why_absent(self, version: str) -> str:
        """'added in X' / 'removed in Y' for a version the flag is not in."""
        v = _vkey(version)
        later = [a for a, _ in self.ranges if a is not None and _vkey(a) > v]
        gone = [b for _, b in self.ranges if b is not None and _vkey(b) <= v]
        if later and not gone:
            return f"added in {later[0]}"
        if gone and later:
            return f"removed in {gone[-1]}, back in {later[0]}"
        return f"removed in {gone[-1]}" if gone else "not in this release"


@dataclass
class OptionTable:
    engine: str
    options: list[Option]
    normalize_underscores: bool = False
    allow_abbrev: bool = True
    unknown_code: str = ""
    invalid_code: str = ""
    deprecated_code: str = ""
    history: dict[str, FlagHistory] = field(default_factory=dict)  # flag as written -> its releases
    env_history: dict[str, FlagHistory] = field(default_factory=dict)  # variable -> the releases that read it
    unread_env_code: str = ""  # a twin variable the release does not read (it has no effect)
    underscores_since: str | None = None  # `_` == `-` in long names from this release on
    by_flag: dict[str, Option] = field(default_factory=dict)
    by_env: dict[str, Option] = field(default_factory=dict)
    by_name: dict[str, Option] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for opt in self.options:
            self.by_name[opt.name] = opt
            for f in opt.flags:
                self.by_flag[self._norm(f)] = opt
            for e in opt.env:
                self.by_env[e] = opt

    def _norm(self, flag: str) -> str:
        if self.normalize_underscores and flag.startswith("--"):
            return "--" + flag[2:].replace("_", "-")
        return flag

    def lookup(self, flag: str, version: str | None = None) -> tuple[Option | None, bool]:
        """(option, negated) for a flag as written, or (None, False)."""
        opt, negated, _ = self.resolve(flag, version)
        return opt, negated

    def in_release(self, flag: str, version: str | None) -> bool:
        """Whether the engine's parser of `version` has `flag` (True where no history says)."""
        h = self.history.get(flag)
        return h is None or h.present(version)

    def resolve(self, flag: str, version: str | None = None) -> tuple[Option | None, bool, str]:
        """(option, negated, the table's spelling of the flag) for a flag as written. An
        abbreviation counts only among the flags of `version` (argparse sees no others)."""
        f = self._norm(flag)
        if "_" in flag and f != flag and version is not None and self.underscores_since \
                and _vkey(version) < _vkey(self.underscores_since):
            f = flag  # before FlexibleArgumentParser, --max_model_len is its own (unknown) word
        opt = self.by_flag.get(f)
        if opt is not None and (self.in_release(f, version) or not self._abbrev(f, version)):
            return opt, False, f
        if f.startswith("--no-"):
            pos = self.by_flag.get("--" + f[5:])
            if pos is not None and pos.negatable:
                return pos, True, f
        hit = self._abbrev(f, version)
        if hit is not None:
            return hit[0], False, hit[1]
        return None, False, f

    def _abbrev(self, f: str, version: str | None) -> tuple[Option, str] | None:
        """argparse's allow_abbrev: a unique prefix of one long flag of this release (a flag the
        release dropped can still be the prefix of one it kept, and then argparse takes it)."""
        if not (self.allow_abbrev and f.startswith("--") and len(f) > 3):
            return None
        hits = {k: o for k, o in self.by_flag.items()
                if k.startswith(f) and k != f and k.startswith("--") and self.in_release(k, version)}
        if len(hits) == 1:
            k, o = next(iter(hits.items()))
            return o, k
        return None

    def release_problem(self, canon: str, version: str | None) -> tuple[str, str] | None:
        """(rule code, message) where the flag is not in `version` (an error: argparse rejects
        it) or is deprecated there (a warning naming the replacement); None when fine."""
        h = self.history.get(canon)
        if h is None or version is None and h.present(None):
            return None
        shown = f"this is {version}" if version else "servefit models the newest release: pin the image tag or pass " \
            "--engine-version if an older one runs"
        if not h.present(version):
            when = h.why_absent(version) if version else f"removed in {h.ranges[-1][1]}"
            tail = f"; use {h.replacement}" if h.replacement and "removed" in when else ""
            return self.unknown_code, f"unrecognized argument: {canon} ({when}; {shown}){tail}"
        if h.deprecated_since and self.deprecated_code and (version is None or
                                                            _vkey(version) >= _vkey(h.deprecated_since)):
            rep = f"; use {h.replacement}" if h.replacement else ""
            return self.deprecated_code, f"{canon} is deprecated since {h.deprecated_since}{rep}"
        return None

    def suggest(self, flag: str) -> str | None:
        import difflib

        cands = [k for k in self.by_flag if k.startswith("--")] if flag.startswith("--") else list(self.by_flag)
        close = difflib.get_close_matches(self._norm(flag), cands, n=1, cutoff=0.6)
        return close[0] if close else None


def _history(engine: str) -> dict[str, Any]:
    """data/engines/<engine>_history.yaml where the engine has one (generated from its releases)."""
    if not (data.DATA_DIR / "engines" / f"{engine}_history.yaml").is_file():
        return {}
    return dict(data.load(f"engines/{engine}_history.yaml"))


@cache
def load_table(engine: str) -> OptionTable:
    """The engine's option table: the hand-written data/engines/<engine>.yaml merged with the
    flags its releases' parsers have (the merge is kept in the data cache)."""
    files: list[str | os.PathLike[str]] = [data.DATA_DIR / "engines" / f"{engine}.yaml", __file__]
    if (data.DATA_DIR / "engines" / f"{engine}_history.yaml").is_file():
        files.append(data.DATA_DIR / "engines" / f"{engine}_history.yaml")
    opts, history, env_history, attrs = data.derived(f"options-{engine}", files, lambda: _table_data(engine))
    return OptionTable(engine=engine, options=[Option(*o) for o in opts],
                       history={f: FlagHistory(*h) for f, h in history.items()},
                       env_history={v: FlagHistory(r) for v, r in env_history.items()}, **attrs)


def _table_data(engine: str) -> tuple[list[tuple[Any, ...]], dict[str, tuple[Any, ...]],
                                      dict[str, tuple[Any, ...]], dict[str, Any]]:
    """load_table's content as plain data: (options as Option's fields, flag histories as
    FlagHistory's fields, variables' ranges, the table's other settings)."""
    raw = data.load(f"engines/{engine}.yaml")
    hist = _history(engine)
    opts = []
    for o in raw["options"]:
        flags = o.get("flags") or []
        env = o.get("env") or []
        if isinstance(env, str):
            env = [env]
        opts.append(Option(
            name=o["name"], flags=tuple(flags), type=o.get("type", "str"), env=tuple(env),
            default=o.get("default"), choices=tuple(str(c) for c in o.get("choices") or ()),
            negatable=bool(o.get("negatable", False)), nargs=o.get("nargs"),
            since=o.get("since"), until=o.get("until"), memory=bool(o.get("memory", False)),
            help=o.get("help", ""),
        ))
    history: dict[str, tuple[Any, ...]] = {}
    if hist:
        hand_since = {f: o.since for o in opts for f in o.flags if o.since}
        read = [str(v) for v in hist.get("releases_read") or []]
        opts = _with_history(opts, hist)
        for flag, h in (hist.get("flags") or {}).items():
            ranges = [list(r) for r in h["in"]]
            if flag in hand_since and _hand_since_fits(ranges[0][0], hand_since[flag], read):
                # the hand value is finer than the releases read
                ranges[0][0] = hand_since[flag]
            history[flag] = (tuple((a, b) for a, b in ranges), h.get("deprecated_since"), h.get("replacement"))
    env_history = {var: tuple((a, b) for a, b in h["in"]) for var, h in (hist.get("env") or {}).items()}
    codes = raw.get("codes", {})
    attrs = {"normalize_underscores": bool(raw.get("normalize_underscores", False)),
             "allow_abbrev": bool(raw.get("allow_abbrev", True)), "unknown_code": codes.get("unknown", ""),
             "invalid_code": codes.get("invalid", ""), "deprecated_code": codes.get("deprecated", ""),
             "underscores_since": hist.get("underscore_dash_same_since"),
             "unread_env_code": codes.get("unread_env", "")}
    return [_fields_of(o) for o in opts], history, env_history, attrs


def _fields_of(o: Option) -> tuple[Any, ...]:
    """An Option's fields in order, as Option(*fields) takes them back."""
    return tuple(getattr(o, f.name) for f in fields(Option))


def _hand_since_fits(first_read: str | None, hand: str, read: list[str]) -> bool:
    """Whether a hand-written `since` refines where the releases read place a flag's start: before
    the oldest release read (None), or between the release read before `first_read` and it."""
    if first_read is None:
        return True
    before = [r for r in read if _vkey(r) < _vkey(first_read)]
    return bool(before) and _vkey(before[-1]) < _vkey(hand) <= _vkey(first_read)


def _newest(arity: Any) -> str:
    """A history value is one value, or {release: value} where it changed; the newest counts."""
    return str(list(arity.values())[-1]) if isinstance(arity, dict) else str(arity)


def _with_history(opts: list[Option], hist: dict[str, Any]) -> list[Option]:
    """The hand-written options (types, memory meaning) plus every other flag some release's parser
    has; a hand-written flag no release has is dropped unless its entry names its versions."""
    flags = hist.get("flags") or {}
    out: list[Option] = []
    known: set[str] = set()
    negated = {h["negates"] for h in flags.values() if h.get("negates")}
    for o in opts:
        kept = tuple(f for f in o.flags if f in flags or o.since or o.until)
        negatable = o.negatable or any(f in negated for f in o.flags)
        arity = [_newest(flags[f].get("arity", "1")) for f in kept if f in flags]
        typ, nargs = o.type, o.nargs
        if typ == "str" and not o.memory and arity and all(a == "0" for a in arity):
            typ = "bool"  # a switch the table left untyped
        elif typ == "str" and not o.memory and arity and arity[-1] == "?":
            nargs = "?"  # a bare flag or a value (`--hf-token` / `--hf-token TOKEN`)
        if kept or not o.flags:
            out.append(Option(**{**o.__dict__, "flags": kept, "negatable": negatable, "type": typ,
                                 "nargs": nargs}))
        known.update(kept)
    for flag, h in flags.items():
        if flag in known or h.get("negates") and flag == "--no-" + h["negates"][2:]:
            continue  # argparse-style `--no-X` is X's own negation (resolve)
        last = _newest(h.get("arity", "1"))
        name = flag.lstrip("-").replace("-", "_")
        out.append(Option(name=name, flags=(flag,), type="bool" if last == "0" else "str",
                          nargs=last if last in ("?", "*", "+") else None, negatable=flag in negated,
                          help="(from the engine's parser)"))
    return out


class ValueProblem(ValueError):
    pass


def convert(opt: Option, text: str) -> Any:
    """Turn one value as written into what the engine will hold, or raise ValueProblem with
    the engine's own complaint."""
    t = opt.type
    try:
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
            return json.loads(text)
    except ValueError as exc:
        raise ValueProblem(f"invalid {t.replace('_', ' ')} value: {text!r}") from exc
    if opt.choices and text not in opt.choices:
        raise ValueProblem(f"invalid choice: {text!r} (choose from {', '.join(opt.choices)})")
    return text


@dataclass
class Parsed:
    values: dict[str, Any] = field(default_factory=dict)
    spans: dict[str, Span] = field(default_factory=dict)
    flag_spans: dict[str, Span] = field(default_factory=dict)  # span of the flag word itself
    positionals: list[Token] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    unknown: list[Token] = field(default_factory=list)


def _is_flag(text: str) -> bool:
    if not text.startswith("-") or text == "-" or text == "--":
        return False
    try:
        float(text)
        return False
    except ValueError:
        return True


def _span_after(tok: Token, offset: int) -> Span | None:
    """The part of a `--flag=value` token after `offset` characters."""
    s = tok.span
    if s is None:
        return None
    if s.line != s.end_line or s.start < 0:
        return s
    return Span(s.file, s.line, s.col + offset, s.end_line, s.end_col, s.start + offset, s.end)


def parse_argv(table: OptionTable, args: list[Token], version: str | None = None,
               site: str = "") -> Parsed:
    """Parse engine arguments (after the command words) against `table`."""
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
        if opt is None and not eq and not flag.startswith("--") and len(flag) > 2:
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
        problem = table.release_problem(canon, version) if canon in table.history else None
        if problem is not None and problem[0]:
            out.findings.append(finding(problem[0], problem[1], span=tok.span, site=site))
        elif canon not in table.history and not version_in(version, opt.since, opt.until) and table.unknown_code:
            when = f"added in {opt.since}" if opt.since and not version_in(version, opt.since, None) \
                else f"removed after {opt.until}"
            out.findings.append(finding(
                table.unknown_code, f"unrecognized argument: {flag} ({when}; this is {version})",
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
                    out.values[opt.name] = convert(opt, inline)
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
                out.values[opt.name] = convert(opt, v.text)
            except ValueProblem as exc:
                out.findings.append(_bad_value(table, flag, str(exc), v, site))
                continue
        if sp is not None:
            out.spans[opt.name] = sp
    return out


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
            parsed.values[opt.name] = convert(opt, tok.text) if opt.type != "list" else tok.text.split(",")
        except ValueProblem as exc:
            parsed.findings.append(finding(table.invalid_code, f"{var}: {exc}", span=tok.span, site=site))
            continue
        if tok.span is not None:
            parsed.spans[opt.name] = tok.span
