"""Suppressions are per file (issue 14, Done-when 4): an ignore in a.yaml never silences the
same finding at the same line of b.yaml, nor does a file-ignore or a k8s annotation on an
object that happens to share its name with one in another file."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.config import Config
from servefit.linter.policy import apply
from servefit.linter.run import LintOptions, lint_paths

EXAMPLE = (Path(__file__).resolve().parent.parent / "examples" / "k8s" / "vllm-llama-8b.yaml").read_text()
LINE = "            - meta-llama/Llama-3.1-8B-Instruct\n"  # line 21: VLLM003 (131k on an L4)


def _lint(tmp_path: Path, a: str, b: str) -> list[tuple[str, int, str]]:
    (tmp_path / "a.yaml").write_text(a)
    (tmp_path / "b.yaml").write_text(b)
    cfg = Config(root=str(tmp_path))
    result = lint_paths([str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")], LintOptions(config=cfg))
    return [(Path(f.span.file).name, f.span.line, f.code) for f in apply(result, cfg) if f.span is not None]


def test_line_ignore_applies_to_its_own_file_only(tmp_path: Path) -> None:
    a = EXAMPLE.replace(LINE, LINE.rstrip("\n") + "  # servefit: ignore[VLLM003] reviewed: long-context pod\n")
    found = _lint(tmp_path, a, EXAMPLE)
    assert ("b.yaml", 21, "VLLM003") in found
    assert ("a.yaml", 21, "VLLM003") not in found
    assert not any(code == "SF010" for _, _, code in found)  # the ignore was used, in a.yaml


def test_ignore_in_the_other_file_at_the_same_line_is_unused(tmp_path: Path) -> None:
    b = EXAMPLE.replace(LINE, LINE.rstrip("\n") + "  # servefit: ignore[VLLM003] reviewed\n")
    found = _lint(tmp_path, EXAMPLE, b)
    assert ("a.yaml", 21, "VLLM003") in found and ("b.yaml", 21, "VLLM003") not in found


def test_file_ignore_applies_to_its_own_file_only(tmp_path: Path) -> None:
    a = "# servefit: file-ignore[VLLM003] this pool is being replaced\n" + EXAMPLE
    found = _lint(tmp_path, a, "#\n" + EXAMPLE)
    assert ("b.yaml", 22, "VLLM003") in found and not any(f == "a.yaml" and c == "VLLM003" for f, _, c in found)


def test_annotation_on_a_same_named_object_in_another_file(tmp_path: Path) -> None:
    a = EXAMPLE.replace("  labels: {app: llama-8b}\nspec:",
                        "  labels: {app: llama-8b}\n  annotations: {servefit.io/ignore-VLLM003: \"reviewed\"}\nspec:")
    found = _lint(tmp_path, a, "#\n" + EXAMPLE)  # same Deployment name, same server name
    assert ("b.yaml", 22, "VLLM003") in found
    assert not any(f == "a.yaml" and c == "VLLM003" for f, _, c in found)


def _lint_cfg(tmp_path: Path, a: str, b: str, cfg: Config, baseline: str | None = None) -> list[tuple[str, int, str]]:
    (tmp_path / "a.yaml").write_text(a)
    (tmp_path / "b.yaml").write_text(b)
    result = lint_paths([str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")], LintOptions(config=cfg))
    return [(Path(f.span.file).name, f.span.line, f.code) for f in apply(result, cfg, baseline) if f.span is not None]


def test_both_files_report_the_same_line_without_suppressions(tmp_path: Path) -> None:
    """The premise of every test here: identical files give the same finding at the same line."""
    found = _lint(tmp_path, EXAMPLE, EXAMPLE)
    assert ("a.yaml", 21, "VLLM003") in found and ("b.yaml", 21, "VLLM003") in found


def test_ignore_on_the_line_above_applies_to_its_own_file_only(tmp_path: Path) -> None:
    own_line = "            # servefit: ignore[VLLM003] reviewed: long-context pod\n"
    a = EXAMPLE.replace(LINE, own_line + LINE)  # the finding moves to line 22 in a.yaml
    b = "#\n" + EXAMPLE  # ... and in b.yaml, with no directive there
    found = _lint(tmp_path, a, b)
    assert ("b.yaml", 22, "VLLM003") in found
    assert ("a.yaml", 22, "VLLM003") not in found
    assert not any(code == "SF010" for _, _, code in found)


def test_ignores_in_both_files_each_silence_their_own(tmp_path: Path) -> None:
    a = EXAMPLE.replace(LINE, LINE.rstrip("\n") + "  # servefit: ignore[VLLM003] reviewed\n")
    b = EXAMPLE.replace(LINE, LINE.rstrip("\n") + "  # servefit: ignore[VLLM019] wrong code\n")
    found = _lint(tmp_path, a, b)
    assert ("a.yaml", 21, "VLLM003") not in found
    assert ("b.yaml", 21, "VLLM003") in found  # b's ignore names another rule
    assert ("b.yaml", 21, "SF010") in found  # ... and is unused there; a's was used
    assert ("a.yaml", 21, "SF010") not in found


def test_file_ignore_in_the_other_file_leaves_this_one(tmp_path: Path) -> None:
    b = "# servefit: file-ignore[VLLM] this pool is being replaced\n" + EXAMPLE
    found = _lint(tmp_path, "#\n" + EXAMPLE, b)
    assert ("a.yaml", 22, "VLLM003") in found
    assert not any(f == "b.yaml" and c.startswith("VLLM") for f, _, c in found)


def test_per_file_ignores_match_the_file_name(tmp_path: Path) -> None:
    cfg = Config(root=str(tmp_path), per_file_ignores={"a.yaml": ["VLLM003"]})
    found = _lint_cfg(tmp_path, EXAMPLE, EXAMPLE, cfg)
    assert ("b.yaml", 21, "VLLM003") in found
    assert ("a.yaml", 21, "VLLM003") not in found


def test_per_file_ignores_glob_in_a_directory(tmp_path: Path) -> None:
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "a.yaml").write_text(EXAMPLE)
    (tmp_path / "a.yaml").write_text(EXAMPLE)
    cfg = Config(root=str(tmp_path), per_file_ignores={"legacy/*.yaml": ["VLLM003"]})
    files = [str(tmp_path / "legacy" / "a.yaml"), str(tmp_path / "a.yaml")]
    result = lint_paths(files, LintOptions(config=cfg))
    found = [(cfg.relative(f.span.file), f.span.line, f.code) for f in apply(result, cfg) if f.span is not None]
    assert ("a.yaml", 21, "VLLM003") in found  # the same base name outside legacy/ is not ignored
    assert ("legacy/a.yaml", 21, "VLLM003") not in found


@pytest.mark.parametrize("recorded, other", [("a.yaml", "b.yaml"), ("b.yaml", "a.yaml")])
def test_baseline_of_one_file_does_not_absorb_the_other(tmp_path: Path, recorded: str, other: str) -> None:
    """Recorded from one file only; the other file (linted before or after it) still reports."""
    from servefit import baseline

    cfg = Config(root=str(tmp_path))
    (tmp_path / "a.yaml").write_text(EXAMPLE)
    (tmp_path / "b.yaml").write_text(EXAMPLE)
    only = apply(lint_paths([str(tmp_path / recorded)], LintOptions(config=cfg)), cfg)
    assert any(f.code == "VLLM003" for f in only)
    base = str(tmp_path / "baseline.json")
    baseline.write(base, only, cfg.relative)
    found = _lint_cfg(tmp_path, EXAMPLE, EXAMPLE, cfg, baseline=base)
    assert (other, 21, "VLLM003") in found  # new: same line, same server, same setting, other file
    assert not any(f == recorded for f, _, _ in found)  # everything in the recorded file was absorbed
    assert {c for f, _, c in found if f == other} == {f.code for f in only}
