"""diagnose on public logs it was not written against (issue 16, deliverable 4): one test per general fix,
each from a few lines quoted from the public log named in the comment (benchmarks/diagnose/cases.yaml has the
cases and their calibration / held-out split; only calibration cases drove these fixes)."""

from __future__ import annotations

from servefit.diagnose import diagnose_lines


def _diag(text: str):
    return diagnose_lines(text.strip("\n").splitlines())


# https://github.com/vllm-project/vllm/issues/14095 (V0 0.7.x, multiproc workers)
VLLM_WORKER_OOM = (
    "(VllmWorkerProcess pid=195295) ERROR 03-02 19:49:43 [multiproc_worker_utils.py:242] torch.OutOfMemoryError: CUDA "
    "out of memory. Tried to allocate 20.00 MiB. GPU 2 has a total capacity of 14.62 GiB of which 3.31 MiB is free. "
    "Including non-PyTorch memory, this process has 14.61 GiB memory in use. Of the allocated memory 14.42 GiB is "
    "allocated by PyTorch, and 23.14 MiB is reserved by PyTorch but unallocated.")
VLLM_WORKER_METHOD = ("(VllmWorkerProcess pid=195297) ERROR 03-02 19:49:43 [multiproc_worker_utils.py:242] Exception "
                      "in worker VllmWorkerProcess while processing method load_model.")


def test_vllm_worker_lines_name_the_engine_and_the_load_stage() -> None:
    d = _diag(VLLM_WORKER_OOM + "\n" + VLLM_WORKER_METHOD)
    assert (d.engine, d.root_cause, d.timing, d.stage) == ("vllm", "model_too_large", "load", "load")
    assert d.figures["worker_method"] == "load_model"
    assert any("--tensor-parallel-size 2" in f for f in d.fix)  # vLLM's own flag, not the generic torch advice


def test_vllm_worker_method_named_before_the_oom() -> None:
    """V0 prints "Exception in worker ... while processing method X." first, then the traceback ending in the OOM."""
    method = VLLM_WORKER_METHOD.replace("load_model", "determine_num_available_blocks")
    d = _diag(method + "\n" + VLLM_WORKER_OOM)
    assert (d.stage, d.timing) == ("profile", "startup")


# https://github.com/vllm-project/vllm/issues/9377 (an exception logged at ERROR before its traceback header)
FLASH_ATTN = """
ERROR 10-16 05:20:48 registry.py:264] ImportError: /usr/local/lib/python3.10/dist-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationE
ERROR 10-16 05:20:48 registry.py:264]
Traceback (most recent call last):
  File "/usr/local/bin/vllm", line 8, in <module>
"""
# https://github.com/vllm-project/vllm/issues/5510 (the end of a traceback whose header the excerpt cut off)
DRIVER_804 = """
ERROR 06-06 14:09:57 worker_base.py:148]   File "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py", line 293, in _lazy_init
ERROR 06-06 14:09:57 worker_base.py:148]     torch._C._cuda_init()
ERROR 06-06 14:09:57 worker_base.py:148] RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility was attempted on non supported HW
"""


def test_exception_without_a_traceback_header_is_not_called_an_oom() -> None:
    d = _diag(FLASH_ATTN)
    assert d.root_cause == "not_oom" and d.fix == []
    assert "undefined symbol" in d.summary
    assert d.signature == "python.undefined_symbol" and "built against a different torch" in d.summary
    d = _diag(DRIVER_804)
    assert d.root_cause == "not_oom"
    assert d.figures["exception"] == "RuntimeError" and "Error 804" in d.figures["message"]
    assert d.signature == "cuda.driver" and "needs a newer NVIDIA driver" in d.summary
    assert [ln.number for ln in d.evidence] == [3]


def test_cuda_no_kernel_image_names_the_build() -> None:
    d = _diag("RuntimeError: CUDA error: no kernel image is available for execution on the device")
    assert (d.root_cause, d.signature) == ("not_oom", "cuda.no_kernel")
    assert "compute capability" in d.summary


def test_a_prose_line_with_an_error_word_is_not_a_failure() -> None:
    d = _diag("INFO 06-06 14:09:57 worker.py:12] Retrying after ValueError: transient, continuing")
    assert d.root_cause == "none"


# https://github.com/huggingface/text-generation-inference/issues/1164 (title: the router's warm-up error line)
TGI_TINY = ("ERROR warmup{max_input_length=64 max_prefill_tokens=256}:warmup: text_generation_client: "
            "router/client/src/lib.rs:33: Server error: Not enough memory to handle 256 prefill tokens. You need to "
            "decrease `--max-batch-prefill-tokens`")


def test_tgi_warmup_that_fails_on_a_tiny_prefill_blames_the_weights() -> None:
    d = _diag(TGI_TINY)
    assert (d.root_cause, d.timing, d.stage) == ("model_too_large", "startup", "profile")
    assert not any("max-batch-prefill-tokens" in f for f in d.fix)  # lowering it further cannot help
    assert any("--quantize" in f for f in d.fix) and any("--num-shard" in f for f in d.fix)
    big = _diag(TGI_TINY.replace("256 prefill", "4096 prefill"))  # a full-size warm-up batch: the batch is the cause
    assert big.root_cause == "profiling_peak"
    assert big.fix[0].startswith("Lower --max-batch-prefill-tokens from 4096 to 2048")


# https://github.com/huggingface/text-generation-inference/issues/563 (TGI 0.9 router panic at warm-up)
TGI_PANIC = (
    "thread 'main' panicked at 'Unable to warmup model: Generation(\"Allocation on device 0 would exceed allowed "
    "memory. (out of memory)\\nCurrently allocated     : 16.08 GiB\\nRequested               : 4.83 GiB\\nDevice "
    "limit            : 22.20 GiB\\nFree (according to CUDA): 11.12 MiB\")', router/src/main.rs:216:18\n"
    "2023-07-07T17:55:43.805488Z ERROR text_generation_launcher: Webserver Crashed")


def test_tgi_router_warmup_panic_is_a_warmup_oom() -> None:
    d = _diag(TGI_PANIC)
    assert (d.root_cause, d.stage, d.signature) == ("profiling_peak", "profile", "tgi.warmup_panic")
    assert d.figures["tried_to_allocate"] == round(4.83 * 2**30)
    assert d.figures["allocated"] == round(16.08 * 2**30) and d.figures["total"] == round(22.20 * 2**30)
    assert d.fix[0].startswith("Lower --max-batch-prefill-tokens")


# https://github.com/sgl-project/sglang/pull/36473 (the RuntimeError it quotes, from #34676)
SGLANG_PREFILL = """
RuntimeError: Prefill out of memory. Try to lower your batch size.
Try to allocate 8192 tokens.
Available full tokens: 8070656 (full_available_size=7936 + full_evictable_size_=8062720)
"""


def test_sglang_prefill_pool_exhaustion_is_a_serving_prefill_failure() -> None:
    d = _diag(SGLANG_PREFILL)
    assert (d.root_cause, d.timing, d.stage) == ("batch_misconfiguration", "serving", "prefill")
    assert d.figures["pool_tokens_tried"] == 8192
    assert "--chunked-prefill-size" in d.fix[0]
    # the token pool ran out: shrinking it (a lower mem-fraction-static) would make it worse
    assert not any("Lower --mem-fraction-static" in f for f in d.fix)


# https://github.com/sgl-project/sglang/issues/2102 (traceback head from the body, last line = the title)
FLASHINFER = """
[2024-11-20 16:40:55 TP0] Traceback (most recent call last):
  File "/root/sglang/python/sglang/srt/managers/scheduler.py", line 1196, in run_scheduler_process
    scheduler.event_loop_normal()
RuntimeError: Failed to allocate memory for batch_prefill_tmp_v with size 435814400 and alignment 16 in AlignedAllocator
"""


def test_flashinfer_workspace_overflow_is_an_oom_with_its_own_fix() -> None:
    d = _diag(FLASHINFER)
    assert (d.engine, d.root_cause, d.timing, d.stage) == ("sglang", "batch_misconfiguration", "serving", "prefill")
    assert d.figures["alloc_size"] == 435814400 and d.figures["workspace_buffer"] == "batch_prefill_tmp_v"
    assert any("SGLANG_FLASHINFER_WORKSPACE_SIZE" in f for f in d.fix)
    decode = _diag(FLASHINFER.replace("batch_prefill_tmp_v", "batch_decode_tmp_v"))
    assert decode.stage == "decode" and "--max-running-requests" in decode.fix[0]


# https://github.com/ollama/ollama/issues/8964 (Ollama 0.5.7's runner output)
PINNED = """
ggml_cuda_host_malloc: failed to allocate 335445.83 MiB of pinned memory: out of memory
ggml_backend_cuda_buffer_type_alloc_buffer: allocating 28426.68 MiB on device 0: cudaMalloc failed: out of memory
"""


def test_pinned_memory_fallback_places_the_failure_at_load() -> None:
    d = _diag(PINNED)
    assert (d.root_cause, d.timing, d.stage) == ("model_too_large", "load", "load")
    alone = _diag(PINNED.strip().splitlines()[0])  # the fallback itself is a warning: llama.cpp goes on
    assert alone.root_cause == "none"


def test_bare_exception_line_after_header_less_frames_is_not_oom() -> None:
    """The same traceback end as torch prints it to stderr, without the worker's log prefix."""
    bare = "\n".join(line.split("] ", 1)[1] for line in DRIVER_804.strip().splitlines())
    d = _diag(bare)
    assert d.root_cause == "not_oom" and d.figures["exception"] == "RuntimeError"
    # a V1 worker's raw traceback carries its process prefix and no log level (vllm issue 15182's lines)
    prefixed = DRIVER_804.replace("ERROR 06-06 14:09:57 worker_base.py:148]", "(VllmWorker rank=5 pid=3073)")
    assert _diag(prefixed).root_cause == "not_oom"


# https://github.com/ggml-org/llama.cpp/issues/8101 (build 3184: n_ctx defaulted to the model's 1M training context)
CPU_KV = """
llama_new_context_with_model: n_ctx      = 1048576
ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 137438953504
llama_kv_cache_init: failed to allocate buffer for kv cache
llama_new_context_with_model: llama_kv_cache_init() failed for self-attention cache
"""


def test_host_kv_cache_overflow_speaks_of_ram_and_the_cost_per_token() -> None:
    d = _diag(CPU_KV)
    assert (d.root_cause, d.stage) == ("kv_cache_overflow", "kv_alloc")
    assert "host memory (RAM) can hold" in d.summary and "GPU has left" not in d.summary
    # 137438953504 B / 1048576 tokens = 128 KiB a token; 131072 tokens -> 16 GiB
    assert d.fix[0] == ("Lower the context -c/--ctx-size (now 1048576) to 524288 or less (this KV buffer takes 128 KiB "
                        "per token of context; at 131,072 tokens it would take 16.00 GiB)")
    assert not any("--no-kv-offload" in f for f in d.fix)  # the KV cache is in RAM already


# https://github.com/vllm-project/vllm/issues/17631 (V1 0.8.5: the frames of its traceback; the excerpt stops before
# the exception, so the last line is torch's standard OOM wording)
COMPILE = """
(VllmWorker rank=4 pid=555) ERROR 05-04 12:38:38 [multiproc_executor.py:380]   File "/opt/conda/lib/python3.11/site-packages/vllm/v1/worker/gpu_worker.py", line 157, in determine_available_memory
(VllmWorker rank=4 pid=555) ERROR 05-04 12:38:38 [multiproc_executor.py:380]     self.model_runner.profile_run()
(VllmWorker rank=4 pid=555) ERROR 05-04 12:38:38 [multiproc_executor.py:380]   File "/opt/conda/lib/python3.11/site-packages/torch/_functorch/aot_autograd.py", line 830, in _create_aot_dispatcher_function
(VllmWorker rank=4 pid=555) ERROR 05-04 12:38:38 [multiproc_executor.py:380]     compiled_fn, fw_metadata = compiler_fn(
(VllmWorker rank=4 pid=555) ERROR 05-04 12:38:38 [multiproc_executor.py:380] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 22.07 GiB of which 512.00 MiB is free.
"""


def test_vllm_oom_while_torch_compile_compiles_is_a_startup_compile_oom() -> None:
    d = _diag(COMPILE)
    assert (d.engine, d.timing, d.stage, d.root_cause) == ("vllm", "startup", "compile", "profiling_peak")
    assert d.fix[0].startswith("Skip torch.compile: -O0 (no compilation) or --enforce-eager")
    profile = _diag("\n".join(ln for ln in COMPILE.splitlines() if "aot_autograd" not in ln and "compiler_fn" not in ln))
    assert profile.stage == "profile" and not profile.fix[0].startswith("Skip torch.compile")


# https://github.com/noonghunna/club-3090/issues/60 (vLLM V1, May 2026: the GPTQ-Marlin repack after loading)
MARLIN = """
(EngineCore pid=77) ERROR 05-05 07:35:19 [core.py:1136]   File "/usr/local/lib/python3.12/dist-packages/vllm/_custom_ops.py", line 1279, in gptq_marlin_repack
(EngineCore pid=77) ERROR 05-05 07:35:19 [core.py:1136]     return torch.ops._C.gptq_marlin_repack(
(EngineCore pid=77) ERROR 05-05 07:35:19 [core.py:1136] RuntimeError: CUDA driver error: out of memory
"""


def test_cuda_driver_error_out_of_memory_in_a_weight_repack_is_a_load_oom() -> None:
    d = _diag(MARLIN)
    assert (d.signature, d.engine, d.timing, d.stage, d.root_cause) == (
        "torch.oom", "vllm", "load", "load", "model_too_large")
