"""Shared pieces of the fuzz suite: example counts scaled by the Hypothesis profile, a corpus of
real-looking configs, and mutations of them."""

from __future__ import annotations

from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
CORPUS_DIRS = [ROOT / "tests" / "fixtures" / "sources", ROOT / "tests" / "fixtures" / "tune", ROOT / "examples"]


def fuzz(n: int) -> settings:
    """`n` examples under the default "ci" profile (100 examples); the nightly profile scales it."""
    scale = max(1, settings.default.max_examples // 100)
    return settings(max_examples=n * scale, deadline=None)


def corpus() -> list[tuple[str, str]]:
    """(path, text) of every fixture and example file that a wrapper reads."""
    out = []
    for d in CORPUS_DIRS:
        for p in sorted(d.rglob("*")):
            if p.is_file() and p.suffix not in (".md", ".toml", ".env") and p.name != ".env":
                out.append((str(p), p.read_text(encoding="utf-8")))
    return out


SPECIALS = ["&a ", "*a", "<<: *a\n", "{{ .Values.x }}", "{{- if .Values.y }}", "${X}", "${X:-y}", "$(Y)", "$Z",
            "\\\n", "'", '"', "`", "\ufeff", "\r\n", "\t", "- ", ": ", "[", "]", "{", "}", "#", "|\n", ">-\n",
            "!!python/object/apply:os.system ['true']", "\x00", "\x85", "\u2028", "---\n", "...\n", "? ",
            "--max-model-len", "--tensor-parallel-size 8", "-c 999999999", "=", "0.0.0.0", "--api-key",
            "sh -c '", "vllm serve ", "llama-server ", "ollama serve", "9" * 30, "-1", "nan", "1e309",
            "FROM ", "PARAMETER num_ctx ", "ADAPTER https://x/", "ExecStart=", "Environment=", "ENV ", "CMD [",
            "\n" * 3, " " * 40]
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)


@st.composite
def mutated(draw: st.DrawFn, files: list[tuple[str, str]]) -> tuple[str, str]:
    """A real-looking file with 1-4 edits: insertions of special or random text, deletions,
    duplicated or swapped lines, truncation."""
    path, text = draw(st.sampled_from(files))
    for _ in range(draw(st.integers(1, 4))):
        n = len(text)
        i = draw(st.integers(0, n))
        op = draw(st.sampled_from(["special", "random", "delete", "dup", "swap", "truncate", "replace"]))
        if op == "special":
            text = text[:i] + draw(st.sampled_from(SPECIALS)) + text[i:]
        elif op == "random":
            text = text[:i] + draw(TEXT) + text[i:]
        elif op == "delete":
            text = text[:i] + text[min(n, i + draw(st.integers(1, 60))):]
        elif op == "replace":
            text = text[:i] + draw(st.sampled_from(SPECIALS)) + text[min(n, i + draw(st.integers(1, 20))):]
        elif op == "truncate":
            text = text[:i]
        else:
            lines = text.splitlines(keepends=True)
            if len(lines) > 1:
                a = draw(st.integers(0, len(lines) - 1))
                b = draw(st.integers(0, len(lines) - 1))
                if op == "dup":
                    lines.insert(b, lines[a])
                else:
                    lines[a], lines[b] = lines[b], lines[a]
                text = "".join(lines)
    return path, text
