"""`servefit lint -- COMMAND...`: a launch command in place of paths, as estimate takes it, linted
as a one-line script (the same findings, spans on the command's own columns)."""

from __future__ import annotations

import json
import subprocess
import sys

CMD = ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "999999"]


def servefit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "servefit", *args], capture_output=True, text=True, timeout=60)


def test_a_command_after_dashes_is_linted_with_the_span_of_its_setting():
    out = servefit("lint", "--gpu", "L4", "--select", "VLLM", "--", *CMD)
    assert out.returncode == 1, out.stderr
    line = " ".join(CMD)
    col = line.index("999999") + 1
    assert out.stdout.splitlines()[0] == (
        f"<command line>:1:{col}: VLLM006 User-specified max_model_len (999999) is greater than the derived "
        "max_model_len (131072 for meta-llama/Llama-3.1-8B-Instruct). Set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 to override. "
        "[GPU: L4 ×1 from --gpu]")


def test_servefit_options_after_the_command_and_a_quoted_command_agree():
    a = servefit("lint", "--select", "VLLM", "--format", "json", "--", *CMD, "--gpu", "L4")
    b = servefit("lint", "--select", "VLLM", "--gpu", "L4", "--format", "json", " ".join(CMD))
    assert a.returncode == b.returncode == 1, (a.stderr, b.stderr)
    da, db = json.loads(a.stdout), json.loads(b.stdout)
    assert [f["code"] for f in da] == [f["code"] for f in db] == ["VLLM006"]
    assert da == db


def test_lint_and_estimate_agree_about_the_same_command():
    lint = servefit("lint", "--gpu", "L4", "--format", "json", "--", *CMD[:3])
    est = servefit("estimate", "--gpu", "L4", "--format", "json", "--", *CMD[:3])
    codes = {f["code"] for f in json.loads(lint.stdout)}
    assert {f["code"] for f in json.loads(est.stdout)["findings"]} <= codes
    assert "VLLM003" in codes


def test_not_a_command_nor_a_file_is_one_line_and_exit_2():
    out = servefit("lint", "--", "nginx", "-g", "daemon off;")
    assert out.returncode == 2 and out.stderr.strip() == "servefit: error: nginx: no such file or directory"
