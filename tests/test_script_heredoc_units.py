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


# a script written from a heredoc (`cat > run.sh <<EOF`), or run from one (`bash <<EOF`): its
# commands are read as the script's own, their words pointing where they are written
SCRIPTS = r"""#!/bin/bash
CTX=131072
cat > /opt/serve.sh <<EOF
#!/bin/sh
exec vllm serve meta-llama/Llama-3.1-8B-Instruct \\
  --max-model-len ${CTX}
EOF
sudo tee /opt/sglang.sh > /dev/null <<-'SH'
<TAB>python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct --context-length $LEN
<TAB>SH
nohup vllm serve Qwen/Qwen2.5-0.5B-Instruct > small.log 2>&1 &
bash <<'RUN'
llama-server -m /models/Qwen2.5-14B-Instruct-Q4_K_M.gguf -c 131072
RUN
cat > notes.txt <<EOF
vllm serve not/a-server-but-a-note
EOF
""".replace("<TAB>", "\t")


def test_scripts_written_or_run_from_heredocs_are_read(tmp_path: Path) -> None:
    p = tmp_path / "setup.sh"
    p.write_text(SCRIPTS)
    sites = scan_file(str(p)).sites
    assert [(s.engine, [t.text for t in s.argv]) for s in sites] == [
        ("vllm", ["vllm", "serve", "Qwen/Qwen2.5-0.5B-Instruct"]),  # the script's own, read once
        ("vllm", ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "131072"]),
        ("sglang", ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen2.5-7B-Instruct",
                    "--context-length", "$LEN"]),
        ("llamacpp", ["llama-server", "-m", "/models/Qwen2.5-14B-Instruct-Q4_K_M.gguf", "-c", "131072"])]
    # the unquoted heredoc expands the script's CTX when it is written: the value is the assignment's
    ctx = sites[1].argv[4].span
    assert (ctx.line, SCRIPTS[ctx.start:ctx.end]) == (2, "131072")
    model = sites[2].argv[4].span  # a tab-stripped (<<-) body keeps its positions
    assert (model.line, SCRIPTS[model.start:model.end]) == (9, "Qwen/Qwen2.5-7B-Instruct")
    c = sites[3].argv[4].span
    assert (c.line, SCRIPTS[c.start:c.end]) == (13, "131072")
