"""TGI's start-up by release, as each tag's code has it: who owns max_batch_total_tokens before
0.9.4, which limits the launcher checks before 2.4.0 and the router after warm-up from then,
PREFILL_CHUNKING's default (off in 2.4.x), the warm-up requests' new tokens (1.1.1) and the CUDA
graphs each release captures."""

from __future__ import annotations

import math

from test_tgi_engine import H100, LLAMA2_7B, LLAMA8B, codes, msg, run

from servefit.engines.tgi import defaults as d
from servefit.engines.tgi import memory as mem
from servefit.engines.tgi.era import era

MiB = 2**20
LLAMA2 = "text-generation-launcher --model-id meta-llama/Llama-2-7b-hf"


def test_before_0_9_4_the_pool_is_max_batch_total_tokens_not_inferred():
    # 0.9.3 flash_causal_lm.py::FlashCausalLM.warmup: CacheManager(ceil(16000 / 16) + 10 blocks) before the
    # prefill; the router keeps its own 16000 and logs no "Setting max batch total tokens"
    cfg, plan = run(LLAMA2, env={"MAX_BATCH_TOTAL_TOKENS": "12000"}, version="0.9.3", model=LLAMA2_7B)
    assert plan.outcome == "started"
    assert (plan.detail.max_batch_total_tokens, plan.kv_cache_tokens) == (12000, 12000)
    assert plan.detail.kv_cache_blocks == math.ceil(12000 / 16) + 10 == 760
    bpt = 32 * 32 * 128 * 2 * 2  # Llama-2-7B fp16: layers x KV heads x head size x (K, V) x 2 bytes
    assert plan.kv_bytes_per_token == bpt and plan.memory.kv_cache == 760 * 16 * bpt
    assert plan.messages[-1] == "Connected"
    assert not any(m.startswith("Setting max batch total tokens") for m in plan.messages)
    assert "TGI010" not in codes(cfg, plan)  # honoured, not "deprecated for Flash Attention models"
    # 0.9.4 (#630) infers it from the memory left after the prefill and ignores the setting
    cfg, plan = run(LLAMA2, env={"MAX_BATCH_TOTAL_TOKENS": "12000"}, version="0.9.4", model=LLAMA2_7B)
    assert plan.outcome == "started" and plan.kv_cache_tokens == 15808
    assert "Setting max batch total tokens to 15808" in plan.messages and "TGI010" in codes(cfg, plan)


def test_before_0_9_4_a_model_without_flash_attention_keeps_the_launchers_total():
    gpt2 = LLAMA2_7B.__class__(**{**LLAMA2_7B.__dict__, "name": "gpt2", "architecture": "GPT2LMHeadModel",
                                  "model_type": "gpt2", "max_position_embeddings": 1024})
    cfg, plan = run("text-generation-launcher --model-id gpt2 --max-total-tokens 1024 --max-input-length 1000",
                    version="0.9.3", model=gpt2)
    assert plan.outcome == "started" and plan.detail.max_batch_total_tokens == 16000
    assert plan.memory.kv_cache == 0 and plan.messages[-1] == "Connected"
    assert "Model does not support automatic max batch total tokens" not in plan.messages


def test_before_0_9_4_warmup_oom_names_the_total_tokens():
    cfg, plan = run(LLAMA2, env={"MAX_BATCH_TOTAL_TOKENS": "40000"}, version="0.9.3", model=LLAMA2_7B)
    assert plan.outcome == "oom_at_load"
    assert plan.messages[-1] == ("RuntimeError: Not enough memory to handle 40000 total tokens with 4096 prefill "
                                 "tokens. You need to decrease `--max-batch-total-tokens` or "
                                 "`--max-batch-prefill-tokens`")
    assert "TGI008" in codes(cfg, plan)


def test_before_0_9_4_launcher_checks_against_the_16000_default():
    a = LLAMA2 + " --max-batch-prefill-tokens 20000 --max-total-tokens 20001 --max-input-length 1000"
    cfg, plan = run(a, version="0.9.3", model=LLAMA2_7B)
    assert plan.outcome == "rejected_config"
    assert msg(cfg, plan, "TGI006") == ("Invalid argument: `max_batch_prefill_tokens` must be <= "
                                        "`max_batch_total_tokens`. Given: 20000 and 16000")
    assert msg(cfg, plan, "TGI007") == ("Invalid argument: `max_total_tokens` must be <= `max_batch_total_tokens`. "
                                        "Given: 20001 and 16000")
    cfg, plan = run(a, version="1.0.0", model=LLAMA2_7B, gpu=H100)  # Option<u32> from 0.9.4: nothing to check
    assert not {"TGI006", "TGI007"} & set(codes(cfg, plan))


def test_prefill_below_input_is_the_launchers_until_2_4_0_then_the_routers():
    a = "text-generation-launcher --model-id m --max-input-tokens 4000 --max-total-tokens 4096 " \
        "--max-batch-prefill-tokens 2048"
    for version, who in (("2.2.0", "Invalid argument"), ("2.3.1", "Invalid argument"),
                         ("2.4.0", "Argument validation error")):
        cfg, plan = run(a, version=version)
        assert plan.outcome == "rejected_config", version
        assert msg(cfg, plan, "TGI005") == (f"{who}: `max_batch_prefill_tokens` must be >= `max_input_tokens`. "
                                            "Given: 2048 and 4000"), version
    # the launcher refuses before anything loads: no warm-up figures at 2.3.1
    cfg, plan = run(a, version="2.3.1")
    assert plan.detail.max_batch_total_tokens is None
    cfg, plan = run(a, version="2.4.0")
    assert plan.detail.max_batch_total_tokens and plan.detail.max_batch_total_tokens > 4096


def test_prefill_chunking_is_off_by_default_in_2_4_x():
    cmd = "text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct"
    # 2.4.1 models/globals.py PREFILL_CHUNKING default "0": the shard's max_total_tokens is the warm-up's tokens
    cfg, plan = run(cmd, version="2.4.1", gpu=H100)
    x = plan.detail
    assert x.support_chunking is False and x.warmup_prefill_tokens == 4096
    assert (x.max_input_tokens, x.max_total_tokens) == (4095, 4096)
    assert "Maximum total tokens defaulted to 4096" in plan.messages
    # with PREFILL_CHUNKING=1, 2.4.1 takes max_total = the KV capacity, max_input = capacity - 1
    cfg, plan = run(cmd, env={"PREFILL_CHUNKING": "1"}, version="2.4.1", gpu=H100)
    x = plan.detail
    assert x.support_chunking is True and x.max_total_tokens == x.max_batch_total_tokens == plan.kv_cache_tokens
    assert x.max_input_tokens == x.max_total_tokens - 1
    cfg, plan = run(cmd, version="3.0.0", gpu=H100)  # "1" from 3.0.0
    assert plan.detail.support_chunking is True


def test_2_4_1_chunked_input_default_is_capped_by_the_tokenizer_not_the_total():
    m = LLAMA8B.__class__(**{**LLAMA8B.__dict__, "model_max_length": 131072})
    cfg, plan = run("text-generation-launcher --model-id m", env={"PREFILL_CHUNKING": "1"}, version="2.4.1",
                    gpu=H100, model=m)
    x = plan.detail
    assert x.max_total_tokens == x.max_batch_total_tokens > 131072
    assert x.max_input_tokens == 131072  # min(num_blocks x BLOCK_SIZE - 1, tokenizer.model_max_length)


def test_no_shard_defaults_logged_before_2_4_1():
    cfg, plan = run("text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct", version="2.3.1",
                    gpu=H100)
    assert plan.outcome == "started"
    assert not any(m.startswith("Maximum input tokens defaulted") for m in plan.messages)


def test_warmup_requests_ask_max_total_minus_truncate_from_1_1_1():
    # router/client/src/client.rs::warmup: `max_new_tokens: 2` up to 1.1.0, then max_total_tokens - truncate
    old = mem.warmup_batch(era("1.1.0"), 4096, 1024, 2048, 16, 0, None)
    assert (old.requests, old.tokens, old.blocks) == (4, 4096, 4 * math.ceil((1024 + 2 - 1) / 16)) == (4, 4096, 260)
    new = mem.warmup_batch(era("1.1.1"), 4096, 1024, 2048, 16, 0, None)
    assert new.blocks == 4 * math.ceil((1024 + 1024 - 1) / 16) == 512


def test_cuda_graph_sizes_by_release():
    nine_to_64 = [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]
    assert d.cuda_graph_sizes({}, era("1.3.4"), None) == []
    assert d.cuda_graph_sizes({}, era("1.4.5"), None) == []  # ENABLE_CUDA_GRAPHS defaults to false
    assert d.cuda_graph_sizes({"enable_cuda_graphs": True}, era("1.4.5"), None) == nine_to_64
    assert d.cuda_graph_sizes({}, era("2.0.3"), None) == [1, 2, 4, 8, 16, 32]
    # 2.0.x reads --cuda-graphs only with --quantize; 2.1.0 always, dropping zeros
    assert d.cuda_graph_sizes({"cuda_graphs": [0]}, era("2.0.3"), None) == [1, 2, 4, 8, 16, 32]
    assert d.cuda_graph_sizes({"cuda_graphs": [0]}, era("2.0.3"), "awq") == []
    assert d.cuda_graph_sizes({"cuda_graphs": [0]}, era("2.1.0"), None) == []
    assert d.cuda_graph_sizes({"cuda_graphs": [1, 2]}, era("2.1.0"), None) == [1, 2]
    assert d.cuda_graph_sizes({}, era("2.2.0"), "bitsandbytes-nf4") == []
    assert d.cuda_graph_sizes({}, era("2.2.0"), "exl2") == [1, 2, 4, 8, 16, 32]
    assert d.cuda_graph_sizes({}, era("2.3.0"), "exl2") == []
    cfg, plan = run(LLAMA2 + " --enable-cuda-graphs", version="1.4.5", model=LLAMA2_7B, gpu=H100)
    assert plan.memory.cuda_graphs == 11 * mem.GRAPH_BYTES == 11 * 24 * MiB
    cfg, plan = run(LLAMA2, version="1.4.5", model=LLAMA2_7B, gpu=H100)
    assert plan.memory.cuda_graphs == 0


# --- the prefill's live peak (what a warm-up OOM counts) -------------------------------------

GiB = 2**30
LLAMA70B = LLAMA8B.__class__(**{**LLAMA8B.__dict__, "name": "meta-llama/Llama-3.1-70B-Instruct",
                                "num_hidden_layers": 80, "hidden_size": 8192, "num_attention_heads": 64,
                                "intermediate_size": 28672, "params": 70_553_706_496})


def test_prefill_live_peak_counts_the_head_tensors_each_release_holds():
    n, v, h = 16434, 128256, 8192
    head = n * v * 2  # tokens x vocab, fp16
    # sharded over a vocabulary 4 divides: world_out, log_softmax's contiguous copy of world_out.T, its output
    assert mem.prefill_live_peak(LLAMA70B, era("2.2.0"), n, 2, 2, 4, False) == 3 * head
    assert mem.prefill_live_peak(LLAMA70B, era("2.4.0"), n, 2, 2, 4, False) == 3 * head
    # one shard: the head output and log_softmax's output; from 2.4.0 log_softmax(out, -1, out=out) in place,
    # so the lm_head step (its input hidden states and output) is the peak
    assert mem.prefill_live_peak(LLAMA70B, era("2.2.0"), n, 2, 2, 1, False) == 2 * head
    assert mem.prefill_live_peak(LLAMA70B, era("2.4.0"), n, 2, 2, 1, False) == head + n * h * 2
    # a vocabulary the shards do not divide is loaded whole: no gather, no transposed view
    odd = LLAMA70B.__class__(**{**LLAMA70B.__dict__, "vocab_size": 128257})
    assert mem.prefill_live_peak(odd, era("2.2.0"), n, 2, 2, 4, False) == 2 * n * 128257 * 2
    # 3.x without prefill log-probabilities: one row per request; one layer's working set is the peak
    fwd = n * (4 * h + 3 * (28672 // 4)) * 2
    assert mem.prefill_live_peak(LLAMA70B, era("3.0.0"), n, 2, 2, 4, False) == fwd
    assert mem.prefill_live_peak(LLAMA70B, era("3.0.0"), n, 2, 2, 4, True) == 3 * head


def test_warmup_oom_matches_the_memory_in_use_the_2_2_log_reports():
    # tgi-2301 (4 x RTX A6000, 2.2.0, 16k input / 32k total): "Tried to allocate 3.93 GiB ... Process has
    # 46.33 GiB memory in use" when log_softmax's output is allocated: weights + warm-up KV + world_out +
    # its contiguous copy + the process's non-torch memory
    from servefit.hardware.spec import GpuSpec
    a6000 = GpuSpec(key="rtx-a6000", name="NVIDIA RTX A6000", vendor="nvidia", memory_bytes=51_040_485_376,
                    compute_capability=86)
    cfg, plan = run("text-generation-launcher --model-id m --num-shard 4 --max-input-tokens 16384 "
                    "--max-total-tokens 32768", version="2.2.0", model=LLAMA70B, gpu=a6000, count=4)
    assert plan.outcome == "oom_at_load"
    head = 16434 * 128256 * 2
    assert round(head / GiB, 2) == 3.93
    warm_kv = 2 * 2048 * 16 * 81920  # two requests of 32767 tokens: 2048 blocks of 16 x 81920 bytes each
    in_use = plan.memory.weights + warm_kv + 2 * head + plan.memory.non_torch
    assert abs(in_use / GiB - 46.33) < 0.1


def test_dbrx_1_4_5_prefill_23000_starts_on_four_h100():
    # tgi-1692 (calibration): the reserved activations of every layer do not add up with the head's
    # tensors for the OOM: the allocator frees its cache and retries first
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks" / "accuracy"))
    import run as accuracy
    case = next(c for c in accuracy.load_cases("tgi", "calibration")
                if c["id"] == "tgi-1692-4xh100-dbrx-prefill-23000-cuda-graphs")
    plan = accuracy.predict(case)
    assert plan.outcome == "started"
    assert plan.detail.warmup_prefill_tokens == 23000 and plan.memory.cuda_graphs == 11 * mem.GRAPH_BYTES
    # what the prefill would leave cached does not fit: the allocator frees its cached segments and retries,
    # so what stays reserved when warm-up reads free memory is the live peak (world_out, log_softmax's copy
    # and output of 23000 x 100352 bf16 logits), shown as the activation peak too
    m = plan.memory
    live = 3 * 23000 * 100352 * 2
    assert plan.detail.warmup_activation_bytes == m.activation_peak == live == 13_848_576_000
    warm = 2 * math.ceil(19999 / 16)  # two requests of 14000 + 6000 new - 1 tokens: 2500 blocks of 16
    block = 16 * 40 * (8 // 4) * 128 * 2 * 2  # DBRX per shard: 40 layers x 2 KV heads x 128 x (K, V) x bf16
    # the 80 warm-up KV tensors (a key and a value per layer) are 2500 x 16 x 2 x 128 x 2 = 20,480,000 bytes
    # each: the caching allocator gives each a 20 MiB segment and keeps the 491,520-byte tail with it
    # (it splits a block only when more than 1 MiB would remain)
    assert warm * block == 80 * 20_480_000
    free = m.total - m.non_torch - m.weights - 80 * 20 * 2**20 - live
    assert m.non_torch == int(0.40 * GiB) + int(0.25 * GiB)  # context and NCCL, paged attention
    blocks = int(free * 0.95 // block) + warm  # 1.4.5: 0.95 of the free memory, warm-up blocks added back
    assert plan.detail.kv_cache_blocks == blocks == 6858 and plan.kv_cache_tokens == 6858 * 16


def test_compute_optimal_prefill_knows_the_cards_of_its_release():
    # launcher/src/main.rs Gpu::from: 3.0.0 - 3.0.1 name nine cards; "nvidia-h100", H100 NVL, A40 and the
    # A100 40GB / 80GB PCIe come in 3.0.2, H200 in 3.1.0; an unknown card gets the 4096 fallback, no VRAM cap
    from servefit.hardware.spec import GpuSpec
    flop = 15_032_385_536  # Config::flop of Llama-3.1-8B (test_tgi_engine)
    nvl = GpuSpec(key="h100-nvl", name="NVIDIA H100 NVL", vendor="nvidia", memory_bytes=100_485_038_080,
                  compute_capability=90)
    h200 = GpuSpec(key="h200", name="NVIDIA H200", vendor="nvidia", memory_bytes=150_754_820_096,
                   compute_capability=90)
    cmd = "text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct"
    assert run(cmd, version="3.0.1", gpu=nvl)[1].detail.max_batch_prefill_tokens == 4096
    assert run(cmd, version="3.0.2", gpu=nvl)[1].detail.max_batch_prefill_tokens == int(900e12 / flop) == 59870
    assert run(cmd, version="3.0.2", gpu=h200)[1].detail.max_batch_prefill_tokens == 4096
    assert run(cmd, version="3.1.0", gpu=h200)[1].detail.max_batch_prefill_tokens == int(989e12 / flop) == 65791
    # the SXM H100's name is known from 3.0.0
    assert run(cmd, version="3.0.0", gpu=H100)[1].detail.max_batch_prefill_tokens == 59870


def test_explain_sweeps_an_fp8_kv_cache_only_where_tgi_has_one():
    # --kv-cache-dtype takes fp8_e4m3fn / fp8_e5m2 from 2.4.0; "fp8" is no TGI value
    from servefit import sweep
    from servefit.pipeline import Target, evaluate, site_from_argv

    argv = "text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct --max-total-tokens 4096".split()
    old = evaluate(site_from_argv(argv), Target(gpu="H100", engine_version="2.2.0"))
    assert list(sweep.variants(old)) == ["as configured"]
    new = evaluate(site_from_argv(argv), Target(gpu="H100", engine_version="3.3.7"))
    assert sweep.variants(new) == {"as configured": {}, "kv fp8": {"kv_cache_dtype": "fp8_e4m3fn"}}
    users = sweep.max_users(new, sweep.variants(new), upto=8192)
    base, fp8 = dict(users["as configured"]), dict(users["kv fp8"])
    assert fp8[8192] >= 2 * base[8192] - 1  # one byte per element instead of two
