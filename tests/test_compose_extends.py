"""docker compose `extends:`: the base service (in another file or this one) is merged under the
service, so a service whose image and GPUs come from its base is still a server; a base another
file extends is that file's template, not a second deployment."""

from __future__ import annotations

from pathlib import Path

from servefit.linter.run import LintOptions, lint_paths
from servefit.sources import scan_file

BASE = """services:
  engine-base:
    image: ghcr.io/huggingface/text-generation-inference:3.3.4
    shm_size: 1g
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 2
              capabilities: [gpu]
"""
TOP = """services:
  tgi:
    extends:
      file: common/base.yaml
      service: engine-base
    profiles: [gpu]
    command: --model-id ${MODEL} --max-total-tokens 8192 --max-input-tokens 8192
"""


def _repo(tmp_path: Path) -> Path:
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "base.yaml").write_text(BASE)
    (tmp_path / "compose.yaml").write_text(TOP)
    (tmp_path / ".env").write_text("MODEL=Qwen/Qwen2.5-7B-Instruct\n")
    return tmp_path


def test_a_service_extending_another_files_service_is_read_with_its_base(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    [site] = scan_file(str(repo / "compose.yaml")).sites
    assert (site.engine, site.image, site.engine_version) == (
        "tgi", "ghcr.io/huggingface/text-generation-inference:3.3.4", "3.3.4")
    assert [t.text for t in site.argv] == ["text-generation-launcher", "--model-id", "Qwen/Qwen2.5-7B-Instruct",
                                           "--max-total-tokens", "8192", "--max-input-tokens", "8192"]
    assert (site.gpu.count, site.workload.shm) == (2, True)
    assert site.workload.compose_extends == [(str(repo / "common" / "base.yaml"), "engine-base")]
    found = lint_paths([str(repo)], LintOptions(gpu="l4"))
    assert len(found.sites) == 1  # the base is compose.yaml's template, not a deployment of its own
    tgi003 = [f for f in found.findings if f.code == "TGI003"]
    line = TOP.splitlines()[6]
    assert [(Path(f.span.file).name, f.span.line, f.span.col) for f in tgi003] == [("compose.yaml", 7, 77)]
    assert line[76:] == "8192" and line.rindex("8192") == 76  # the value of --max-input-tokens


def test_extends_in_the_same_file_keeps_both_services(tmp_path: Path) -> None:
    f = tmp_path / "compose.yaml"
    f.write_text(BASE.replace("engine-base:", "tgi-a:") + "    command: --model-id Qwen/Qwen3-8B\n"
                 "  tgi-b:\n    extends: tgi-a\n    command: --model-id Qwen/Qwen3-4B\n")
    sites = scan_file(str(f)).sites
    assert [(s.workload.service, s.argv[2].text, s.gpu.count) for s in sites] == [
        ("tgi-a", "Qwen/Qwen3-8B", 2), ("tgi-b", "Qwen/Qwen3-4B", 2)]
    assert len(lint_paths([str(f)], LintOptions(gpu="l4")).sites) == 2


def test_a_missing_base_file_leaves_the_service_as_written(tmp_path: Path) -> None:
    (tmp_path / "compose.yaml").write_text(TOP)
    assert scan_file(str(tmp_path / "compose.yaml")).sites == []
