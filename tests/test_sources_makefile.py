"""Makefiles whose recipes start a server (`make serve`): servefit read none ("0 servers", nothing
said). A recipe line is read as the shell gets it from make: `$$` is `$`, `$(VAR)` a variable of
the file, a leading `@`/`-` is make's; findings point at the file's own characters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

MAKEFILE = """MODEL ?= bartowski/Qwen2.5-7B-Instruct-GGUF:Q4_K_M
CTX := 8192

.PHONY: serve
serve:
\t@echo starting
\tllama-server -hf $(MODEL) -c $(CTX) -ngl 99 \\
\t\t--port 8080 --host 127.0.0.1

vllm: deps
\t-vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 65536 --host 127.0.0.1 --port $$PORT
"""


def test_recipes_are_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "Makefile"
    f.write_text(MAKEFILE)
    main(["lint", str(f), "--gpu", "l4", "--format", "json", "--fail-on", "never"])
    found = [(x["code"], x["location"]["line"], x["location"]["column"]) for x in json.loads(capsys.readouterr().out)]
    assert found == [("SF004", 7, 2), ("VLLM006", 11, 55), ("SF001", 11, 85)]
    main(["models", str(f), "--format", "json"])
    rows = json.loads(capsys.readouterr().out)
    assert [(r["line"], r["server"], r["ref"]) for r in rows] == [
        (7, "make:serve", "bartowski/Qwen2.5-7B-Instruct-GGUF:Q4_K_M"), (11, "make:vllm", "Qwen/Qwen2.5-7B-Instruct")]


def test_tune_writes_a_make_variable_in_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "Makefile"
    f.write_text(MAKEFILE.replace("CTX := 8192", "CTX := 2048"))
    main(["tune", str(f), "--gpu", "l4", "--write"])
    capsys.readouterr()
    # the context is written where make sets it, a flag is added in the recipe's continuation style
    assert f.read_text() == MAKEFILE.replace("CTX := 8192", "CTX := 262144").replace(
        "\t\t--port 8080 --host 127.0.0.1\n", "\t\t--port 8080 --host 127.0.0.1 \\\n\t\t--parallel 8\n").replace(
        "--max-model-len 65536 --host 127.0.0.1 --port", "--max-model-len 32768 --host 127.0.0.1 --max-num-seqs 128 --port")
    main(["tune", str(f), "--gpu", "l4", "--diff"])
    assert "no changes to write" in capsys.readouterr().out
