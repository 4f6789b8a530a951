"""`python -m sglang_router.launch_server`: SGLang's server options and the router's own, all
`--router-*` (sgl-router launch_server.py::main). The router's were SGL001 errors and the module
words themselves "unrecognized arguments: python3"; `lint -- COMMAND` did not know the module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

CMD = ("python3 -m sglang_router.launch_server --model-path Qwen/Qwen3-0.6B --dp-size 2 "
       "--router-policy cache_aware --router-dp-worker-base-port 31000 --context-length 8192 --router-dp-aware")


def _codes(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    main(["lint", *args, "--gpu", "H100", "--output-format", "json"])
    return [f["code"] for f in json.loads(capsys.readouterr().out)]


def test_the_routers_options_are_not_the_servers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "serve.sh"
    p.write_text(CMD + "\n")
    assert _codes(capsys, str(p)) == []
    main(["estimate", str(p), "--gpu", "H100", "--format", "json"])
    [plan] = json.loads(capsys.readouterr().out)
    assert plan["engine"] == "sglang" and plan["max_model_len"] == 8192
    assert "--router-policy --router-dp-worker-base-port --router-dp-aware: options of the SGLang router, " \
           "not of SGLang's server (not checked)" in plan["assumptions"]


def test_a_wrong_server_option_through_the_router_is_still_found(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "serve.sh"
    p.write_text(CMD + " --context-lenght 4096\n")
    assert _codes(capsys, str(p)) == ["SGL001"]


def test_the_command_given_to_lint(capsys: pytest.CaptureFixture[str]) -> None:
    assert _codes(capsys, "--", *CMD.split()) == []
