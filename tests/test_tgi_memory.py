"""TGI warmup arithmetic (flash_causal_lm.py::warmup) against hand computations, and the warmup
failures as outcomes."""

from __future__ import annotations

import math

from test_tgi_engine import H100, LLAMA8B, run

from servefit.engines.tgi import memory as mem
from servefit.engines.tgi import quant_scratch as qs
from servefit.engines.tgi.era import era
from servefit.models.spec import ModelSpec

GiB = 2**30
LLAMA70B = ModelSpec(
    name="meta-llama/Llama-3.1-70B-Instruct", architecture="LlamaForCausalLM", model_type="llama",
    num_hidden_layers=80, hidden_size=8192, num_attention_heads=64, num_key_value_heads=8, head_dim=128,
    intermediate_size=28672, vocab_size=128256, max_position_embeddings=131072, params=70_553_706_496,
    rope_scaling={"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192})
GPT2 = ModelSpec(name="gpt2", architecture="GPT2LMHeadModel", model_type="gpt2", num_hidden_layers=12,
                 hidden_size=768, num_attention_heads=12, num_key_value_heads=12, head_dim=64, intermediate_size=3072,
                 vocab_size=50257, max_position_embeddings=1024, params=124_439_808, torch_dtype="float32")


def test_bytes_per_block_per_backend():
    # warmup: total_cache_size = num_layers x BLOCK_SIZE x num_kv_heads x head_size x 2 x dtype_size
    assert mem.bytes_per_token(LLAMA8B, 2, 1) == 32 * 8 * 128 * 2 * 2 == 131_072
    assert mem.bytes_per_token(LLAMA8B, 2, 2) == 65_536  # 4 KV heads per shard
    cfg, plan = run("text-generation-launcher --model-id m")  # 3.x flashinfer: block 1
    assert plan.detail.block_size == 1 and plan.detail.attention == "flashinfer"
    cfg, plan = run("text-generation-launcher --model-id m", {"ATTENTION": "flashdecoding"})
    assert plan.detail.block_size == 256
    cfg, plan = run("text-generation-launcher --model-id m", version="2.2.0")  # before 2.3: paged, 16
    assert plan.detail.block_size == 16


def test_kv_blocks_formula_by_era():
    total, used, bb = 24 * GiB, 16 * GiB, 131_072
    # >= 3.0: free - (1 - fraction x wiggle) x total, then // block bytes, plus the warmup blocks
    r = mem.kv_blocks(era("3.3.7"), total, used, 1.0, 0.9, bb, 100)
    assert r.num_blocks == int(8 * GiB - 0.1 * total) // bb + 100
    # 2.x: (free - (1 - fraction) x total) x wiggle // block bytes
    r = mem.kv_blocks(era("2.2.0"), total, used, 0.9, 0.95, bb, 10)
    assert r.num_blocks == int(int(8 * GiB - 0.1 * total) * 0.95 // bb) + 10


def test_warmup_batch_requests():
    # 2.x: requests of max_input tokens until max_batch_prefill_tokens; each asks max_total - truncate new tokens
    b = mem.warmup_batch(era("2.0.3"), 4145, 4095, 4096, 16, 0, None)
    assert (b.requests, b.tokens) == (2, 4145)
    assert b.blocks == math.ceil((4095 + 1 - 1) / 16) + math.ceil((50 + 4046 - 1) / 16)
    b = mem.warmup_batch(era("3.3.7"), 8315, None, None, 1, 0, None)  # 3.x: one request, 1 new token
    assert (b.requests, b.tokens, b.blocks) == (1, 8315, 8315)


def test_done_when_a10g_llama31_8b_matches_hand_computation():
    cfg, plan = run("text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct")
    m, x = plan.memory, plan.detail
    assert plan.outcome == "started"
    assert (x.max_batch_prefill_tokens, x.cuda_memory_fraction, x.wiggle_room) == (8315, 1.0, 0.9)
    warm_blocks = 8315  # block size 1, one request of 8315 tokens + 1 new token - 1
    used = m.non_torch + m.weights + warm_blocks * 131_072 + x.warmup_activation_bytes
    free = int((m.total - used) - (1 - 1.0 * 0.9) * m.total)
    expected = free // 131_072 + warm_blocks
    assert x.max_batch_total_tokens == expected == plan.kv_cache_tokens
    assert f"Setting max batch total tokens to {expected}" in plan.messages
    assert x.max_total_tokens == expected and x.max_input_tokens == expected - 1
    # the weights are the checkpoint's bf16 tensors
    assert abs(m.weights - 8_030_261_248 * 2) < 0.01 * m.weights


def test_2x_warmup_includes_prefill_logprobs():
    cfg, plan = run("text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct", version="2.2.0")
    n, v, h = 4145, 128256, 4096
    head = n * v * (2 + mem.LOGPROB_EXTRA_BYTES) + n * h * 2
    fwd = n * (4 * h + 3 * 14336) * 2
    assert plan.detail.warmup_activation_bytes == head + fwd
    cfg3, plan3 = run("text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct "
                      "--max-batch-prefill-tokens 4145")
    assert plan3.detail.warmup_activation_bytes < plan.detail.warmup_activation_bytes / 3  # 3.x: one row per request


def test_24_takes_prefill_logprobs_in_place():
    """2.4.0's generate_token writes log_softmax over the lm_head output (#2661): the warm-up prefill
    of 2.4.x holds one model-dtype tokens x vocab tensor less than 2.3.1's. Llama-3.1-8B, launcher
    defaults 4095 / 4096 / 4145 (max_position_embeddings capped at 4096), fp16."""
    n, v, h = 4145, 128256, 4096
    fwd = n * (4 * h + 3 * 14336) * 2  # hidden states, fused gate_up output and its activated half
    assert fwd == 492_359_680
    # 2.3.1: head output (2 bytes) + log_softmax's copy and the sampler's (6 bytes) per logit
    _, p23 = run("text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct", version="2.3.1")
    assert p23.detail.warmup_activation_bytes == n * v * 8 + n * h * 2 + fwd == 4_779_284_480
    # 2.4.0 and 2.4.1: the log_softmax copy (2 bytes per logit) is gone
    for version in ("2.4.0", "2.4.1"):
        _, p24 = run("text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct "
                     "--max-batch-prefill-tokens 4145", version=version)
        assert p24.detail.warmup_activation_bytes == n * v * 6 + n * h * 2 + fwd == 3_716_042_240, version
    assert p23.detail.warmup_activation_bytes - 3_716_042_240 == n * v * 2 == 1_063_242_240
    assert mem.logprob_extra_bytes(era("2.3.1"), 2) == 6 and mem.logprob_extra_bytes(era("2.4.0"), 2) == 4
    assert mem.logprob_extra_bytes(era("2.4.0"), 4) == 2  # a float32 model's log_softmax tensor is 4 bytes


def test_not_enough_memory_for_prefill_tokens():
    cfg, plan = run("text-generation-launcher --model-id meta-llama/Meta-Llama-3.1-70B-Instruct --max-input-length "
                    "131072 --max-total-tokens 139264 --num-shard 4 --sharded true", version="2.2.0",
                    model=LLAMA70B, gpu=H100, count=4)
    assert plan.outcome == "oom_at_load"
    assert ("RuntimeError: Not enough memory to handle 131122 prefill tokens. You need to decrease "
            "`--max-batch-prefill-tokens`") in plan.messages
    f = next(f for f in plan.findings if f.code == "TGI008")
    assert f.severity == "error" and f.setting == "max_batch_prefill_tokens"


def test_max_total_tokens_above_kv_capacity():
    # from 1.1 the warmup requests ask max_total - truncate new tokens, so their KV blocks fail first
    cfg, plan = run("text-generation-launcher --model-id m --max-input-tokens 131000 --max-total-tokens 131072 "
                    "--max-batch-prefill-tokens 4096")
    assert plan.outcome == "oom_at_load"
    assert ("RuntimeError: Not enough memory to handle 4096 prefill tokens. You need to decrease "
            "`--max-batch-prefill-tokens`") in plan.messages
    # 1.0 asked 2 new tokens: warmup passes and the router refuses the result
    cfg, plan = run("text-generation-launcher --model-id m --max-input-length 4000 --max-total-tokens 131072",
                    version="1.0.3")
    assert plan.outcome == "oom_at_load"
    bt = plan.detail.max_batch_total_tokens
    assert f"Error: `max_total_tokens` must be <= `max_batch_total_tokens`. Given: 131072 and {bt}" in plan.messages
    assert "TGI009" in [f.code for f in plan.findings]


def test_weights_larger_than_the_gpu():
    cfg, plan = run("text-generation-launcher --model-id meta-llama/Llama-3.1-70B-Instruct", model=LLAMA70B, gpu=H100)
    assert plan.outcome == "oom_at_load" and "TGI014" in [f.code for f in plan.findings]


def test_cuda_memory_fraction_shrinks_the_cache():
    _, full = run("text-generation-launcher --model-id m", gpu=H100)
    _, part = run("text-generation-launcher --model-id m --cuda-memory-fraction 0.5", gpu=H100)
    assert part.detail.max_batch_total_tokens < full.detail.max_batch_total_tokens / 2
    _, wig = run("text-generation-launcher --model-id m", {"TGI_WIGGLE_ROOM": "0.8"}, gpu=H100)
    assert wig.detail.wiggle_room == 0.8
    assert wig.detail.max_batch_total_tokens < full.detail.max_batch_total_tokens


def test_non_flash_model_keeps_router_default():
    cfg, plan = run("text-generation-launcher --model-id gpt2", version="1.4.0", model=GPT2)
    assert plan.detail.max_batch_total_tokens == 16000
    assert "Model does not support automatic max batch total tokens" in plan.messages
    assert plan.kv_cache_tokens == 0


def test_capacity_advice():
    cfg, plan = run("text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct")
    f = next(f for f in plan.findings if f.code == "TGI017")
    assert f.severity == "info"
    assert plan.max_concurrency == plan.kv_cache_tokens / plan.max_model_len
    assert any("TGI 3.3.7 assumed" in a for a in cfg.assumptions)


def test_a10g_llama31_8b_from_the_launcher_formulas_alone():
    """The same case from the model card and TGI's own formulas, sharing no sub-term with the plan:
    weights = 8,030,261,248 params x 2 bytes; the CUDA context 0.40 GiB, flashinfer's 128 MiB
    workspace (layers/attention/flashinfer.py::get_workspace) and the 8 MiB int workspace each of the
    three wrappers FlashCausalLM.__init__ creates allocates (flashinfer prefill.py / decode.py
    Batch*Wrapper.__init__: torch.empty((8 * 1024 * 1024,), dtype=torch.uint8)); the warmup prefill's
    peak (flash_causal_lm.py::warmup, 3.x: one request of max_batch_prefill_tokens = 8315) =
    8315 x (4 x 4096 + 3 x 14336) x 2 for a decoder layer + 1 x 128256 x (2 + 4) + 8315 x 4096 x 2
    for the head; then free - (1 - 1.0 x 0.9) x total over 131,072 bytes per block-of-1 token."""
    _, plan = run("text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct")
    total = 23_684_186_112  # A10G as torch reports it
    weights = 8_030_261_248 * 2
    context = int(0.40 * 2**30) + 128 * 2**20 + 3 * 8 * 2**20
    peak = 8315 * (4 * 4096 + 3 * 14336) * 2 + 128256 * 6 + 8315 * 4096 * 2
    warm = 8315 * 131_072
    free = int((total - (context + weights + warm + peak)) - 0.1 * total)
    assert plan.kv_cache_tokens == free // 131_072 + 8315 == 27_540


def test_a_tied_head_is_a_second_copy_on_each_shard():
    # TensorParallelHead.load reads the embed_tokens tensor again (its own GPU tensor, sharded over
    # the vocabulary), so a tied model holds the vocab x hidden matrix twice
    tied = ModelSpec(name="t", architecture="LlamaForCausalLM", model_type="llama", num_hidden_layers=16,
                     hidden_size=2048, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                     intermediate_size=8192, vocab_size=128256, max_position_embeddings=131072,
                     params=1_235_814_400, tie_word_embeddings=True)
    untied = ModelSpec(**{**tied.__dict__, "tie_word_embeddings": False})
    assert mem.weights_per_shard(untied, 2, None, 1) == 1_235_814_400 * 2
    assert mem.weights_per_shard(tied, 2, None, 1) == 1_235_814_400 * 2 + 128256 * 2048 * 2
    assert mem.weights_per_shard(tied, 2, None, 2) == (1_235_814_400 * 2 + 128256 * 2048 * 2) // 2


def test_flashinfer_workspace_held_at_warmup_only_on_that_backend():
    # layers/attention/flashinfer.py::get_workspace: 128 MiB per shard, allocated in
    # FlashCausalLM.__init__ and alive when warmup reads free memory, plus the 8 MiB int workspace each of
    # the three wrappers created there allocates (flashinfer 0.1.6 / 0.2.0 Batch*Wrapper.__init__); none on
    # paged / flashdecoding (and none before 2.3, where every model runs paged attention)
    _, fi = run("text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct --max-batch-prefill-tokens 4096")
    _, fd = run("text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct --max-batch-prefill-tokens 4096",
                {"ATTENTION": "flashdecoding", "PREFIX_CACHING": "0"})
    assert (fi.detail.attention, fd.detail.attention) == ("flashinfer", "flashdecoding")
    assert fi.memory.non_torch - fd.memory.non_torch == 128 * 2**20 + 3 * 8 * 2**20
    _, old = run("text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct", version="2.2.0")
    assert old.memory.non_torch == int(0.40 * GiB)
    # 3.x sizes blocks of one token from free - 0.1 x total: 152 MiB is 1216 tokens of 128 KiB
    assert fd.kv_cache_tokens - fi.kv_cache_tokens in range(1216 - 256, 1216 + 256 + 1)


def test_gemma3_vlm_prefill_masks_and_sdpa_by_release():
    # flash_gemma3_modeling.py: requests x S x S masks for a Gemma 3 VLM prefill; 3.2.x runs the
    # math-backend SDPA (scores + softmax per head of the shard), 3.3.x on flashinfer only the masks
    from test_tgi_launcher_config import GEMMA3_27B

    text = ModelSpec(**{**GEMMA3_27B.__dict__, "multimodal": False})
    s, heads = 8000, 32
    argv = "text-generation-launcher --model-id g --max-batch-prefill-tokens 8000"
    # masks: float32 additive (4) + bool sliding (1) + float32 local (4); 3.3.x also the bool mask (1)
    for version, extra in (("3.2.1", 9 * s * s + 2 * heads * s * s * 2),
                           ("3.3.7", 10 * s * s), ("3.1.1", 0)):
        _, vlm = run(argv, version=version, model=GEMMA3_27B, gpu=H100)
        _, txt = run(argv, version=version, model=text, gpu=H100)
        assert vlm.detail.warmup_activation_bytes - txt.detail.warmup_activation_bytes == extra, version
    # 3.3.x off flashinfer (ATTENTION=flashdecoding) the SDPA runs again
    _, fd = run(argv, {"ATTENTION": "flashdecoding"}, version="3.3.7", model=GEMMA3_27B, gpu=H100)
    _, fdt = run(argv, {"ATTENTION": "flashdecoding"}, version="3.3.7", model=text, gpu=H100)
    assert fd.detail.warmup_activation_bytes - fdt.detail.warmup_activation_bytes == 10 * s * s + 2 * heads * s * s * 2
    # two shards halve the heads; two requests of 4000 tokens (max_input 4000) give 2 x 4000^2 masks
    assert mem.gemma3_mask_bytes(GEMMA3_27B, era("3.2.1"), s, 1, 2, 2, "flashinfer") == 9 * s * s + 2 * 16 * s * s * 2
    b = mem.warmup_batch(era("3.2.1"), 8000, 4000, None, 1, 0, None)
    assert (b.requests, b.longest) == (2, 4000)
    assert mem.gemma3_mask_bytes(GEMMA3_27B, era("3.3.7"), 4000, 2, 2, 1, "flashinfer") == 10 * 2 * 4000 * 4000


def test_gemma3_vlm_long_prefill_warmup_oom_only_where_the_sdpa_runs():
    # 16000 prefill tokens on one H100 (max_input 15999: requests of 15999 and 1 tokens, both padded
    # to S = 15999 in the masks): 3.2.1's SDPA scores (2 x 2 x 32 x 15999^2 x 2 bytes = 66 GB) do not
    # fit beside 55 GB of weights; 3.3.7 on flashinfer keeps only the masks (2 x 10 x 15999^2 = 5 GB)
    argv = "text-generation-launcher --model-id g --max-batch-prefill-tokens 16000 --max-input-tokens 15999 " \
           "--max-total-tokens 16000"
    from test_tgi_launcher_config import GEMMA3_27B

    _, old = run(argv, version="3.2.1", model=GEMMA3_27B, gpu=H100)
    assert old.outcome == "oom_at_load"
    assert "Not enough memory to handle 16000 prefill tokens" in " ".join(old.messages)
    _, new = run(argv, version="3.3.7", model=GEMMA3_27B, gpu=H100)
    assert new.outcome == "started"
    assert new.detail.warmup_activation_bytes > 2 * 10 * 15999**2


def test_flash_decoding_blocks_before_the_attention_backends():
    # 2.1.1 - 2.2.x models/globals.py: BLOCK_SIZE = 256 with FLASH_DECODING; the 2.2 launcher forces
    # it for gemma2 (softcap); 2.1.0 has no such switch, 2.3 chooses through ATTENTION instead
    gemma2 = ModelSpec(**{**LLAMA70B.__dict__, "name": "google/gemma-2-9b", "model_type": "gemma2",
                          "num_hidden_layers": 42, "hidden_size": 3584, "num_attention_heads": 16,
                          "num_key_value_heads": 8, "head_dim": 256, "intermediate_size": 14336,
                          "vocab_size": 256000, "max_position_embeddings": 8192, "params": 9_241_705_984})
    argv = "text-generation-launcher --model-id g"
    for version, env, model, block in (("2.2.0", None, gemma2, 256), ("2.1.1", None, gemma2, 16),
                                       ("2.1.1", {"FLASH_DECODING": "true"}, LLAMA8B, 256),
                                       ("2.1.0", {"FLASH_DECODING": "1"}, LLAMA8B, 16),
                                       ("2.2.0", {"FLASH_DECODING": "yes"}, LLAMA8B, 16)):
        _, p = run(argv, env, version=version, model=model, gpu=H100)
        assert p.detail.block_size == block, (version, env, model.name)
    _, p = run(argv, version="2.2.0", model=gemma2, gpu=H100)
    assert p.detail.kv_cache_blocks * 256 == p.kv_cache_tokens
    assert p.detail.warmup_prefill_tokens == 4145  # two requests (4095 + 50) with 8192 positions capped at 4096


def test_request_logprobs_variable_is_the_flag():
    # 3.x shards compute every prompt token's log-probabilities at warm-up with REQUEST_LOGPROBS
    # ("1" / "true" in any case), which --enable-prefill-logprobs sets; the launcher's environment reaches the shards
    argv = "text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct --max-batch-prefill-tokens 4096"
    _, flag = run(argv + " --enable-prefill-logprobs")
    _, env = run(argv, {"REQUEST_LOGPROBS": "TRUE"})
    _, off = run(argv, {"REQUEST_LOGPROBS": "0"})
    assert env.detail.warmup_activation_bytes == flag.detail.warmup_activation_bytes > off.detail.warmup_activation_bytes + 4096 * 128256 * 2


def test_exllama_scratch_for_gptq_where_marlin_does_not_take_it():
    # server.py::Warmup -> layers/gptq/exllamav2.py::create_exllama_buffers: one scratch buffer of the
    # largest in x out x 2 + 128 + out x tokens x 4 + 128 over the shard's projections, allocated before
    # the free-memory reading; from 2.2.0 Marlin takes symmetric 4-bit GPTQ on compute capability >= 8.0
    from servefit.hardware.spec import GpuSpec

    gptq = ModelSpec(**{**LLAMA8B.__dict__, "quantization": {"quant_method": "gptq", "bits": 4, "group_size": 128,
                                                             "desc_act": False, "sym": True}})
    t4 = GpuSpec(key="t4", name="NVIDIA T4", vendor="nvidia", memory_bytes=15_655_829_504, compute_capability=75)

    def scratch(tokens: int, shards: int = 1) -> int:
        shapes = [(4096, 6144 // shards), (4096 // shards, 4096), (4096, 28672 // shards), (14336 // shards, 4096)]
        return max(i * o * 2 + 128 + o * tokens * 4 + 128 for i, o in shapes)

    assert qs.exllama_scratch(gptq, era("3.3.7"), "gptq", 75, 1, 4324) == scratch(4324) \
        == 4096 * 28672 * 2 + 28672 * 4324 * 4 + 256
    assert qs.exllama_scratch(gptq, era("3.3.7"), "gptq", 75, 2, 4096) == scratch(4096, 2)
    assert qs.exllama_scratch(gptq, era("3.3.7"), "gptq", 86, 1, 4096) == 0  # Marlin
    assert qs.exllama_scratch(gptq, era("2.1.0"), "gptq", 86, 1, 4145) == scratch(4096 * 16)  # before Marlin
    # 2.1.1 layers/marlin.py::can_use_gptq_marlin already repacks symmetric GPTQ for Marlin: no ExLlama layer
    assert qs.exllama_scratch(gptq, era("2.1.1"), "gptq", 86, 1, 4145) == 0
    assert qs.exllama_scratch(gptq, era("2.1.1"), "gptq", 75, 1, 4145) == scratch(4145)
    assert qs.exllama_scratch(gptq, era("2.0.4"), "gptq", 86, 1, 4145) == scratch(4096 * 16)  # default 4096 x 16
    assert qs.exllama_scratch(gptq, era("1.1.0"), "gptq", 86, 1, 4096) == 0  # ExLlama v1 only
    act_order = ModelSpec(**{**gptq.__dict__, "quantization": {**gptq.quantization, "desc_act": True}})
    eight = ModelSpec(**{**gptq.__dict__, "quantization": {**gptq.quantization, "bits": 8}})
    asym = ModelSpec(**{**gptq.__dict__, "quantization": {**gptq.quantization, "sym": False}})
    assert qs.exllama_scratch(act_order, era("3.3.7"), "gptq", 75, 1, 4096) == 0
    assert qs.exllama_scratch(eight, era("3.3.7"), "gptq", 75, 1, 4096) == 0
    assert qs.exllama_scratch(asym, era("3.3.7"), "gptq", 86, 1, 4096) == scratch(4096)  # Marlin wants sym
    assert qs.exllama_scratch(gptq, era("3.3.7"), "awq", 75, 1, 4096) == 0
    # in the plan the buffer is held with the warm-up prefill: the T4's pool shrinks by its size
    argv = "text-generation-launcher --model-id m --max-batch-prefill-tokens 4096"
    _, on_t4 = run(argv, model=gptq, gpu=t4)
    plain = ModelSpec(**{**gptq.__dict__, "quantization": {**gptq.quantization, "bits": 8}})
    _, eight_t4 = run(argv, model=plain, gpu=t4)
    assert on_t4.detail.warmup_activation_bytes - eight_t4.detail.warmup_activation_bytes == scratch(4096)


def test_marlin_gemm_buffers_held_with_the_prefill():
    # gptq_marlin.cu::gptq_marlin_gemm: a_tmp (size_m x size_k, fp16) always; from marlin-kernels 0.3.1
    # (TGI 2.4.0) the fp32 reduce buffer c_tmp (reduce_max_m x size_n), reduce_max_m = 64 x min(ceil(m / 64), 16)
    awq = ModelSpec(**{**LLAMA70B.__dict__, "quantization": {"quant_method": "awq", "bits": 4, "group_size": 128,
                                                             "zero_point": True}})
    # 2 shards: qkv 8192 -> 5120, o 4096 -> 8192, gate_up 8192 -> 28672, down 14336 -> 8192; gate_up is largest
    assert qs.marlin_scratch(awq, era("3.0.1"), "awq", 86, 2, 4096) == 4096 * 8192 * 2 + 1024 * 28672 * 4 \
        == 184_549_376
    assert qs.marlin_scratch(awq, era("3.0.1"), "awq", 86, 2, 100) == \
        max(100 * 8192 * 2 + 128 * 28672 * 4, 100 * 14336 * 2 + 128 * 8192 * 4)  # ceil(100 / 64) = 2 tiles of 64
    assert qs.marlin_scratch(awq, era("3.0.1"), "awq", 86, 2, 40) == 40 * 8192 * 2 + 48 * 28672 * 4
    assert qs.marlin_scratch(awq, era("2.3.1"), "awq", 86, 2, 4096) == 4096 * 14336 * 2  # a_tmp only: down's
    assert qs.marlin_scratch(awq, era("2.1.1"), "awq", 86, 2, 4096) == 0  # AWQ kernels before 2.2.0
    assert qs.marlin_scratch(awq, era("3.0.1"), "awq", 75, 2, 4096) == 0  # Marlin needs compute capability 8.0
    assert qs.marlin_scratch(awq, era("3.0.1"), None, 86, 2, 4096) == 0
    gptq = ModelSpec(**{**LLAMA70B.__dict__, "quantization": {"quant_method": "gptq", "bits": 4, "group_size": 128,
                                                              "sym": False}})
    assert qs.marlin_scratch(gptq, era("3.0.1"), "gptq", 86, 2, 4096) == 0  # asymmetric GPTQ: not Marlin
    # in the plan the buffers count with the layer's working set: the KV pool of two RTX 3090s shrinks
    from servefit.hardware.spec import GpuSpec

    rtx = GpuSpec(key="rtx-3090", name="NVIDIA GeForce RTX 3090", vendor="nvidia", memory_bytes=24122 * 2**20,
                  compute_capability=86)
    argv = "text-generation-launcher --model-id m --quantize awq --num-shard 2 --max-batch-prefill-tokens 4096"
    # groups of 256 are not Marlin's: llm-awq's kernel with its split-K sums (8 x 4096 x 28672 x 2) instead
    g256 = ModelSpec(**{**awq.__dict__, "quantization": {**awq.quantization, "group_size": 256}})
    _, marlin = run(argv, model=awq, gpu=rtx, count=2, version="3.0.1")
    _, split_k = run(argv, model=g256, gpu=rtx, count=2, version="3.0.1")
    assert split_k.detail.warmup_activation_bytes - marlin.detail.warmup_activation_bytes == \
        8 * 4096 * 28672 * 2 - 184_549_376


def test_awq_split_k_partial_sums_where_marlin_does_not_take_awq():
    # llm-awq gemm_cuda_gen.cu::gemm_forward_cuda: _out_feats = torch::empty({8, tokens, out}) in fp16, then .sum(0)
    awq = ModelSpec(**{**LLAMA8B.__dict__, "quantization": {"quant_method": "awq", "bits": 4, "group_size": 128,
                                                            "zero_point": True}})
    # largest output on one shard: gate_up, 2 x 14336 = 28672
    assert qs.awq_split_k_scratch(awq, era("1.4.5"), "awq", 86, 1, 4096) == 8 * 4096 * 28672 * 2 == 1_879_048_192
    assert qs.awq_split_k_scratch(awq, era("1.4.5"), "awq", 86, 2, 100) == 8 * 100 * 14336 * 2
    assert qs.awq_split_k_scratch(awq, era("3.3.7"), "awq", 75, 1, 4096) == 8 * 4096 * 28672 * 2  # T4: no Marlin
    assert qs.awq_split_k_scratch(awq, era("3.3.7"), "awq", 86, 1, 4096) == 0  # Marlin takes it from 2.2.0
    assert qs.awq_split_k_scratch(awq, era("2.1.1"), "awq", 86, 1, 4096) == 8 * 4096 * 28672 * 2
    assert qs.awq_split_k_scratch(awq, era("1.0.3"), "awq", 86, 1, 4096) == 0  # no AWQ before 1.1.0
    assert qs.awq_split_k_scratch(awq, era("1.1.0"), "awq", 86, 1, 100) == 8 * 100 * 28672 * 2
    assert qs.awq_split_k_scratch(awq, era("1.4.5"), "gptq", 86, 1, 4096) == 0
    # in the plan it counts with the layer's working set (what warm-up finds cached, and the live peak)
    argv = "text-generation-launcher --model-id m --quantize awq --max-batch-prefill-tokens 4096"
    _, split_k = run(argv, model=awq, version="2.1.1")
    g256 = ModelSpec(**{**awq.__dict__, "quantization": {**awq.quantization, "group_size": 256}})
    _, marlin_era = run(argv, model=awq, version="2.2.0")
    assert qs.uses_marlin(awq, era("2.2.0"), "awq", 86) and not qs.uses_marlin(g256, era("2.2.0"), "awq", 86)
    _, no_marlin = run(argv, model=g256, version="2.2.0")
    assert no_marlin.detail.warmup_activation_bytes - marlin_era.detail.warmup_activation_bytes == \
        1_879_048_192 - 4096 * 14336 * 2  # split-K sums replace Marlin's a_tmp, down_proj's (2.2.0: no c_tmp yet)
    assert split_k.memory.activation_peak > marlin_era.memory.activation_peak


def test_moe_gptq_attention_goes_to_marlin_too():
    # the GPTQ loader is chosen per --quantize (utils/quantization.py::get_loader), so a MoE checkpoint's attention
    # projections are repacked for Marlin like a dense one's: no ExLlama layer, Marlin buffers over qkv / o only
    moe = ModelSpec(**{**LLAMA8B.__dict__, "num_experts": 8, "num_experts_per_tok": 2,
                       "quantization": {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True}})
    assert qs.uses_marlin(moe, era("3.0.1"), "gptq", 86)
    assert qs.exllama_scratch(moe, era("3.0.1"), "gptq", 86, 1, 4096) == 0
    # qkv 4096 -> 6144, o 4096 -> 4096: a_tmp 4096 x 4096 x 2, c_tmp 1024 x 6144 x 4
    assert qs.marlin_scratch(moe, era("3.0.1"), "gptq", 86, 1, 4096) == 4096 * 4096 * 2 + 1024 * 6144 * 4
