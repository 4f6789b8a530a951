"""Suppressions are per file (issue 14, Done-when 4): an ignore in a.yaml never silences the
same finding at the same line of b.yaml, nor does a file-ignore or a k8s annotation on an
object that happens to share its name with one in another file."""

from __future__ import annotations

from pathlib import Path

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
