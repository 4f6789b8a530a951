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
