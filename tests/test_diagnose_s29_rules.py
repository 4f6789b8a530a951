"""Two rules read from the engines' own code, each driven by a public calibration log (benchmarks/diagnose):

- Ollama (llm/server.go::WaitUntilRunning): "waiting for server to become available" is logged while the runner
  starts and loads the model, until "llama runner started in N seconds"; a runner killed in between was killed
  loading (ollama-9685-orin-signal-killed).
- SGLang (model_runner.py::init_memory_pool): "max_total_tokens=N is larger than the profiled value M" with
  M <= 0 is followed by the "Not enough memory. Please try to increase --mem-fraction-static." refusal - the
  pool has no room after the weights (sglang-7691-negative-profiled-tokens). A start that goes on past it
  (the pool made, graphs captured) was not stopped by it.

The logs are minimal ones written in each engine's line format, not the public excerpts."""

from __future__ import annotations

from servefit.diagnose import diagnose_lines

OLLAMA_LOADING = [
    'time=2025-03-12T12:11:30.100Z level=INFO source=server.go:405 msg="starting llama server" cmd="/usr/local/bin/ollama runner --ollama-engine --model /m --ctx-size 8192 --port 40000"',
    'time=2025-03-12T12:11:30.200Z level=INFO source=server.go:580 msg="waiting for llama runner to start responding"',
    'time=2025-03-12T12:11:30.300Z level=INFO source=server.go:614 msg="waiting for server to become available" status="llm server loading model"',
    'time=2025-03-12T12:11:39.337Z level=INFO source=ggml.go:289 msg="model weights" buffer=CUDA0 size="16.2 GiB"',
    'time=2025-03-12T12:14:15.838Z level=INFO source=server.go:614 msg="waiting for server to become available" status="llm server not responding"',
]
KILLED = ('time=2025-03-12T12:14:22.015Z level=ERROR source=sched.go:456 msg="error loading llama server" '
          'error="llama runner process has terminated: signal: killed"')
STARTED = 'time=2025-03-12T12:14:20.000Z level=INFO source=server.go:619 msg="llama runner started in 170.00 seconds"'


def test_ollama_runner_killed_while_the_server_waits_for_it_was_killed_loading() -> None:
    d = diagnose_lines(OLLAMA_LOADING + [KILLED])
    assert (d.root_cause, d.timing, d.engine) == ("killed", "load", "ollama")


def test_ollama_wait_line_alone_places_the_kill_at_load() -> None:
    # no "starting llama server" line quoted: the wait line alone says the runner was still loading
    d = diagnose_lines(OLLAMA_LOADING[2:] + [KILLED])
    assert (d.root_cause, d.timing) == ("killed", "load")


def test_ollama_runner_killed_after_it_started_was_serving() -> None:
    d = diagnose_lines(OLLAMA_LOADING + [STARTED, KILLED])
    assert (d.root_cause, d.timing) == ("killed", "serving")


SGL_LOADED = [
    "[2025-07-02 07:40:01 TP0] Load weight begin. avail mem=188.32 GB",
    "[2025-07-02 07:41:58 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=21.73 GB, "
    "mem usage=166.59 GB.",
]


def profiled(tokens: int) -> str:
    return f"[2025-07-02 07:41:59 TP0] max_total_tokens=131072 is larger than the profiled value {tokens}. " \
           "Use the profiled value instead."


def test_sglang_negative_profiled_value_is_the_no_pool_refusal() -> None:
    d = diagnose_lines(SGL_LOADED + [profiled(-561981)])
    assert (d.root_cause, d.timing, d.stage, d.signature, d.confidence) == (
        "model_too_large", "startup", "kv_alloc", "sglang.no_pool", "high")
    assert d.fix[0] == "Raise --mem-fraction-static if the weights leave room; otherwise:"
    assert d.summary.startswith("SGLang found no memory for the KV cache pool")


def test_sglang_zero_profiled_tokens_is_the_refusal_too() -> None:
    assert diagnose_lines(SGL_LOADED + [profiled(0)]).signature == "sglang.no_pool"


def test_sglang_positive_profiled_value_is_only_a_cap_that_did_not_bind() -> None:
    d = diagnose_lines(SGL_LOADED + [profiled(50756)])
    assert d.root_cause == "none"


def test_sglang_refusal_after_the_profiled_line_is_one_failure() -> None:
    d = diagnose_lines(SGL_LOADED + [profiled(-89624), "[2025-07-02 07:41:59 TP0] Scheduler hit an exception: "
                                     "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."])
    assert (d.root_cause, d.signature, d.stage) == ("model_too_large", "sglang.no_pool", "kv_alloc")
    assert [e.number for e in d.evidence if e.number >= 3] == [3, 4]


def test_sglang_start_that_goes_on_past_a_negative_profile_was_not_stopped_by_it() -> None:
    d = diagnose_lines(SGL_LOADED + [profiled(-89624),
                                     "Capturing batches (bs=4 avail_mem=1.85 GB):   0%|          | 0/4 [00:00<?, ?it/s]"])
    assert (d.root_cause, d.signature, d.stage, d.timing) == ("recovered", "sglang.no_pool", "kv_alloc", "startup")
    assert "then went on with its start-up (line 4: Capturing batches" in d.summary


def test_sglang_went_on_line_does_not_undo_another_failure() -> None:
    # the `recovers` list: a graph-capture OOM is not undone by a later pool line (a new run's)
    d = diagnose_lines(SGL_LOADED + [
        "[2025-07-02 07:42:10 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=3.10 GB",
        "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 448.00 MiB.",
        "[2025-07-02 07:45:00 TP0] Memory pool end. avail mem=3.20 GB",
    ])
    assert d.root_cause == "cuda_graph_capture"
