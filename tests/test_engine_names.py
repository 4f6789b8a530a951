"""Engine names outside engines/ and data/ (issue 14, Done-when 3): every string literal that is
an engine's name, in code that should ask the engine plugins instead. The goal is none outside
help text; this test is the ratchet on the way there: the count may only go down, and the shared
assembly and target code has none at all."""

from __future__ import annotations

import ast
import io
import tokenize
from collections import Counter
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "servefit"
NAMES = {"vllm", "llamacpp", "ollama", "tgi", "sglang"}
BUDGET = 155  # 228 before issue 14; 155 with diagnose's per-release fixes (issue 16); 156 with recognition, listen and parallel data in data/engines/*.yaml, tune adapters in engines
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
    total = sum(per_file.values())
    assert total <= BUDGET, f"{total} engine names outside engines/ (budget {BUDGET}): " + \
        ", ".join(f"{f} {n}" for f, n in per_file.most_common(8) if n)
