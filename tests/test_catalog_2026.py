"""Issue 13, 2026 families (third round): GLM-5.2 / 5.3 IndexShare (the indexer on one layer in
four), checked by hand against the engine formulas."""

from __future__ import annotations

from servefit.models import count_params, resolve_model
from servefit.models.arch_hrm import kv_layers
from servefit.models.architecture import indexer_layers
from servefit.models.config_json import from_config
from servefit.pipeline import Target, evaluate, site_from_argv


def _plan(argv: list[str], gpu: str = "H200"):
    return evaluate(site_from_argv(argv), Target(gpu=gpu, engine_version="0.33.0")).plan


# ------------------------------------------------------------------------------ GLM-5.2 / 5.3

INDEXER = 2048 * 32 * 128 + 6144 * (128 + 32) + 2 * 128  # wq_b, wk + weights_proj, k_norm (vLLM Indexer)


def test_glm52_count_is_glm5_less_57_indexers():
    glm5, glm52 = resolve_model("zai-org/GLM-5"), resolve_model("zai-org/GLM-5.2")
    assert INDEXER == 9_371_904
    assert indexer_layers(glm5) == 78 and indexer_layers(glm52) == 21
    assert count_params(glm52) == glm52.params == glm5.params - 57 * INDEXER == 743_377_019_904
    # llmfit's zai-org/GLM-5.2 total: the main model plus GLM-5's MTP layer
    assert glm52.params + 9_952_920_576 == 753_329_940_480
    assert resolve_model("zai-org/GLM-5.3").params == glm52.params


def test_indexer_schedule_follows_vllm():
    """vllm/models/deepseek_v32/attention.py: a layer skips its indexer when
    max(layer - offset + 1, 0) % freq != 0, or where index_topk_pattern says S."""
    m = resolve_model("zai-org/GLM-5.2")
    ids = [i for i in range(78) if max(i - 1, 0) % 4 == 0]
    assert ids[:4] == [0, 1, 5, 9] and len(ids) == indexer_layers(m) == 21
    m.layout["index_skip_topk_offset"] = 3  # layers 0, 1, 2, 6, 10, ... 74: still 21
    assert indexer_layers(m) == 21
    m.layout["index_topk_pattern"] = "FS" * 39
    assert indexer_layers(m) == 39


def test_glm52_config_json_reads_the_schedule():
    cfg = {"architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", "num_hidden_layers": 78,
           "hidden_size": 6144, "num_attention_heads": 64, "num_key_value_heads": 64, "intermediate_size": 12288,
           "moe_intermediate_size": 2048, "n_routed_experts": 256, "num_experts_per_tok": 8, "n_shared_experts": 1,
           "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 2048, "qk_rope_head_dim": 64,
           "qk_nope_head_dim": 192, "v_head_dim": 256, "index_n_heads": 32, "index_head_dim": 128,
           "index_topk": 2048, "index_topk_freq": 4, "vocab_size": 154880, "max_position_embeddings": 1048576}
    assert from_config(cfg, "x/glm52").params == resolve_model("zai-org/GLM-5.2").params
    del cfg["index_topk_freq"]
    assert from_config(cfg, "x/glm5").params == resolve_model("zai-org/GLM-5").params


def test_glm52_kv_per_token_by_hand():
    """MLA latent (kv_lora_rank + qk_rope_head_dim) on all 78 layers (mla_attention.py
    MLAAttention.get_kv_cache_spec), the indexer's fp8 key of 128 + 4 scale bytes only on the 21
    layers that build an Indexer (deepseek_v2.py DeepseekV32IndexerCache)."""
    plan = _plan(["vllm", "serve", "zai-org/GLM-5.2-FP8", "--max-model-len", "8192", "-tp", "8"])
    assert plan.kv_bytes_per_token == 78 * 576 * 2 + 21 * 132 == 92_628
    fp8 = _plan(["vllm", "serve", "zai-org/GLM-5.2-FP8", "--max-model-len", "8192", "-tp", "8",
                 "--kv-cache-dtype", "fp8"])
    # on Hopper an fp8 cache runs FLASHMLA_SPARSE, which stores fp8_ds_mla rows of 656 bytes
    # (mla_attention.py::_canonicalize_sparse_mla_kv_cache_dtype, kv_cache_interface.py MLAAttentionSpec)
    assert fp8.kv_bytes_per_token == 78 * 656 + 21 * 132
    glm5 = _plan(["vllm", "serve", "zai-org/GLM-5-FP8", "--max-model-len", "8192", "-tp", "8"])
    assert glm5.kv_bytes_per_token == 78 * (576 * 2 + 132)


def test_glm52_derivatives_print_their_assumption():
    m = resolve_model("nvidia/GLM-5.2-NVFP4")
    assert m.name == "zai-org/GLM-5.2"
    assert any("NVFP4" in a and "nvidia" in a for a in m.assumptions)


# ------------------------------------------------------------------------------ HRM-Text

# a legacy config.json (the per-stack count as num_hidden_layers); the published one stores 128 and
# num_layers_per_stack 16 (search index file 54920907000), test_hrm_text_config_json_legacy_and_inflated
HRM_CONFIG = {"architectures": ["HrmTextForCausalLM"], "model_type": "hrm_text", "num_hidden_layers": 16,
              "hidden_size": 1536, "num_attention_heads": 12, "head_dim": 128, "intermediate_size": 4096,
              "vocab_size": 65536, "max_position_embeddings": 4096, "H_cycles": 2, "L_cycles": 3}


def hrm_by_hand() -> int:
    h = 1536
    layer = 5 * h * h + 3 * h * 4096  # q, k, v, o, gate_proj; gate/up/down (weightless RMSNorms)
    return 2 * 65536 * h + 2 * 16 * layer + h  # embed + untied lm_head, two stacks, z_L_init


def test_hrm_text_count_by_hand():
    m = resolve_model("sapientinc/HRM-Text-1B")
    assert count_params(m) == m.params == hrm_by_hand() == 1_182_795_264
    lay = m.layout
    assert m.num_hidden_layers == kv_layers(lay["num_layers_per_stack"], lay["H_cycles"], lay["L_cycles"]) == 128


def test_hrm_text_config_json_legacy_and_inflated():
    legacy = from_config(dict(HRM_CONFIG), "x/hrm")
    assert legacy.num_hidden_layers == 128 and legacy.params == hrm_by_hand()
    inflated = from_config({**HRM_CONFIG, "num_hidden_layers": 128, "num_layers_per_stack": 16}, "x/hrm")
    assert inflated.num_hidden_layers == 128 and inflated.params == hrm_by_hand()
    fewer = from_config({**HRM_CONFIG, "L_cycles": 1}, "x/hrm")  # 16 x 2 x 2 layer runs
    assert fewer.num_hidden_layers == 64 and fewer.params == hrm_by_hand()


def test_hrm_text_caches_every_layer_run():
    """vLLM hrm_text.py: one Attention per (step, layer), 16 x 2 x (3 + 1) = 128, each K and V of
    12 heads x 128 (num_kv_heads = num_attention_heads); SGLang hrm_text.py the same RadixAttention slots."""
    want = 128 * 2 * 12 * 128 * 2
    plan = _plan(["vllm", "serve", "sapientinc/HRM-Text-1B", "--max-model-len", "4096"], gpu="L4")
    assert plan.kv_bytes_per_token == want == 786_432
    sg = _plan(["python", "-m", "sglang.launch_server", "--model-path", "checkpoints/HRM-Text-1B",
                "--context-length", "4096"], gpu="L4")
    assert sg.kv_bytes_per_token == want
    m = resolve_model("checkpoints/HRM-Text-1B")
    assert m.name == "sapientinc/HRM-Text-1B" and "another organization" in m.assumptions[0]


# ------------------------------------------------------------------------------ MiniMax-M3

M3_CONFIG = {
    "architectures": ["MiniMaxM3SparseForConditionalGeneration"], "model_type": "minimax_m3_vl",
    "text_config": {"model_type": "minimax_m3_vl_text", "vocab_size": 200064, "hidden_size": 6144,
                    "intermediate_size": 3072, "num_hidden_layers": 60, "num_attention_heads": 64,
                    "num_key_value_heads": 4, "head_dim": 128, "max_position_embeddings": 524288,
                    "num_experts_per_tok": 4, "num_local_experts": 128, "dense_intermediate_size": 12288,
                    "shared_intermediate_size": 3072, "moe_layer_freq": [0, 0, 0] + [1] * 57,
                    "sparse_attention_config": {"sparse_num_index_heads": 4, "sparse_index_dim": 128,
                                                "sparse_attention_freq": [0, 0, 0] + [1] * 57}},
    "vision_config": {"model_type": "minimax_m3_vl_vision", "hidden_size": 1280, "intermediate_size": 5120,
                      "num_hidden_layers": 32, "num_attention_heads": 16, "patch_size": 14,
                      "temporal_patch_size": 2, "spatial_merge_size": 2, "image_size": 2016},
    "projector_hidden_size": 6144}


def m3_by_hand() -> tuple[int, int]:
    """transformers modeling_minimax_m3_vl.py, module by module."""
    h, v = 6144, 1280
    attn = h * 64 * 128 + 2 * h * 4 * 128 + 64 * 128 * h + 2 * 128  # q, k, v, o, q_norm / k_norm
    indexer = h * 4 * 128 + h * 128 + 2 * 128  # q_proj, k_proj, q_norm, k_norm
    moe = 128 * 3 * h * 3072 + 128 * h + 128 + 3 * h * 3072  # experts, router + score bias, shared expert
    text = 2 * 200064 * h + h + 60 * (attn + 2 * h) + 57 * indexer + 3 * 3 * h * 12288 + 57 * moe
    layer = 4 * (v * v + v) + 4 * v + (v * 5120 + 5120) + (5120 * v + v)
    tower = 3 * 2 * 14 * 14 * v + 2 * v + 32 * layer  # Conv3d without bias, pre_layrnorm
    proj = (v * h + h) + (h * h + h) + (4 * h * h + h) + (h * h + h)
    return text + tower + proj, tower + proj


def test_minimax_m3_count_by_hand():
    m = resolve_model("MiniMaxAI/MiniMax-M3")
    total, vision = m3_by_hand()
    assert count_params(m) == m.params == total == 427_040_140_160
    assert m.vision_params == vision
    assert indexer_layers(m) == 57


def test_minimax_m3_config_json():
    m = from_config(M3_CONFIG, "x/m3")
    assert (m.intermediate_size, m.moe_intermediate_size, m.num_shared_experts, m.first_k_dense_replace) == \
        (12288, 3072, 1, 3)
    assert m.params == m3_by_hand()[0]


def test_minimax_m3_kv_per_token_by_hand():
    """vLLM models/minimax_m3/nvidia/model.py: FullAttentionSpec of 4 KV heads x 128 on every layer
    (one head a rank from TP 4 on); common/indexer.py MiniMaxM3IndexerCache: one bf16 key of 128 on
    each of the 57 sparse layers, not split by TP and not following --kv-cache-dtype."""
    tp4 = _plan(["vllm", "serve", "MiniMaxAI/MiniMax-M3", "--max-model-len", "32768", "-tp", "4"], gpu="B200")
    assert tp4.kv_bytes_per_token == 60 * 2 * 1 * 128 * 2 + 57 * 128 * 2 == 45_312
    fp8 = _plan(["vllm", "serve", "MiniMaxAI/MiniMax-M3", "--max-model-len", "32768", "-tp", "4",
                 "--kv-cache-dtype", "fp8"], gpu="B200")
    assert fp8.kv_bytes_per_token == 60 * 2 * 128 + 57 * 256
    tp2 = _plan(["vllm", "serve", "MiniMaxAI/MiniMax-M3", "--max-model-len", "32768", "-tp", "2"], gpu="B200")
    assert tp2.kv_bytes_per_token == 60 * 2 * 2 * 128 * 2 + 57 * 256
