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


# a systemd unit whose values come from an EnvironmentFile outside the repository, and an SGLang
# script whose parallel size is a variable: each typed flag given an unset variable was an
# "invalid int value" error in the parse, so every engine but vLLM planned `rejected_config`:
# list-sites and estimate said "refuses the configuration" and tune "nothing meets the needs",
# while lint reported only SF001 (the value is not known) and exited 0
UNIT = """[Unit]
Description=llama.cpp server

[Service]
EnvironmentFile=/etc/systemd/system/llama-server.env
ExecStart=/opt/llama.cpp/build/bin/llama-server -m /models/Qwen2.5-7B-Instruct-Q4_K_M.gguf \\
    --host ${HOST} --port ${PORT} -ngl ${NGL_LEVEL} --ctx-size ${CONTEXT_SIZE}
Restart=always
"""
SGLANG_SH = "python -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct --tp $TP --context-length 4096\n"
TGI_SH = "text-generation-launcher --model-id Qwen/Qwen2.5-7B-Instruct --num-shard $SHARDS --max-total-tokens 4096\n"


@pytest.mark.parametrize("name, text, var, flag", [("llama.service", UNIT, "CONTEXT_SIZE", "--ctx-size"),
                                                    ("serve.sh", SGLANG_SH, "TP", "--tp"),
                                                    ("tgi.sh", TGI_SH, "SHARDS", "--num-shard")])
def test_an_unset_variable_is_an_assumption_in_every_command(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             name: str, text: str, var: str, flag: str) -> None:
    f = tmp_path / name
    f.write_text(text)
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "L4", "--format", "json")
    found = json.loads(out)
    assert rc == 0 and any(d["code"] == "SF001" and var in d["message"] for d in found)
    # nothing claims the setting is missing, nor judges the default planned in its place
    assert not [d for d in found if d["code"] in ("LCPP008", "LCPP010")]
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "L4", "--list-sites", "--format", "json")
    [site] = json.loads(out)
    assert site["verdict"] == "started"
    rc, out, _ = _run(capsys, "estimate", str(f), "--gpu", "L4", "--format", "json")
    [plan] = json.loads(out)
    assert rc == 0 and plan["outcome"] == "started" and not [d for d in plan["findings"] if d["severity"] == "error"]
    assert f"{flag} is ${{{var}}}, which is not set here: planned with the engine's default " \
           "(pass the value, or set the variable in the file)" in plan["assumptions"]
    rc, out, _ = _run(capsys, "tune", str(f), "--gpu", "L4", "--format", "json")
    now = json.loads(out)["sites"][0]["current"]
    assert now["outcome"] == "started" and now["feasible"]


# a public Ollama compose file publishes its port through a variable with a default: the spec was
# split at the colon inside `${OLLAMA_PORT:-11434}`, and SEC002 said "published on ${OLLAMA_PORT"
OLLAMA_PORTS = """services:
  ollama:
    image: ollama/ollama:latest
    ports:
      - '${OLLAMA_PORT:-11434}:11434'
    env_file:
      - .env
"""


def test_a_compose_port_is_read_after_interpolation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "compose.yaml"
    f.write_text(OLLAMA_PORTS)
    rc, out, _ = _run(capsys, "lint", str(f), "--format", "json")
    [sec] = [d for d in json.loads(out) if d["code"] == "SEC002"]
    assert 'compose ports "${OLLAMA_PORT:-11434}:11434" (published on all interfaces) publishes it' in sec["message"]
    assert (sec["location"]["line"], sec["location"]["column"]) == (5, 10)
    f.write_text(OLLAMA_PORTS.replace("${OLLAMA_PORT:-11434}", "${OLLAMA_BIND:-127.0.0.1}:11434"))
    rc, out, _ = _run(capsys, "lint", str(f), "--format", "json")
    assert not [d for d in json.loads(out) if d["code"] == "SEC002"]  # the default binds loopback only


# a public manifest that streams the model from a bucket: the model is `${MODEL_PATH}`, which
# Kubernetes does not expand (only `$(MODEL_PATH)`), so vLLM gets the text; the server was left
# unplanned without a word ("the model is a variable")
K8S_LITERAL = """apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm-streaming}
spec:
  template:
    spec:
      nodeSelector:
        cloud.google.com/gke-accelerator: nvidia-l4
      containers:
        - name: vllm
          image: vllm/vllm-openai:latest
          env:
            - name: MODEL_PATH
              value: gs://models/Qwen2.5-7B-Instruct
          command:
            - "vllm"
            - "serve"
            - "${MODEL_PATH}"
            - "--max-model-len=$(MAX_LEN)"
            - "--port"
            - "8000"
        - name: shell
          image: vllm/vllm-openai:latest
          command: ["sh", "-c", "vllm serve ${MODEL_PATH} --port 8001"]
          env:
            - name: MODEL_PATH
              value: Qwen/Qwen2.5-7B-Instruct
"""


def test_a_k8s_command_with_a_shell_variable_says_it_is_passed_literally(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "vllm.yaml"
    f.write_text(K8S_LITERAL)
    rc, out, _ = _run(capsys, "lint", str(f), "--format", "json")
    found = [d for d in json.loads(out) if d["code"] == "SF107"]
    assert [(d["location"]["line"], d["location"]["column"], d["message"]) for d in found] == [
        (18, 16, "Kubernetes passes '${MODEL_PATH}' to the engine literally: it expands $(VAR) in command and args, "
                 "not ${VAR}; write $(MODEL_PATH)")]  # not $(MAX_LEN), not the sh -c payload


# a public manifest on `vllm/vllm-openai:latest` with a flag vLLM removed: lint said VLLM001 (an
# error) and estimate refused the file, while explain printed "verdict: starts", the sites table
# "starts", and tune proposed --max-num-seqs 128 for a server that exits at argparse
VLLM_REMOVED_FLAG = """apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm-governance}
spec:
  template:
    spec:
      nodeSelector:
        cloud.google.com/gke-accelerator: nvidia-l4
      containers:
      - name: vllm
        image: vllm/vllm-openai:latest
        command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]
        args:
        - "--model"
        - "Qwen/Qwen2.5-7B-Instruct"
        - "--guided-decoding-backend"
        - "outlines"
        resources:
          limits:
            nvidia.com/gpu: 1
"""


def test_a_flag_the_engine_refuses_is_the_same_verdict_everywhere(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "vllm.yaml"
    f.write_text(VLLM_REMOVED_FLAG)
    rc, out, _ = _run(capsys, "lint", str(f), "--format", "json")
    [err] = [d for d in json.loads(out) if d["severity"] == "error"]
    assert rc == 1 and err["code"] == "VLLM001" and (err["location"]["line"], err["location"]["column"]) == (16, 12)
    # vllm/vllm-openai:latest runs the newest release where it is pulled: the flag dates nothing there
    assert err["message"].startswith("unrecognized argument: --guided-decoding-backend (removed in 0.11.0; the image "
                                     "tag latest runs the newest release)")
    rc, out, _ = _run(capsys, "lint", str(f), "--list-sites", "--format", "json")
    assert json.loads(out)[0]["verdict"] == "rejected_config"
    rc, out, _ = _run(capsys, "explain", str(f), "--format", "json")
    assert rc == 1 and json.loads(out)[0]["outcome"] == "rejected_config"
    rc, out, _ = _run(capsys, "explain", str(f))
    assert "verdict: refuses the configuration" in out
    rc, _, err_line = _run(capsys, "estimate", str(f))
    said = f"{f}:16:12: vLLM: unrecognized argument: --guided-decoding-backend"
    assert rc == 2 and err_line.startswith(f"servefit: error: {said}")
    rc, out, _ = _run(capsys, "tune", str(f), "--diff", "--format", "json")
    [site] = json.loads(out)["sites"]
    assert rc == 2 and site["error"].startswith(said) and site["error"].endswith(
        "[VLLM001]: the engine refuses this command; fix it first, then tune")


def test_a_server_that_loads_models_on_request_says_its_memory_was_not_checked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The public Ollama compose file above, on a GPU: lint said nothing about memory, estimate
    "Ollama: no model given in the command" (there is no command in it)."""
    f = tmp_path / "compose.yaml"
    f.write_text(OLLAMA_PORTS)
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "RTX4090", "--format", "json")
    [sf] = [d for d in json.loads(out) if d["code"] == "SF115"]
    assert sf["severity"] == "info" and (sf["location"]["line"], sf["location"]["column"]) == (3, 1)
    assert sf["message"] == ("Ollama loads the models requests name, and this file names none, so their memory was "
                             "not checked: add `# servefit: model=REF` above it for the model it serves")
    rc, _, err = _run(capsys, "estimate", str(f), "--gpu", "RTX4090")
    assert rc == 2 and err == ("servefit: error: Ollama loads the models requests name, and none is named here: add "
                               "`# servefit: model=REF` above the server (or pass --model REF)\n")
    f.write_text("# servefit: model=llama3.1:8b\n" + OLLAMA_PORTS)  # the fix the message names
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "RTX4090", "--list-sites", "--format", "json")
    assert json.loads(out)[0]["verdict"] == "started"
    # llama.cpp's router says it in its own words (LCPP015), once
    g = tmp_path / "router.sh"
    g.write_text("llama-server --host 127.0.0.1 --port 8080 --models-max 2\n")
    rc, out, _ = _run(capsys, "lint", str(g), "--gpu", "RTX4090", "--format", "json")
    assert [d["code"] for d in json.loads(out)] == ["LCPP015"]


def test_the_examples_carry_no_stale_suppression(capsys: pytest.CaptureFixture[str]) -> None:
    """A new user's first command linted examples/ and got SF010 (an `ignore[SF002]` that nothing
    needed any more, since the model resolves by its base's name)."""
    examples = Path(__file__).resolve().parents[1] / "examples"
    rc, out, _ = _run(capsys, "lint", str(examples), "--format", "json")
    assert not [d for d in json.loads(out) if d["code"] in ("SF010", "SF011", "SF012", "SF112")]


def test_the_target_flags_help_says_what_they_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """lint's help said --gpu / --gpus / --engine-version apply to "servers whose file does not
    say", but the flag wins over the file (issue 14's precedence), as estimate's does."""
    with pytest.raises(SystemExit):
        main(["lint", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--gpu GPU GPU for every server, over what the files and the config say" in text
    assert "--gpus GPUS GPU count for every server, over what the files say" in text
    assert "engine version to model for every server, over what image tags say" in text
    f = tmp_path / "vllm.yaml"
    f.write_text(VLLM_A.replace("      containers:", "      nodeSelector: {cloud.google.com/gke-accelerator: nvidia-l4}\n"
                                                      "      containers:"))
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "H100", "--gpus", "2", "--engine-version", "0.10.2",
                      "--list-sites", "--format", "json")
    [site] = json.loads(out)
    assert (site["gpu"]["name"], site["gpu"]["count"], site["engine_version"]) == ("H100", 2, "0.10.2")


def test_tune_leaves_a_variable_set_elsewhere_to_the_user(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """tune --write replaced `--ctx-size ${CONTEXT_SIZE}` (set in an EnvironmentFile outside the
    repository) with a number, cutting the unit off from the file that configures it."""
    f = tmp_path / "llama.service"
    f.write_text(UNIT)
    rc, out, _ = _run(capsys, "tune", str(f), "--gpu", "L4", "--format", "json")
    [site] = json.loads(out)["sites"]
    fix = site["fix"]
    assert fix["applied"] is False and fix["held_back"] and fix["applicability"] == "display-only"
    assert fix["by_hand"][0].startswith("CONTEXT_SIZE=")
    assert fix["by_hand"][0].endswith(" where $CONTEXT_SIZE is set (it gives --ctx-size)")
    assert fix["by_hand"][1:] == [f"--{k} {v}" for k, v in site["changes"].items()]  # nothing is written: all by hand
    assert rc == 1
    main(["tune", str(f), "--gpu", "L4", "--write"])
    capsys.readouterr()
    assert f.read_text() == UNIT


# an Ollama image that bakes its model in at build time (`RUN ollama serve & ... ollama pull $MODEL`):
# the model was not seen, so the server was "no model named" (SF115) though the file names it
OLLAMA_BAKED = """FROM ollama/ollama:0.11.9

ENV OLLAMA_HOST 0.0.0.0:8080
ENV OLLAMA_KEEP_ALIVE -1

ENV MODEL codestral:22b
RUN ollama serve & sleep 5 && ollama pull $MODEL
"""
# a benchmark script that writes vLLM's --config file at run time: the file is not in the
# repository, and nothing said so (the settings it holds were silently unchecked)
HEREDOC_CONFIG = """#!/usr/bin/env bash
cat > config.yaml << EOF
max-num-batched-tokens: 8192
max-model-len: 10240
EOF
vllm serve openai/gpt-oss-20b --host=127.0.0.1 --config=config.yaml --gpu-memory-utilization=0.9
"""


def test_a_model_pulled_at_build_time_is_the_images_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "Dockerfile"
    f.write_text(OLLAMA_BAKED)
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "L4", "--list-sites", "--format", "json")
    [site] = json.loads(out)
    assert site["model_ref"]["written"] == "codestral:22b" and site["model_ref"]["location"]["line"] == 6
    assert site["verdict"] == "started"
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "L4", "--format", "json")
    assert "SF115" not in {d["code"] for d in json.loads(out)}


def test_a_vllm_config_file_that_is_not_there_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "bench.sh"
    f.write_text(HEREDOC_CONFIG)
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "H100", "--format", "json")
    [sf] = [d for d in json.loads(out) if d["code"] == "SF113"]
    assert sf["message"] == ("--config config.yaml is not in the repository; the settings it holds are unknown, so "
                             "only the command line's are checked")
    assert (sf["location"]["line"], sf["location"]["column"]) == (6, 48)
    (tmp_path / "config.yaml").write_text("max-model-len: 10240\n")  # there: read, and nothing to say
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "H100", "--format", "json")
    assert "SF113" not in {d["code"] for d in json.loads(out)}


# two Dockerfiles of one public repository that add a package to the vLLM image; the one that
# also passes a build-time Hub token through ENV became a server with no model (SF002, SEC004),
# its twin without the ENV was (rightly) no server at all
VLLM_EXTENDED = """FROM vllm/vllm-openai:latest
RUN pip install --no-cache-dir "vllm[runai]" runai-model-streamer huggingface_hub
ARG HUGGING_FACE_HUB_TOKEN
ENV HUGGING_FACE_HUB_TOKEN=$HUGGING_FACE_HUB_TOKEN
"""


def test_an_image_that_only_extends_the_engine_is_no_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "Dockerfile.vllm"
    f.write_text(VLLM_EXTENDED)
    assert scan_file(str(f)).sites == []
    f.write_text(VLLM_EXTENDED + "ENV VLLM_ATTENTION_BACKEND=FLASHINFER\n")  # a setting of the server: it is one
    [site] = scan_file(str(f)).sites
    assert site.engine == "vllm" and site.env["VLLM_ATTENTION_BACKEND"].text == "FLASHINFER"
    f.write_text("FROM ghcr.io/huggingface/text-generation-inference:3.3.4\nENV MODEL_ID=Qwen/Qwen2.5-7B-Instruct\n")
    [site] = scan_file(str(f)).sites  # TGI's launcher takes its whole configuration from the environment
    assert site.engine == "tgi"


def test_lcpp009_says_what_runs_on_the_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Windows llama-swap config with MoE models and --fit said "offloaded 49/49 layers to GPU
    (--fit, experts of 3 layers on the CPU); the rest runs on the CPU": every layer, and a rest."""
    f = tmp_path / "serve.sh"
    f.write_text("llama-server -m /m/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf -ngl 20 -c 4096 --host 127.0.0.1\n")
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "L4", "--format", "json")
    [d] = [d for d in json.loads(out) if d["code"] == "LCPP009"]
    assert d["message"].startswith("offloaded 20/33 layers to GPU (-ngl); 13 layers run on the CPU")
    f = tmp_path / "config.yaml"
    f.write_text(LLAMA_SWAP_WINDOWS.replace("-c 16384", "--fit-ctx 60000").replace(
        r"Qwen2.5-Coder-7B-Instruct-GGUF\Qwen2.5-Coder-7B-Instruct-Q4_K_M.gguf",
        r"Qwen3-Coder-30B-A3B-Instruct-GGUF\Qwen3-Coder-30B-A3B-Instruct-Q4_K_M.gguf"))
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "RTX4090", "--format", "json")
    msgs = [d["message"] for d in json.loads(out) if d["code"] == "LCPP009"]
    assert msgs and all("the rest" not in m for m in msgs)
    assert any(m.startswith("offloaded 49/49 layers to GPU (--fit); the experts of ") for m in msgs), msgs


def test_models_reads_each_files_configuration_as_lint_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`models a b` applied a/servefit.toml's model mapping to b's server too (and `models b a`
    to neither), while lint reads the nearest configuration per file."""
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "serve.sh").write_text("vllm serve /models/my-finetune --host 127.0.0.1\n")
    (tmp_path / "a" / "servefit.toml").write_text('[tool.servefit]\ngpu = "L4"\n[tool.servefit.models]\n'
                                                  '"/models/my-finetune" = "Qwen/Qwen2.5-7B-Instruct"\n')
    (tmp_path / "b" / "servefit.toml").write_text('[tool.servefit]\ngpu = "L4"\n')
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    rc, out, _ = _run(capsys, "lint", a, b, "--list-sites", "--format", "json")
    linted = {Path(s["file"]).parent.name: s["model_ref"]["resolved"] for s in json.loads(out)}
    assert linted == {"a": "Qwen/Qwen2.5-7B-Instruct", "b": None}
    for order in ((a, b), (b, a)):
        rc, out, _ = _run(capsys, "models", *order, "--format", "json")
        assert {Path(r["file"]).parent.name: r["model"] for r in json.loads(out)} == linted, order
    rc, out, _ = _run(capsys, "models", b, "--config", str(tmp_path / "a" / "servefit.toml"), "--format", "json")
    assert [r["model"] for r in json.loads(out)] == ["Qwen/Qwen2.5-7B-Instruct"]  # named: for every file
