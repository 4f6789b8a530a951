"""A llama-server whose slot holds more than the model was trained for (-c 262144 on Qwen2.5-7B,
32,768 tokens): lint warns LCPP011 ("possible training context overflow"), and tune said "change
none: the config is already the best one", keeping it. tune counts such a slot as not serving and
splits the context into slots the model can use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

SCRIPT = "llama-server -hf bartowski/Qwen2.5-7B-Instruct-GGUF:Q4_K_M -c 262144 -ngl 99 --host 127.0.0.1\n"


def test_tune_splits_a_context_past_training(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "serve.sh"
    f.write_text(SCRIPT)
    main(["tune", str(f), "--gpu", "l4", "--write"])
    out = capsys.readouterr().out
    # headroom: 13.6% with the L4's ~196 MiB CUDA context (12.2% when servefit took a flat 512 MiB)
    assert ("  now     context 262,144, KV f16, weights Q4_K_M, headroom 13.6%: starts, but a slot holds more than "
            "the model was trained for (LCPP011)") in out
    assert f.read_text() == SCRIPT.replace("--host 127.0.0.1\n", "--host 127.0.0.1 --parallel 8\n")
    main(["lint", str(f), "--gpu", "l4", "--format", "json", "--fail-on", "never"])
    assert [x["code"] for x in json.loads(capsys.readouterr().out) if x["severity"] != "info"] == []
