"""diagnose tells the start-up stage that ran out of memory (the profiling run, CUDA graph
capture) from runtime OOMs, and gives the fixes that act at that stage for the vLLM release
the log names."""

from __future__ import annotations

from pathlib import Path

import pytest

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


# -- every engine's stages, from public logs (each fixture's header names its issue) -------------------

def stage(name: str):  # type: ignore[no-untyped-def]
    return diagnose_path(str(STAGES / name), progress=False)


def test_tgi_warmup_prefill_is_the_start_up_profiling_of_that_batch():
    d = stage("tgi_warmup_prefill.log")
    assert (d.engine, d.stage, d.root_cause, d.timing) == ("tgi", "profile", "profiling_peak", "startup")
    assert [e.number for e in d.evidence] == [5, 7] and d.figures["prefill_tokens"] == 4096
    assert d.fix[0].startswith("Lower --max-batch-prefill-tokens from 4096 to 2048: the warm-up runs one prefill")
    # no release in the log: the newest spelling, and the one before 2.0 (launcher --max-input-length)
    assert d.fix[1].startswith("And lower --max-input-tokens (--max-input-length before 2.0.0) to at most 2048 with "
                               "it: TGI before 3.0 refuses")
    assert "warm-up" in d.stage_text and "--max-batch-prefill-tokens" in d.stage_text


def test_tgi_0_9_warmup_total_tokens_names_max_batch_total_tokens():
    # the error as the title of https://github.com/huggingface/text-generation-inference/issues/710 quotes it
    d = diagnose_lines(["Not enough memory to handle 16000 total tokens with 2 prefill tokens. You need to decrease "
                        "`--max-batch-total-tokens` or `--max-batch-prefill-tokens"])
    assert (d.signature, d.stage, d.root_cause) == ("tgi.warmup_total", "profile", "kv_cache_overflow")
    assert d.fix[0].startswith("Lower --max-batch-total-tokens (now 16000) to 8000: before 0.9.4 TGI reserves")
    assert "num-shard 2" not in " ".join(d.fix)  # not a count that may be lower than the one in use


def test_tgi_runtime_prefill_oom_is_a_serving_step_not_start_up():
    d = stage("tgi_prefill_runtime.log")
    assert (d.stage, d.timing, d.root_cause, d.confidence) == ("prefill", "serving", "batch_misconfiguration", "medium")
    assert [e.number for e in d.evidence] == [4] and d.figures["tried_to_allocate"] == 222 * 2**20
    assert d.fix[0].startswith("Lower --max-batch-prefill-tokens")


def test_sglang_graph_capture_oom_acts_on_the_capture():
    d = stage("sglang_graph_capture.log")
    assert (d.engine, d.stage, d.root_cause, d.signature) == ("sglang", "graphs", "cuda_graph_capture",
                                                                "sglang.graph_capture")
    assert [e.number for e in d.evidence] == [20]
    # no release in the log: 0.5.16 renamed the flag (server_args.py), the old spelling is named with it
    assert [f.split(":")[0] for f in d.fix] == ["Lower --cuda-graph-max-bs-decode (--cuda-graph-max-bs before 0.5.16) "
                                                "(e.g. 16)",
                                                 "Lower --mem-fraction-static (-0.05)",
                                                 "Or skip graph capture"]
    d = diagnose_lines(["[2025-04-10 08:00:01] server_args=ServerArgs(mem_fraction_static=0.88, cuda_graph_max_bs=160)"]
                       + (STAGES / "sglang_graph_capture.log").read_text().splitlines())
    assert "--cuda-graph-max-bs from 160 to 80" in d.fix[0] and "--mem-fraction-static from 0.88 to 0.83" in d.fix[1]


def test_sglang_capture_failure_without_oom_says_it_is_not_memory():
    d = stage("sglang_graph_capture_not_oom.log")
    assert (d.root_cause, d.engine, d.fix, d.stage) == ("not_oom", "sglang", [], "")
    assert "not for lack of memory" in d.summary and "pair.cc:534" in d.summary
    assert [e.number for e in d.evidence] == [20]


def test_sglang_kv_pool_refusal_and_decode_retraction():
    # RuntimeError as https://github.com/sgl-project/sglang/issues/4330 quotes it (SGLang 0.4.3.post2)
    d = diagnose_lines(["RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."])
    assert (d.stage, d.root_cause) == ("kv_alloc", "model_too_large") and d.fix[0].startswith("Raise --mem-fraction")
    d = stage("sglang_decode_retract.log")
    assert (d.stage, d.timing, d.root_cause) == ("decode", "serving", "kv_cache_overflow")
    assert d.figures["retracted_reqs"] == 1 and d.figures["new_token_ratio_after"] == 0.1845
    assert d.fix[0].startswith("Lower --max-running-requests") and "kept running" in d.summary


def test_llamacpp_model_buffer_kv_cache_and_compute_buffer_stages():
    load = stage("llamacpp_load_alloc.log")
    assert (load.stage, load.root_cause, load.timing) == ("load", "model_too_large", "load")
    assert [e.number for e in load.evidence] == [5, 6, 7] and round(load.figures["alloc_size"] / 2**20, 2) == 144817.04
    assert "141.42 GiB for the model weights on the GPU" in load.summary and "-ngl" in load.fix[1]
    kv = stage("llamacpp_kv_alloc.log")
    assert (kv.stage, kv.root_cause) == ("kv_alloc", "kv_cache_overflow")
    assert kv.fix[0].startswith("Lower the context -c/--ctx-size (now 1048576) to 524288 or less (this KV buffer")
    assert "in host memory (RAM)" in kv.summary and kv.figures["alloc_size"] == 137438953504
    compute = stage("llamacpp_compute_alloc.log")
    assert (compute.stage, compute.timing) == ("compute", "startup")
    assert any(f.startswith("Lower -ub/--ubatch-size to 256") for f in compute.fix)


def test_llamacpp_pipeline_parallel_copies_of_the_compute_buffer():
    """llama-context.cpp keeps n_copies of the compute buffer per GPU under pipeline parallelism: the
    first fix is the one that drops the copies, and a log without them does not offer it. The log:
    https://github.com/ollama/ollama/issues/6860 (a llama-cpp-python user's llama.cpp log)."""
    d = stage("llamacpp_pipeline_copies.log")
    assert (d.stage, d.figures["pipeline_copies"]) == ("compute", 4)
    assert d.summary.endswith("could not allocate 144 MiB for the compute buffer on the GPU. Pipeline parallelism "
                              "keeps 4 copies of that buffer on each GPU.")
    assert d.fix[0].startswith("Pipeline parallelism keeps 4 copies of the compute buffer on each GPU: build "
                               "llama.cpp with -DGGML_SCHED_MAX_COPIES=1, or turn it off with --split-mode row")
    assert not any("Pipeline" in f for f in stage("llamacpp_compute_alloc.log").fix)


def test_llamacpp_compute_buffer_reserved_while_decoding_is_runtime():
    d = stage("llamacpp_runtime_compute.log")
    assert (d.stage, d.timing, d.root_cause) == ("serving", "serving", "batch_misconfiguration")
    assert d.fix[0].startswith("Lower -ub/--ubatch-size to 256") and "while serving" in d.summary


def test_ollama_host_memory_runner_load_compute_and_runtime():
    sysmem = stage("ollama_sysmem.log")
    assert (sysmem.engine, sysmem.stage, sysmem.root_cause) == ("ollama", "load", "model_too_large")
    assert [e.number for e in sysmem.evidence] == [13]
    assert "164.80 GiB of system memory and 13.40 GiB is available" in sysmem.summary
    load = stage("ollama_load_alloc.log")
    assert (load.engine, load.stage, load.root_cause) == ("ollama", "load", "model_too_large")
    assert [e.number for e in load.evidence] == [4, 5, 6] and "PARAMETER num_gpu" in load.fix[1]
    compute = stage("ollama_compute.log")
    assert (compute.stage, compute.signature) == ("compute", "ollama.runner_oom")
    assert "Ollama's runner (llama.cpp) could not allocate 800 MiB for the compute buffer" in compute.summary
    assert any(f.startswith("Lower num_batch") for f in compute.fix)
    runtime = stage("ollama_runtime_cuda.log")
    assert (runtime.stage, runtime.timing) == ("serving", "serving")
    assert [e.number for e in runtime.evidence] == [5, 6] and runtime.fix[0].startswith("Lower num_batch")


def test_ollama_unknown_architecture_is_not_an_oom():
    d = stage("ollama_not_oom.log")
    assert (d.root_cause, d.engine, d.fix) == ("not_oom", "ollama", [])
    assert "unknown model architecture: 'pangu-embedded'" in d.summary
    assert [e.number for e in d.evidence] == [3]


def test_vllm_v1_sampler_free_memory_graph_capture_and_load_from_public_logs():
    sampler = stage("vllm_sampler_v1.log")
    assert (sampler.stage, sampler.root_cause) == ("sampler", "batch_misconfiguration")
    assert sampler.fix[0] == "Lower --max-num-seqs from 256 to 128"
    free = stage("vllm_free_memory_v1.log")
    assert (free.stage, free.timing, free.root_cause) == ("load", "load", "model_too_large")
    assert free.fix[1] == "Or lower --gpu-memory-utilization (now 0.9) to 0.78 or less"
    graphs = stage("vllm_graph_capture_v1.log")  # torch's capture_end frame, no "Traceback" header
    assert (graphs.stage, graphs.root_cause, graphs.timing) == ("graphs", "cuda_graph_capture", "startup")
    assert [e.number for e in graphs.evidence] == [9]
    load = stage("vllm_load_v1.log")  # the traceback comes after the message
    assert (load.stage, load.timing, load.root_cause, load.confidence) == ("load", "load", "model_too_large", "high")


def test_stage_is_in_the_json_and_the_report():
    from servefit.report.diagnose import render_text

    d = stage("sglang_decode_retract.log")
    assert d.as_dict()["stage"] == "decode"
    assert "  Stage: serving, a decode batch" in render_text(d)
    assert stage("vllm_load_v1.log").as_dict()["stage"] == "load"


def test_llamacpp_pipeline_copies_blame_the_copies_not_the_context():
    """A compute buffer that failed with pipeline parallelism on (ggml-backend.cpp::ggml_backend_sched_new keeps
    GGML_SCHED_MAX_COPIES copies) is the scheduler's copies after the KV cache was placed: a batch/compute
    setting, not the context; the same failure without copies stays a context (KV) problem."""
    copies = stage("llamacpp_pipeline_copies.log")
    assert (copies.root_cause, copies.timing, copies.stage) == ("batch_misconfiguration", "startup", "compute")
    plain = stage("llamacpp_compute_alloc.log")
    assert (plain.root_cause, plain.stage) == ("kv_cache_overflow", "compute")


TGI_SHARD_OOM = """\
torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 128.00 MiB (GPU 0; 15.77 GiB total capacity; \
15.37 GiB already allocated; 13.62 MiB free; 15.77 GiB allowed; 15.40 GiB reserved in total by PyTorch)
 rank=0
Error: ShardCannotStart
2023-08-17T10:23:27.032737Z ERROR text_generation_launcher: Shard 0 failed to start
2023-08-17T10:23:27.032758Z  INFO text_generation_launcher: Shutting down shards"""


@pytest.mark.parametrize("tail", [
    ["Error: ShardCannotStart"],
    ["2023-08-17T10:23:27.032737Z ERROR text_generation_launcher: Shard 1 failed to start"],
])
def test_tgi_shard_that_never_started_ran_out_loading_the_weights(tail: list[str]) -> None:
    """TGI's launcher (launcher/src/main.rs::spawn_shards) says a shard "failed to start" when it exits before its
    socket exists, which server.py::serve_inner opens after get_model: an OOM those lines follow is the weights
    (the warm-up is the router's call, later). The log: text-generation-inference issue 866."""
    d = diagnose_lines(TGI_SHARD_OOM.splitlines()[:1] + tail)
    assert (d.engine, d.stage, d.timing, d.root_cause) == ("tgi", "load", "load", "model_too_large")
    assert any("--num-shard" in f for f in d.fix)


def test_tgi_warmup_failure_stays_the_warmup() -> None:
    """The router's warm-up failing ("Webserver Crashed") is not a shard that never started."""
    d = diagnose_lines(["2023-09-26T21:48:00.969072Z ERROR text_generation_launcher: Method Warmup encountered an "
                        "error.", "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB",
                        "2023-09-26T21:48:01.0Z ERROR text_generation_launcher: Webserver Crashed"])
    assert (d.stage, d.timing) == ("profile", "startup")


LOAD_OOM = ["ggml_backend_cuda_buffer_type_alloc_buffer: allocating 28426.68 MiB on device 0: cudaMalloc failed: out of "
            "memory", "llama_model_load: error loading model: unable to allocate CUDA0 buffer"]


def test_llamacpp_layers_fix_names_the_embedding_programs_setting_only_when_the_log_does_not_say() -> None:
    """Only llama.cpp's own tools print `build: N` (common.cpp); without it the lines may come from llama.cpp
    inside llama-cpp-python or Ollama, so the layer count is named as each calls it."""
    bare = diagnose_lines(LOAD_OOM)
    assert (bare.engine, bare.root_cause) == ("llamacpp", "model_too_large")
    assert "Offload fewer layers: lower -ngl (n_gpu_layers in llama-cpp-python, num_gpu in Ollama)" in bare.fix[1]
    own = diagnose_lines(["build: 4567 (a1b2c3d4) with cc (Ubuntu 13.2.0) for x86_64-linux-gnu", *LOAD_OOM])
    assert own.fix[1].startswith("Offload fewer layers: lower -ngl (the rest") and "Ollama" not in own.fix[1]


def _traceback(frames: list[tuple[str, str]], last: str) -> list[str]:
    out = ["Traceback (most recent call last):"]
    for path, fn in frames:
        out += [f'  File "/usr/local/lib/python3.10/dist-packages/{path}", line 10, in {fn}', "    x()"]
    return out + [last]


TORCH_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1002.00 MiB. GPU 0 has a total capacity "
             "of 15.59 GiB of which 940.12 MiB is free.")


@pytest.mark.parametrize("frames, stage_, timing", [
    # vLLM V0 worker.py::load_model -> model_runner.load_model -> the loader's load_weights
    ([("vllm/worker/worker.py", "load_model"), ("vllm/worker/model_runner.py", "load_model"),
      ("vllm/model_executor/models/llama.py", "load_weights")], "load", "load"),
    # V0 worker.py::initialize_cache -> _init_cache_engine -> CacheEngine
    ([("vllm/worker/worker.py", "initialize_cache"), ("vllm/worker/worker.py", "_init_cache_engine"),
      ("vllm/worker/cache_engine.py", "__init__")], "kv_alloc", "startup"),
    # SGLang's scheduler loop runs after start-up: a failure under it is a served batch
    ([("sglang/srt/managers/scheduler.py", "run_scheduler_process"),
      ("sglang/srt/managers/scheduler.py", "event_loop_overlap"),
      ("sglang/srt/managers/scheduler.py", "process_batch_result")], "serving", "serving"),
    # SGLang model_runner.py::load_model
    ([("sglang/srt/managers/scheduler.py", "run_scheduler_process"),
      ("sglang/srt/model_executor/model_runner.py", "initialize"),
      ("sglang/srt/model_executor/model_runner.py", "load_model")], "load", "load"),
])
def test_traceback_frames_name_the_stage(frames: list[tuple[str, str]], stage_: str, timing: str) -> None:
    d = diagnose_lines(_traceback(frames, TORCH_OOM))
    assert (d.stage, d.timing) == (stage_, timing)


SGLANG_POOL = ["[2025-04-13 02:02:00 TP0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=20.10 "
               "GB, mem usage=14.20 GB.", "[2025-04-13 02:02:10 TP0] Memory pool end. avail mem=2.10 GB"]
SGLANG_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 0 has a total capacity of "
              "23.50 GiB of which 120.00 MiB is free.")


@pytest.mark.parametrize("bar", ["Capturing batches (avail_mem=0.21 GB):   0%|          | 0/4 [00:02<?, ?it/s]",
                                 "Capturing batches (bs=160 avail_mem=9.71 GB):  20%|##        | 4/20 [00:02<00:08]"])
def test_sglang_capture_progress_bar_is_graph_capture(bar: str) -> None:
    """SGLang 0.4.4+ cuda_graph_runner.py::capture draws a tqdm bar instead of the begin/end lines: an OOM under it
    ran out capturing graphs."""
    d = diagnose_lines([*SGLANG_POOL, bar, SGLANG_OOM])
    assert (d.engine, d.stage, d.timing, d.root_cause) == ("sglang", "graphs", "startup", "cuda_graph_capture")


def test_sglang_after_the_memory_pool_is_start_up() -> None:
    """model_runner.py::init_memory_pool logs "Memory pool end" once the KV pool is allocated (an excerpt may start
    there): an OOM after it is start-up, not the weights."""
    d = diagnose_lines([SGLANG_POOL[1], SGLANG_OOM])
    assert (d.engine, d.timing) == ("sglang", "startup")


V1_OOM = ("(EngineCore_DP0 pid=1) ERROR 03-26 21:14:47 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. Tried "
          "to allocate 48.00 MiB. GPU 7 has a total capacity of 79.19 GiB of which 43.00 MiB is free.")


@pytest.mark.parametrize("line", [
    # V1 loggers.py (the API server's output loop) and V0 llm_engine.py::step -> log_stats
    "(APIServer pid=1) INFO 03-26 21:14:40 [loggers.py:123] Engine 000: Avg prompt throughput: 1200.5 tokens/s, Avg "
    "generation throughput: 50.1 tokens/s, Running: 12 reqs, Waiting: 0 reqs, GPU KV cache usage: 45.2%, Prefix cache "
    "hit rate: 0.0%",
    "INFO 03-26 21:14:40 metrics.py:351] Avg prompt throughput: 1200.5 tokens/s, Avg generation throughput: 50.1 "
    "tokens/s, Running: 12 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 45.2%, CPU KV cache usage: 0.0%.",
    # V1 async_llm.py::add_request
    "(APIServer pid=1) INFO 03-26 21:14:40 [async_llm.py:261] Added request chatcmpl-abc123.",
])
def test_a_serving_loops_line_before_the_oom_makes_it_a_serving_one(line: str) -> None:
    d = diagnose_lines([line, V1_OOM])
    assert d.timing in ("first_batch", "serving") and d.root_cause == "batch_misconfiguration"
    assert diagnose_lines([V1_OOM]).timing == "unknown"
