"""diagnose tells the start-up stage that ran out of memory (the profiling run, CUDA graph
capture) from runtime OOMs, and gives the fixes that act at that stage for the vLLM release
the log names."""

from __future__ import annotations

from pathlib import Path

from servefit.diagnose import diagnose_lines, diagnose_path

STAGES = Path(__file__).parent / "fixtures" / "logs" / "stages"


def test_v0_063_profile_run_oom_is_the_profiling_peak_not_the_batch():
    d = diagnose_path(str(STAGES / "vllm063_v0_profile_run.log"), progress=False)
    assert (d.root_cause, d.timing, d.confidence) == ("profiling_peak", "startup", "high")
    assert d.figures["engine_version"] == "0.6.3"
    fix = "\n".join(d.fix)
    assert "batch misconfiguration" not in d.summary.lower()
    assert d.fix[0].startswith("Lower --max-model-len (now 32768) to 16,384 or less")
    assert "--enable-chunked-prefill --max-num-batched-tokens 8192" in fix
    # 8192 below max-model-len without chunked prefill is what V0 rejects: never advised alone
    assert all("--enable-chunked-prefill" in line for line in d.fix if "--max-num-batched-tokens" in line)
    assert "max-num-seqs" not in fix and "gateway" not in fix
    assert "does not help here" in d.fix[2]


def test_v1_graph_capture_oom_names_the_capture_flag_of_that_release():
    d = diagnose_path(str(STAGES / "vllm_v1_graph_capture.log"), progress=False)
    assert (d.root_cause, d.timing) == ("cuda_graph_capture", "startup")
    assert d.fix[0].startswith("Lower --gpu-memory-utilization")
    assert "--cuda-graph-sizes" in d.fix[1]  # 0.11 has no --max-cudagraph-capture-size (0.12+)
    assert "--enforce-eager" in d.fix[2]


def _v1_profile(version: str) -> list[str]:
    return [
        f"(APIServer pid=1) INFO 05-16 09:58:05 [api_server.py:1839] vLLM API server version {version}",
        "(EngineCore_DP0 pid=240) INFO 05-16 09:59:02 [gpu_model_runner.py:2653] Model loading took 14.9889 GiB "
        "and 42.97 seconds",
        "(EngineCore_DP0 pid=240) ERROR 05-16 09:59:20 [core.py:708] Traceback (most recent call last):",
        '(EngineCore_DP0 pid=240) ERROR 05-16 09:59:20 [core.py:708]   File "/x/vllm/v1/worker/gpu_worker.py", '
        "line 263, in determine_available_memory",
        '(EngineCore_DP0 pid=240) ERROR 05-16 09:59:20 [core.py:708]   File "/x/vllm/v1/worker/gpu_model_runner.py", '
        "line 3201, in profile_run",
        "(EngineCore_DP0 pid=240) ERROR 05-16 09:59:20 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 7.50 GiB. GPU 0 has a total capacity of 79.19 GiB of which 2.10 GiB is free.",
    ]


def test_v1_profile_run_oom_points_at_the_batched_tokens_and_v12_graph_flag():
    d = diagnose_lines(_v1_profile("0.11.0"))
    assert d.root_cause == "profiling_peak"
    assert d.fix[0].startswith("Lower --max-num-batched-tokens") and "vLLM 0.11.0" in d.fix[0]
    d = diagnose_lines([line.replace("determine_available_memory", "compile_or_warm_up_model")
                        .replace("profile_run", "capture_model") for line in _v1_profile("0.12.0")])
    assert d.root_cause == "cuda_graph_capture" and "--max-cudagraph-capture-size" in d.fix[1]


def test_runtime_oom_is_not_a_start_up_stage():
    lines = _v1_profile("0.11.0")[:2] + [
        "(APIServer pid=1) INFO:     Application startup complete.",
        '(APIServer pid=1) INFO:     10.0.0.1:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        "(EngineCore_DP0 pid=240) ERROR 05-16 10:20:20 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 7.50 GiB. GPU 0 has a total capacity of 79.19 GiB of which 2.10 GiB is free.",
    ]
    d = diagnose_lines(lines)
    assert d.root_cause not in ("profiling_peak", "cuda_graph_capture") and d.timing != "startup"


def test_a_log_without_an_oom_says_so():
    d = diagnose_lines(_v1_profile("0.11.0")[:2])
    assert (d.root_cause, d.summary, d.fix) == ("none", "no OOM signature found", [])
