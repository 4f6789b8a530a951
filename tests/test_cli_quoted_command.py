"""A launch command quoted as one word is read as the shell would split it; a path that does not
exist is reported as missing, not as an unrecognised engine."""

from __future__ import annotations

import json

import pytest

from servefit.cli import main


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    main([*argv, "--format", "json"])
    return json.loads(capsys.readouterr().out)


def test_quoted_command_is_the_same_as_the_command_after_dashes(capsys: pytest.CaptureFixture[str]) -> None:
    quoted = _json(capsys, "estimate", "vllm serve Qwen/Qwen3-8B --max-model-len 4096 --gpu l4")
    split = _json(capsys, "estimate", "--gpu", "l4", "--", "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "4096")
    assert quoted["max_model_len"] == split["max_model_len"] == 4096
    assert quoted["memory"] == split["memory"]
    assert quoted["gpu"]["name"] == "NVIDIA L4"


@pytest.mark.parametrize("target, message", [
    ("deploy/vllm.yaml", "servefit: error: deploy/vllm.yaml: no such file or directory"),
    ("vllm serve 'Qwen/Qwen3-8B", "servefit: error: cannot read the quoted command (No closing quotation): "
                                  "give it after `--` instead"),
])
def test_bad_one_word_targets(capsys: pytest.CaptureFixture[str], target: str, message: str) -> None:
    assert main(["estimate", "--gpu", "l4", target]) == 2
    assert capsys.readouterr().err.strip() == message
