"""Where each option is written on a launch command (the flag, its value, the `=` and `--no-` forms), so
that tune can rewrite a value in place instead of adding the flag again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from servefit.core import LaunchSite, Token


@dataclass
class Occurrence:
    """Where an option is written on the command line (the flag, its value, whether the value follows `=`,
    whether it is the `--no-` form), so tune can rewrite it in place."""

    flag: Token
    value: Token | None
    inline: bool
    negated: bool


def option_table(engine: str) -> Any:
    """The engine's option table, or None for an engine without one (its flags are read from the names)."""
    from servefit.engines.options import load_table

    try:
        return load_table(engine)
    except Exception:  # an engine without a table yet (TGI, SGLang): flags from the names
        return None


def occurrences(site: LaunchSite, table: Any, skip: int, argv: list[Token] | None = None) -> dict[str, Occurrence]:
    """The last place each option is written on the command line (argparse: the last wins)."""
    out: dict[str, Occurrence] = {}
    args = (site.argv if argv is None else argv)[skip:]
    i = 0
    while i < len(args):
        tok = args[i]
        text = tok.text
        if not text.startswith("-") or text in ("-", "--"):
            i += 1
            continue
        flag, eq, _ = text.partition("=")
        opt, neg = table.lookup(flag) if table is not None else (None, False)
        if opt is None:
            i += 1
            continue
        if not opt.takes_value or neg:
            out[opt.name] = Occurrence(tok, None, bool(eq), neg)
            i += 1
            continue
        if eq:
            out[opt.name] = Occurrence(tok, None, True, False)
            i += 1
            continue
        val = args[i + 1] if i + 1 < len(args) else None
        out[opt.name] = Occurrence(tok, val, False, False)
        i += 2
    return out
