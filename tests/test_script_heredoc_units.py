"""A setup script that writes a systemd unit from a heredoc (`cat > /etc/systemd/system/x.service
<<EOF ... ExecStart=/usr/local/bin/llama-server ...`), a common bare-metal shape: the server was
not read at all ("0 servers"). The unit is read as the unit it becomes; an unquoted delimiter lets
the shell expand the script's variables and undo `\\\\` first."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.cli import main
from servefit.sources import scan_file

SETUP = r"""#!/bin/bash
MODEL_DIR=/opt/models
MODEL_FILE=Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf
cat > /etc/systemd/system/llama-server.service <<EOF
[Service]
Environment=LLAMA_ARG_N_PARALLEL=2
ExecStart=/usr/local/bin/llama-server \\
    --model ${MODEL_DIR}/${MODEL_FILE} \\
    --host 127.0.0.1 \\
    --ctx-size 131072
EOF
sudo tee /etc/systemd/system/qwen.service > /dev/null << 'UNIT'
[Service]
ExecStart=/usr/local/bin/llama-server -m /opt/models/Qwen2.5-7B-Instruct-Q4_K_M.gguf -c 8192 --host 127.0.0.1
UNIT
systemctl daemon-reload
"""


def test_units_written_from_heredocs_are_read(tmp_path: Path) -> None:
    p = tmp_path / "setup.sh"
    p.write_text(SETUP)
    a, b = scan_file(str(p)).sites
    assert (a.name, [t.text for t in a.argv]) == ("systemd/llama-server.service", [
        "/usr/local/bin/llama-server", "--model", "/opt/models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
        "--host", "127.0.0.1", "--ctx-size", "131072"])
    ctx = a.argv[6].span
    assert (ctx.line, ctx.col, SETUP[ctx.start:ctx.end]) == (10, 16, "131072")
    assert {k: t.text for k, t in a.env.items()} == {"LLAMA_ARG_N_PARALLEL": "2"}  # not the script's MODEL_DIR
    assert (b.name, [t.text for t in b.argv][1:4]) == ("systemd/qwen.service", [
        "-m", "/opt/models/Qwen2.5-7B-Instruct-Q4_K_M.gguf", "-c"])


def test_tune_writes_into_the_heredoc(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "setup.sh"
    p.write_text(SETUP)
    main(["tune", str(p), "--gpu", "T4", "--write"])
    capsys.readouterr()
    # each unit in its own idiom: the Environment= entry and the flag where they are written
    assert p.read_text() == SETUP.replace("LLAMA_ARG_N_PARALLEL=2", "LLAMA_ARG_N_PARALLEL=1").replace(
        "--ctx-size 131072", "--ctx-size 65536").replace(
        "-c 8192 --host 127.0.0.1", "-c 131072 --host 127.0.0.1 --parallel 8")
