"""Compose files layered on a base, as `docker compose -f docker-compose.yml -f
docker-compose.gpu.yml` reads them: an overlay beside a base is one deployment with it (later
layers replace the command and the GPU request, merge environment by variable), the base reads
its standard override as docker compose does by default, and the base alone is not reported
beside the layered service. The files are tiny, with the shapes of public repositories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main
from servefit.sources.assemble import assemble

BASE = """services:
  vllm:
    image: vllm/vllm-openai:v0.10.1
    command: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "16384"]
    environment:
      - VLLM_LOGGING_LEVEL=INFO
      - HF_HOME=/data/hf
    ports:
      - "127.0.0.1:8000:8000"
  webui:
    image: ghcr.io/open-webui/open-webui:main
"""
# the GPU variant: another command, a GPU reservation whose count is a variable with a default
GPU = """services:
  vllm:
    command: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "16384",
              "--tensor-parallel-size", "2"]
    environment:
      VLLM_LOGGING_LEVEL: DEBUG
    ipc: host
    deploy:
      resources:
        reservations:
          devices:
            - driver: ${GPU_DRIVER-nvidia}
              count: ${GPU_COUNT-2}
              capabilities: [gpu]
"""
# open-webui's shape: the overlay only reserves the GPU; the command stays the base's
GPU_ONLY = """services:
  vllm:
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities:
                - gpu
"""


def pair(tmp_path: Path, overlay: str = GPU, name: str = "docker-compose.gpu.yml") -> Path:
    (tmp_path / "docker-compose.yml").write_text(BASE)
    (tmp_path / name).write_text(overlay)
    return tmp_path


def at(tok) -> tuple[str, int, int]:
    return Path(tok.span.file).name, tok.span.line, tok.span.col


def test_overlay_is_read_on_top_of_its_base(tmp_path: Path) -> None:
    [srv] = assemble([str(pair(tmp_path))], plan=False).servers
    site = srv.site
    assert site.name == "compose/vllm+docker-compose.gpu.yml"
    assert [t.text for t in site.argv][-2:] == ["--tensor-parallel-size", "2"]  # the overlay's command
    assert at(site.argv[-1]) == ("docker-compose.gpu.yml", 4, 42)
    assert Path(site.file).name == "docker-compose.gpu.yml" and site.line == 3
    assert site.env["VLLM_LOGGING_LEVEL"].text == "DEBUG" and at(site.env["VLLM_LOGGING_LEVEL"]) == \
        ("docker-compose.gpu.yml", 6, 27)
    assert site.env["HF_HOME"].text == "/data/hf" and at(site.env["HF_HOME"]) == ("docker-compose.yml", 7, 17)
    assert (site.gpu.count, site.gpu.source) == (2, "compose deploy.resources.reservations.devices count")
    assert Path(site.gpu.span.file).name == "docker-compose.gpu.yml"
    assert site.workload.shm is True  # ipc: host from the overlay
    assert site.image == "vllm/vllm-openai:v0.10.1"  # the base's image


def test_overlay_without_a_command_keeps_the_base_command_and_its_place(tmp_path: Path) -> None:
    [srv] = assemble([str(pair(tmp_path, GPU_ONLY))], plan=False).servers
    site = srv.site
    assert Path(site.file).name == "docker-compose.yml" and site.line == 4  # where the command is
    assert at(site.argv[-1]) == ("docker-compose.yml", 4, 74)
    assert site.gpu.count == 1 and Path(site.gpu.span.file).name == "docker-compose.gpu.yml"


def test_lint_reports_the_layered_service_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before, the overlay was not read at all (no engine named in it) and the base's server was
    checked on one GPU; now the tensor-parallel 2 on the overlay's 2 GPUs is what is checked."""
    d = pair(tmp_path)
    rc = main(["lint", str(d), "--gpu", "L4", "--list-sites", "--format", "json"])
    sites = json.loads(capsys.readouterr().out)
    assert rc == 0 and [s["name"] for s in sites] == ["compose/vllm+docker-compose.gpu.yml"]
    [s] = sites
    assert s["gpu"]["count"] == 2 and s["settings"]["tensor_parallel_size"] == 2


def test_the_base_alone_is_read_alone(tmp_path: Path) -> None:
    """`docker compose up` without -f reads no overlay: neither does `lint docker-compose.yml`."""
    d = pair(tmp_path)
    [srv] = assemble([str(d / "docker-compose.yml")], plan=False).servers
    assert srv.site.name == "compose/vllm" and srv.site.gpu is None
    assert srv.site.env["VLLM_LOGGING_LEVEL"].text == "INFO"


def test_the_standard_override_is_read_with_its_base_as_docker_compose_does(tmp_path: Path) -> None:
    override = GPU_ONLY.replace("count: 1", "count: 4")
    d = pair(tmp_path, override, "docker-compose.override.yml")
    for paths in ([d / "docker-compose.yml"], [d], [d / "docker-compose.override.yml"]):
        [srv] = assemble([str(p) for p in paths], plan=False).servers
        assert srv.site.name == "compose/vllm" and srv.site.gpu.count == 4, paths


@pytest.mark.parametrize("cmd", ["estimate", "tune"])
def test_estimate_and_tune_take_the_pair_as_lint_does(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      cmd: str) -> None:
    d = pair(tmp_path)
    rc = main([cmd, str(d / "docker-compose.yml"), str(d / "docker-compose.gpu.yml"), "--gpu", "L4",
               "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    servers = out if cmd == "estimate" else out["sites"]
    assert rc in (0, 1) and len(servers) == 1
    assert servers[0]["gpu"]["count"] == 2
