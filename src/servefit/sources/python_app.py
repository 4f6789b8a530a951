"""Python is not read: a Modal, BentoML or Cog app, or any launcher script, builds its server's command
from variables and function calls that only running it evaluates. A .py file that starts an engine
(a command list such as `["vllm", "serve", MODEL, ...]`, or a command-line string such as
`f"python -m sglang.launch_server --model-path {MODEL}"`) is said to be unchecked, once, at the first
such command, so a repository whose servers start from Python is not reported clean. `from vllm import
LLM` (offline inference in the process itself) starts no server and is not named.
"""

from __future__ import annotations

import ast

from servefit.sources.base import FileCtx
from servefit.sources.problems import not_read
from servefit.sources.terraform import engine_title, launch_words

_UNKNOWN = "x"  # a word Python computes (`MODEL_NAME`, `str(PORT)`)


def _text(node: ast.expr) -> str | None:
    """A string constant's text (an f-string's literal parts are constants of their own); None otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _command(node: ast.AST) -> list[str] | None:
    """The words of a command the node spells: a list or tuple of words (computed ones unknown), or a
    string of several words; None for anything else."""
    if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
        words = [_text(e) for e in node.elts]
        if words[0] is None and len(words) > 2 and words[1] == "-m":  # [sys.executable, "-m", "vllm..."]
            words[0] = "python"
        return [w if w is not None else _UNKNOWN for w in words] if words[0] is not None else None
    if isinstance(node, ast.expr):
        text = _text(node)
        if text is not None and len(text) <= 4000 and len(text.split()) > 1:
            return text.split()
    return None


def _in_fstring(tree: ast.AST) -> set[int]:
    return {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}


def scan(fc: FileCtx) -> None:
    from servefit.sources import detect

    try:
        tree = ast.parse(fc.text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    hits: list[tuple[int, int, int, int, str]] = []
    inner = _in_fstring(tree)
    for node in ast.walk(tree):
        if id(node) in inner:
            continue
        # an f-string's literal parts: said at the f-string (Python 3.12 places the parts themselves)
        parts = [_command(v) for v in node.values] if isinstance(node, ast.JoinedStr) else [_command(node)]
        hit = next((h for words in parts if words and (h := detect.recognise(words)) is not None), None)
        if hit is not None and isinstance(node, ast.expr):
            hits.append((node.lineno, node.col_offset, node.end_lineno or node.lineno,
                         node.end_col_offset or node.col_offset, hit[0]))
    if not hits:
        return
    line, col, end_line, end_col, eng = min(hits)
    at, end = _offset(fc, line, col), _offset(fc, end_line, end_col)
    fc.findings.append(not_read(
        f"servefit does not read Python, and this file starts {engine_title(eng)} here: its settings were not "
        f"checked. Lint the command it runs (`servefit estimate -- {' '.join(launch_words(eng))} ...`)",
        span=fc.li.span(at, end)))


def _offset(fc: FileCtx, line: int, col: int) -> int:
    """The character offset of ast's (line, UTF-8 byte column)."""
    starts = fc.li.starts
    start = starts[line - 1] if line - 1 < len(starts) else len(fc.text)
    return start + len(fc.text[start:start + col].encode("utf-8")[:col].decode("utf-8", "ignore"))
