"""Failures diagnose met in public issue threads: an allocation llama.cpp retried without pipeline
parallelism and got past (not a failure), a torch OOM printed while vLLM / SGLang were capturing
CUDA graphs with no traceback to say so, and SGLang's "increase --mem-fraction-static" refusal
when the log does not print the fraction. The excerpts are written here in each engine's own line
formats (llama.cpp llama-context.cpp, vLLM model_runner.py / gpu_model_runner.py, SGLang
model_runner.py)."""

from __future__ import annotations

from servefit.diagnose import diagnose_lines
from servefit.report.diagnose import render_text

# llama.cpp since PR 16748: a compute buffer that does not fit with pipeline parallelism is reserved again
# without it (a 2-GPU layer split, 150k context, -ub 4096)
PP_HEAD = [
    "llama_context: n_seq_max     = 1",
    "llama_context: n_ctx         = 150272",
    "llama_context: n_ubatch      = 4096",
    "llama_kv_cache:      CUDA0 KV buffer size = 12327.00 MiB",
    "llama_kv_cache:      CUDA1 KV buffer size = 11153.00 MiB",
    "llama_context: pipeline parallelism enabled (n_copies=4)",
    "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 12710.31 MiB on device 0: cudaMalloc failed: out of memory",
    "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 13327728640",
    "graph_reserve: failed to allocate compute buffers",
    "llama_context: compute buffer allocation failed, retrying without pipeline parallelism",
]
PP_OK = PP_HEAD + [
    "llama_context:      CUDA0 compute buffer size =  3177.58 MiB",
    "llama_context:      CUDA1 compute buffer size =  3177.58 MiB",
    "srv    load_model: initializing slots, n_slots = 1",
    "main: server is listening on http://127.0.0.1:8080 - starting the main loop",
]
PP_FAIL_AGAIN = PP_HEAD + [
    "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 3177.58 MiB on device 0: cudaMalloc failed: out of memory",
    "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 3331932160",
    "graph_reserve: failed to allocate compute buffers",
    "llama_init_from_model: failed to initialize the context: failed to allocate compute pp buffers",
    "main: exiting due to model loading error",
]


def test_an_allocation_retried_without_pipeline_parallelism_is_not_a_failure():
    d = diagnose_lines(PP_OK)
    assert (d.root_cause, d.engine, d.confidence, d.signature) == ("recovered", "llamacpp", "high",
                                                                    "llamacpp.cuda_alloc")
    assert [e.number for e in d.evidence] == [7, 8, 9, 10]
    assert d.evidence[-1].text == PP_HEAD[-1]
    assert d.figures == {"alloc_size": round(12710.31 * 2**20), "alloc_device": "CUDA0", "device": 0}
    assert (d.stage, d.timing, d.fix) == ("compute", "startup", [])
    assert d.summary.startswith("llama.cpp ran out of memory at line 7, then said it retried another way (line 10: ")
    assert d.summary.endswith("this log shows no out-of-memory failure.")
    assert d.notes == []  # the server went on to listen
    head = render_text(d).splitlines()[0]
    assert head == "-: Out of memory, recovered by the engine  [recovered; llama.cpp; high confidence]"


def test_a_retry_cut_short_by_the_end_of_the_log_says_so():
    d = diagnose_lines(PP_HEAD)
    assert d.root_cause == "recovered"
    assert d.notes == ["the log ends before the server said it was ready: if it stopped later, pass the rest of "
                       "the log"]


def test_a_failure_after_the_retry_is_diagnosed_without_the_pipeline_copies_it_no_longer_has():
    d = diagnose_lines(PP_FAIL_AGAIN)
    assert (d.root_cause, d.stage, d.timing) == ("batch_misconfiguration", "compute", "startup")
    assert d.figures["alloc_size"] == round(3177.58 * 2**20) and "pipeline_copies" not in d.figures
    assert [e.number for e in d.evidence if e.number > 10] == [11, 12, 13, 14]
    assert "Pipeline parallelism" not in d.summary and not any("GGML_SCHED_MAX_COPIES" in f for f in d.fix)
    # one slot already (n_seq_max = 1): lowering -np is no fix
    assert d.fix == ["Lower -ub/--ubatch-size (now 4096) to 2048 (and -b/--batch-size with it): the compute "
                     "buffer grows with the micro-batch"]
    assert d.notes == ["line 7: an out-of-memory the engine retried another way (line 10); what is diagnosed here "
                       "came after it"]


def test_the_same_failure_without_the_retry_line_keeps_the_pipeline_fix():
    d = diagnose_lines(PP_HEAD[:-1] + ["llama_init_from_model: failed to initialize the context: failed to "
                                       "allocate compute pp buffers"])
    assert (d.root_cause, d.figures["pipeline_copies"]) == ("batch_misconfiguration", 4)
    assert d.fix[0].startswith("Pipeline parallelism keeps 4 copies of the compute buffer on each GPU")


def test_a_non_oom_error_after_the_retry_is_not_called_recovered():
    d = diagnose_lines(PP_HEAD + ["llama_model_load: error loading model: tensor 'blk.0.ffn_up' data is not "
                                  "within the file bounds"])
    assert d.root_cause == "not_oom" and "within the file bounds" in d.summary


# vLLM 0.8 (V0, Ray workers): the OOM is printed by another worker with no traceback frames; the capture
# line before it is the only sign of the stage
V0_CAPTURE = [
    "(RayWorkerWrapper pid=1463574, ip=10.0.0.60) INFO 03-27 10:29:01 [worker.py:267] the current vLLM instance can "
    "use total_gpu_memory (44.53GiB) x gpu_memory_utilization (0.98) = 43.64GiB",
    "(RayWorkerWrapper pid=1463574, ip=10.0.0.60) INFO 03-27 10:29:01 [worker.py:267] model weights take 20.64GiB; "
    "non_torch_memory takes 0.28GiB; PyTorch activation peak memory takes 1.52GiB; the rest of the memory reserved "
    "for KV Cache is 21.20GiB.",
    "(RayWorkerWrapper pid=1861983) INFO 03-27 10:29:03 [model_runner.py:1442] Capturing cudagraphs for decoding. "
    "This may lead to unexpected consequences if the model is not static.",
    "(RayWorkerWrapper pid=206994, ip=10.0.0.25) ERROR 03-27 10:29:13 [worker_base.py:620] torch.OutOfMemoryError: "
    "CUDA out of memory. Tried to allocate 2.00 MiB. GPU 6 has a total capacity of 44.53 GiB of which 448.00 KiB "
    "is free. Including non-PyTorch memory, this process has 44.52 GiB memory in use. Of the allocated memory "
    "42.10 GiB is allocated by PyTorch, and 125.37 MiB is reserved by PyTorch but unallocated.",
]


def test_a_torch_oom_during_graph_capture_without_a_traceback_is_the_capture():
    d = diagnose_lines(V0_CAPTURE)
    assert (d.root_cause, d.timing, d.stage, d.confidence) == ("cuda_graph_capture", "startup", "graphs", "high")
    assert d.fix[0].startswith("Lower --gpu-memory-utilization")
    assert d.figures["tried_to_allocate"] == 2 * 2**20 and d.figures["total"] == round(44.53 * 2**30)


def test_v1_progress_bar_marks_the_capture_and_its_end_closes_it():
    bar = "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  40%|####      | 27/67 [00:04<00:06,  5.43it/s]"
    oom = V0_CAPTURE[-1]
    assert diagnose_lines([*V0_CAPTURE[:2], bar, oom]).stage == "graphs"
    done = ("(EngineCore_DP0 pid=240) INFO 05-16 10:01:02 [gpu_model_runner.py:3480] Graph capturing finished in "
            "12 secs, took 0.46 GiB")
    d = diagnose_lines([*V0_CAPTURE[:2], bar, done, oom])
    assert d.stage != "graphs" and d.root_cause != "cuda_graph_capture"


def test_sglang_oom_between_capture_begin_and_end_is_the_capture():
    lines = ["[2026-03-04 16:46:41 TP0] Capture cuda graph begin. This can take up to several minutes. "
             "avail mem=15.30 GB",
             "[2026-03-04 16:46:44 TP0] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.02 GiB. "
             "GPU 0 has a total capacity of 79.19 GiB of which 612.00 MiB is free."]
    d = diagnose_lines(lines)
    assert (d.root_cause, d.engine, d.stage) == ("cuda_graph_capture", "sglang", "graphs")
    assert d.figures["avail_before_graphs"] == round(15.30 * 2**30)
    assert d.fix[0].startswith("Lower --cuda-graph-max-bs")
    end = ("[2026-03-04 16:46:52 TP0] Capture cuda graph end. Time elapsed: 11.02 s. mem usage=0.47 GB. "
           "avail mem=14.83 GB.")
    assert diagnose_lines([lines[0], end, lines[1]]).stage != "graphs"


SGL_REFUSAL = [
    "[2025-03-29 18:18:34 TP0] Load weight end. type=Gemma3ForConditionalGeneration, dtype=torch.bfloat16, "
    "avail mem=3.12 GB, mem usage=19.80 GB.",
    "[2025-03-29 18:18:34 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
]


def test_sglang_refusal_never_prints_a_placeholder_for_the_fraction():
    d = diagnose_lines(SGL_REFUSAL)
    assert d.summary == ("SGLang found no memory for the KV cache pool: the weights fill the share "
                         "mem_fraction_static sets of the GPU.")
    assert d.fix[0] == "Raise --mem-fraction-static if the weights leave room; otherwise:"
    args = "[2025-03-29 18:10:00] server_args=ServerArgs(model_path='google/gemma-3-27b-it', mem_fraction_static=0.8)"
    d = diagnose_lines([args, *SGL_REFUSAL])
    assert d.summary.endswith("the weights fill mem_fraction_static (0.8) of the GPU.")
    assert d.fix[0] == "Raise --mem-fraction-static from 0.8 to 0.90 if the weights leave room; otherwise:"


def test_the_retry_failing_with_the_same_message_is_a_new_failure_not_a_repeat():
    d = diagnose_lines(PP_HEAD + PP_HEAD[6:9] + ["main: exiting due to model loading error"])
    assert d.root_cause == "batch_misconfiguration"
    assert [e.number for e in d.evidence if e.number > 10] == [11, 12, 13]


# llama.cpp's compute buffer at a long context (ROCm, 70B IQ4_XS, llama.cpp ~2025-10 line formats)
COMPUTE = [
    "llama_context: n_seq_max     = 1",
    "llama_context: n_ctx         = 131072",
    "llama_context: n_ubatch      = 512",
    "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 14136.04 MiB on device 0: cudaMalloc failed: out of memory",
    "ggml_gallocr_reserve_n: failed to allocate ROCm0 buffer of size 14822711296",
    "graph_reserve: failed to allocate compute buffers",
    "llama_init_from_model: failed to initialize the context: failed to allocate compute pp buffers",
]
FA_WHY = ("the compute buffer then no longer holds the attention scores for the whole context "
          "(context x micro-batch x heads x 4 bytes)")


def test_a_long_context_compute_buffer_failure_names_flash_attention_as_the_log_shows_it():
    d = diagnose_lines(COMPUTE)
    assert (d.root_cause, d.stage) == ("kv_cache_overflow", "compute")
    assert d.summary.startswith("KV cache overflow: the KV cache was allocated, but the compute buffer this context "
                                "length needs next to it does not fit. llama.cpp could not allocate 13.80 GiB")
    assert d.fix[0] == f"If flash attention is off, turn it on (-fa on): {FA_WHY}"
    assert d.fix[1] == "Lower the context -c/--ctx-size (now 131072) to 65536 or less"
    off = diagnose_lines(COMPUTE[:3] + ["llama_context: flash_attn    = disabled"] + COMPUTE[3:])
    assert off.fix[0] == f"Turn on flash attention (-fa on): {FA_WHY}"
    for on in ("enabled", "auto", "1"):
        d = diagnose_lines(COMPUTE[:3] + [f"llama_context: flash_attn    = {on}"] + COMPUTE[3:])
        assert not any("flash attention" in f.lower() and "turn it on" in f.lower() for f in d.fix), on
        assert d.fix[0].startswith("Lower the context"), on


def test_a_kv_cache_failure_is_not_told_to_turn_on_flash_attention():
    d = diagnose_lines(["llama_context: n_ctx         = 131072",
                        "llama_kv_cache_init: failed to allocate buffer for kv cache"])
    assert d.stage == "kv_alloc" and not any(f.startswith(("If flash", "Turn on flash")) for f in d.fix)


def test_ollama_compute_failure_reads_flash_attention_from_its_server_config():
    env = ('time=2024-10-19T22:20:00.000+08:00 level=INFO source=routes.go:1186 msg="server config" '
           'env="map[OLLAMA_FLASH_ATTENTION:false OLLAMA_NUM_PARALLEL:0]"')
    runner = ["llama_new_context_with_model: n_ctx      = 131072",
              "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 8574.52 MiB on device 3: cudaMalloc failed: "
              "out of memory",
              "ggml_gallocr_reserve_n: failed to allocate CUDA3 buffer of size 8991031296",
              "llama_new_context_with_model: failed to allocate compute buffers"]
    d = diagnose_lines([env, *runner])
    assert (d.engine, d.root_cause, d.stage) == ("ollama", "kv_cache_overflow", "compute")
    assert d.fix[0] == f"Turn on flash attention (OLLAMA_FLASH_ATTENTION=1): {FA_WHY}"


def test_ggml_cuda_error_of_2024_is_an_oom():
    # Ollama 0.1.17's runner (llama.cpp's ggml-cuda.cu CUDA_CHECK before 2024-03)
    d = diagnose_lines([
        "CUDA error 2 at /go/src/github.com/jmorganca/ollama/llm/llama.cpp/gguf/ggml-cuda.cu:9132: out of memory",
        "current device: 0",
        "2024/01/05 10:38:07 llama.go:463: error starting llama runner: llama runner process has terminated",
    ])
    assert (d.signature, d.engine) == ("llamacpp.cuda_error_old", "ollama")
    assert d.root_cause == "model_too_large" and d.evidence[0].number == 1
    assert diagnose_lines(["CUDA error 700 at ggml-cuda.cu:1234: an illegal memory access was encountered"]
                          ).root_cause == "none"


def test_ollama_system_memory_refusal_is_titled_for_the_host_not_the_gpu():
    # server/sched.go (Ollama 0.5.7): the scheduler checks system RAM before it starts a runner
    d = diagnose_lines([
        'time=2025-01-31T20:48:19.586Z level=INFO source=server.go:104 msg="system memory" total="1690.2 GiB" '
        'free="358.4 GiB" free_swap="7.8 GiB"',
        'time=2025-01-31T20:48:19.587Z level=INFO source=sched.go:428 msg="NewLlamaServer failed" model=/m/blob '
        'error="model requires more system memory (391.0 GiB) than is available (366.2 GiB)"',
    ])
    assert (d.root_cause, d.engine, d.signature) == ("model_too_large", "ollama", "ollama.sysmem")
    assert render_text(d).splitlines()[0] == ("-: Model too large for the host memory  [model_too_large; Ollama; "
                                              "high confidence]")
    gpu = diagnose_lines(["llama_model_load: error loading model: unable to allocate CUDA0 buffer"])
    assert render_text(gpu).splitlines()[0].startswith("-: Model too large for the GPU  [model_too_large;")
