"""Every fixture and example parses without error, and every span is consistent with its file."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.sources import iter_files, scan_file
from servefit.sources.text import LineIndex

ROOT = Path(__file__).parent.parent
FILES = sorted(set(iter_files([str(ROOT / "tests" / "fixtures" / "sources")])) | set(iter_files([str(ROOT / "examples")])))
EXPECTED_PROBLEMS = {"bad.yaml": {"SF105"}}


def _text(path: str) -> str:
    with open(path, encoding="utf-8", newline="") as fh:
        return fh.read()


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(Path(p).relative_to(ROOT)))
def test_every_file_parses_and_every_span_is_exact(path):
    r = scan_file(path)
    codes = {f.code for f in r.findings}
    assert not codes & {"SF105", "SF108"} - EXPECTED_PROBLEMS.get(Path(path).name, set()), r.findings
    for site in r.sites:
        assert site.engine in ("vllm", "llamacpp", "ollama", "tgi", "sglang")
        assert site.argv or site.inputs.definition is not None
        toks = list(site.argv) + list(site.env.values())
        for tok in toks:
            s = tok.span
            if s is None:
                continue
            text = _text(s.file)
            assert 0 <= s.start <= s.end <= len(text)
            li = LineIndex(text, s.file)
            assert li.pos(s.start) == (s.line, s.col) and li.pos(s.end) == (s.end_line, s.end_col)
            written = text[s.start:s.end]
            plain = not any(c in written for c in "$\"'\\{") and not (tok.text.startswith("--") and written[:1] != "-")
            if plain and tok.text in written:  # values written as they are (not via a variable or a key)
                assert written == tok.text, (tok, written)


def test_examples_hold_one_server_per_launch_style():
    sites = [s for p in iter_files([str(ROOT / "examples")]) for s in scan_file(p).sites]
    kinds = {Path(s.file).parent.name for s in sites}
    assert kinds >= {"k8s", "compose", "scripts", "systemd", "helm", "skypilot", "llama-swap", "docker"}
    assert {s.engine for s in sites} >= {"vllm", "llamacpp", "ollama", "tgi"}
