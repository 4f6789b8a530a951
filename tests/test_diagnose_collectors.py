"""diagnose reads a log the same whatever the collector put in front of each line: `docker compose`'s
service column, `kubectl logs --timestamps` / `--prefix`, ANSI colour, Windows line ends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.diagnose import diagnose_lines
from servefit.diagnose.collectors import unwrap

STAGES = Path(__file__).parent / "fixtures" / "logs" / "stages"
WRAPS = {
    "compose": lambda line: "vllm-1  | " + line,
    "k8s_time": lambda line: "2024-05-01T10:00:00.123456789Z " + line,
    "compose_then_time": lambda line: "svc-1  | 2024-05-01T10:00:00.123Z " + line,
    "kubectl_prefix": lambda line: "[pod/vllm-7d9f/vllm] " + line,
    "ansi": lambda line: "\x1b[31m" + line + "\x1b[0m",
    "crlf": lambda line: line + "\r",
    "journald": lambda line: "Jul 24 16:07:57 gpu-7 vllm[4312]: " + line,
    "cri": lambda line: "2024-05-01T10:00:00.123456789Z stderr F " + line,
    "docker_json": lambda line: json.dumps({"log": line + "\n", "stream": "stderr", "time": "2024-05-01T10:00:00Z"}),
}


def _verdict(lines: list[str]) -> tuple[str, str, str, tuple[str, ...]]:
    d = diagnose_lines(lines)
    return d.root_cause, d.timing, d.stage, tuple(d.fix)


@pytest.mark.parametrize("wrap", sorted(WRAPS))
@pytest.mark.parametrize("log", sorted(p.name for p in STAGES.glob("*.log")))
def test_wrapped_log_reads_like_the_bare_one(log: str, wrap: str) -> None:
    lines = (STAGES / log).read_text().splitlines()
    assert _verdict([WRAPS[wrap](x) for x in lines]) == _verdict(lines)


@pytest.mark.parametrize("raw, bare", [
    ("vllm-1  | INFO 05-16 10:00:00 api_server.py:1] x", "INFO 05-16 10:00:00 api_server.py:1] x"),
    ("2024-05-01T10:00:00.5Z RuntimeError: boom", "RuntimeError: boom"),
    ("[pod/a-1/c] llama_kv_cache_init: failed", "llama_kv_cache_init: failed"),
    ("\x1b[1;31mERROR\x1b[0m x\r", "ERROR x"),
    ("a | 2024-05-01T10:00:00+00:00 RuntimeError: y", "RuntimeError: y"),
    ("2024-05-01T10:00:00.1Z stdout P RuntimeError: y", "RuntimeError: y"),
    ("Jul 24 16:07:58 vega ollama[114917]: CUDA error: out of memory", "CUDA error: out of memory"),
    ("2024-07-24T16:07:58+0200 vega ollama[114917]: CUDA error: out of memory", "CUDA error: out of memory"),
    ('{"log":"RuntimeError: y\\n","stream":"stderr","time":"2024-05-01T10:00:00Z"}', "RuntimeError: y"),
    ('{"level":50,"time":1752516972565,"msg":"time=2025 level=ERROR msg=x\\n"}', "time=2025 level=ERROR msg=x"),
    ('{"timestamp":"2023-10-16T06:44:03.670755Z","level":"ERROR","fields":{"message":"Shard 0 failed to start"},'
     '"target":"text_generation_launcher"}',
     "2023-10-16T06:44:03.670755Z ERROR text_generation_launcher: Shard 0 failed to start"),
    # the kernel's own syslog lines keep their "kernel:" (no [pid]); JSON that is no log record stays
    ("May 16 03:12:40 gpu-node-7 kernel: Out of memory: Killed process 4390",
     "May 16 03:12:40 gpu-node-7 kernel: Out of memory: Killed process 4390"),
    ('{"max_model_len": 4096}', '{"max_model_len": 4096}'),
    # an engine's own time followed by its level is the engine's line, kept whole (TGI)
    ("2024-03-06T17:53:31.052444Z ERROR shard-manager: x", "2024-03-06T17:53:31.052444Z ERROR shard-manager: x"),
    ("2024-03-06T17:53:31Z  INFO text_generation_launcher: y", "2024-03-06T17:53:31Z  INFO text_generation_launcher: y"),
    # not a collector column: tqdm bars, markdown tables, Ollama's GIN lines
    ("Capturing CUDA graphs: 100%|██████████| 51/51", "Capturing CUDA graphs: 100%|██████████| 51/51"),
    ("| GPU | Memory |", "| GPU | Memory |"),
    ("[GIN] 2024/05/01 - 10:00:00 | 200 |", "[GIN] 2024/05/01 - 10:00:00 | 200 |"),
])
def test_unwrap(raw: str, bare: str) -> None:
    assert unwrap(raw) == bare


def test_evidence_quotes_the_line_as_the_log_has_it() -> None:
    """Patterns read the engine's line; the evidence quotes the line as the log has it (what the user greps for;
    the report makes control characters safe when it prints them)."""
    lines = (STAGES / "llamacpp_kv_alloc.log").read_text().splitlines()
    d = diagnose_lines(["\x1b[2mvllm-1  | " + x + "\x1b[0m" for x in lines])
    assert d.evidence and all(e.text.startswith("\x1b[2mvllm-1  | ") for e in d.evidence)


def test_exception_after_k8s_timestamp_is_a_failure() -> None:
    lines = ["2024-05-01T10:00:00.1Z Bfloat16 is only supported on GPUs with compute capability of at least 8.0.",
             "2024-05-01T10:00:00.2Z RuntimeError: GPUs with compute capability below 7.0 are not supported."]
    assert diagnose_lines(lines).root_cause == "not_oom"



# -- the release, from the log's own version line -------------------------------------------------------------
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
       "14.62 GiB of which 3.31 MiB is free.")


@pytest.mark.parametrize("line, engine, version", [
    # vllm engine/llm_engine.py::LLMEngine.__init__ (0.7.3 on) and the older wording
    ("INFO 03-31 01:47:44 llm_engine.py:234] Initializing a V0 LLM engine (v0.7.2) with config: model='q'",
     "vllm", "0.7.2"),
    ("INFO 12-20 20:25:00 llm_engine.py:237] Initializing an LLM engine (v0.6.4.post1) with config: model='q'",
     "vllm", "0.6.4.post1"),
    # ollama server/routes.go::Serve
    ('time=2025-02-02T09:23:09.833+08:00 level=INFO source=routes.go:1238 msg="Listening on 127.0.0.1:11434 '
     '(version 0.5.7)"', "ollama", "0.5.7"),
    # llama.cpp before 2024-09 (examples' "main: build = N (commit)") and after ("build: N (commit)")
    ("main: build = 3184 (9c77ec1d)", None, "3184"),
    ("build: 4567 (a1b2c3d4) with cc (Ubuntu 13.2.0) for x86_64-linux-gnu", None, "4567"),
])
def test_version_line_names_the_release(line: str, engine: str | None, version: str) -> None:
    for wrap in ("", "svc-1  | \x1b[36m"):
        d = diagnose_lines([wrap + line, OOM])
        assert d.figures.get("engine_version") == version
        if engine:
            assert d.engine == engine


def test_server_version_holds_for_the_runner_it_starts() -> None:
    """Ollama logs its release once, then starts a runner per model (a new run): the release carries over."""
    d = diagnose_lines([
        'time=2025-02-02T09:23:09.833+08:00 level=INFO source=routes.go:1238 msg="Listening on 127.0.0.1:11434 '
        '(version 0.5.7)"',
        'time=2025-02-02T09:24:00.000+08:00 level=INFO source=server.go:376 msg="starting llama server" '
        'cmd="/usr/bin/ollama runner --ctx-size 8192 --n-gpu-layers 25 --parallel 1 --port 33405"',
        "load_tensors: offloading 25 repeating layers to GPU",
        'time=2025-02-02T09:25:00.000+08:00 level=INFO source=server.go:376 msg="starting llama server" '
        'cmd="/usr/bin/ollama runner --ctx-size 8192 --n-gpu-layers 30 --parallel 1 --port 33406"',
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 3000.00 MiB on device 0: cudaMalloc failed: out of "
        "memory",
        "llama_model_load: error loading model: unable to allocate CUDA0 buffer"])
    assert (d.engine, d.figures.get("engine_version"), d.root_cause) == ("ollama", "0.5.7", "model_too_large")


def test_v0_version_line_picks_that_releases_capture_flag() -> None:
    graphs = (STAGES / "vllm_graph_capture_v1.log").read_text().splitlines()
    old = diagnose_lines(["INFO 03-31 01:47:44 llm_engine.py:234] Initializing a V0 LLM engine (v0.7.2) with "
                          "config: model='q'"] + graphs)
    assert any("--max-seq-len-to-capture" in f for f in old.fix)
    assert not any("--cuda-graph-sizes" in f for f in old.fix)


# -- a process killed by SIGKILL with no out-of-memory line: neither an OOM cause nor "not memory" ---------------
@pytest.mark.parametrize("lines", [
    ['time=2024-08-26T09:53:44.346Z level=ERROR source=sched.go:451 msg="error loading llama server" '
     'error="llama runner process has terminated: signal: killed"'],
    ["2024-03-06T17:53:31.052444Z ERROR shard-manager: text_generation_launcher: Shard process was signaled to "
     "shutdown with signal 9 rank=0", "Error: ShardCannotStart"],
    ["vllm-openai-1 exited with code 137"],
])
def test_sigkill_without_an_oom_line_says_killed(lines: list[str]) -> None:
    d = diagnose_lines(lines)
    assert (d.root_cause, d.confidence) == ("killed", "low")
    assert "not for lack of memory" not in d.summary and "OOM killer" in d.summary


def test_other_signals_stay_not_memory() -> None:
    d = diagnose_lines(["2024-03-06T17:53:31.052444Z ERROR shard-manager: text_generation_launcher: Shard process was "
                        "signaled to shutdown with signal 4 rank=0", "Error: ShardCannotStart"])
    assert d.root_cause == "not_oom" and "4 (SIGILL)" in d.summary and "(line 1)" in d.summary


def test_an_oom_line_outranks_the_kill() -> None:
    d = diagnose_lines([OOM, 'msg="error loading llama server" error="llama runner process has terminated: signal: '
                             'killed"'])
    assert d.root_cause not in ("killed", "not_oom", "none")


def test_text_report_shows_the_evidence_as_the_terminal_did() -> None:
    """The evidence keeps the log's bytes (JSON output); the text report drops the colour codes a terminal hid."""
    from servefit.report.diagnose import render_text

    lines = (STAGES / "llamacpp_kv_alloc.log").read_text().splitlines()
    text = render_text(diagnose_lines(["\x1b[2mllama-1  | " + x + "\x1b[0m" for x in lines]))
    assert "| llama-1  | llama_kv_cache_init: failed to allocate buffer for kv cache" in text
    assert "\\u001b" not in text and "\x1b" not in text
