"""Engine option tables (data/engines/<engine>.yaml) with each flag's release history.

One table per engine serves parsing (engines/argv.py), did-you-mean, docs and tune's knobs; the
history (data/engines/<engine>_history.yaml, read from each release's own parser) says in which
releases a flag exists, when it was deprecated and what replaced it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any

from servefit import data


@dataclass(frozen=True)
class Option:
    """One engine setting as the engine's parser takes it: flags, environment variables, value type, default
    and the releases that have it; `memory` marks the settings a plan fills with their default."""

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
    kvs_until: str | None = None  # a json option that also takes `k=v,k=v` before this release

    @property
    def takes_value(self) -> bool:
        return self.type != "bool" or self.nargs == "?"


@lru_cache(maxsize=4096)
def _vkey(v: str) -> tuple[int, ...]:
    """A release's sort key (0.6.3 -> (0, 6, 3)); cached: version checks compare a few hundred
    release names per server."""
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


@dataclass(frozen=True)
class Implied:
    """The release the options a config uses date it to, when no version was given."""

    version: str | None  # the newest release with every option; None: no release has them all
    why: tuple[tuple[str, str], ...]  # (option, "removed in 0.17.1" / "0.5.3 to 0.16.0"): what dates it


def _releases_text(has: list[str], cands: list[str]) -> str:
    """The releases an option is in, as runs of the releases known: "up to 0.16.0", "from 0.20.0 on"."""
    if not has:
        return "in no release servefit read"
    runs: list[list[str]] = []
    for r in has:
        if runs and cands.index(r) == cands.index(runs[-1][-1]) + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    parts = []
    for run in runs:
        first, last = run[0] == cands[0], run[-1] == cands[-1]
        parts.append("in every release" if first and last else f"up to {run[-1]}" if first
                     else f"from {run[0]} on" if last else run[0] if len(run) == 1 else f"{run[0]} to {run[-1]}")
    return " and ".join(parts)


@dataclass
class OptionTable:
    """An engine's settings indexed by flag, variable and name, with each flag's release history, so a command
    line is read the way the given release reads it."""

    engine: str
    options: list[Option]
    normalize_underscores: bool = False
    allow_abbrev: bool = True
    glued_short_values: bool = True  # `-tp4` read as `-tp 4` (argparse, clap); llama.cpp looks flags up whole
    numbers: str = "python"  # how the parser reads ints and floats: python (argparse) | cpp (std::stoi / std::stof)
    unknown_code: str = ""
    invalid_code: str = ""
    deprecated_code: str = ""
    history: dict[str, FlagHistory] = field(default_factory=dict)  # flag as written -> its releases
    env_history: dict[str, FlagHistory] = field(default_factory=dict)  # variable -> the releases that read it
    unread_env_code: str = ""  # a twin variable the release does not read (it has no effect)
    underscores_since: str | None = None  # `_` == `-` in long names from this release on
    releases: tuple[str, ...] = ()  # the releases whose parsers the history was read from, oldest first
    dotted_json_since: str | None = None  # `--json-flag.key value` sets one key of a JSON option from here on
    dotted_aliases: dict[str, str] = field(default_factory=dict)  # `-O.key`: the JSON flag that prefix stands for
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

    def dotted(self, flag: str, version: str | None) -> tuple[Option, str, str] | None:
        """(JSON option, its flag as the table spells it, key path) for `--compilation-config.mode`
        or `-O.cudagraph_mode`, where the release reads one key of a JSON option that way; None
        otherwise."""
        base, dot, path = flag.partition(".")
        if not dot or not path or self.dotted_json_since is None:
            return None
        if version is not None and _vkey(version) < _vkey(self.dotted_json_since):
            return None
        base = self.dotted_aliases.get(base, base)
        opt, negated, canon = self.resolve(base, version)
        if opt is None or negated or opt.type != "json" or not self.in_release(canon, version):
            return None
        return opt, canon, path

    def release_shown(self, version: str | None, unpinned: str = "") -> str:
        """Which release a finding judged by: why the newest is modelled (`unpinned`, or no version
        given), else the one given."""
        if unpinned:
            return unpinned
        if version:
            return f"this is {version}"
        return "no version given, so servefit models the newest release: pin the image tag or pass " \
            "--engine-version if an older one runs"

    def release_problem(self, canon: str, version: str | None, unpinned: str = "") -> tuple[str, str] | None:
        """(rule code, message) where the flag is not in `version` (an error: argparse rejects
        it) or is deprecated there (a warning naming the replacement); None when fine."""
        h = self.history.get(canon)
        if h is None or version is None and h.present(None):
            return None
        shown = self.release_shown(version, unpinned)
        if not h.present(version):
            when = h.why_absent(version) if version else f"removed in {h.ranges[-1][1]}"
            tail = f"; use {h.replacement}" if h.replacement and "removed" in when else ""
            return self.unknown_code, f"unrecognized argument: {canon} ({when}; {shown}){tail}"
        if h.deprecated_since and self.deprecated_code and (version is None or
                                                            _vkey(version) >= _vkey(h.deprecated_since)):
            rep = f"; use {h.replacement}" if h.replacement else ""
            return self.deprecated_code, f"{canon} is deprecated since {h.deprecated_since}{rep}"
        return None

    def implied_release(self, used: Iterable[str], current: str) -> Implied | None:
        """What the options a config uses say about its release when none was given: the newest
        release read (or `current`, the newest modelled) in which every one exists, from each
        release's own parser (the history) or the table's since / until. None: the newest has
        them all, or nothing here dates them."""
        checks: dict[str, Callable[[str], bool]] = {}
        for name in used:
            h = self.history.get(name) or self.env_history.get(name)
            opt = self.by_flag.get(name) or self.by_env.get(name)
            if h is not None:
                checks[name] = h.present
            elif opt is not None and (opt.since or opt.until):
                checks[name] = lambda v, o=opt: version_in(v, o.since, o.until)  # type: ignore[misc]
        if not checks:
            return None
        cands = sorted({*self.releases, current}, key=_vkey)
        has = {name: [r for r in cands if ok(r)] for name, ok in checks.items()}
        common = [r for r in cands if all(r in rs for rs in has.values())]
        if common and _vkey(common[-1]) >= _vkey(current):
            return None
        if common:
            after = cands[cands.index(common[-1]) + 1]
            return Implied(common[-1], tuple((n, self._why_absent(n, after)) for n, rs in has.items()
                                             if after not in rs))
        names_in_order = list(has)
        pair = next(((a, b) for i, a in enumerate(names_in_order) for b in names_in_order[i + 1:]
                     if not set(has[a]) & set(has[b])), None)
        names = pair or tuple(has)
        return Implied(None, tuple((n, _releases_text(has[n], cands)) for n in names))

    def _why_absent(self, name: str, version: str) -> str:
        h = self.history.get(name) or self.env_history.get(name)
        if h is not None:
            return h.why_absent(version)
        opt = self.by_flag.get(name) or self.by_env.get(name)
        return f"removed after {opt.until}" if opt is not None and opt.until else "not in later releases"

    def suggest(self, flag: str) -> str | None:
        """The flag meant: the same name with the other number of dashes (`--fa` for llama.cpp's `-fa`),
        else the closest of the same kind."""
        import difflib

        name = self._norm(flag).lstrip("-")
        same = next((alt for alt in ("-" + name, "--" + name) if alt != flag and alt in self.by_flag), None)
        if same is not None:
            return same
        cands = [k for k in self.by_flag if k.startswith("--")] if flag.startswith("--") else list(self.by_flag)
        close = difflib.get_close_matches(self._norm(flag), cands, n=1, cutoff=0.6)
        return close[0] if close else None


@cache
def load_table(engine: str) -> OptionTable:
    """The engine's option table: the hand-written data/engines/<engine>.yaml merged with the
    flags its releases' parsers have (the merge is kept in the data cache)."""
    from servefit.engines import option_data

    files: list[str | os.PathLike[str]] = [data.DATA_DIR / "engines" / f"{engine}.yaml", __file__, option_data.__file__]
    if (data.DATA_DIR / "engines" / f"{engine}_history.yaml").is_file():
        files.append(data.DATA_DIR / "engines" / f"{engine}_history.yaml")
    opts, history, env_history, attrs = data.derived(f"options-{engine}", files, lambda: option_data.table_data(engine))
    return OptionTable(engine=engine, options=[Option(*o) for o in opts],
                       history={f: FlagHistory(*h) for f, h in history.items()},
                       env_history={v: FlagHistory(r) for v, r in env_history.items()}, **attrs)
