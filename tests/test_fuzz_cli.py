"""Fuzzing the command line in-process: random argument lists built from servefit's own
commands, options, values, files and launch-command words. `servefit.cli.main` must return 0, 1
or 2 (argparse's own usage errors exit 2 and --help/--version exit 0 through SystemExit), never
raise, and never print a traceback or the catch-all "internal error" line. Also the diagnose
entry point on random and mutated log lines.

Properties besides "no crash": a planted secret never appears in any output, no raw control
character reaches stdout and no output line is forged by input, SARIF output validates against
the official schema, JSON output parses; a diagnosis names a known root cause and quotes only
lines of its input, with their numbers.

Examples under the "ci" profile: 500 CLI (half of them well-formed commands) + 300 log lines + 150 mutated logs = 950."""

from __future__ import annotations

import io
import json
import shutil
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import jsonschema
import pytest
from fuzzkit import ROOT, TEXT, fuzz
from hypothesis import given
from hypothesis import strategies as st

from servefit.cli import main

SECRET = "sk-PlantedSecretValue0123456789abcdef"
CONTROLS = {chr(c) for c in range(32) if c not in (9, 10)} | {"\x7f", "\x9b", "\u202e"}
SARIF = jsonschema.Draft7Validator(json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text()))

LOGS = ROOT / "tests" / "fixtures" / "logs"
WORDS = {
    "command": ["estimate", "explain", "lint", "tune", "diagnose", "gpus", "models", "rules", "rule", "bogus"],
    "option": ["--gpu", "--gpus", "--gpu-memory", "--engine-version", "--model", "--model-config", "--format", "-o",
               "--output", "--list-sites", "--select", "--ignore", "--fail-on", "--config", "--baseline",
               "--write-baseline", "--exit-zero", "--online", "--sweep", "--batch", "--context", "--min-context",
               "--min-concurrency", "--allow", "--headroom", "--objective", "--diff", "--trials", "--sampler",
               "--seed", "--repo", "--config-file", "--no-progress", "--version", "--help", "--", "-"],
    "value": ["H100", "L4", "A100-80GB", "RTX 4090", "g5.xlarge", "nonexistent-gpu", "0", "1", "2", "-3", "48GiB",
              "x", "0.11.0", "9.9", "json", "text", "sarif", "github", "html", "markdown", "context", "batch",
              "block", "context,batch", "32k", "lots", "SEC", "VLLM003", "hardcoded-secret", "error", "never",
              "fail-on=\"warning\"", "gpu=3", "select=[", "kv=fp8", "quant=any", "eager", "memory",
              "balanced,context", "exhaustive", "out.txt", "report.html", "missing.json"],
    "file": ["k8s.yaml", "serve.sh", "server.log", "empty.log", ".", "nowhere.yaml"],
    "launch": ["vllm", "serve", "Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "131072",
               "--tensor-parallel-size", "2", "--gpu-memory-utilization", "0.95", "--kv-cache-dtype", "fp8",
               "llama-server", "-m", "/m/x.gguf", "-c", "8192", "ollama", "run", "llama3.1:8b",
               "text-generation-launcher", "--model-id", "python", "-m", "sglang.launch_server", "--model-path",
               "--api-key", "sk-x", "--api-k", "Bearer-PlantedFlagValue-1234", "--quantization", "awq", "--max-num-seqs", "0"],
}
WORD = st.one_of(*[st.sampled_from(v) for v in WORDS.values()], TEXT)
K8S = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          args: [meta-llama/Llama-3.1-8B-Instruct, --max-model-len, "65536"]
          resources: {limits: {nvidia.com/gpu: 1}}
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("cli")
    (d / "k8s.yaml").write_text(K8S)
    (d / "serve.sh").write_text("#!/bin/sh\nvllm serve Qwen/Qwen3-8B --max-model-len 32768\n")
    (d / "empty.log").write_text("")
    shutil.copy(LOGS / "vllm_kv_refusal.log", d / "server.log")
    return d


ENGINE_CMDS = [["vllm", "serve", "Qwen/Qwen3-8B"], ["llama-server", "-m", "/m/llama-3.1-8b-instruct-q4_k_m.gguf"],
               ["ollama", "run", "llama3.1:8b"], ["text-generation-launcher", "--model-id", "Qwen/Qwen3-8B"],
               ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"]]
COMMON = {"--gpu": ["H100", "L4", "T4", "nope"], "--gpus": ["1", "2", "8", "0"], "--gpu-memory": ["24GiB", "1"],
          "--engine-version": ["0.6.0", "0.11.0", "3.3.4", "0.12.3"], "--format": ["text", "json"]}
OPTIONS = {"estimate": COMMON, "explain": {**COMMON, "--sweep": ["context", "batch", "block"], "--format": ["html"]},
           "tune": {**COMMON, "--min-context": ["32k", "1"], "--allow": ["kv=fp8"], "--objective": ["memory", "context"],
                    "--trials": ["1", "3"]},
           "lint": {"--gpu": ["H100", "L4"], "--format": ["text", "json", "sarif", "github", "html"],
                    "--list-sites": [], "--select": ["SEC,VLLM"], "--fail-on": ["warning"]}}


def _command(cmd: str) -> st.SearchStrategy[list[str]]:
    opts = OPTIONS[cmd]
    pair = st.sampled_from(sorted(opts)).flatmap(
        lambda o: st.sampled_from(opts[o]).map(lambda v: [o, v]) if opts[o] else st.just([o]))
    files = st.sampled_from([["k8s.yaml"], ["serve.sh"], ["k8s.yaml", "serve.sh"]])
    launch = st.tuples(st.sampled_from(ENGINE_CMDS), st.lists(st.sampled_from(WORDS["launch"]), max_size=6)) \
        .map(lambda t: ["--", *t[0], *t[1]])
    target = files if cmd == "lint" else st.one_of(files, launch)
    gpu = st.sampled_from([[], ["--gpu", "H100"], ["--gpu", "L4"], ["--gpu", "A100-80GB"], ["--gpu", "RTX 4090"]])
    return st.tuples(gpu, st.lists(pair, max_size=3), target).map(
        lambda t: [cmd, *t[0], *[w for p in t[1] for w in p], *t[2]])


STRUCTURED = st.sampled_from(sorted(OPTIONS)).flatmap(_command)


@fuzz(500)
@given(args=st.one_of(STRUCTURED, st.tuples(st.sampled_from(WORDS["command"]), st.lists(WORD, max_size=10))
                      .map(lambda t: [t[0], *t[1]])))
def test_cli_never_raises(workdir, args):
    args = [a.replace("sk-x", SECRET) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp, redirect_stdout(out), redirect_stderr(err):
        mp.chdir(workdir)
        mp.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
        try:
            rc = main(args)
        except SystemExit as exc:  # argparse: usage errors (2), --help / --version (0)
            rc = exc.code if isinstance(exc.code, int) else 0
    assert rc in (0, 1, 2), (args, rc)
    assert "Traceback" not in err.getvalue() and "internal error" not in err.getvalue(), (args, err.getvalue())
    stdout, stderr = out.getvalue(), err.getvalue()
    flagged = [b for a, b in zip(args, args[1:], strict=False) if a in ("--api-key", "--api-k")]  # a value by its flag
    for secret in [SECRET] + [v for v in flagged if "Planted" in v]:  # an sk- token by its shape, anywhere
        assert secret not in stdout and secret not in stderr, (args, stdout[-500:], stderr)
    assert not set(stdout) & CONTROLS and not set(stderr) & CONTROLS - {"\r"}, args
    assert not any(ln.startswith("::") and not ln.startswith(("::error ", "::warning ", "::notice "))
                   for ln in stdout.splitlines()), args
    assert stderr.count("\n") <= 1 or rc != 2 or "--help" in args or "-h" in args or "--version" in args, stderr
    if rc in (0, 1) and args and args[0] == "lint" and "-o" not in args and "--output" not in args:
        fmts = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--format"]
        fmt = fmts[0] if len(fmts) == 1 else "several"
        if fmt == "sarif" and "--list-sites" not in args:
            SARIF.validate(json.loads(stdout))
        elif fmt == "json":
            json.loads(stdout)
    for f in ("k8s.yaml", "serve.sh"):  # tune --write may edit them; start each example from the same files
        if f == "k8s.yaml" and (workdir / f).read_text() != K8S:
            (workdir / f).write_text(K8S)


LOG_WORDS = ["INFO", "ERROR", "WARNING", "torch.OutOfMemoryError: CUDA out of memory.", "Tried to allocate",
             "2.00 GiB", "GPU 0 has a total capacity of 79.19 GiB", "of which 0 bytes is free", "max_model_len",
             "KV cache", "Killed process", "oom-kill", "llama_kv_cache", "ggml_backend_cuda_buffer_type_alloc_buffer",
             "cudaMalloc failed", "2025-05-16T03:11:41Z", "May 16 03:11:41", "[", "]", ":", "=", " ", "\t", "\r",
             "137", "nan", "-1", "99999999999999999999", "GiB", "MiB", "%", "(", ")", "vllm", "sglang", "tgi",
             "ollama", "msg=", "\"", "{", "}", "\x1b[31m"]
LOG_LINE = st.one_of(TEXT, st.lists(st.sampled_from(LOG_WORDS), max_size=14).map(" ".join))


@fuzz(300)
@given(lines=st.lists(LOG_LINE, max_size=20))
def test_diagnose_any_lines(lines):
    from servefit.diagnose import diagnose_lines

    check_diagnosis(diagnose_lines(lines), lines)


def check_diagnosis(diag, lines: list[str]) -> None:
    """A known root cause and confidence; evidence quotes lines of the input by their numbers."""
    from servefit.diagnose.model import ROOT_CAUSES

    assert diag.root_cause in ROOT_CAUSES and diag.confidence in ("high", "medium", "low", "none")
    assert diag.lines_read == len(lines)
    assert (diag.root_cause == "none") == (diag.signature is None) or diag.root_cause != "none"
    for e in diag.evidence:
        assert 1 <= e.number <= len(lines), (e.number, len(lines))
        assert e.text.strip() and e.text.strip()[:40] in lines[e.number - 1], (e.text, lines[e.number - 1])


LOG_FILES = sorted(p for p in LOGS.iterdir() if p.is_file())


@fuzz(150)
@given(data=st.data())
def test_diagnose_mutated_logs(data):
    from servefit.diagnose import diagnose_lines

    path = data.draw(st.sampled_from(LOG_FILES))
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    for _ in range(data.draw(st.integers(1, 5))):
        if not lines:
            break
        i = data.draw(st.integers(0, len(lines) - 1))
        op = data.draw(st.sampled_from(["drop", "dup", "cut", "insert"]))
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "cut":
            lines[i] = lines[i][: data.draw(st.integers(0, len(lines[i])))]
        else:
            lines.insert(i, data.draw(LOG_LINE))
    check_diagnosis(diagnose_lines(lines), lines)
