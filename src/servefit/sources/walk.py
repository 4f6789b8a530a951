"""Walking a repository: files under the given paths, skipping VCS and tool directories,
virtual environments (any directory holding `pyvenv.cfg`), node_modules, and whatever the
`.gitignore` files (at every level, plus `.git/info/exclude`) ignore. Paths named explicitly
are always yielded. Symlinks are not followed, so a link loop cannot hang the walk; a link that
loops or points nowhere is yielded for the reader to report."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".nox",
             ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis", "site-packages", ".terraform",
             ".idea", ".vscode", ".eggs", ".cache"}


def _glob_regex(pat: str) -> str:
    out = []
    i = 0
    n = len(pat)
    while i < n:
        c = pat[i]
        if c == "*":
            if pat.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
                continue
            if pat.startswith("**", i):
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pat.find("]", i + 1)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = pat[i + 1:j].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = j
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pat[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@dataclass(frozen=True)
class Rule:
    """One .gitignore pattern, compiled, with the directory it applies under."""

    base: str  # directory of the .gitignore, relative to the walk root ("" for the root)
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    anchored: bool


def parse_gitignore(text: str, base: str) -> list[Rule]:
    rules = []
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if not line.strip() or line.startswith("#"):
            continue
        if not line.endswith("\\ "):
            line = line.rstrip(" ")
        negate = line.startswith("!")
        if negate:
            line = line[1:]
        if line.startswith("\\"):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        rx = re.compile(_glob_regex(line) + r"\Z")
        rules.append(Rule(base, rx, negate, dir_only, anchored))
    return rules


def ignored(rules: list[Rule], rel: str, is_dir: bool) -> bool:
    """Whether `rel` (relative to the walk root, `/`-separated) is ignored: the last matching
    rule decides."""
    result = False
    for r in rules:
        if r.dir_only and not is_dir:
            continue
        if r.base:
            if not rel.startswith(r.base + "/"):
                continue
            sub = rel[len(r.base) + 1:]
        else:
            sub = rel
        target = sub if r.anchored else sub.rsplit("/", 1)[-1]
        if r.regex.match(target):
            result = not r.negate
    return result


def _read(path: str) -> str:
    from servefit.safe_io import open_regular

    try:
        with open_regular(path) as fh:
            return fh.read(1 << 20).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _readable_entry(e: os.DirEntry[str]) -> bool:
    """Files, and what the reader should report rather than skip in silence: a symlink that
    loops or points nowhere, a FIFO or a device (never opened). Symlinks that resolve are not
    followed: their targets are linted where they live, and a loop cannot hang the walk."""
    try:
        if e.is_symlink():
            return not os.path.exists(e.path)
        return not e.is_dir(follow_symlinks=False)
    except OSError:
        return True


def _walk(root: str, rel: str, rules: list[Rule]) -> Iterator[str]:
    d = os.path.join(root, rel) if rel else root
    gi = os.path.join(d, ".gitignore")
    if os.path.isfile(gi):
        rules = rules + parse_gitignore(_read(gi), rel)
    try:
        entries = sorted(os.scandir(d), key=lambda e: e.name)
    except OSError:
        return
    if any(e.name == "pyvenv.cfg" for e in entries) and rel:
        return
    subdirs = []
    for e in entries:
        child = f"{rel}/{e.name}" if rel else e.name
        try:
            is_dir = e.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_dir:
            if e.name in SKIP_DIRS or ignored(rules, child, True):
                continue
            subdirs.append(child)
        elif _readable_entry(e) and not ignored(rules, child, False):
            yield os.path.join(root, child) if root != "." else child
    for child in subdirs:
        yield from _walk(root, child, rules)


def iter_files(paths: list[str]) -> Iterator[str]:
    """Every file to lint under `paths` (default: the current directory)."""
    seen: set[str] = set()
    for p in paths or ["."]:
        if os.path.isdir(p):
            root = p.rstrip("/") or "/"
            rules: list[Rule] = []
            exclude = os.path.join(root, ".git", "info", "exclude")
            if os.path.isfile(exclude):
                rules = parse_gitignore(_read(exclude), "")
            for f in _walk(root, "", rules):
                if f not in seen:
                    seen.add(f)
                    yield f
        elif p not in seen:
            seen.add(p)
            yield p
