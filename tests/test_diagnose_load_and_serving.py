"""diagnose places an OOM that no traceback frame places: by the checkpoint-shard progress bar
tqdm redraws when the exception closes it (weights loading), and by the serving engine that wrote the
log (a near-full GPU is a serving engine's normal state, not weights that do not fit)."""

from __future__ import annotations

from servefit.diagnose import diagnose_lines

OOM = ("(EngineCore_DP0 pid=7) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 80.00 MiB. GPU 0 has "
       "a total capacity of 79.19 GiB of which 60.00 MiB is free. Of the allocated memory 78.50 GiB is allocated by "
       "PyTorch, and 12.00 MiB is reserved by PyTorch but unallocated.")


def _shards(pct: int) -> str:
    return f"Loading safetensors checkpoint shards:  {pct:2d}% Completed | {pct * 30 // 100}/30 [00:02<01:39,  2.77s/it]"


def test_shard_bar_under_100_after_the_oom_places_it_in_weight_loading():
    d = diagnose_lines([OOM, "", _shards(3), "", "(EngineCore_DP0 pid=7) "])
    assert (d.root_cause, d.timing, d.stage, d.confidence) == ("model_too_large", "load", "load", "high")
    assert d.fix[0] == "Quantize: an AWQ or GPTQ checkpoint, or --quantization fp8 on Ada/Hopper (about half the weights)"
    assert d.fix[1] == "Shard over more GPUs: --tensor-parallel-size 2"


def test_without_the_bar_or_with_it_far_away_the_stage_stays_unknown():
    d = diagnose_lines([OOM])
    assert (d.timing, d.stage) == ("unknown", "")
    d = diagnose_lines([OOM] + ["(EngineCore_DP0 pid=7) DEBUG unrelated"] * 60 + [_shards(3)])
    assert (d.timing, d.stage) == ("unknown", "")


def test_a_bar_after_loaded_weights_does_not_move_a_later_oom_to_loading():
    # the weights finished (100%) before the OOM: a bar printed afterwards (a second model, a LoRA) is not it
    d = diagnose_lines([_shards(100), OOM, _shards(3)])
    assert d.stage != "load"


TGI_PREFILL = ("2023-12-22T00:21:35.318928Z ERROR batch{batch_size=1}:prefill:prefill{id=1 size=1}:prefill{id=1 "
               "size=1}: text_generation_client: router/client/src/lib.rs:33: Server error: CUDA out of memory. Tried "
               "to allocate 222.00 MiB. GPU 0 has a total capacty of 39.39 GiB of which 217.94 MiB is free. Process 9 "
               "has 39.17 GiB memory in use. Of the allocated memory 37.10 GiB is allocated by PyTorch, and 1.57 GiB "
               "is reserved by PyTorch but unallocated.")


def test_tgi_serving_prefill_on_a_full_gpu_is_the_prefill_budget_not_the_weights():
    # TGI fills the card with its KV blocks at warm-up (flash_causal_lm.py::warmup): 94% allocated is normal
    d = diagnose_lines([TGI_PREFILL])
    assert (d.engine, d.timing, d.stage, d.root_cause) == ("tgi", "serving", "prefill", "batch_misconfiguration")
    assert d.fix[0].startswith("Lower --max-batch-prefill-tokens")
    assert not any("Quantize" in line for line in d.fix)


def test_a_script_oom_on_a_full_gpu_is_still_the_weights():
    # no serving engine named: an inference call whose weights fill the GPU
    line = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 222.00 MiB. GPU 0 has a total capacity of "
            "39.39 GiB of which 217.94 MiB is free. Of the allocated memory 37.10 GiB is allocated by PyTorch, and "
            "1.57 GiB is reserved by PyTorch but unallocated.")
    d = diagnose_lines(['  File "/app/infer.py", line 12, in generate', line])
    assert (d.timing, d.root_cause) == ("serving", "model_too_large")


REQUEST = '(APIServer pid=1) INFO:     10.0.0.5:48768 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
WORKER_OOM = ("(Worker_TP0 pid=641) ERROR 03-26 21:14:47 [multiproc_executor.py:949] torch.OutOfMemoryError: CUDA out "
              "of memory. Tried to allocate 48.00 MiB. GPU 0 has a total capacity of 79.19 GiB of which 43.00 MiB is "
              "free. Of the allocated memory 72.09 GiB is allocated by PyTorch, and 371.74 MiB is reserved by PyTorch "
              "but unallocated.")


def test_a_request_the_server_answered_before_the_oom_makes_it_a_serving_oom():
    d = diagnose_lines([REQUEST, WORKER_OOM])
    assert (d.engine, d.timing, d.stage, d.root_cause) == ("vllm", "serving", "serving", "batch_misconfiguration")
    assert d.fix[1] == "Lower --max-num-batched-tokens (e.g. 8192) to cap the tokens processed per step"
    # without the request line nothing says when it happened
    assert diagnose_lines([WORKER_OOM]).timing == "unknown"


def test_a_request_before_the_weights_loaded_is_not_serving():
    loaded = "(EngineCore_DP0 pid=7) INFO 03-26 21:10:00 [gpu_model_runner.py:2653] Model loading took 14.99 GiB"
    d = diagnose_lines([REQUEST, loaded, WORKER_OOM])
    assert d.timing == "startup"


MM = [
    "INFO 11-05 03:21:41 model_runner.py:1025] Loading model weights took 10.0714 GB",
    "(VllmWorkerProcess pid=67) INFO 11-05 03:21:41 enc_dec_model_runner.py:297] Starting profile run for multi-modal "
    "models.",
    "(VllmWorkerProcess pid=67) ERROR 11-05 03:21:52 multiproc_worker_utils.py:233] Exception in worker "
    "VllmWorkerProcess while processing method determine_num_available_blocks: CUDA out of memory. Tried to allocate "
    "1.95 GiB. GPU 1 has a total capacity of 22.09 GiB of which 758.44 MiB is free.",
]


def test_v0_multimodal_profile_run_lowers_max_num_seqs_and_never_chunked_prefill_for_encoder_decoder():
    d = diagnose_lines(MM)
    assert (d.root_cause, d.timing, d.stage) == ("profiling_peak", "startup", "profile")
    assert d.fix == [
        "Lower --max-num-seqs (e.g. to 16): the multimodal profiling run of the V0 engine (no version in the log; its "
        "lines are the V0 engine's) gives each of max-num-seqs dummy requests the model's largest image input",
        "Lower --max-model-len: without chunked prefill the dummy requests share max-num-batched-tokens of text, which "
        "is then max-model-len",
        "Lowering --gpu-memory-utilization does not help here: the profiling peak comes before the KV cache is sized"]
    # the decoder-only runner (model_runner.py) takes chunked prefill, 0.6.3 has it
    dec = [MM[0], MM[1].replace("enc_dec_model_runner.py:297", "model_runner.py:1230"), MM[2],
           "INFO 11-05 03:21:30 llm_engine.py:237] Initializing an LLM engine (v0.6.3) with config: model='x'"]
    d = diagnose_lines([dec[3], *dec[:3]])
    assert d.fix[0].startswith("Lower --max-num-seqs (e.g. to 16): the multimodal profiling run of the V0 engine "
                               "(vLLM 0.6.3)")
    assert d.fix[2] == "Or bound the text of the profiled batch: --enable-chunked-prefill --max-num-batched-tokens 8192"


def test_no_version_and_no_v0_line_keeps_the_newest_engines_advice():
    d = diagnose_lines([MM[0], MM[2].replace("determine_num_available_blocks", "determine_available_memory")])
    assert d.fix[0].startswith("Lower --max-num-batched-tokens (e.g. 2048): the engine (no version in the log; "
                               "assuming the newest vLLM)")


def _v1_graphs(inner: str) -> list[str]:
    head = "(Worker_TP0 pid=2352) ERROR 06-29 11:22:29 [multiproc_executor.py:1000] "
    return [f"{head}Traceback (most recent call last):",
            f'{head}  File "/x/vllm/v1/worker/gpu_worker.py", line 460, in determine_available_memory',
            f'{head}  File "/x/vllm/v1/worker/gpu_model_runner.py", line 5684, in {inner}',
            f"{head}torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total "
            "capacity of 79.19 GiB of which 100.00 MiB is free."]


def test_graphs_measured_before_the_kv_cache_are_not_fixed_by_a_lower_utilization():
    # 0.20+: determine_available_memory captures the graphs once to measure them (profile_cudagraph_memory)
    d = diagnose_lines(_v1_graphs("profile_cudagraph_memory"))
    assert (d.root_cause, d.stage, d.figures["failed_in"]) == ("cuda_graph_capture", "graphs",
                                                                "profile_cudagraph_memory")
    assert d.summary.startswith("CUDA graph capture: vLLM ran out while measuring its CUDA graphs at start-up")
    assert d.fix == [
        "Capture fewer, smaller graphs: --max-cudagraph-capture-size 128 (the graphs are measured before the KV cache "
        "is sized, next to the weights and the profiling peak)",
        "Or skip graph capture: --enforce-eager (slower decoding, no graph memory)",
        "Lowering --gpu-memory-utilization does not help here: the KV cache is not allocated yet"]
    # the profiling run itself (profile_run) is the profiling peak, not the graphs
    d = diagnose_lines(_v1_graphs("profile_run"))
    assert (d.root_cause, d.stage, d.figures["failed_in"]) == ("profiling_peak", "profile", "profile_run")
    # the capture after the KV cache: a lower utilization leaves the graphs room
    d = diagnose_lines([line.replace("determine_available_memory", "compile_or_warm_up_model")
                        for line in _v1_graphs("capture_model")])
    assert d.fix[0].startswith("Lower --gpu-memory-utilization (e.g. 0.85): CUDA graphs are captured after the KV")
