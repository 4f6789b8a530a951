"""Every log line diagnose knows, gathered from the engines: the generic lines (patterns.py) and
each engine's `logs` table (data/engines/<name>.yaml for the built-ins, `Engine.table("logs")`
for a plugin; schema: schemas/engine_logs.schema.json). Nothing here names an engine: adding
one adds its table.

A table holds the engine's patterns (with the stage a line names, the cause a refusal states and
the settings its fix changes), the words that tell its logs apart (`hints`, tried in
`hint_order`), the traceback frames and line words that name a stage, how the engine names each
stage, the settings its start-up lines print, and the flags its fixes change (`fix`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from servefit.diagnose import patterns as P

# how a matched line adds to the run state (diagnose/track.py)
PARSE_MODES = ("sum_devices", "layout", "logfmt", "env_map", "cmd_flags", "block", "keep_first", "token_ids")
GENERIC_WINDOWS = {"kernel": 200, "k8s": 40}  # lines within which one failure's lines belong together
# Keywords: each needle is reached through one of its words. A line is cut into words once
# (punctuation to spaces, one C-level translate + split), the words are intersected with the
# keyword set, and only the needles of the keywords found are tested: an ordinary line costs a
# couple of microseconds whatever the number of patterns.
_PUNCT = "".join(chr(c) for c in range(33, 127) if not (chr(c).isalnum() or chr(c) == "_"))
WORDS = bytes.maketrans(_PUNCT.encode(), b" " * len(_PUNCT))  # bytes.translate is the fast one
_COMMON = {"a", "an", "the", "of", "to", "in", "is", "at", "on", "for", "with", "and", "one", "than", "that",
           "can", "be", "more", "size", "model", "failed", "memory", "process", "server", "request", "GPU", "KV",
           "cache", "max", "tokens", "llama", "took"}


def keyword(needle: str) -> str:
    words = needle.encode().translate(WORDS).decode().split()
    rare = [w for w in words if w not in _COMMON] or words
    return max(rare, key=len)


@dataclass(frozen=True)
class Catalog:
    """Every engine's log patterns and the tables that go with them, indexed by keyword so that a log line is
    tested only against the patterns it could match."""

    patterns: tuple[P.Pattern, ...]
    hints: tuple[tuple[str, tuple[str, ...]], ...]  # (engine, words), the first engine found wins
    merge_window: dict[str, int]
    frames: dict[str, str]  # traceback function -> stage
    stage_text: tuple[tuple[str, str], ...]  # words of a failure line -> stage
    settings: frozenset[str]  # settings the engines' start-up lines print
    aliases: dict[str, str]  # printed name -> setting
    stage_names: dict[str, dict[str, str]]  # engine -> stage -> how the engine calls it
    fix: dict[str, dict[str, Any]]  # engine -> its `fix` table
    keywords: frozenset[bytes] = frozenset()
    keyword_needles: dict[bytes, list[tuple[str, list[P.Pattern]]]] = field(default_factory=dict)
    size_figures: frozenset[str] = frozenset()
    by_name: dict[str, P.Pattern] = field(default_factory=dict)

    def pattern(self, name: str) -> P.Pattern | None:
        return self.by_name.get(name)


def _pattern(engine: str, raw: dict[str, Any]) -> P.Pattern:
    regex = str(raw["regex"]).replace("%SIZE%", P.SIZE)
    cause = raw.get("cause")
    return P.Pattern(
        name=f"{engine}.{raw['name']}", engine=engine, kind=str(raw["kind"]), needles=tuple(raw["needles"]),
        regex=re.compile(regex, re.I if raw.get("ignore_case") else 0), rank=int(raw.get("rank", 0)),
        stage=str(raw.get("stage", "")), cause=(str(cause[0]), str(cause[1]), str(cause[2])) if cause else None,
        targets=tuple(raw.get("targets") or ()), parse=str(raw.get("parse", "")), phase=str(raw.get("phase", "")),
        keys=tuple(raw.get("keys") or ()), names=tuple((str(k), str(v)) for k, v in (raw.get("names") or {}).items()),
        skip=str(raw.get("skip", "")), clears=tuple(raw.get("clears") or ()),
        recovers=tuple(f"{engine}.{r}" for r in raw.get("recovers") or ()),
        host=bool(raw.get("host", False)), means=str(raw.get("means", "")))


def tables() -> list[tuple[str, dict[str, Any]]]:
    """(engine, logs table) for every engine that has one, in hint order."""
    from servefit import engines

    out = [(name, engines.section(name, "logs")) for name in engines.available()]
    return sorted(((n, t) for n, t in out if t), key=lambda nt: int(nt[1].get("hint_order", 100)))


def build(found: list[tuple[str, dict[str, Any]]]) -> Catalog:
    pats: list[P.Pattern] = list(P.GENERIC)
    frames = dict(P.GENERIC_FRAMES)
    stage_text: list[tuple[str, str]] = []
    settings: set[str] = set()
    aliases: dict[str, str] = {}
    windows = dict(GENERIC_WINDOWS)
    for engine, t in found:
        pats += [_pattern(engine, raw) for raw in t.get("patterns") or ()]
        for fn, stage in (t.get("frames") or {}).items():
            frames.setdefault(str(fn), str(stage))
        stage_text += [(str(e["text"]), str(e["stage"])) for e in t.get("stage_text") or ()]
        settings.update(t.get("settings") or ())
        aliases.update({str(k): str(v) for k, v in (t.get("aliases") or {}).items()})
        if t.get("merge_window"):
            windows[engine] = int(t["merge_window"])
    settings.update(aliases.values())
    by_needle: dict[str, list[P.Pattern]] = {}
    for pat in pats:
        for nd in pat.needles:
            by_needle.setdefault(nd, []).append(pat)
    index: dict[bytes, list[tuple[str, list[P.Pattern]]]] = {}
    for nd, group in by_needle.items():
        index.setdefault(keyword(nd).encode(), []).append((nd, group))
    return Catalog(
        patterns=tuple(pats), hints=tuple((e, tuple(t.get("hints") or ())) for e, t in found if t.get("hints")),
        merge_window=windows, frames=frames, stage_text=tuple(stage_text), settings=frozenset(settings),
        aliases=aliases, stage_names={e: dict(t.get("stage_names") or {}) for e, t in found},
        fix={e: dict(t.get("fix") or {}) for e, t in found}, keywords=frozenset(index), keyword_needles=index,
        size_figures=P.size_keys([p.regex for p in pats]), by_name={p.name: p for p in pats})


_cache: dict[tuple[str, ...], Catalog] = {}


def catalog() -> Catalog:
    """The catalog of the engines installed now (rebuilt when a plugin comes or goes)."""
    from servefit import engines

    key = tuple(engines.available())
    if key not in _cache:
        _cache.clear()
        _cache[key] = build(tables())
    return _cache[key]
