"""LCPP018 (less free than llama.cpp's 1 GiB --fit margin, common/common.h fit_params_target) and
tune agree: tune proposed -c 131072 -ub 1024 on an RTX 4090 (624 MiB free), which lint then
reported, and called such a file "already the best one". tune now counts a plan lint reports
LCPP018 about as not serving, and explain's sweep marks it TIGHT."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

CMD = "llama-server -m Meta-Llama-3.1-8B-Instruct-Q6_K.gguf -c {ctx} -ub 1024 -ngl 99 -fit off\n"


def _lint(capsys: pytest.CaptureFixture[str], f: Path) -> list[tuple[str, str]]:
    main(["lint", str(f), "--gpu", "RTX4090", "--format", "json", "--fail-on", "never"])
    return [(x["code"], x["message"]) for x in json.loads(capsys.readouterr().out) if x["code"] != "SF004"]


def test_tune_raises_the_context_only_as_far_as_lint_accepts(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "serve.sh"
    f.write_text(CMD.format(ctx=8192))
    assert _lint(capsys, f) == []
    main(["tune", str(f), "--gpu", "RTX4090", "--write"])
    out = capsys.readouterr().out
    assert "  tuned   context 16,384 x 8 users, KV f16, weights Q6_K, headroom 5.0%\n" in out
    assert f.read_text() == CMD.format(ctx=131072).replace("-fit off\n", "-fit off --parallel 8\n")
    assert _lint(capsys, f) == [("LCPP007", "-c 131072 is shared by 8 slots: each request can use at most "
                                            "16384 tokens (n_ctx_seq) [GPU: RTX4090 ×1 from --gpu]")]


def test_tune_fixes_what_lcpp018_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "serve.sh"
    f.write_text(CMD.format(ctx=131072))
    assert _lint(capsys, f) == [("LCPP018", "CUDA0 keeps only 624 MiB free [GPU: RTX4090 ×1 from --gpu]")]
    main(["tune", str(f), "--gpu", "RTX4090", "--write"])
    out = capsys.readouterr().out
    assert ("  now     context 131,072, KV f16, weights Q6_K, headroom 2.6%: starts, but with less free "
            "than llama.cpp's --fit margin (LCPP018)\n") in out
    assert "  change  --ubatch-size 512 [safe]\n" in out
    assert f.read_text() == CMD.format(ctx=131072).replace("-ub 1024", "-ub 512")
    assert _lint(capsys, f) == []


def test_explain_marks_a_context_lint_reports_as_tight(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "serve.sh"
    f.write_text(CMD.format(ctx=131072))
    main(["explain", str(f), "--gpu", "RTX4090", "--sweep", "context", "--batch", "1"])
    out = capsys.readouterr().out
    assert "   65,536    8.00 GiB   14.56 GiB   61.8%     1.00  OK\n" in out
    assert "  131,072   16.00 GiB   22.94 GiB   97.4%     0.00  TIGHT  ◀ OOM boundary\n" in out
    assert "  131,072 |             0             1             2\n" in out


def test_tune_for_context_lowers_the_ubatch_lint_would_report(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """--objective context: 131072 tokens fit with -ub 1024 at 624 MiB free, which tune wrote
    before; -ub 512 keeps 1.02 GiB free."""
    f = tmp_path / "serve.sh"
    f.write_text(CMD.format(ctx=8192))
    main(["tune", str(f), "--gpu", "RTX4090", "--objective", "context", "--write"])
    out = capsys.readouterr().out
    assert "  change  --ubatch-size 512, --ctx-size 131072, --parallel 1 [safe]\n" in out
    assert f.read_text() == CMD.format(ctx=131072).replace("-ub 1024", "-ub 512").replace(
        "-fit off\n", "-fit off --parallel 1\n")
    assert _lint(capsys, f) == []


@pytest.mark.parametrize("fitt, lint, written", [
    # a smaller --fit-target is the margin the user asked for: 624 MiB free is enough, and tune agrees
    ("512", [], None),
    # a larger one: lint reports the 624 MiB against it, and tune halves the context to keep 2 GiB
    ("2048", [("LCPP018", "CUDA0 keeps only 624 MiB free (--fit-target 2048 MiB) [GPU: RTX4090 ×1 from --gpu]")],
     CMD.format(ctx=65536).replace("-fit off\n", "-fit off -fitt 2048 --parallel 1\n")),
])
def test_the_margin_is_the_fit_target(tmp_path: Path, capsys: pytest.CaptureFixture[str], fitt: str,
                                      lint: list[tuple[str, str]], written: str | None) -> None:
    f = tmp_path / "serve.sh"
    text = CMD.format(ctx=131072).replace("-fit off\n", f"-fit off -fitt {fitt}\n")
    f.write_text(text)
    assert _lint(capsys, f) == lint
    main(["tune", str(f), "--gpu", "RTX4090", "--write"])
    capsys.readouterr()
    assert f.read_text() == (written or text)
    assert _lint(capsys, f) == []
