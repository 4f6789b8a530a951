"""Problems found by running every command on public deployment repositories (session 25 trial);
each test carries a small synthetic file with the shape that broke, never the fetched file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main


def _sites(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict]:
    rc = main(["lint", *args, "--list-sites", "--output-format", "json"])
    assert rc == 0
    return json.loads(capsys.readouterr().out)


def test_a_for_loops_word_list_is_not_a_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`for d in "$(VOLUME_DIR)" ...` over folders named after llama-server was read as a server
    (with LCPP001 on the folder path); the server the loop body starts is still read."""
    (tmp_path / "Makefile").write_text(
        "VOLUME_DIR := $(HOME)/docker-volumes/llama-server\n"
        "dirs:\n"
        "\t@for d in \"$(VOLUME_DIR)\" \"$(VOLUME_DIR)/models\"; do \\\n"
        "\t\tmkdir -p \"$$d\"; \\\n"
        "\tdone\n")
    (tmp_path / "run.sh").write_text(
        "#!/bin/sh\n"
        "select m in /opt/vllm /opt/llama-server; do break; done\n"
        "for m in a.gguf b.gguf; do llama-server -m \"/models/$m\" -c 4096; done\n")
    sites = _sites(capsys, str(tmp_path))
    assert [(Path(s["file"]).name, s["line"], s["engine"]) for s in sites] == [("run.sh", 3, "llamacpp")]
    assert sites[0]["settings"] == {"ctx_size": 4096}
    assert sites[0]["settings_raw"]["ctx_size"]["location"] == {"file": str(tmp_path / "run.sh"), "line": 3, "col": 60,
                                                               "end_line": 3, "end_col": 64}
