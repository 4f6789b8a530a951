"""Dockerfiles named with `_` or `-` after the word (TGI's own Dockerfile_intel, Dockerfile_trtllm,
Dockerfile_amd beside Dockerfile.neuron) were not read at all, while Dockerfile.nix was: their
servers went unlisted without a word."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.cli import main
from servefit.sources import file_kind

INTEL = """FROM intel/intel-extension-for-pytorch:2.3.110-xpu AS xpu
ENV HF_HOME=/data PORT=80
ENTRYPOINT ["text-generation-launcher"]
CMD ["--json-output", "--max-total-tokens", "lots"]
"""


@pytest.mark.parametrize("name", ["Dockerfile_intel", "Dockerfile-cuda", "dockerfile_amd", "Containerfile_rocm",
                                  "Containerfile-xpu", "Dockerfile.neuron", "cuda.Dockerfile"])
def test_dockerfile_name_forms(name: str) -> None:
    assert file_kind(f"repo/{name}") == "dockerfile"


@pytest.mark.parametrize("name", ["Dockerfiles.md", "dockerfiles", "mydockerfile"])
def test_other_names_are_not_dockerfiles(name: str) -> None:
    assert file_kind(f"repo/{name}") != "dockerfile"


def test_an_underscore_dockerfile_is_linted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "Dockerfile_intel"
    f.write_text(INTEL)
    main(["lint", str(tmp_path), "--gpu", "A100"])
    out = capsys.readouterr().out
    assert f"{f}:4:46: TGI002 argument --max-total-tokens: invalid int value: 'lots'\n" in out
    assert out.endswith("in 1 file (1 server)\n")
