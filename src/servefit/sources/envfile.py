"""`KEY=value` files: compose `.env` / `env_file`, systemd `EnvironmentFile=`, docker
`--env-file`. Each value keeps the span of its characters in that file (quotes excluded)."""

from __future__ import annotations

import os
import re
from functools import lru_cache

from servefit.budget import charge_entries
from servefit.core import Token
from servefit.sources.base import read_text
from servefit.sources.text import LineIndex

LINE = re.compile(r"^[ \t]*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*=[ \t]*(.*?)[ \t]*\r?$", re.M)


def parse_env_text(text: str, path: str) -> dict[str, Token]:
    li = LineIndex(text, path)
    out: dict[str, Token] = {}
    for m in LINE.finditer(text):
        raw = m.group(2)
        a = m.start(2)
        if raw[:1] in ("'", '"'):
            q = raw[0]
            end = raw.find(q, 1)
            end = len(raw) if end < 0 else end
            value, a, b = raw[1:end], a + 1, a + end
        else:
            cut = re.search(r"[ \t]+#", raw)
            value = raw[:cut.start()] if cut else raw
            b = a + len(value)
        out[m.group(1)] = Token(value, li.span(a, b))
    return out


def load_env_file(path: str) -> dict[str, Token] | None:
    """The file's variables (parsed once per version of the file), charged to the reading file's
    budget: a big env file shared by thousands of services cannot multiply into gigabytes."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    vals = _load(os.path.abspath(path), st.st_mtime_ns, st.st_size, path)
    if vals is not None:
        charge_entries(len(vals))
    return vals


@lru_cache(maxsize=32)
def _load(path: str, mtime: int, size: int, shown: str) -> dict[str, Token] | None:
    """Read by its absolute path; spans name the file as the caller wrote it, as every other finding does."""
    text = read_text(path)
    if text is None:
        return None
    return parse_env_text(text, shown)
