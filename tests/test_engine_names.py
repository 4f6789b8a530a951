"""Engine names outside engines/ and data/ (issue 14, Done-when 3): every string literal that is
an engine's name, in code that should ask the engine plugins instead (their methods, or their
data in data/engines/<name>.yaml). None is left: adding an engine touches engines/<name>/ and its
data file only. A literal a user reads (help text) would be listed in USER_TEXT with its reason."""

from __future__ import annotations

import ast
import io
import tokenize
from collections import Counter
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "servefit"
NAMES = {"vllm", "llamacpp", "ollama", "tgi", "sglang"}
# file -> (count, why a user reads these names there); empty: no code outside the plugins names one
USER_TEXT: dict[str, tuple[int, str]] = {}
CLEAN = ("sources/assemble.py", "sources/target.py", "linter/run.py", "linter/fixes.py", "commands/estimate.py",
         "commands/explain.py", "commands/tune.py", "commands/lint.py", "pipeline.py", "config.py",
         "sources/detect.py")


def count(text: str) -> int:
    n = 0
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type != tokenize.STRING:
            continue
        try:
            value = ast.literal_eval(tok.string)
        except (ValueError, SyntaxError):
            continue
        n += isinstance(value, str) and value in NAMES
    return n


def test_counter_sees_literals_only() -> None:
    assert count('x = "vllm"\ny = {"ollama": 1, "tgi": "sglang"}\n# "vllm" in a comment\n') == 4
    assert count('"""vllm serve"""\nz = "vllm serve"\n') == 0


def test_engine_names_outside_the_plugins() -> None:
    per_file: Counter[str] = Counter()
    for p in SRC.rglob("*.py"):
        rel = p.relative_to(SRC).as_posix()
        if rel.startswith(("engines/", "data/")):
            continue
        per_file[rel] = count(p.read_text(encoding="utf-8"))
    assert {f: per_file[f] for f in CLEAN if per_file[f]} == {}
    found = {f: n for f, n in per_file.items() if n}
    assert found == {f: n for f, (n, _) in USER_TEXT.items()}, \
        "engine names outside engines/ and data/ (ask the plugin, or put it in the engine's data file): " + \
        ", ".join(f"{f} {n}" for f, n in sorted(found.items()))
