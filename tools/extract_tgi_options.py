#!/usr/bin/env python3
"""Read TGI's launcher arguments (launcher/src/main.rs, `struct Args`, clap derive) release by
release and write which `text-generation-launcher` flags and environment twins each has, which
take a value, their defaults, and which the docs call legacy / deprecated.

clap derive rules used here: a field `foo_bar` with `long` is `--foo-bar` (or `long = "x"`),
`short` is `-f` (its first letter, or `short = 'x'`), `env` is FOO_BAR (or `env = "X"`); a plain
`bool` field is a switch (no value), `Option<bool>` takes one; `default_value = "..."` is the
default. clap takes no abbreviations (no `infer_long_args` in any release read).

Usage (sources from the release tags, never committed):
    for t in v1.0.0 ... v3.3.7; do mkdir -p /tmp/tgisrc/${t#v}/launcher/src
      git -C tgi show $t:launcher/src/main.rs > /tmp/tgisrc/${t#v}/launcher/src/main.rs; done
    python3 tools/extract_tgi_options.py /tmp/tgisrc/* \
        --flags-out tests/data/tgi_flags.yaml --history-out src/servefit/data/engines/tgi_history.yaml
Each folder's name is its version.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from history_common import main_for  # noqa: E402

ATTR = re.compile(r"#\[(?:clap|arg)\((.*?)\)\]\s*$", re.S)
FIELD = re.compile(r"^\s*(?:pub\s+)?([a-z_][a-z0-9_]*)\s*:\s*(.+?),?\s*$")
LEGACY = re.compile(r"(?:[Ll]egacy version of|[Dd]eprecated[^.]*?(?:use|in favou?r of))\s*\[?`?(?:Args::)?([a-z_]+)")


def _struct_body(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if re.match(r"^(?:pub\s+)?struct Args\s*\{", ln))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("}"))
    return lines[start + 1:end]


def _kv(attr: str, key: str) -> str | None:
    m = re.search(rf"\b{key}\s*=\s*(\"[^\"]*\"|'[^']*'|[\w:]+)", attr)
    return m.group(1).strip("\"'") if m else None


def _has(attr: str, word: str) -> bool:
    return re.search(rf"(?:^|,)\s*{word}\s*(?:,|$)", attr) is not None


def extract(root: Path) -> dict[str, Any]:
    text = (root / "launcher/src/main.rs").read_text(encoding="utf-8", errors="replace")
    flags: dict[str, dict[str, Any]] = {}
    env: dict[str, dict[str, Any]] = {}
    attrs: list[str] = []
    doc: list[str] = []
    pending = ""
    for line in _struct_body(text):
        s = line.strip()
        if pending:  # an attribute over several lines
            pending += " " + s
            if s.endswith(")]"):
                attrs.append(pending)
                pending = ""
            continue
        if s.startswith("///"):
            doc.append(s[3:].strip())
            continue
        if s.startswith("#["):
            if s.endswith("]"):
                attrs.append(s)
            else:
                pending = s
            continue
        m = FIELD.match(line)
        if not m or s.startswith("//"):
            continue
        field, typ = m.group(1), m.group(2).rstrip(",").strip()
        clap = ", ".join(a.group(1) for a in (ATTR.match(x) for x in attrs) if a)
        attrs, help_text, doc = [], " ".join(doc), []
        if not clap:
            continue
        names = []
        if _has(clap, "long") or _kv(clap, "long"):
            names.append("--" + (_kv(clap, "long") or field.replace("_", "-")))
        if _has(clap, "short") or _kv(clap, "short"):
            names.append("-" + (_kv(clap, "short") or field[0]))
        bool_switch = typ == "bool" and not _kv(clap, "action") or "SetTrue" in clap or \
            (_has(clap, "action") and typ == "bool")
        fact: dict[str, Any] = {"arity": "0" if bool_switch else "1"}
        default = _kv(clap, "default_value")
        if default is not None:
            fact["default"] = _typed(default, typ)
        elif bool_switch:
            fact["default"] = False
        m2 = LEGACY.search(help_text)
        if m2 or re.search(r"\bdeprecated\b", help_text, re.I):
            fact["deprecated"] = True
            if m2:
                fact["replacement"] = "--" + m2.group(1).replace("_", "-")
        for n in names:
            if n not in flags:  # clap keeps the first of two fields claiming one short (-p)
                flags[n] = dict(fact)
        if _has(clap, "env") or _kv(clap, "env"):
            var = _kv(clap, "env") or field.upper()
            env[var] = {"default": fact["default"]} if "default" in fact else {}
    for f in flags.values():
        if f.get("replacement") and f["replacement"] not in flags:
            f.pop("replacement")
    return {"flags": flags, "env": env, "underscores": False, "has_envs": True}


def _typed(text: str, typ: str) -> Any:
    if typ == "bool" and text in ("true", "false"):
        return text == "true"
    if re.match(r"^(?:u|i)(?:8|16|32|64|size)$", typ):
        try:
            return int(text)
        except ValueError:
            return text
    if typ in ("f32", "f64"):
        try:
            return float(text)
        except ValueError:
            return text
    return text


if __name__ == "__main__":
    raise SystemExit(main_for(
        "tgi", extract, __doc__ or "",
        "# Generated by tools/extract_tgi_options.py from TGI's own launcher/src/main.rs (struct Args)\n"
        "# at each release tag of huggingface/text-generation-inference.\n"))
