"""Issue 13, 2026 families: MiniCPM3 (MLA projections, a per-head cache in vLLM and a latent in
SGLang) and the Ornith-1.5 / Qwen3.8 entries on the Qwen3.5 layouts."""

from __future__ import annotations

from servefit.models import count_params, resolve_model
from servefit.models.config_json import from_config
from servefit.pipeline import Target, evaluate, site_from_argv

MINICPM3_CONFIG = {
    "architectures": ["MiniCPM3ForCausalLM"], "model_type": "minicpm3", "hidden_size": 2560,
    "num_hidden_layers": 62, "num_attention_heads": 40, "num_key_value_heads": 40, "intermediate_size": 6400,
    "vocab_size": 73448, "q_lora_rank": 768, "kv_lora_rank": 256, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32,
    "max_position_embeddings": 32768, "tie_word_embeddings": True}


def minicpm3_by_hand() -> int:
    h, heads = 2560, 40
    attn = (h * 768 + 768 + 768 * heads * 96  # q_a, q_a_layernorm, q_b (qk_nope 64 + qk_rope 32)
            + h * (256 + 32) + 256  # kv_a_proj_with_mqa and kv_a_layernorm
            + 256 * heads * (64 + 64)  # kv_b: k_nope and v (v_head_dim = qk_nope_head_dim)
            + heads * 64 * h)  # o_proj
    layer = attn + 3 * h * 6400 + 2 * h
    return 62 * layer + 73448 * h + h  # tied lm_head, final norm


def test_minicpm3_catalog_entry_by_hand():
    m = resolve_model("openbmb/MiniCPM3-4B")
    assert count_params(m) == m.params == minicpm3_by_hand() == 4_073_875_968


def test_minicpm3_config_json_derives_v_head_dim():
    m = from_config(MINICPM3_CONFIG, "openbmb/MiniCPM3-4B")
    assert m.v_head_dim == 64 and m.head_dim == 96
    assert m.params == minicpm3_by_hand()


def _plan(argv: list[str]):
    return evaluate(site_from_argv(argv), Target(gpu="H100-80GB", engine_version="0.33.0")).plan


def test_minicpm3_vllm_caches_k_and_v_per_head():
    # minicpm3 is not in vLLM's is_deepseek_mla: Attention(num_heads, qk_head_dim 96, num_kv_heads=num_heads)
    plan = _plan(["vllm", "serve", "openbmb/MiniCPM3-4B", "--max-model-len", "8192"])
    assert plan.kv_bytes_per_token == 62 * 2 * 40 * 96 * 2 == 952_320
    tp2 = _plan(["vllm", "serve", "openbmb/MiniCPM3-4B", "--max-model-len", "8192", "--tensor-parallel-size", "2"])
    assert tp2.kv_bytes_per_token == 952_320 // 2  # 20 KV heads a rank


def test_deepseek_mla_still_caches_one_latent_in_vllm():
    plan = _plan(["vllm", "serve", "deepseek-ai/DeepSeek-V2-Lite", "--max-model-len", "8192"])
    m = resolve_model("deepseek-ai/DeepSeek-V2-Lite")
    assert plan.kv_bytes_per_token == m.num_hidden_layers * (512 + 64) * 2


def test_minicpm3_sglang_caches_the_latent():
    # sglang srt/configs/model_config.py: MiniCPM3ForCausalLM -> AttentionArch.MLA
    plan = _plan(["python", "-m", "sglang.launch_server", "--model-path", "openbmb/MiniCPM3-4B",
                  "--context-length", "8192"])
    assert plan.kv_bytes_per_token == 62 * (256 + 32) * 2


def test_ornith_and_qwen38_share_the_qwen35_layouts():
    for name, base in (("ornith-ai/Ornith-1.5-9B", "Qwen/Qwen3.5-9B"),
                       ("ornith-ai/Ornith-1.5-35B-A3B", "Qwen/Qwen3.5-35B-A3B"),
                       ("ornith-ai/Ornith-1.5-397B", "Qwen/Qwen3.5-397B-A17B"),
                       ("Qwen/Qwen3.8-27B", "Qwen/Qwen3.5-27B")):
        m, b = resolve_model(name), resolve_model(base)
        assert m.name == name and count_params(m) == m.params == b.params


def test_minicpm3_llamacpp_caches_k_and_v_per_head():
    # llama.cpp loads no key_length_mla for LLM_ARCH_MINICPM3: not the latent cache DeepSeek-V2 gets
    from servefit.engines.llamacpp.model import from_spec

    lm = from_spec(resolve_model("openbmb/MiniCPM3-4B"), "Q4_K_M")
    assert not lm.mla and lm.head_k == 96 and lm.n_head_kv == [40] * 62


LAGUNA_XS2_CONFIG = {
    "architectures": ["LagunaForCausalLM"], "model_type": "laguna", "hidden_size": 2048, "num_hidden_layers": 40,
    "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 8192,
    "vocab_size": 100352, "max_position_embeddings": 131072, "sliding_window": 512, "gating": True,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "num_experts": 256, "num_experts_per_tok": 8,
    "num_attention_heads_per_layer": [48 if i % 4 == 0 else 64 for i in range(40)],
    "layer_types": ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(40)],
    "mlp_layer_types": ["dense"] + ["sparse"] * 39, "tie_word_embeddings": False}


def laguna_by_hand(heads: list[int], h: int = 2048, hd: int = 128, kv: int = 8, dense: int = 8192,
                   moe: int = 512, experts: int = 256, vocab: int = 100352, gate_per_channel: bool = False) -> int:
    total = 2 * vocab * h + h
    for i, q in enumerate(heads):
        gate = q * hd if gate_per_channel else q
        total += 2 * h * q * hd + 2 * h * kv * hd + 2 * hd + h * gate + 2 * h  # q/o, k/v, q/k norms, g_proj, norms
        total += 3 * h * dense if i == 0 else (experts + 1) * 3 * h * moe + h * experts + experts  # router, its bias
    return total


def test_laguna_xs2_by_hand_is_llmfits_exact_count():
    m = resolve_model("poolside/Laguna-XS.2")
    heads = [48 if i % 4 == 0 else 64 for i in range(40)]
    assert count_params(m) == m.params == laguna_by_hand(heads) == 33_442_617_088
    assert m.kinds().count("sliding") == 30 and m.sliding_window == 512


def test_laguna_config_json_reads_per_layer_heads_and_the_gate():
    m = from_config(LAGUNA_XS2_CONFIG, "poolside/Laguna-XS.2")
    assert m.params == 33_442_617_088 and m.first_k_dense_replace == 1
    assert m.kinds().count("sliding") == 30
    per_channel = from_config({**LAGUNA_XS2_CONFIG, "gating": "per-element"}, "x")
    heads = LAGUNA_XS2_CONFIG["num_attention_heads_per_layer"]
    assert per_channel.params == laguna_by_hand(heads, gate_per_channel=True)


def test_laguna_gguf_layout_has_each_layers_heads_and_gate():
    from servefit.models.gguf_quant import synth_tensors

    ts = {t.name: t for t in synth_tensors(resolve_model("poolside/Laguna-XS.2"), "BF16")}
    assert ts["blk.0.attn_q.weight"].shape == (2048, 48 * 128) and ts["blk.1.attn_q.weight"].shape == (2048, 64 * 128)
    assert ts["blk.1.attn_output.weight"].shape == (64 * 128, 2048) and ts["blk.1.attn_gate.weight"].shape == (2048, 64)
    assert ts["blk.0.ffn_up.weight"].shape == (2048, 8192) and "blk.1.ffn_up_exps.weight" in ts


def test_laguna_vllm_weights_hold_every_layers_heads():
    from servefit.memory.params import param_groups

    m = resolve_model("poolside/Laguna-M.1")
    g = param_groups(m)
    assert g.total == m.params and g.attn[0] == 2 * 4096 * 64 * 128 + 2 * 4096 * 8 * 128 + 256 + 4096 * 64 * 128


STEP35_CONFIG = {
    "architectures": ["Step3p5ForCausalLM"], "model_type": "step3p5", "hidden_size": 4096, "num_hidden_layers": 45,
    "num_attention_heads": 64, "num_attention_groups": 8, "head_dim": 128, "intermediate_size": 11264,
    "vocab_size": 128896, "max_position_embeddings": 262144, "sliding_window": 512,
    # the decoder's 45 kinds, then the 3 MTP layers'
    "layer_types": ["full_attention" if i % 5 == 0 else "sliding_attention" for i in range(45)] + ["full_attention"] * 3,
    "attention_other_setting": {"attention_type": "sliding_attention", "num_attention_heads": 96,
                                "num_attention_groups": 8, "head_dim": 128},
    "use_head_wise_attn_gate": True, "moe_layers_enum": ",".join(str(i) for i in range(3, 45)),
    "moe_num_experts": 288, "moe_top_k": 8, "moe_intermediate_size": 1280, "share_expert_dim": 1280,
    "use_moe_router_bias": True, "num_nextn_predict_layers": 3, "tie_word_embeddings": False}


def test_step35_config_json_reads_stepfuns_names():
    m = from_config(STEP35_CONFIG, "stepfun-ai/Step-3.5-Flash")
    assert m.num_key_value_heads == 8 and m.first_k_dense_replace == 3 and m.num_shared_experts == 1
    assert len(m.kinds()) == 45 and m.kinds().count("sliding") == 36
    assert m.layout["num_attention_heads_per_layer"][:2] == [64, 96]
    assert m.params == resolve_model("stepfun-ai/Step-3.5-Flash").params == 197_057_186_880


def test_step35_vllm_pages_sliding_and_full_layers_alike():
    # 8 KV heads of 128 on every layer: the textbook figure is 45 layers x K+V x 8 x 128 x bf16
    plan = _plan(["vllm", "serve", "stepfun-ai/Step-3.5-Flash", "--max-model-len", "65536",
                  "--tensor-parallel-size", "8"])
    assert plan.kv_bytes_per_token == 45 * 2 * 1 * 128 * 2  # one KV head a rank at TP 8


ZAMBA2_27B_CONFIG = {
    "architectures": ["Zamba2ForCausalLM"], "model_type": "zamba2", "hidden_size": 2560, "num_hidden_layers": 54,
    "num_attention_heads": 32, "vocab_size": 32000, "max_position_embeddings": 4096, "mamba_d_state": 64,
    "mamba_d_conv": 4, "mamba_expand": 2, "mamba_ngroups": 1, "n_mamba_heads": 80, "num_mem_blocks": 2,
    "use_shared_attention_adapter": False, "adapter_rank": 128,
    "layers_block_type": ["mamba"] + (["mamba"] * 5 + ["hybrid"]) * 7 + ["mamba"] * 4 + ["hybrid"] + ["mamba"] * 3
                         + ["hybrid"] + ["mamba"] * 2}


def zamba2_by_hand(h: int, layers: int, hybrid: int, blocks: int, m_heads: int, state: int, attn_lora: bool,
                   vocab: int = 32000, rank: int = 128) -> int:
    d = 2 * h  # Mamba2 d_inner (expand 2) and the shared block's input width (hidden + embeddings)
    conv = d + 2 * state
    mamba = h * (d + conv + m_heads) + conv * 5 + 3 * m_heads + d + d * h + h  # in_proj, conv+bias, dt/A/D, norm, out, ln
    block = d + 3 * d * d + d * h + h + 3 * h * 4 * h  # ln, q/k/v (2h -> 2h), o (2h -> h), pre_ff ln, gated MLP
    lora = h * rank + rank * 8 * h + (3 * (d * rank + rank * d) if attn_lora else 0)
    return vocab * h + h + layers * mamba + blocks * block + hybrid * (lora + h * h)


def test_zamba2_by_hand_is_llmfits_exact_count():
    assert resolve_model("Zyphra/Zamba2-2.7B").params == zamba2_by_hand(2560, 54, 9, 2, 80, 64, False) == 2_662_214_560
    m = resolve_model("Zyphra/Zamba2-1.2B-instruct")
    assert count_params(m) == zamba2_by_hand(2048, 38, 6, 1, 64, 128, True) == 1_215_064_704


def test_zamba2_config_json():
    m = from_config(ZAMBA2_27B_CONFIG, "Zyphra/Zamba2-2.7B")
    assert m.head_dim == 160 and m.tie_word_embeddings and m.kinds().count("full") == 9
    assert m.params == 2_662_214_560


def test_zamba2_hybrid_layers_hold_attention_and_mamba_state_in_vllm():
    from servefit.engines.vllm.kvcache import layer_kinds

    kinds = layer_kinds(resolve_model("Zyphra/Zamba2-2.7B"), hybrid_manager=True, disable_sliding_window=False,
                        state_blocks=1)
    assert kinds.count(("mamba", 1)) == 54 and kinds.count(("full", 0)) == 9
    plan = _plan(["vllm", "serve", "Zyphra/Zamba2-2.7B", "--max-model-len", "4096"])
    assert plan.kv_bytes_per_token == 9 * 2 * 32 * 160 * 2
