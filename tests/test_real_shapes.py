"""Found by running every command on real deployment files from public repositories (a second
round; tests/test_trial_real_files.py holds the first). Each test writes a small file with the
shape that went wrong, never the fetched file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main
from servefit.sources import scan_file


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in err
    return rc, out, err


def _at(tok) -> tuple[int, int, str]:
    s = tok.span
    with open(s.file, encoding="utf-8", newline="") as fh:
        return s.line, s.col, fh.read()[s.start:s.end]


# llama-swap on Windows: the programs and models are Windows paths, a macro holds the program.
# Split with the POSIX rules the backslashes were escapes (`C:UsersBobllama-server.exe`), the
# program was not recognised and the file had no server at all, without a word.
LLAMA_SWAP_WINDOWS = r"""macros:
  "llamacpp-vulkan": >
    C:\Users\Bob\apps\llamacpp-vulkan\llama-server.exe
    --port ${PORT}
    --no-mmap

models:
  Qwen Coder 7B:
    ttl: 900
    cmd: |
      ${llamacpp-vulkan}
      -m F:\models\Qwen2.5-Coder-7B-Instruct-GGUF\Qwen2.5-Coder-7B-Instruct-Q4_K_M.gguf
      -c 16384
      --jinja
  quoted:
    cmd: >
      "C:\Program Files\llama\llama-server.exe" -m "F:\models\my model\Qwen2.5-7B-Instruct-Q4_K_M.gguf"
      --alias "say \"hi\"" -c 8192
"""


def test_llama_swap_on_windows_keeps_the_backslashes(tmp_path: Path) -> None:
    f = tmp_path / "config.yaml"
    f.write_text(LLAMA_SWAP_WINDOWS)
    coder, quoted = scan_file(str(f)).sites
    assert (coder.engine, coder.name, coder.line) == ("llamacpp", "llama-swap/Qwen Coder 7B", 11)
    assert [t.text for t in coder.argv] == [
        r"C:\Users\Bob\apps\llamacpp-vulkan\llama-server.exe", "--port", "5800", "--no-mmap",
        "-m", r"F:\models\Qwen2.5-Coder-7B-Instruct-GGUF\Qwen2.5-Coder-7B-Instruct-Q4_K_M.gguf",
        "-c", "16384", "--jinja"]
    assert _at(coder.argv[0]) == (3, 5, r"C:\Users\Bob\apps\llamacpp-vulkan\llama-server.exe")  # in the macro
    assert _at(coder.argv[5])[:2] == (12, 10) and _at(coder.argv[7]) == (13, 10, "16384")
    # quotes group, a backslash before a quote escapes it, other backslashes stay
    assert [t.text for t in quoted.argv] == [
        r"C:\Program Files\llama\llama-server.exe", "-m", r"F:\models\my model\Qwen2.5-7B-Instruct-Q4_K_M.gguf",
        "--alias", 'say "hi"', "-c", "8192"]
    assert quoted.engine == "llamacpp"


def test_llama_swap_on_windows_is_linted_and_estimated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "config.yaml"
    f.write_text(LLAMA_SWAP_WINDOWS)
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "RTX4090", "--list-sites", "--format", "json")
    sites = json.loads(out)
    assert [(s["name"], s["engine"], s["verdict"]) for s in sites] == [
        ("llama-swap/Qwen Coder 7B", "llamacpp", "started"), ("llama-swap/quoted", "llamacpp", "started")]
    assert sites[0]["settings"]["ctx_size"] == 16384
    rc, out, _ = _run(capsys, "estimate", str(f), "--gpu", "RTX4090", "--format", "json")
    assert [p["outcome"] for p in json.loads(out)] == ["started", "started"]


def test_a_posix_llama_swap_command_still_reads_backslashes_as_escapes(tmp_path: Path) -> None:
    f = tmp_path / "config.yaml"
    f.write_text("models:\n  m:\n    cmd: /app/llama-server -m /models/a\\ b.gguf -c 4096\n")
    [site] = scan_file(str(f)).sites
    assert [t.text for t in site.argv] == ["/app/llama-server", "-m", "/models/a b.gguf", "-c", "4096"]


# an install script that checks for the binary before writing a systemd unit: the test command
# `[ ! -f ".../llama-server" ]` was read as a llama-server launch with the argument `]` (LCPP001,
# exit 1) on a file that starts no server
INSTALL_SH = """#!/bin/bash
set -e
LLAMACPP_DIR="${LLAMACPP_DIR:-$HOME/git/llama.cpp}"
if [ ! -f "${LLAMACPP_DIR}/build/bin/llama-server" ]; then
    echo "ERROR: llama-server binary not found at ${LLAMACPP_DIR}/build/bin/llama-server"
    exit 1
fi
while [ ! -x "${LLAMACPP_DIR}/build/bin/llama-server" ]; do sleep 1; done
if /opt/llama/llama-server -m /models/qwen2.5-7b-instruct-q4_k_m.gguf -c 4096 --port 8080; then echo ok; fi
"""


def test_a_test_of_the_binary_is_not_a_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "install.sh"
    f.write_text(INSTALL_SH)
    [site] = scan_file(str(f)).sites  # only the command that `if` runs
    assert site.line == 9 and [t.text for t in site.argv][:3] == ["/opt/llama/llama-server", "-m",
                                                                  "/models/qwen2.5-7b-instruct-q4_k_m.gguf"]
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "L4", "--format", "json")
    assert rc == 0 and not [d for d in json.loads(out) if d["code"] == "LCPP001"]


LOGS = Path(__file__).parent / "fixtures" / "logs"
# a TGI start script as public repos write it, and an unrelated vLLM manifest beside it
TGI_SCRIPT = """model=Qwen/Qwen3-1.7B
docker run --gpus all --shm-size 1g -p 8000:80 -v $PWD/models:/models \\
    ghcr.io/huggingface/text-generation-inference:latest \\
    --model-id $model \\
    --max-total-tokens 8093 \\
    --max-batch-prefill-tokens 8092
"""
VLLM_A = """apiVersion: apps/v1
kind: Deployment
metadata: {name: short}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.11.0
        args: ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"]
"""
VLLM_B = VLLM_A.replace("name: short", "name: long").replace(', "--max-model-len", "8192"', "")


def _diagnose(capsys: pytest.CaptureFixture[str], log: str, *argv: str) -> dict:
    rc, out, _ = _run(capsys, "diagnose", str(LOGS / log), *argv, "--format", "json")
    assert rc == 0
    return json.loads(out)


def test_diagnose_repo_never_points_a_log_at_another_engines_server(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """`diagnose vllm.log --repo R` put the vLLM fixes (`--max-model-len`) on the TGI script, the only
    server in R, and a TGI log's `--max-batch-prefill-tokens` on a vLLM manifest."""
    (tmp_path / "start-tgi.sh").write_text(TGI_SCRIPT)
    doc = _diagnose(capsys, "vllm_kv_refusal.log", "--repo", str(tmp_path))
    assert "setting" not in doc and "tune" not in doc and not any("start-tgi.sh" in f for f in doc["fix"])
    assert doc["notes"] == [f"this log is vLLM's, and no server in {tmp_path} runs vLLM: the fixes name no file"]
    # the TGI log says max_batch_prefill_tokens=16000, the script sets 8092: another config wrote it
    doc = _diagnose(capsys, "tgi_prefill.log", "--repo", str(tmp_path))
    assert "setting" not in doc and not any("start-tgi.sh" in f for f in doc["fix"])
    assert doc["notes"] == [f"no server in {tmp_path} matches this log ({tmp_path / 'start-tgi.sh'}:4 sets "
                            "max_batch_prefill_tokens=8092 here, 16000 in the log): the fixes name no file"]
    # named with --config-file, the file is taken at its word, and the difference is said
    doc = _diagnose(capsys, "tgi_prefill.log", "--config-file", str(tmp_path / "start-tgi.sh"))
    assert doc["setting"]["name"] == "max_batch_prefill_tokens" and doc["setting"]["line"] == 6
    assert "sets max_batch_prefill_tokens=8092 here, 16000 in the log" in doc["notes"][0]


def test_diagnose_repo_prefers_the_server_whose_settings_match_the_log(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a-short.yaml").write_text(VLLM_A)  # first in the walk, but max-model-len 8192 != 131072
    (tmp_path / "b-long.yaml").write_text(VLLM_B)
    doc = _diagnose(capsys, "vllm_kv_refusal.log", "--repo", str(tmp_path))
    assert doc["setting"]["name"] == "max_model_len" and doc["fix"][0].startswith(f"{tmp_path / 'b-long.yaml'}:")
    assert not doc.get("notes")
