"""VLLM018 (max-model-len not set, the model's 32k+ length taken) and tune agree: lint warned about
`vllm serve meta-llama/Llama-3.1-8B-Instruct` while tune said "change none: the config is already
the best one". tune now writes the length its plan was made for, also where nothing else changes,
and lint has nothing to say about the file it wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

CMD = "vllm serve meta-llama/Llama-3.1-8B-Instruct --host 127.0.0.1\n"


def _codes(capsys: pytest.CaptureFixture[str], f: Path) -> list[str]:
    main(["lint", str(f), "--gpu", "H100", "--format", "json", "--fail-on", "never"])
    return [x["code"] for x in json.loads(capsys.readouterr().out)]


def test_tune_pins_the_length_vllm018_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "serve.sh"
    f.write_text(CMD)
    assert _codes(capsys, f) == ["VLLM018"]
    main(["tune", str(f), "--gpu", "H100", "--write"])
    out = capsys.readouterr().out
    assert "  tuned   context 131,072 x 3 users, KV auto (bfloat16), weights none, headroom 8.2%\n" in out
    assert "  change  --max-model-len 131072 [safe]\n" in out
    assert f.read_text() == CMD.replace("\n", " --max-model-len 131072\n")
    assert _codes(capsys, f) == []
    main(["tune", str(f), "--gpu", "H100", "--diff"])
    out = capsys.readouterr().out
    assert "  change  none: the config is already the best one\n" in out and "no changes to write" in out


def test_a_short_model_length_is_left_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Under 32k tokens VLLM018 says nothing, and tune writes nothing either (Llama-2's 4,096)."""
    f = tmp_path / "serve.sh"
    f.write_text(CMD.replace("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-2-7b-chat-hf"))
    assert "VLLM018" not in _codes(capsys, f)
    main(["tune", str(f), "--gpu", "H100", "--diff"])
    assert "--max-model-len" not in capsys.readouterr().out
