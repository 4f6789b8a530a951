"""diagnose reads a log the same whatever the collector put in front of each line: `docker compose`'s
service column, `kubectl logs --timestamps` / `--prefix`, ANSI colour, Windows line ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.diagnose import diagnose_lines
from servefit.diagnose import patterns as P

STAGES = Path(__file__).parent / "fixtures" / "logs" / "stages"
WRAPS = {
    "compose": lambda line: "vllm-1  | " + line,
    "k8s_time": lambda line: "2024-05-01T10:00:00.123456789Z " + line,
    "compose_then_time": lambda line: "svc-1  | 2024-05-01T10:00:00.123Z " + line,
    "kubectl_prefix": lambda line: "[pod/vllm-7d9f/vllm] " + line,
    "ansi": lambda line: "\x1b[31m" + line + "\x1b[0m",
    "crlf": lambda line: line + "\r",
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
    # an engine's own time followed by its level is the engine's line, kept whole (TGI)
    ("2024-03-06T17:53:31.052444Z ERROR shard-manager: x", "2024-03-06T17:53:31.052444Z ERROR shard-manager: x"),
    ("2024-03-06T17:53:31Z  INFO text_generation_launcher: y", "2024-03-06T17:53:31Z  INFO text_generation_launcher: y"),
    # not a collector column: tqdm bars, markdown tables, Ollama's GIN lines
    ("Capturing CUDA graphs: 100%|██████████| 51/51", "Capturing CUDA graphs: 100%|██████████| 51/51"),
    ("| GPU | Memory |", "| GPU | Memory |"),
    ("[GIN] 2024/05/01 - 10:00:00 | 200 |", "[GIN] 2024/05/01 - 10:00:00 | 200 |"),
])
def test_unwrap(raw: str, bare: str) -> None:
    assert P.unwrap(raw) == bare


def test_exception_after_k8s_timestamp_is_a_failure() -> None:
    lines = ["2024-05-01T10:00:00.1Z Bfloat16 is only supported on GPUs with compute capability of at least 8.0.",
             "2024-05-01T10:00:00.2Z RuntimeError: GPUs with compute capability below 7.0 are not supported."]
    assert diagnose_lines(lines).root_cause == "not_oom"

