"""The time from start-up to the failure is only given where the log shows when the run began: a
log that starts at the failure says nothing about how long the server ran."""

from __future__ import annotations

from servefit.diagnose import diagnose_lines

OOM = [
    "ERROR 03-14 09:12:05 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. "
    "GPU 0 has a total capacity of 23.55 GiB of which 401.00 MiB is free. Including non-PyTorch memory, this "
    "process has 23.14 GiB memory in use. Of the allocated memory 22.90 GiB is allocated by PyTorch, and "
    "12.00 MiB is reserved by PyTorch but unallocated.",
]
STARTED = [
    "INFO 03-14 09:10:00 [api_server.py:1000] vLLM API server version 0.11.0",
    "INFO 03-14 09:10:01 [api_server.py:1001] args: Namespace(model='Qwen/Qwen3-8B')",
]


def test_a_log_that_begins_at_the_failure_has_no_uptime() -> None:
    d = diagnose_lines(OOM)
    assert d.figures["allocated"] == 24_588_687_770  # 22.90 GiB
    assert "uptime_seconds" not in d.figures


def test_a_log_from_start_up_gives_the_uptime() -> None:
    d = diagnose_lines(STARTED + OOM)
    assert d.figures["uptime_seconds"] == 125
