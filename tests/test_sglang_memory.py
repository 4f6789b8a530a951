"""SGLang's KV pool (ModelRunner.profile_max_num_token / init_memory_pool) against hand
computations: dense GQA, MLA, sliding-window hybrid; the request caps; the start failures."""

from __future__ import annotations

from test_sglang_engine import H100, L4, LAUNCH, LLAMA8B, run

from servefit.engines.sglang import plan as sp
from servefit.memory.weights import weight_bytes
from servefit.models.spec import ModelSpec

GiB = 2**30
DSV2_LITE = ModelSpec(
    name="deepseek-ai/DeepSeek-V2-Lite", architecture="DeepseekV2ForCausalLM", model_type="deepseek_v2",
    num_hidden_layers=27, hidden_size=2048, num_attention_heads=16, num_key_value_heads=16, head_dim=192,
    intermediate_size=10944, vocab_size=102400, max_position_embeddings=163840, params=15_706_484_224,
    num_experts=64, num_experts_per_tok=6, num_shared_experts=2, moe_intermediate_size=1408, first_k_dense_replace=1,
    kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
    rope_scaling={"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096})
GEMMA2_9B = ModelSpec(
    name="google/gemma-2-9b-it", architecture="Gemma2ForCausalLM", model_type="gemma2", num_hidden_layers=42,
    hidden_size=3584, num_attention_heads=16, num_key_value_heads=8, head_dim=256, intermediate_size=14336,
    vocab_size=256000, max_position_embeddings=8192, tie_word_embeddings=True, params=9_241_705_984,
    sliding_window=4096, layer_types=["sliding", "full"] * 21)
GPT_OSS_20B = ModelSpec(
    name="openai/gpt-oss-20b", architecture="GptOssForCausalLM", model_type="gpt_oss",
    num_hidden_layers=24, hidden_size=2880, num_attention_heads=64, num_key_value_heads=8, head_dim=64,
    intermediate_size=2880, vocab_size=201088, max_position_embeddings=131072, params=20_914_757_184,
    num_experts=32, num_experts_per_tok=4, moe_intermediate_size=2880, sliding_window=128,
    layer_types=["sliding", "full"] * 12, quantization={"quant_method": "mxfp4"})


def hand_rest(plan, fraction: float) -> float:
    """profile_max_num_token: available after load - pre-load memory x (1 - mem_fraction_static)."""
    total = plan.memory.total
    pre = total - plan.memory.non_torch
    return (pre - plan.memory.weights) - pre * (1 - fraction)


def test_dense_gqa_pool_by_hand():
    cfg, plan = run(f"{LAUNCH} --mem-fraction-static 0.88", version="0.4.4.post1")
    # cell size: 8 KV heads x 128 x (K + V) x 32 layers x 2 bytes
    assert plan.kv_bytes_per_token == 8 * 128 * 2 * 32 * 2 == 131_072
    assert plan.memory.non_torch == sp.CONTEXT
    assert plan.memory.weights == int(weight_bytes(LLAMA8B, 2, None)) + sp.LOAD_EXTRA
    tokens = int(hand_rest(plan, 0.88) // 131_072)
    assert plan.detail.max_total_num_tokens == tokens == plan.kv_cache_tokens
    assert f"max_total_num_tokens={tokens}" in plan.messages[-1]
    half = (tokens + 1) * 131_072 / 2 / GiB
    assert f"KV Cache is allocated. #tokens: {tokens}, K size: {half:.2f} GB, V size: {half:.2f} GB" in plan.messages


def test_tp_splits_kv_heads_and_weights():
    _, one = run(f"{LAUNCH} --mem-fraction-static 0.88")
    _, two = run(f"{LAUNCH} --mem-fraction-static 0.88 --tp 2", count=2)
    assert two.kv_bytes_per_token == one.kv_bytes_per_token // 2
    assert two.memory.weights < one.memory.weights * 0.55
    assert two.detail.max_total_num_tokens > 2 * one.detail.max_total_num_tokens


def test_mla_pool_is_the_latent_not_split_by_tp():
    cfg, plan = run("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V2-Lite --trust-remote-code "
                    "--mem-fraction-static 0.85", model=DSV2_LITE)
    cell = (512 + 64) * 27 * 2  # (kv_lora_rank + qk_rope_head_dim) x layers x bf16
    assert plan.kv_bytes_per_token == cell == 31_104
    assert plan.detail.max_total_num_tokens == int(hand_rest(plan, 0.85) // cell)
    assert plan.detail.context_len == 163840  # yarn with original_max_position_embeddings: factor ignored
    _, tp2 = run("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V2-Lite --tp 2 "
                 "--mem-fraction-static 0.85", model=DSV2_LITE, count=2)
    assert tp2.kv_bytes_per_token == cell  # every rank holds the whole latent
    assert any(m.startswith("KV Cache is allocated. #tokens:") and "KV size:" in m for m in plan.messages)


def test_sliding_window_hybrid_pool_gpt_oss():
    cfg, plan = run("python -m sglang.launch_server --model-path openai/gpt-oss-20b --mem-fraction-static 0.85",
                    model=GPT_OSS_20B)
    per_layer = 8 * 64 * 2 * 2
    cell = per_layer * (12 + 0.8 * 12)  # full_layer_tokens x (n_full + swa_full_tokens_ratio x n_swa)
    full = int(hand_rest(plan, 0.85) // cell)
    assert plan.detail.max_total_num_tokens == full
    assert plan.detail.swa_max_total_num_tokens == int(full * 0.8)
    assert f"Use Sliding window memory pool. full_layer_tokens={full}, swa_layer_tokens={int(full * 0.8)}" \
        in plan.messages
    _, off = run("python -m sglang.launch_server --model-path openai/gpt-oss-20b --mem-fraction-static 0.85 "
                 "--disable-hybrid-swa-memory", model=GPT_OSS_20B)
    assert off.detail.max_total_num_tokens == int(hand_rest(off, 0.85) // (per_layer * 24))
    assert off.detail.max_total_num_tokens < full


def test_gemma2_hybrid_only_between_0_4_10_and_0_5_5():
    argv = "python -m sglang.launch_server --model-path google/gemma-2-9b-it --mem-fraction-static 0.85"
    _, mid = run(argv, version="0.5.5", model=GEMMA2_9B)
    _, new = run(argv, version="0.5.23", model=GEMMA2_9B)
    _, old = run(argv, version="0.4.6.post5", model=GEMMA2_9B)
    assert mid.detail.swa_max_total_num_tokens
    assert not new.detail.swa_max_total_num_tokens and not old.detail.swa_max_total_num_tokens
    per_layer = 8 * 256 * 2 * 2
    assert new.detail.max_total_num_tokens == int(hand_rest(new, 0.85) // (per_layer * 42))


def test_request_caps():
    cfg, plan = run(f"{LAUNCH} --mem-fraction-static 0.88 --context-length 32768")
    tokens = plan.detail.max_total_num_tokens
    req_pool = min(max(int(tokens / 32768 * 512), 2048), 4096)
    assert plan.detail.max_running_requests == min(tokens // 2, req_pool)
    assert plan.detail.max_req_len == min(32768 - 1, tokens - 1)
    assert plan.detail.max_req_input_len == plan.detail.max_req_len - 5
    # before 0.4.7 the request pool had one extra slot: the logs' max_running_requests=2049
    _, old = run(f"{LAUNCH} --mem-fraction-static 0.88", version="0.4.1.post7")
    assert old.detail.max_running_requests == 2049


def test_pool_smaller_than_context_caps_requests():
    cfg, plan = run(f"{LAUNCH} --mem-fraction-static 0.88", gpu=L4)
    tokens = plan.detail.max_total_num_tokens
    assert tokens < 131072
    assert plan.detail.max_req_len == tokens - 1 and plan.detail.max_req_input_len == tokens - 6
    f = next(f for f in plan.findings if f.code == "SGL006")
    assert f.severity == "warning" and str(tokens - 6) in f.message


def test_not_enough_memory_when_fraction_below_weights():
    cfg, plan = run(f"{LAUNCH} --mem-fraction-static 0.6", gpu=L4)
    assert plan.outcome == "oom_at_load"
    assert ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
            "mem_fraction_static=0.6") in plan.messages
    assert "SGL004" in [f.code for f in plan.findings]


def test_weights_larger_than_the_gpu():
    big = ModelSpec(name="meta-llama/Llama-3.1-70B-Instruct", architecture="LlamaForCausalLM", model_type="llama",
                    num_hidden_layers=80, hidden_size=8192, num_attention_heads=64, num_key_value_heads=8,
                    head_dim=128, intermediate_size=28672, vocab_size=128256, max_position_embeddings=131072,
                    params=70_553_706_496)
    cfg, plan = run("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct", model=big)
    assert plan.outcome == "oom_at_load" and "SGL005" in [f.code for f in plan.findings]
    _, ok = run("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct --tp 4", model=big,
                count=4, gpu=H100)
    assert ok.outcome == "started"


def test_fp8_kv_doubles_the_pool():
    _, bf16 = run(f"{LAUNCH} --mem-fraction-static 0.88")
    _, fp8 = run(f"{LAUNCH} --mem-fraction-static 0.88 --kv-cache-dtype fp8_e4m3")
    assert fp8.kv_bytes_per_token == bf16.kv_bytes_per_token // 2
    assert abs(fp8.detail.max_total_num_tokens - 2 * bf16.detail.max_total_num_tokens) <= 2


def test_page_size_rounds_the_pool_down():
    _, plan = run(f"{LAUNCH} --mem-fraction-static 0.88 --page-size 64")
    assert plan.detail.max_total_num_tokens % 64 == 0


def test_h100_llama31_8b_pool_from_the_formula_alone():
    """ModelRunner.profile_max_num_token by hand, sharing no sub-term with the plan: weights
    8,030,261,248 x 2 bytes + 0.20 GiB load extra, 0.40 GiB context; rest = (pre - weights) -
    pre x (1 - 0.88) with pre = total - context; one token's cell = 8 x 128 x 2 x 32 x 2 bytes."""
    _, plan = run(f"{LAUNCH} --mem-fraction-static 0.88", version="0.4.4.post1")
    total = 85_029_027_840
    pre = total - int(0.40 * 2**30)
    weights = 8_030_261_248 * 2 + int(0.20 * 2**30)
    rest = (pre - weights) - pre * (1 - 0.88)
    assert plan.kv_cache_tokens == int(rest // (8 * 128 * 2 * 32 * 2)) == 443_819
