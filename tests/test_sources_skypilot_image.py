"""SkyPilot `resources.image_id: docker:IMAGE`: the run script runs in that container, so its tag
is the engine's version (and its span is where the version is written)."""

from __future__ import annotations

from servefit.sources import scan_file

TASK = """resources:
  accelerators: L4:1
  image_id: docker:vllm/vllm-openai:v0.10.2
envs:
  MODEL: Qwen/Qwen3-8B
run: |
  vllm serve $MODEL --max-model-len 8192 -O.cudagraph_mode=NONE
"""


def test_docker_image_gives_the_version() -> None:
    [site] = scan_file("task.yaml", TASK).sites
    assert (site.engine, site.image, site.engine_version) == ("vllm", "vllm/vllm-openai:v0.10.2", "0.10.2")
    sp = site.image_span
    assert (sp.line, sp.col) == (3, 13)
    assert TASK[sp.start:sp.end] == "docker:vllm/vllm-openai:v0.10.2"


def test_a_cloud_image_is_no_container() -> None:
    task = TASK.replace("docker:vllm/vllm-openai:v0.10.2", "projects/deeplearning-platform/global/images/x")
    [site] = scan_file("task.yaml", task).sites
    assert (site.image, site.engine_version) == (None, None)


def test_the_release_judges_the_flags(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """-O.cudagraph_mode is a dotted compilation-config key from 0.10.1: accepted at 0.10.2, and the
    0.10.0 image rejects it."""
    from servefit.linter.run import LintOptions, lint_paths

    f = tmp_path / "task.yaml"
    f.write_text(TASK)
    assert [x.code for x in lint_paths([str(f)], LintOptions()).findings if x.code == "VLLM001"] == []
    f.write_text(TASK.replace("v0.10.2", "v0.10.0"))
    got = [(x.code, x.span.line, x.span.col) for x in lint_paths([str(f)], LintOptions()).findings
           if x.code == "VLLM001"]
    line = TASK.splitlines()[6]
    assert got == [("VLLM001", 7, line.index("-O.") + 1)] == [("VLLM001", 7, 42)]
