"""Where a new key goes in a YAML mapping that tune writes a setting into (a chart's values, an
operator's spec): after its sibling's whole entry, at the sibling's indentation, its value written so
that it reads back as the same number, boolean or string. Each helper returns (start, end, text) as
tune.style's do."""

from __future__ import annotations

import re

from servefit.core import Span
from servefit.tune.style import Piece, eol_of, line_bounds, yaml_quote

KEY_AT = re.compile(r"['\"]?([A-Za-z_][A-Za-z0-9_.-]*)['\"]?[ \t]*:")


def yaml_key_at(text: str, span: Span | None) -> str | None:
    """The YAML mapping key written at span (a flag servefit read from a values or config key),
    or None when span holds something else."""
    if span is None or not (0 <= span.start <= span.end <= len(text)):
        return None
    m = KEY_AT.match(text, span.start)
    return m.group(1) if m is not None and m.start(1) - span.start <= 1 else None


def yaml_scalar(value: str) -> str:
    """A YAML value for a setting: numbers and booleans plain (so they stay numbers), other
    text quoted only when a plain scalar would not read back as the same string."""
    if re.fullmatch(r"-?[0-9]+(?:\.[0-9]+)?|true|false", value):
        return value
    return yaml_quote(value, "")


def entry_end(text: str, key_span: Span) -> int:
    """Where the mapping entry that starts at key_span ends: after its line and every following
    line indented deeper (or blank / comment lines followed by such)."""
    a, _, end = line_bounds(text, key_span.start)
    col = key_span.start - a
    head = text[key_span.start:line_bounds(text, key_span.start)[1]]
    opens_block = bool(re.fullmatch(r"['\"]?[^:]*['\"]?[ \t]*:[ \t]*(?:#.*)?", head))
    pos = end
    last = end
    while pos < len(text):
        la, lb, le = line_bounds(text, pos)
        body = text[la:lb]
        stripped = body.lstrip(" \t")
        if not stripped or stripped.startswith("#"):
            pos = le
            continue
        ind = len(body) - len(stripped)
        # deeper lines belong to the entry; so do `- item` lines at the key's own column when the
        # key opened a block list (`extraArgs:` then `- "--x"`, as k8s manifests often write)
        if ind > col or (ind == col and stripped[:1] == "-" and opens_block):
            pos = le
            last = le
            continue
        break
    return last


def key_entry(text: str, sibling_key: Span, key: str, value: str) -> Piece:
    """`key: value` as a new entry of the mapping holding the sibling key, after the sibling's
    entry, at the same indentation."""
    a, _, _ = line_bounds(text, sibling_key.start)
    indent = " " * (sibling_key.start - a)
    at = entry_end(text, sibling_key)
    eol = eol_of(text, sibling_key.start)
    pre = eol if at == len(text) and not text.endswith("\n") else ""
    return at, at, f"{pre}{indent}{key}: {yaml_scalar(value)}{eol}"


def key_block(text: str, sibling_key: Span, key: str, lines: list[str], step: int = 2) -> Piece:
    """`key:` followed by nested lines (`child: v` or `- item`), after the sibling's entry."""
    a, _, _ = line_bounds(text, sibling_key.start)
    indent = " " * (sibling_key.start - a)
    inner = indent + " " * step
    at = entry_end(text, sibling_key)
    eol = eol_of(text, sibling_key.start)
    pre = eol if at == len(text) and not text.endswith("\n") else ""
    return at, at, f"{pre}{indent}{key}:{eol}" + "".join(f"{inner}{ln}{eol}" for ln in lines)
