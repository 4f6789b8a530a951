"""Issue 13, 2026 families: Kimi-K3 (KDA + gated MLA, latent MoE, attention residuals, the K3 MoonViT)
and MiMo-V2-Flash (KV heads and V width by layer kind): counts, KV / state sizes and plans by hand."""

from __future__ import annotations

from servefit.engines.vllm.era import era
from servefit.engines.vllm.kvcache import hybrid_state, layer_kinds, layout
from servefit.memory.kv import full_kv_bytes_per_token, kind_bytes_per_token
from servefit.memory.params import param_groups
from servefit.models import count_params, resolve_model
from servefit.models.architecture import count_text_params
from servefit.models.catalog import lookup
from servefit.pipeline import Target, evaluate, site_from_argv

H, V = 7168, 163840


def k3_text_by_hand() -> int:
    """SGLang 0.5.23 srt/models/kimi_k3.py, module by module."""
    p = 96 * 128
    kda = (4 * H * p  # fused_qkvg_proj: q, k, v, g
           + H * 96 + H * 128 + 128 * p  # b_proj, f_a_proj, f_b_proj
           + p + 3 * p * 4 + 96  # dt_bias, qkv_conv1d (kernel 4), A_log (one per head)
           + 128 + p * H)  # o_norm, o_proj
    mla = (H * 1536 + 1536 + 1536 * 96 * 192  # q_a, q_a_layernorm, q_b
           + H * 576 + 512 + 512 * 96 * 256  # kv_a_proj_with_mqa, kv_a_layernorm, kv_b
           + 96 * 128 * H + H * 96 * 128)  # o_proj, g_proj (mla_use_output_gate)
    moe = (896 * H + 896  # MoEGate weight, e_score_correction_bias
           + 3 * H * 2 * 3072  # shared experts (2 x 3072)
           + H * 3584 + 3584 + 3584 * H  # routed_expert_down_proj, routed_expert_norm, routed_expert_up_proj
           + 896 * 3 * 3584 * 3072)  # routed experts in the latent width
    per_layer = 2 * H + 4 * H  # input / post-attention norms, two attention-residual scorers (norm + H -> 1)
    return (2 * V * H + H + 2 * H  # embed, lm_head, norm, output_attn_res_norm / _proj
            + 69 * kda + 24 * mla + 92 * moe + 3 * H * 33792 + 93 * per_layer)


def k3_tower_by_hand() -> int:
    """vLLM 0.33.0 kimi_k25_vit.py with KimiK3VisionConfig's options: bias-free, RMSNorm, qkv 1536."""
    h, qkv, inter = 1024, 1536, 4096
    block = 2 * h + h * 3 * qkv + qkv * h + h * inter + inter * h
    enc = 3 * 14 * 14 * h + 64 * 64 * h + 27 * block + h  # patch conv, position table, layers, final norm
    return enc + (4 * h) ** 2 + 4 * h * H + H  # patchmergerv2: linear_1, linear_2, post_norm


def test_kimi_k3_by_hand_and_llmfits_record():
    m = resolve_model("moonshotai/Kimi-K3")
    assert count_text_params(m) == k3_text_by_hand() == 2779484476000
    assert m.vision_params == k3_tower_by_hand() == 447358976
    assert count_params(m) == m.params
    # llmfit's record counts the stored A_log vectors, 128 wide for 96 heads in each of the 69 KDA layers
    assert m.params + 69 * 32 == 2779931837184
    assert m.kinds().count("linear") == 69 and [i for i, k in enumerate(m.kinds()) if k == "full"][-2:] == [91, 92]


def test_kimi_k3_param_groups_split_the_latent_experts():
    g = param_groups(resolve_model("moonshotai/Kimi-K3"))
    assert g.total == 2779931834976
    assert sum(g.experts) == 92 * 896 * 3 * 3584 * 3072 and g.experts[0] == 0
    kinds = resolve_model("moonshotai/Kimi-K3").kinds()
    assert g.attn[kinds.index("linear")] != g.attn[kinds.index("full")]
    # only the routed experts are MXFP4: everything else the ignore list names stays 16-bit
    plan = evaluate(site_from_argv(["vllm", "serve", "moonshotai/Kimi-K3", "--tensor-parallel-size", "16"]),
                    Target(gpu="H200", gpus=16, engine_version="0.33.0")).plan
    assert any("2% of the linear-layer parameters stay bfloat16" in a for a in plan.assumptions)


def test_kimi_k3_vllm_kda_state_and_mla_latent():
    m = resolve_model("moonshotai/Kimi-K3")
    assert full_kv_bytes_per_token(m, 2, 16) == 24 * 576 * 2  # MLAAttentionSpec: one latent, not split by TP
    # kda_state_shape at TP 16: conv (3 x 12288 / 16, kernel - 1) bf16; recurrent 6 x 128 x 128 fp32
    page = 3 * 12288 // 16 * 3 * 2 + 96 // 16 * 128 * 128 * 4
    blocks, block, state, _ = hybrid_state({}, m, "bfloat16", 16, (0, 33, 0), 64, 2)
    assert state == page == 407040
    # the MLA page holds one state, in blocks of a multiple of 128 (platforms/interface.py _align_hybrid_block_size)
    assert block == 128 * -(-page // (128 * 576 * 2)) == 384
    assert blocks == 2  # prefix caching on: "align" keeps two state blocks
    assert hybrid_state({"mamba_ssm_cache_dtype": "bfloat16"}, m, "bfloat16", 16, (0, 33, 0), 64, 2)[2] == \
        3 * 12288 // 16 * 3 * 2 + 6 * 128 * 128 * 2


def test_kimi_k3_plans_with_its_known_gap_stated():
    ev = evaluate(site_from_argv(["vllm", "serve", "moonshotai/Kimi-K3", "--tensor-parallel-size", "16",
                                  "--max-model-len", "131072"]), Target(gpu="H200", gpus=16, engine_version="0.33.0"))
    assert ev.plan.outcome == "started" and ev.plan.kv_bytes_per_token == 27648
    assert any(a.startswith("Kimi Delta Attention layers") for a in ev.plan.assumptions)
    assert not any("not counted in the KV cache" in a for a in ev.plan.assumptions)


def test_kimi_k3_derivatives_resolve_with_the_assumption():
    for name, method in (("RedHatAI/Kimi-K3-INT4", "compressed-tensors"), ("nvidia/Kimi-K3-NVFP4", "modelopt_fp4"),
                         ("unsloth/Kimi-K3-GGUF", "gguf")):
        m = lookup(name)
        assert m is not None and m.name == "moonshotai/Kimi-K3" and m.quantization["quant_method"] == method
        assert m.assumptions and f"resolved '{name}' to catalog entry 'moonshotai/Kimi-K3'" in m.assumptions[0]


# ---------------------------------------------------------------------------------------------- MiMo-V2-Flash

def mimo_by_hand() -> int:
    """transformers 5.24.0 modeling_mimo_v2_flash.py: 9 full layers (0 and every 6th), 39 sliding."""
    h, heads = 4096, 64

    def attn(kv: int, sinks: int) -> int:
        return h * heads * 192 + h * kv * 192 + h * kv * 128 + heads * 128 * h + sinks

    moe = 256 * h + 256 + 256 * 3 * h * 2048  # router, e_score_correction_bias, experts
    layers = 9 * attn(4, 0) + 39 * attn(8, 64) + 48 * 2 * h + 3 * h * 16384 + 47 * moe
    return 2 * 152576 * h + h + layers


def test_mimo_v2_flash_by_hand_and_the_records():
    m = resolve_model("XiaomiMiMo/MiMo-V2-Flash")
    assert count_params(m) == mimo_by_hand() == m.params == 308778780864
    assert param_groups(m).total == m.params
    assert m.params - 39 * 64 == 308778778368  # the MLX conversion's record: no sink logits
    mtp = 2 * 4096 + 2 * 4096 * 4096 + 4096 + (4096 * 64 * 192 + 4096 * 8 * 320 + 64 * 128 * 4096 + 64) \
        + 4096 + 3 * 4096 * 16384 + 4096  # vLLM mimo_v2_mtp.py MiMoV2MTPLayer
    assert mtp == 329273408 and 309785318400 - m.params - 3 * mtp == 18717312  # the FP8 block scales


def test_mimo_v2_flash_kv_by_kind():
    m = resolve_model("XiaomiMiMo/MiMo-V2-Flash")
    # AttentionSpec.page_size_bytes with head_size_v: kv_heads x (192 + 128) x 2 bytes
    assert kind_bytes_per_token(m, "full", 2, 1) == 4 * 320 * 2
    assert kind_bytes_per_token(m, "sliding", 2, 1) == 8 * 320 * 2
    assert full_kv_bytes_per_token(m, 2, 1) == 9 * 2560 + 39 * 5120
    assert full_kv_bytes_per_token(m, 2, 8) == 48 * 320 * 2  # max(1, kv // tp) in both kinds


def test_mimo_v2_flash_vllm_groups_pages_by_kind():
    m = resolve_model("XiaomiMiMo/MiMo-V2-Flash")
    lay = layout(m, layer_kinds(m, True, False), 2, 4, 16, era("0.33.0"))
    # sliding page 16 x 2 x 320 x 2 = 20480; the full layers' half-size page takes 32-token blocks
    assert lay.page_bytes == 20480 and lay.bytes_per_block == 20480 * 9 and lay.padding_layers == 6
    assert [(g.kind, g.block_size) for g in lay.groups] == [("full", 32)] + [("sliding", 16)] * 5
    assert lay.blocks_per_request(131072, 8192) == 131072 // 32 + 5 * (-(-(127 + 8192) // 16) + 1)


def test_mimo_v2_flash_sglang_swa_pool():
    ev = evaluate(site_from_argv(["python", "-m", "sglang.launch_server", "--model-path", "XiaomiMiMo/MiMo-V2-Flash",
                                  "--tp", "4"]), Target(gpu="H200", gpus=4))
    full, swa = 1 * 320 * 2, 2 * 320 * 2  # pool_configurator.py per token at attention TP 4
    assert ev.plan.kv_bytes_per_token == 9 * full + 39 * swa
    tokens = ev.plan.kv_cache_tokens
    assert ev.plan.memory.kv_cache == int(tokens * (9 * full + 0.8 * 39 * swa))
    msg = next(x for x in ev.plan.messages if x.startswith("KV Cache is allocated"))
    k, v = (float(x.split(" GB")[0]) for x in msg.split("K size: ")[1].split("V size: "))
    assert abs(k / v - 192 / 128) < 0.01


def test_mimo_v2_flash_derivatives_resolve_with_the_assumption():
    for name, method in (("cyankiwi/MiMo-V2-Flash-AWQ-4bit", "awq"), ("XiaomiMiMo/MiMo-V2-Flash-FP8", "fp8"),
                         ("unsloth/MiMo-V2-Flash-GGUF", "gguf")):
        m = lookup(name)
        assert m is not None and m.name == "XiaomiMiMo/MiMo-V2-Flash" and m.quantization["quant_method"] == method
        assert f"resolved '{name}' to catalog entry 'XiaomiMiMo/MiMo-V2-Flash'" in m.assumptions[0]


def test_mimo_v2_flash_without_sliding_windows_pages_every_layer_at_the_larger_shape():
    m = resolve_model("XiaomiMiMo/MiMo-V2-Flash")
    lay = layout(m, layer_kinds(m, True, True), 2, 4, 16, era("0.33.0"))
    # one group of 48 layers; the full layers' 4 KV heads are paged as the sliding layers' 8 (an upper bound)
    assert len(lay.groups) == 1 and lay.page_bytes == 16 * 2 * 320 * 2 and lay.bytes_per_block == 48 * 20480


def test_mimo_v2_flash_llamacpp_iswa_cache_by_kind():
    """llama.cpp src/models/mimo2-iswa.cpp: n_head_kv(il) per layer, K 192 / V 128 on both kinds; the iSWA
    cache holds n_ctx cells in the 9 full layers and n_swa x slots + ubatch (1024) in the 39 sliding ones."""
    ev = evaluate(site_from_argv(["llama-server", "-hf", "unsloth/MiMo-V2-Flash-GGUF", "-c", "32768", "-ngl", "99"]),
                  Target(gpu="H200", gpus=4))
    assert ev.plan.kv_bytes_per_token == 9 * 4 * 320 * 2 + 39 * 8 * 320 * 2
    mib = [float(x.split("= ")[1].split(" MiB")[0]) for x in ev.plan.messages if "KV buffer size" in x]
    assert sum(mib) * 2**20 == 32768 * 9 * 4 * 320 * 2 + 1024 * 39 * 8 * 320 * 2


def test_kimi_k3_llamacpp_latent_cache_and_kda_state():
    """llama.cpp src/models/kimi-k3.cpp: the 24 MLA layers cache a K-only latent of 576, the 69 KDA layers
    hold per sequence llama-hparams.cpp n_embd_r = 3 x (d_conv - 1) x heads x head_dim and
    n_embd_s = head_dim^2 x heads, in f32; the GGUF layout holds the text model's parameters."""
    from servefit.models.gguf_quant import synth_tensors

    m = resolve_model("moonshotai/Kimi-K3")
    n = sum(t.n_elements for t in synth_tensors(m, "BF16"))
    assert abs(n / count_text_params(m) - 1) < 1e-5  # the residual scorers are one vector each in the GGUF
    ev = evaluate(site_from_argv(["llama-server", "-hf", "unsloth/Kimi-K3-GGUF", "-c", "32768", "-ngl", "99"]),
                  Target(gpu="H200", gpus=16))
    # the KDA state is logged apart from the KV buffers (llama_memory_recurrent: RS buffer size)
    mib = [float(x.split("= ")[1].split(" MiB")[0]) for x in ev.plan.messages
           if "KV buffer size" in x or "RS buffer size" in x]
    assert any("RS buffer size" in x for x in ev.plan.messages)
    slots = 4  # llama-server's default -np
    expected = 24 * 32768 * 576 * 2 + 69 * slots * (3 * 3 * 12288 + 128 * 128 * 96) * 4
    assert abs(sum(mib) * 2**20 - expected) < len(mib) * 0.01 * 2**20


# ---------------------------------------------------------------------------------------------- config.json

K3_CONFIG = {  # the published config.json as search-index file 65943802881 quotes it (its vision_config trimmed)
    "architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3", "tie_word_embeddings": False,
    "text_config": {
        "attn_res_block_size": 12, "first_k_dense_replace": 1, "hidden_act": "situ", "hidden_size": 7168,
        "intermediate_size": 33792, "kv_lora_rank": 512, "latent_moe_use_norm": True,
        "linear_attn_config": {"full_attn_layers": [*range(4, 93, 4), 93], "head_dim": 128, "num_heads": 96,
                               "short_conv_kernel_size": 4, "use_full_rank_gate": True},
        "max_position_embeddings": 1048576, "mla_use_nope": True, "mla_use_output_gate": True,
        "model_type": "kimi_linear", "moe_intermediate_size": 3072, "num_attention_heads": 96, "num_experts": 896,
        "num_experts_per_token": 16, "num_hidden_layers": 93, "num_key_value_heads": 96, "num_shared_experts": 2,
        "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "routed_expert_hidden_size": 3584,
        "tie_word_embeddings": False, "v_head_dim": 128, "vocab_size": 163840},
    "vision_config": {"patch_size": 14},
}


def test_kimi_k3_config_json_reads_the_latent_moe_gates_and_tower():
    from servefit.models.config_json import from_config

    m = from_config(K3_CONFIG, "moonshotai/Kimi-K3")
    assert m.model_type == "kimi_k3" and m.num_experts_per_tok == 16
    assert m.layout == {"moe_latent_size": 3584, "attn_res_block_size": 12, "latent_moe_norm": True,
                        "mla_output_gate": True}
    assert m.vision_params == 447358976  # KimiK3VisionConfig's defaults fill what the trimmed vision_config omits
    assert m.params == resolve_model("moonshotai/Kimi-K3").params


def mimo_config(vllm_names: bool) -> dict:
    base = {"architectures": ["MiMoV2FlashForCausalLM"], "model_type": "mimo_v2_flash", "hidden_size": 4096,
            "num_hidden_layers": 48, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 192,
            "v_head_dim": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 2048, "intermediate_size": 16384,
            "vocab_size": 152576, "max_position_embeddings": 262144, "tie_word_embeddings": False,
            "n_routed_experts": 256}
    if vllm_names:  # the names vLLM 0.33.0 mimo_v2.py reads
        return {**base, "swa_num_attention_heads": 64, "swa_num_key_value_heads": 8, "swa_head_dim": 192,
                "swa_v_head_dim": 128, "sliding_window_size": 128, "add_swa_attention_sink_bias": True,
                "hybrid_layer_pattern": [0 if i == 0 or (i + 1) % 6 == 0 else 1 for i in range(48)],
                "moe_layer_freq": [0] + [1] * 47}
    return {**base, "sliding_window": 129}  # transformers' config class: window = size + 1, its default schedule


def test_mimo_v2_flash_config_json_in_either_naming():
    from servefit.models.config_json import from_config

    entry = resolve_model("XiaomiMiMo/MiMo-V2-Flash")
    for vllm_names in (True, False):
        m = from_config(mimo_config(vllm_names), "XiaomiMiMo/MiMo-V2-Flash")
        assert m.params == entry.params and m.layer_types == entry.layer_types
        assert (m.sliding_window, m.first_k_dense_replace, m.v_head_dim) == (128, 1, 128)
        assert m.layout == {"swa_num_key_value_heads": 8, "swa_attention_sinks": True}
    no_sinks = from_config({**mimo_config(True), "add_swa_attention_sink_bias": False}, "x/MiMo")
    assert entry.params - no_sinks.params == 39 * 64  # vLLM builds no sinks unless the config asks
