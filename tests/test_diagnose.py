"""`servefit diagnose` on realistic engine logs: each fixture asserts the root cause, the engine,
the evidence line numbers and the key figures (seed 000's OOM root-cause procedure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.diagnose import diagnose_path

LOGS = Path(__file__).parent / "fixtures" / "logs"
GiB, MiB = 2**30, 2**20


def gib(x: float) -> int:
    return int(round(x * GiB))


def mib(x: float) -> int:
    return int(round(x * MiB))


# fixture -> (root cause, engine, timing, evidence line numbers, figures that must be exact)
CASES = {
    "vllm_kv_refusal.log": (
        "kv_cache_overflow", "vllm", "startup", [3, 15, 19, 34],
        {"max_model_len": 131072, "kv_cache_needed": gib(16.00), "kv_cache_available": gib(4.05),
         "estimated_max_model_len": 33168, "weights": gib(14.9889), "uptime_seconds": 83, "repeats": 1}),
    "vllm_load_oom.log": (
        "model_too_large", "vllm", "load", [6, 15, 32],
        {"tried_to_allocate": mib(448), "total": gib(79.19), "free": mib(381.69), "allocated": gib(78.21),
         "reserved": gib(78.21) + mib(13.04), "fragmentation_gap": mib(13.04), "process_in_use": gib(78.80),
         "uptime_seconds": 192}),
    "vllm_first_batch.log": (
        "batch_misconfiguration", "vllm", "first_batch", [3, 20, 25, 38],
        {"tried_to_allocate": mib(1002), "total": gib(44.39), "allocated": gib(42.31),
         "fragmentation_gap": mib(402.19), "max_running_requests": 1024, "requests_served": 3,
         "since_startup_seconds": 42, "kv_cache_tokens": 136784}),
    "vllm_fragmentation.log": (
        "fragmentation", "vllm", "after_uptime", [1, 2, 6, 32],
        {"tried_to_allocate": gib(2.50), "total": gib(79.15), "allocated": gib(66.02), "free": mib(456),
         "reserved": gib(74.38), "fragmentation_gap": gib(74.38) - gib(66.02), "uptime_seconds": 9 * 3600 + 575,
         "requests_served": 7}),
    "vllm_long_request.log": (
        "kv_cache_overflow", "vllm", "long_request", [3, 6, 7, 15, 61, 70],
        {"tried_to_allocate": gib(57.50), "free": gib(7.21), "fragmentation_gap": mib(180.44),
         "kv_cache_tokens": 442352, "long_request_tokens": 120319, "max_running_requests": 1,
         "uptime_seconds": 1552}),
    "llamacpp_load_oom.log": (
        "model_too_large", "llamacpp", "load", [27, 35, 36, 37, 38, 39, 40],
        {"alloc_size": mib(39979.41), "device_free": mib(23008), "model_file": gib(39.59),
         "gpu_name": "NVIDIA GeForce RTX 4090"}),
    "llamacpp_kv_oom.log": (
        "kv_cache_overflow", "llamacpp", "startup", [14, 23, 28, 38, 39, 40, 41, 42],
        {"alloc_size": gib(16), "model_buffer": mib(7605.33), "device_free": mib(23008), "layers_offloaded": 33}),
    "ollama_runner_oom.log": (
        "batch_misconfiguration", "ollama", "startup", [1, 31, 45, 46, 47, 48, 50],
        {"alloc_size": mib(4352), "kv_buffer": mib(8192), "memory.required.kv": gib(8.0),
         "memory.available": gib(15.3), "runner_error": "cudaMalloc failed: out of memory"}),
    "tgi_prefill.log": (
        "profiling_peak", "tgi", "startup", [24, 73, 82],
        {"prefill_tokens": 16000, "tried_to_allocate": gib(7.65), "total": gib(22.05), "free": gib(4.89),
         "repeats": 2}),
    "sglang_mem_fraction.log": (
        "model_too_large", "sglang", "startup", [1, 7, 8, 18],
        {"mem_fraction_static": 0.75, "weights": gib(61.04), "avail_after_load": gib(17.46),
         "uptime_seconds": 73}),
    "kernel_oom_killer.log": (
        "model_too_large", "vllm", "load", [4, 6, 7, 18, 19],
        {"killed_pid": 4402, "process": "python3", "anon_rss": 121634812 * 1024, "uptime_seconds": 99}),
    "torch_new_wording.log": (
        "model_too_large", "torch", "serving", [2, 13],
        {"tried_to_allocate": gib(20.00), "total": gib(79.10), "free": gib(3.81), "allocated": gib(71.45),
         "reserved": gib(71.45) + gib(1.67), "fragmentation_gap": gib(1.67), "process_in_use": gib(75.2)}),
    "kubectl_describe_oomkilled.txt": (
        "fragmentation", "vllm", "after_uptime", [19, 20, 21, 22, 26],
        {"uptime_seconds": 6 * 3600 + 50 * 60 + 16, "memory_limit": 32 * GiB}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_diagnosis(name: str) -> None:
    root, engine, timing, lines, figures = CASES[name]
    diag = diagnose_path(str(LOGS / name), progress=False)
    assert diag.root_cause == root
    assert diag.engine == engine
    assert diag.timing == timing
    assert [e.number for e in diag.evidence] == lines
    for key, want in figures.items():
        assert diag.figures.get(key) == want, key
    assert diag.fix, "every diagnosis names a fix"
    text = (LOGS / name).read_text().splitlines()
    for e in diag.evidence:  # evidence quotes the line it points at
        assert text[e.number - 1].startswith(e.text.rstrip("…"))


@pytest.mark.parametrize("name,engine", [("vllm_clean.log", "vllm"), ("llamacpp_clean.log", "llamacpp")])
def test_clean_logs_have_no_signature(name: str, engine: str) -> None:
    diag = diagnose_path(str(LOGS / name), progress=False)
    assert diag.root_cause == "none"
    assert diag.engine == engine
    assert diag.summary == "no OOM signature found"
    assert diag.evidence == [] and diag.fix == [] and diag.figures == {}


def test_every_engine_and_class_is_covered() -> None:
    assert {c[1] for c in CASES.values()} >= {"vllm", "llamacpp", "ollama", "tgi", "sglang", "torch"}
    assert {c[0] for c in CASES.values()} == {"kv_cache_overflow", "batch_misconfiguration", "fragmentation",
                                              "model_too_large", "profiling_peak"}


def test_signatures_and_confidence() -> None:
    refusal = diagnose_path(str(LOGS / "vllm_kv_refusal.log"), progress=False)
    assert refusal.signature == "vllm.kv_refusal" and refusal.confidence == "high"
    assert "33,168" in refusal.summary
    frag = diagnose_path(str(LOGS / "vllm_fragmentation.log"), progress=False)
    assert frag.confidence == "high"
    assert "8.36 GiB reserved but unallocated" in frag.summary
    assert any("expandable_segments:True" in f for f in frag.fix)
    kernel = diagnose_path(str(LOGS / "kernel_oom_killer.log"), progress=False)
    assert "host memory" in kernel.summary


def test_fix_lines_follow_the_seed() -> None:
    def fix(name: str) -> str:
        return "\n".join(diagnose_path(str(LOGS / name), progress=False).fix)

    assert "--max-model-len (now 131072) to 32768" in fix("vllm_kv_refusal.log")
    assert "--kv-cache-dtype fp8" in fix("vllm_kv_refusal.log")
    assert "--max-num-seqs from 1024 to 256" in fix("vllm_first_batch.log")
    assert "--gpu-memory-utilization from 0.9 to 0.85" in fix("vllm_fragmentation.log")
    assert "Quantize" in fix("vllm_load_oom.log") and "--tensor-parallel-size" in fix("vllm_load_oom.log")
    assert "-c/--ctx-size (now 131072) to 65536" in fix("llamacpp_kv_oom.log")
    assert "OLLAMA_NUM_PARALLEL=1 (now 8)" in fix("ollama_runner_oom.log")
    assert "--max-batch-prefill-tokens from 16000 to 8000" in fix("tgi_prefill.log")
    assert "--mem-fraction-static from 0.75 to 0.85" in fix("sglang_mem_fraction.log")
    assert "--swap-space (now 16)" in fix("kernel_oom_killer.log")


def test_settings_printed_in_the_log_are_reported() -> None:
    diag = diagnose_path(str(LOGS / "tgi_prefill.log"), progress=False)
    assert diag.settings_in_log["max_batch_prefill_tokens"] == 16000
    assert diag.settings_in_log["max_input_tokens"] == 15999  # not hidden by max_input_length: None
    ollama = diagnose_path(str(LOGS / "ollama_runner_oom.log"), progress=False)
    assert ollama.settings_in_log["OLLAMA_NUM_PARALLEL"] == 8
    assert ollama.settings_in_log["n_ctx_per_seq"] == 8192
