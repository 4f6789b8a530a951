"""The option table's content as plain data: the hand-written data/engines/<engine>.yaml merged with
every flag its releases' parsers have (data/engines/<engine>_history.yaml), and what a flag's
history says of its arity. engines/options.py builds the table from it (and caches it)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from servefit import data
from servefit.engines.options import Option, _vkey


def _history(engine: str) -> dict[str, Any]:
    """data/engines/<engine>_history.yaml where the engine has one (generated from its releases)."""
    if not (data.DATA_DIR / "engines" / f"{engine}_history.yaml").is_file():
        return {}
    return dict(data.load(f"engines/{engine}_history.yaml"))


def flag_arity(engine: str, flag: str, version: str | None) -> str | None:
    """How many values `flag` takes in `version` ("0" a bare switch, "1", "?"), from the releases' own
    parsers (data/engines/<engine>_history.yaml `arity`, keyed by the release it took effect in); the newest
    release's when `version` is None; None where the history does not say."""
    return _in_release(engine, flag, "arity", version)


def flag_default(engine: str, flag: str, version: str | None) -> str | None:
    """`flag`'s default in `version` as the releases' own parsers have it (the history's `default`, keyed
    by the release it took effect in: vLLM's --model facebook/opt-125m, then Qwen/Qwen3-0.6B from 0.10.0)."""
    return _in_release(engine, flag, "default", version)


def _in_release(engine: str, flag: str, key: str, version: str | None) -> str | None:
    per = ((_history(engine).get("flags") or {}).get(flag) or {}).get(key)
    if not isinstance(per, dict):
        return None if per is None else str(per)
    if version is None:
        return _newest(per)
    past = [(k, a) for k, a in per.items() if _vkey(str(k)) <= _vkey(version)]
    return str(max(past, key=lambda ka: _vkey(str(ka[0])))[1]) if past else None


def table_data(engine: str) -> tuple[list[tuple[Any, ...]], dict[str, tuple[Any, ...]],
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
            help=o.get("help", ""), kvs_until=o.get("kvs_until"),
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
             "allow_abbrev": bool(raw.get("allow_abbrev", True)), "numbers": str(raw.get("numbers", "python")),
             "glued_short_values": bool(raw.get("glued_short_values", True)),
             "unknown_code": codes.get("unknown", ""),
             "invalid_code": codes.get("invalid", ""), "deprecated_code": codes.get("deprecated", ""),
             "underscores_since": hist.get("underscore_dash_same_since"),
             "unread_env_code": codes.get("unread_env", ""),
             "dotted_json_since": (raw.get("dotted_json") or {}).get("since"),
             "dotted_aliases": dict((raw.get("dotted_json") or {}).get("aliases") or {}),
             "releases": tuple(str(v) for v in hist.get("releases_read") or ())}
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
        last = _newest(h.get("arity", "0" if h.get("negates") else "1"))  # a negation is a switch
        name = flag.lstrip("-").replace("-", "_")
        out.append(Option(name=name, flags=(flag,), type="bool" if last == "0" else "str",
                          nargs=last if last in ("?", "*", "+") else None, negatable=flag in negated,
                          help="(from the engine's parser)"))
    return out
