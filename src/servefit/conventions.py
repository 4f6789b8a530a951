"""Command-line conventions shared with ruff and most modern linters: colour from --color,
NO_COLOR and FORCE_COLOR (no-color.org, force-color.org), and `-` for standard input."""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import TextIO

COLOR_CHOICES = ("auto", "always", "never")


def add_color_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--color", choices=COLOR_CHOICES, default="auto",
                   help="colour the text output: auto (a terminal, unless NO_COLOR is set; FORCE_COLOR "
                        "forces it), always or never")


def use_color(choice: str | None, stream: TextIO | None = None) -> bool:
    """--color always / never wins; then a non-empty NO_COLOR turns colour off and a non-empty
    FORCE_COLOR (other than 0 / false) turns it on; else colour when the stream is a terminal."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    if os.environ.get("NO_COLOR"):
        return False
    force = os.environ.get("FORCE_COLOR")
    if force and force.lower() not in ("0", "false"):
        return True
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


def stdin_name(text: str, given: str | None) -> str:
    """The file name that decides how standard input is read: --stdin-filename, else a name
    from what the text looks like (a shebang script, a Dockerfile, a systemd unit, else YAML)."""
    if given:
        return given
    head = text.lstrip("\ufeff")[:4096]
    if head.startswith("#!") or re.search(r"^\s*(?:vllm|llama-server|ollama|python3? -m)\b", head, re.M) and \
            not re.search(r"^\s*[\w.-]+:\s", head, re.M):
        return "<stdin>.sh"
    if re.search(r"^\s*FROM\s+\S", head, re.M | re.I):
        return "<stdin>.dockerfile"
    if re.search(r"^\[(?:Unit|Service|Install)\]", head, re.M):
        return "<stdin>.service"
    return "<stdin>.yaml"


def read_stdin() -> str:
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    return data.decode("utf-8", errors="replace")
