"""Fixes on lint findings (issue 14 item 4): VLLM003 offers the largest max-model-len that
fits, built by tune's patcher; `--diff` shows it, `--fix --unsafe-fixes` writes it. OLLM009's safe fix
writes the context length Ollama serves."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from servefit.cli import main

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "k8s" / "vllm-llama-8b.yaml"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture()
def manifest(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    p = tmp_path / "vllm.yaml"
    shutil.copy(EXAMPLE, p)
    return p


def test_diff_shows_the_unsafe_fix_only_when_asked(manifest: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "lint", str(manifest), "--diff")
    assert rc == 0 and out == "" and "1 unsafe fix(es) not shown" in err
    rc, out, _ = run(capsys, "estimate", str(manifest), "--format", "json")
    fits = json.loads(out)[0]["fitting_max_model_len"]
    rc, out, _ = run(capsys, "lint", str(manifest), "--diff", "--unsafe-fixes")
    assert rc == 1
    added = [ln for ln in out.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert added == ["+            - --max-model-len", f'+            - "{fits}"']
    assert manifest.read_text() == EXAMPLE.read_text()  # --diff writes nothing


def test_fix_writes_and_the_finding_is_gone(manifest: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = manifest.read_text()
    rc, out, err = run(capsys, "lint", str(manifest), "--fix")  # safe fixes only: nothing to do
    assert manifest.read_text() == before and "VLLM003" in out and rc == 1
    rc, out, err = run(capsys, "lint", str(manifest), "--fix", "--unsafe-fixes")
    assert "fixed 1 finding(s)" in err and "VLLM003" not in out and rc == 0
    after = manifest.read_text()
    assert after != before
    # only an insertion: every byte of the original is still there, in order
    i = after.index("            - --max-model-len\n")
    assert after[:i] + after[i:].split("\n", 2)[2] == before
    rc, out, _ = run(capsys, "lint", str(manifest), "--format", "json")
    assert "VLLM003" not in {d["code"] for d in json.loads(out)}
    rc, out, err = run(capsys, "lint", str(manifest), "--diff", "--unsafe-fixes")
    assert out == "" and rc == 0  # nothing left to fix


@pytest.mark.parametrize("text,want", [
    ("FROM qwen3:8b\nPARAMETER num_ctx 48000\n", "FROM qwen3:8b\nPARAMETER num_ctx 40960\n"),
    ("FROM qwen3:8b\nPARAMETER num_ctx 40960\n", None),  # the length served: nothing to fix
])
def test_ollama_num_ctx_past_the_model_is_fixed_safely_and_tune_agrees(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, want: str | None) -> None:
    """OLLM009 warned while `tune` said "the config is already the best one": Ollama serves the model's own
    length (40960 for Qwen3-8B), so writing it changes nothing that is served."""
    (tmp_path / ".git").mkdir()
    mf = tmp_path / "Modelfile"
    mf.write_text(text)
    rc, out, _ = run(capsys, "lint", str(mf), "--gpu", "L4", "--format", "json")
    found = {f["code"]: f for f in json.loads(out)}
    if want is None:
        assert "OLLM009" not in found
        rc, out, _ = run(capsys, "tune", str(mf), "--gpu", "L4", "--diff")
        assert "no changes to write" in out
        return
    assert found["OLLM009"]["severity"] == "warning"
    rc, out, err = run(capsys, "lint", str(mf), "--gpu", "L4", "--diff")  # safe: shown without --unsafe-fixes
    assert "-PARAMETER num_ctx 48000\n+PARAMETER num_ctx 40960" in out and "unsafe" not in err
    rc, out, _ = run(capsys, "tune", str(mf), "--gpu", "L4", "--diff")
    assert "-PARAMETER num_ctx 48000\n+PARAMETER num_ctx 40960" in out
    rc, _, err = run(capsys, "lint", str(mf), "--gpu", "L4", "--fix")
    assert mf.read_text() == want and "fixed 1 finding(s)" in err
    rc, out, _ = run(capsys, "lint", str(mf), "--gpu", "L4", "--format", "json")
    assert "OLLM009" not in {f["code"] for f in json.loads(out)}
