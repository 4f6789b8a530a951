"""diagnose's building blocks: torch's OOM message in every wording, the engine refusals that
name their cause, timestamps, sizes, request lengths and the keyword index."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.diagnose import diagnose_lines
from servefit.diagnose import patterns as P
from servefit.diagnose.catalog import WORDS, catalog, keyword
from servefit.diagnose.timestamps import BOOT, REL, WALL, Clock, duration

GiB, MiB = 2**30, 2**20
LOGS = Path(__file__).parent / "fixtures" / "logs"


def gib(x: float) -> int:
    return int(round(x * GiB))


def diag(text: str):  # type: ignore[no-untyped-def]
    return diagnose_lines(text.strip("\n").splitlines())


# -- torch ------------------------------------------------------------------------------------------

SEED = """\
Traceback (most recent call last):
  File "/app/infer.py", line 12, in <module>
    out = model(batch)
torch.cuda.OutOfMemoryError: CUDA out of memory.
Tried to allocate 20.00 GiB
(GPU 0; 79.20 GiB total capacity;
 71.45 GiB already allocated;
 3.81 GiB free; 73.12 GiB reserved)
"""


def test_seed_message_wrapped_over_lines() -> None:
    d = diag(SEED)
    f = d.figures
    assert (f["tried_to_allocate"], f["total"], f["allocated"], f["free"], f["reserved"]) == (
        gib(20), gib(79.20), gib(71.45), gib(3.81), gib(73.12))
    assert f["fragmentation_gap"] == gib(73.12) - gib(71.45)
    assert [e.number for e in d.evidence] == [4, 5, 6, 7, 8]
    # 1.67 GiB cached + 3.81 GiB free cannot hold 20 GiB: not fragmentation, a real shortfall
    assert d.root_cause != "fragmentation"
    assert d.engine == "torch"


def test_old_wording_with_large_gap_is_fragmentation() -> None:
    d = diag("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.20 GiB total "
             "capacity; 60.10 GiB already allocated; 1.20 GiB free; 75.90 GiB reserved in total by PyTorch) If "
             "reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.")
    assert d.root_cause == "fragmentation"
    assert d.figures["fragmentation_gap"] == gib(75.90) - gib(60.10)


def test_runtime_error_form_and_bytes() -> None:
    d = diag("RuntimeError: CUDA out of memory. Tried to allocate 128.00 MiB (GPU 0; 14.76 GiB total capacity; "
             "13.65 GiB already allocated; 0 bytes free; 13.92 GiB reserved in total by PyTorch)")
    assert d.signature == "torch.oom"
    assert d.figures["free"] == 0 and d.figures["tried_to_allocate"] == 128 * MiB
    assert d.figures["reserved"] == gib(13.92)


def test_torch_2_1_capacty_typo_and_several_processes() -> None:
    d = diag("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
             "capacty of 79.15 GiB of which 1.05 GiB is free. Process 4242 has 40.00 GiB memory in use. Process "
             "4343 has 38.08 GiB memory in use. Of the allocated memory 36.51 GiB is allocated by PyTorch, and "
             "502.00 MiB is reserved by PyTorch but unallocated.")
    f = d.figures
    assert f["total"] == gib(79.15) and f["free"] == gib(1.05)
    assert f["gpu_processes"] == 2 and f["process_in_use"] == gib(40) + gib(38.08)
    assert f["reserved"] == gib(36.51) + 502 * MiB


def test_source_lines_that_mention_oom_are_not_an_oom() -> None:
    d = diag("""\
  File "/usr/src/server/flash_causal_lm.py", line 1573, in warmup
    except torch.cuda.OutOfMemoryError as e:
INFO 05-16 10:00:00 [scheduler.py:1] Sequence group 3 is preempted because there is not enough KV cache space.
""")
    assert d.root_cause == "none" and d.summary == "no OOM signature found"


# -- engine messages that name their cause ----------------------------------------------------------

@pytest.mark.parametrize("line,root,sig,figures", [
    ("ValueError: Free memory on device cuda:0 (31.20/79.19 GiB) on startup is less than desired GPU memory "
     "utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
     "model_too_large", "vllm.free_memory",
     {"device_free": gib(31.20), "total": gib(79.19), "gpu_memory_utilization": 0.9, "requested": gib(71.27)}),
    ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
     "initializing the engine.", "model_too_large", "vllm.no_kv_memory", {}),
    ("ValueError: Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token",
     "model_too_large", "vllm.autofit_fail", {}),
    ("RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests. Please try "
     "lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.",
     "batch_misconfiguration", "vllm.sampler_oom", {"dummy_requests": 1024}),
    ("ValueError: The model's max seq len (131072) is larger than the maximum number of tokens that can be stored "
     "in KV cache (54320). Try increasing `gpu_memory_utilization` or decreasing `max_model_len`",
     "kv_cache_overflow", "vllm.kv_refusal_v0", {"max_model_len": 131072, "kv_cache_tokens": 54320}),
    ("Error: Backend(NotEnoughMemory(\"Not enough memory to handle `max_total_tokens=32768`\"))",
     "kv_cache_overflow", "tgi.max_total", {"max_total_tokens": 32768}),
    ('time=2025-05-16T08:00:00.000Z level=ERROR source=sched.go:455 msg="error loading llama server" '
     'error="model requires more system memory (45.3 GiB) than is available (31.1 GiB)"',
     "model_too_large", "ollama.sysmem", {"required": gib(45.3), "available": gib(31.1)}),
])
def test_decisive_messages(line: str, root: str, sig: str, figures: dict) -> None:
    d = diag(line)
    assert (d.root_cause, d.signature, d.confidence != "none") == (root, sig, True)
    for k, v in figures.items():
        assert d.figures[k] == v


def test_no_kv_memory_with_a_large_activation_peak_is_the_batch() -> None:
    d = diag("""\
INFO 05-16 10:00:00 [worker.py:1] model weights take 14.99GiB; non_torch_memory takes 0.19GiB; PyTorch activation peak memory takes 21.30GiB; the rest of the memory reserved for KV Cache is 0.00GiB.
ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.
""")
    assert d.root_cause == "batch_misconfiguration"
    assert d.figures["activation_peak"] == gib(21.30)


def test_k8s_get_pods_and_dmesg() -> None:
    d = diag("NAME                          READY   STATUS      RESTARTS   AGE\n"
             "vllm-llama-6d8f7b9c4-kq2zt    0/1     OOMKilled   3          12m\n")
    assert d.signature == "k8s.oomkilled" and d.root_cause != "none"
    d = diag("[ 8812.113482] Out of memory: Killed process 3141 (llama-server) total-vm:61234560kB, "
             "anon-rss:48123904kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:96512kB oom_score_adj:0")
    assert d.figures["killed_pid"] == 3141 and d.engine == "llamacpp"
    assert d.figures["anon_rss"] == 48123904 * 1024


def test_exit_137_alone_is_not_a_guess() -> None:
    """137 = 128 + SIGKILL: what it says (killed) and that the log cannot tell who killed it, not an OOM cause."""
    d = diag("vllm exited with code 137")
    assert (d.root_cause, d.confidence) == ("killed", "low")
    assert "the log alone cannot tell which" in d.summary and d.fix[0].startswith("Look for the kill")
    assert diag("vllm exited with code 1").root_cause == "not_oom"
    assert diag("vllm exited with code 0").root_cause == "none"


# -- timing ---------------------------------------------------------------------------------------

def test_restart_starts_a_new_run() -> None:
    d = diag("""\
INFO 05-16 01:00:00 [api_server.py:1] vLLM API server version 0.11.0
INFO 05-16 01:01:00 [gpu_model_runner.py:1] Model loading took 14.99 GiB and 40.00 seconds
INFO:     Application startup complete.
INFO 05-16 07:00:00 [api_server.py:1] vLLM API server version 0.11.0
INFO 05-16 07:00:30 [gpu_model_runner.py:1] Starting to load model
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 0 has a total capacity of 79.19 GiB of which 381.69 MiB is free.
""")
    assert d.timing == "load" and d.root_cause == "model_too_large"
    assert d.figures["uptime_seconds"] == 30


def test_long_prompt_from_llamacpp_slot_lines() -> None:
    d = diag("""\
main: server is listening on http://0.0.0.0:8080 - starting the main loop
slot update_slots: id  0 | task 0 | new prompt, n_ctx_slot = 131072, n_keep = 0, n_prompt_tokens = 1532
slot update_slots: id  0 | task 1 | new prompt, n_ctx_slot = 131072, n_keep = 0, n_prompt_tokens = 118004
CUDA error: out of memory
  current device: 0, in function ggml_cuda_pool_malloc at ggml-cuda.cu:412
""")
    assert (d.root_cause, d.timing, d.engine) == ("kv_cache_overflow", "long_request", "llamacpp")
    assert d.figures["long_request_tokens"] == 118004
    assert [e.number for e in d.evidence] == [1, 3, 4, 5]


def test_prompt_tokens_json_and_vllm_token_ids() -> None:
    d = diag("""\
INFO:     Application startup complete.
{"ts": "2026-05-16T10:00:00Z", "path": "/v1/chat/completions", "usage": {"prompt_tokens": 40960, "completion_tokens": 12}}
INFO 05-16 10:00:01 [logger.py:40] Received request cmpl-1: prompt: 'hi', params: SamplingParams(n=1), prompt_token_ids: [128000, 15339, 1917], lora_request: None.
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 2.00 GiB is free.
""")
    assert d.timing == "long_request" and d.figures["long_request_tokens"] == 40960
    assert d.figures["requests_served"] == 1


@pytest.mark.parametrize("line,clock,seconds_after_midnight", [
    ("INFO 05-16 10:00:07 [core.py:1] x", WALL, 36007),
    ("2026-05-16T10:00:07.500000000Z INFO x", WALL, 36007.5),
    ("2026-05-16 12:00:07,123 INFO x (python logging, +00:00 assumed)", WALL, 43207.123),
    ("time=2026-05-16T10:00:07+02:00 level=INFO", WALL, 28807),
    ("[2026-05-16 10:00:07 TP0] Load weight begin.", WALL, 36007),
    ("[GIN] 2026/05/16 - 10:00:07 | 200 |  1.2ms | POST \"/api/chat\"", WALL, 36007),
    ("May 16 10:00:07 host kernel: x", WALL, 36007),
    ("[Sat May 16 10:00:07 2026] Out of memory", WALL, 36007),
    ("      Started:      Sat, 16 May 2026 10:00:07 +0000", WALL, 36007),
])
def test_timestamp_formats(line: str, clock: str, seconds_after_midnight: float) -> None:
    c = Clock()
    c.parse("2026-05-16T00:00:00Z")  # sets the year for formats without one
    got = c.parse(line)
    assert got is not None and got[0] == clock
    midnight = c.parse("2026-05-16T00:00:00Z")
    assert duration(midnight, got) == pytest.approx(seconds_after_midnight)


def test_relative_clocks_do_not_mix_with_wall_time() -> None:
    c = Clock()
    boot = c.parse("[ 8812.113482] Out of memory")
    rel = c.parse("0.01.234.567 I llama_context: n_ctx = 4096")
    assert boot == (BOOT, 8812.113482) and rel is not None and rel[0] == REL
    assert duration(boot, c.parse("2026-05-16T00:00:00Z")) is None


@pytest.mark.parametrize("text,value", [("0 bytes", 0), ("512.00 MiB", 512 * MiB), ("1.5 GiB", gib(1.5)),
                                        ("121634812kB", 121634812 * 1024), ("14.9889 GB", gib(14.9889))])
def test_sizes(text: str, value: int) -> None:
    assert P.size(text) == value


# -- the keyword index never hides a needle ---------------------------------------------------------

def test_every_needle_is_reached_through_its_keyword() -> None:
    cat = catalog()
    for pat in cat.patterns:
        for needle in pat.needles:
            kw = keyword(needle).encode()
            assert kw in cat.keywords and any(nd == needle for nd, _ in cat.keyword_needles[kw])
            assert kw in needle.encode().translate(WORDS).split()


def test_keyword_gating_matches_brute_force_on_every_fixture_line() -> None:
    cat = catalog()
    texts = [line for f in sorted(LOGS.rglob("*")) if f.suffix in (".log", ".txt")
             for line in f.read_text().splitlines()]
    texts += SEED.splitlines()
    for text in texts:
        brute = {p.name for p in cat.patterns if any(nd in text for nd in p.needles) and p.regex.search(text)}
        words = cat.keywords.intersection(text.encode().translate(WORDS).split())
        gated = {p.name for w in words for nd, pats in cat.keyword_needles[w] if nd in text
                 for p in pats if p.regex.search(text)}
        assert gated == brute, text


@pytest.mark.parametrize("line", [
    "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled "
    "cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5 ncclUnhandledCudaError: Call to CUDA "
    "function failed. Last error: Cuda failure 'out of memory'",
])
def test_cuda_libraries_failed_allocations_are_ooms(line: str) -> None:
    """cuBLAS's handle/workspace and NCCL's buffers are GPU allocations too: their failure is an OOM, not an
    unrelated error."""
    d = diag(line)
    assert d.root_cause not in ("not_oom", "none", "killed") and d.signature == "torch.oom"


def test_triton_shared_memory_is_not_gpu_memory() -> None:
    d = diag("triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 131072, Hardware "
             "limit: 101376. Reducing block sizes or `num_stages` may help.")
    assert d.root_cause == "not_oom" and "shared memory (per SM)" in d.summary
