"""DeepSeek-V4 (data/models/deepseek_v4.yaml, models/arch_deepseek_v4.py, engines/vllm/kv_dsv4.py):
parameter counts by hand against the Hub totals, config.json reading, name resolution, and the KV
cache vLLM 0.33.0 plans, computed here from its spec formulas (not from the module's sub-terms)."""

from __future__ import annotations

import math

import pytest

from servefit.core import UsageError
from servefit.engines.vllm import kv_dsv4
from servefit.memory.weights import scheme_for, weight_bytes
from servefit.models import arch_deepseek_v4 as v4
from servefit.models import catalog, count_params, resolve_model
from servefit.models.config_json import from_config
from servefit.pipeline import Target, evaluate, site_from_argv

V = 129280
FLASH = [0, 0] + [4, 128] * 20 + [4, 0]  # config.json compress_ratios, the MTP layer's last
PRO = [128, 128] + [4, 128] * 29 + [4, 0]


def flash():
    return catalog.lookup("deepseek-ai/DeepSeek-V4-Flash")


def pro():
    return catalog.lookup("deepseek-ai/DeepSeek-V4-Pro")


def _by_hand(L, h, heads, qr, groups, experts, inter, ratios, with_mtp):
    """transformers modeling_deepseek_v4.py module by module; hd 512, index 64 x 128, hc 4, top-6, 3 hash layers."""
    hd, ih, ihd, hc = 512, 64, 128, 4

    def attn(r):
        n = h * qr + qr + qr * heads * hd + h * hd + hd + heads * hd * 1024 + groups * 1024 * h + heads
        if r == 4:  # CSA compressor (2 x head_dim) + the indexer's own compressor, wq_b, weights_proj
            n += 2 * h * 2 * hd + 4 * 2 * hd + hd + 2 * h * 2 * ihd + 4 * 2 * ihd + ihd + qr * ih * ihd + h * ih
        elif r == 128:
            n += 2 * h * hd + 128 * hd + hd
        return n

    def layer(i, r):
        moe = experts * 3 * h * inter + 3 * h * inter + experts * h + (V * 6 if i < 3 else experts)
        return attn(r) + moe + 2 * h + 2 * (24 * 4 * h + 24 + 3)

    total = 2 * V * h + h + hc * hc * h + hc + 1 + sum(layer(i, r) for i, r in enumerate(ratios[:L]))
    if with_mtp:  # + enorm, hnorm, e_proj, h_proj, its hc_head and norm
        total += layer(L, ratios[L]) + 2 * h + 2 * h * h + hc * hc * h + hc + 1 + h
    return total


def test_flash_counts_by_hand_and_llmfit_records():
    main = _by_hand(43, 4096, 64, 1024, 8, 256, 2048, FLASH, False)
    assert main == 284_334_567_511 == flash().params == count_params(flash())  # sokada4/...-0731-GPTQ-Int4-V1
    assert _by_hand(43, 4096, 64, 1024, 8, 256, 2048, FLASH, True) == 290_944_616_402  # deepseek-ai/DeepSeek-V4-Flash


def test_pro_counts_by_hand_and_llmfit_records():
    main = _by_hand(61, 7168, 128, 1536, 16, 384, 3072, PRO, False)
    assert main == 1_572_999_528_803 == pro().params == count_params(pro())
    assert _by_hand(61, 7168, 128, 1536, 16, 384, 3072, PRO, True) == 1_598_839_674_782  # deepseek-ai/DeepSeek-V4-Pro


@pytest.mark.parametrize("name,fp4,base,total", [
    ("deepseek-ai/DeepSeek-V4-Flash", True, False, 158_069_433_298),  # unsloth/DeepSeek-V4-Flash (llmfit)
    ("deepseek-ai/DeepSeek-V4-Flash-Base", False, True, 292_021_347_282),
    ("deepseek-ai/DeepSeek-V4-Pro", True, False, 861_608_274_846),  # the quoted tensor list's total
    ("deepseek-ai/DeepSeek-V4-Pro-Base", False, True, 1_600_790_440_862),
])
def test_stored_totals_reproduce_the_hub_counts(name, fp4, base, total):
    m = catalog.lookup(name)
    assert v4.stored_total(m, experts_fp4=fp4, mtp_embeddings=base) == total
    assert m.quantization["expert_dtype"] == ("fp4" if fp4 else "fp8")


def test_flash_fp4_expert_packing_by_hand():
    """Pro's quoted tensors: experts.N.w1 int8 [3072, 3584] + F8_E8M0 scale [3072, 224]; Flash's the same
    at 2048 x 4096: half the elements packed, one scale per 32, over 44 layers (MTP included)."""
    e = 256 * 3 * 4096 * 2048 * 44
    scales = 44 * ((8 * 32 + 256 * 8 + 4 * 32 + 64 * 32 + 32 * 64) + 3 * 16 * 32) + 21 * 64 * 8 + 2 * 32 * 32
    assert 290_944_616_402 - e + e // 2 + e // 32 + scales == 158_069_433_298


def test_pro_config_json_reads_to_the_catalog_entry():
    """The config.json keys as DeepSeek-V4-Pro ships them (search index file 62968290951)."""
    cfg = {"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "hidden_size": 7168,
           "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 1, "head_dim": 512,
           "q_lora_rank": 1536, "qk_rope_head_dim": 64, "o_groups": 16, "o_lora_rank": 1024, "hc_mult": 4,
           "index_n_heads": 64, "index_head_dim": 128, "index_topk": 1024, "n_routed_experts": 384,
           "n_shared_experts": 1, "num_experts_per_tok": 6, "moe_intermediate_size": 3072, "num_hash_layers": 3,
           "sliding_window": 128, "vocab_size": V, "max_position_embeddings": 1048576, "compress_ratios": PRO,
           "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}}
    m = from_config(cfg, "local/v4-pro")
    assert m.params == 1_572_999_528_803
    assert m.kinds() == ["sliding"] * 61 and m.sliding_window == 128
    assert m.quantization["expert_dtype"] == "fp4"  # vLLM's default when the config names none


def test_transformers_saved_config_reads_the_same_layout():
    """configuration_deepseek_v4.py writes layer_types / compress_rates / mlp_layer_types instead."""
    names = {0: "sliding_attention", 4: "compressed_sparse_attention", 128: "heavily_compressed_attention"}
    cfg = {"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "hidden_size": 4096,
           "num_hidden_layers": 43, "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512,
           "q_lora_rank": 1024, "o_groups": 8, "o_lora_rank": 1024, "hc_mult": 4, "index_n_heads": 64,
           "index_head_dim": 128, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 6,
           "moe_intermediate_size": 2048, "sliding_window": 128, "vocab_size": V,
           "layer_types": [names[r] for r in FLASH[:43]],
           "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128},
           "mlp_layer_types": ["hash_moe"] * 3 + ["moe"] * 40}
    assert from_config(cfg, "local/v4-flash").params == 284_334_567_511


@pytest.mark.parametrize("ref,entry,why,method", [
    ("deepseek-ai/DeepSeek-V4-Flash-0731", "deepseek-ai/DeepSeek-V4-Flash", "'-0731' reads as a dated release", "fp8"),
    ("deepseek-ai/DeepSeek-V4-Pro-0813", "deepseek-ai/DeepSeek-V4-Pro", "'-0813' reads as a dated release", "fp8"),
    ("RedHatAI/DeepSeek-V4-Flash-0731-NVFP4", "deepseek-ai/DeepSeek-V4-Flash", "assumed NVFP4", "modelopt_fp4"),
    ("nvidia/DeepSeek-V4-Pro-NVFP4", "deepseek-ai/DeepSeek-V4-Pro", "an NVFP4 4-bit repack by nvidia", "modelopt_fp4"),
    ("True2456/DeepSeek-V4-Flash-0731-AWQ", "deepseek-ai/DeepSeek-V4-Flash", "assumed AWQ 4-bit", "awq"),
    ("deepseek-ai/DeepSeek-V4-Flash-FP8", "deepseek-ai/DeepSeek-V4-Flash", "assumed FP8 weights", "fp8"),
    ("unsloth/DeepSeek-V4-Flash-0731-GGUF", "deepseek-ai/DeepSeek-V4-Flash", "dated release", "gguf"),
    ("DeepSeek-V4-Flash-UD-Q4_K_XL-00001-of-00004.gguf", "deepseek-ai/DeepSeek-V4-Flash", "GGUF Q4_K_XL", "gguf"),
    ("deepseek-ai/DeepSeek-V4-Pro-Base", "deepseek-ai/DeepSeek-V4-Pro-Base", "", "fp8"),
])
def test_derivative_names_resolve_and_say_why(ref, entry, why, method):
    m = resolve_model(ref)
    assert m.name == entry and m.quantization["quant_method"] == method
    assert (why in " ".join(m.assumptions)) if why else m.assumptions == []


def test_other_architectures_of_the_family_stay_unknown():
    """V4.1 (another layout) and a date on a catalogued dated name are not V4-Flash."""
    with pytest.raises(UsageError, match="unknown model 'deepseek-ai/DeepSeek-V4.1-Flash'; nearest: deepseek-ai/DeepSeek-V4-Flash"):
        resolve_model("deepseek-ai/DeepSeek-V4.1-Flash")
    assert resolve_model("Qwen/Qwen3-30B-A3B-Instruct-2507").assumptions == []


def _page(states, content):  # kv_cache_interface.py: states x bytes, padded to the 576-byte alignment
    return math.ceil(states * content / 576) * 576


def test_kv_bytes_per_token_by_hand():
    """Per 256-token block: a rate-4 layer's 64 compressed states of 584 B and its indexer's 64 keys of
    128 + 4 B; a rate-128 layer's 2 states of 584 B (attention.py get_kv_cache_spec,
    DeepseekV4IndexerCache)."""
    c4, idx, c128 = _page(64, 584), _page(64, 132), _page(2, 584)
    assert (c4, idx, c128) == (37440, 8640, 1728)
    assert kv_dsv4.bytes_per_token(flash()) == round((21 * (c4 + idx) + 20 * c128) / 256) == 3915
    assert kv_dsv4.bytes_per_token(pro()) == round((30 * (c4 + idx) + 31 * c128) / 256) == 5609


def test_vllm_packs_flash_caches_into_five_groups():
    """_get_packed_kv_cache_groups: MLA bucket (21 + 21 + 20 pages, unbalanced: one group), window bucket
    (43 x 37440, split in 2 by the pattern count 22 that _approximate_gcd picks from [43, 21, 20] above
    21), rate-4 states (21 x 32832 + 21 x 8640), rate-128 states (20 x 32832); block stride = the widest."""
    lay = kv_dsv4.layout(flash())
    swa, st4, st128 = _page(64, 584), _page(4, 2048 * 4) + _page(4, 512 * 4), _page(8, 1024 * 4)
    widths = {21 * (37440 + 8640) + 20 * 1728, 22 * swa, 21 * swa, 21 * st4, 20 * st128}
    assert lay.bytes_per_block == max(widths) == 1_002_240
    assert sorted((g.kind, g.window, g.layers, g.block_size) for g in lay.groups) == sorted([
        ("sliding", 128, 22, 64), ("sliding", 128, 21, 64), ("full", 0, 62, 256), ("sliding", 8, 42, 4),
        ("sliding", 128, 20, 8)])
    # 131072 tokens, 8192 in flight: cdiv(L, 256) + 2 x (cdiv(127 + 8192, 64) + 1) + (cdiv(7 + 8192, 4) + 1)
    # + (cdiv(127 + 8192, 8) + 1)
    assert lay.blocks_per_request(131072, 8192) == 512 + 2 * 131 + 2051 + 1041


def test_window_buckets_are_capped_to_the_block_without_a_repeating_pattern():
    """No rate-4 layer, so no balanced mixed-page bucket: the window and state buckets are state buckets,
    split so that each group fits the anchor (the 61 x 1728 compressed pages): 105408 // 37440 = 2 window
    layers a group (31 groups), 105408 // 32832 = 3 state layers a group (21 groups)."""
    m = pro()
    m = type(m)(**{**m.__dict__, "layout": {**m.layout, "compress_ratios": [128] * 61 + [0]}})
    lay = kv_dsv4.layout(m)
    assert lay.bytes_per_block == 61 * _page(2, 584) == 105_408
    windows = [g for g in lay.groups if g.window == 128 and g.block_size == 64]
    states = [g for g in lay.groups if g.block_size == 8]
    assert (len(windows), len(states), len(lay.groups)) == (31, 21, 53)
    # every n-th layer to a group (pattern_repeats[i::n]): 61 layers over 31 and over 21 groups
    assert sorted({g.layers for g in windows}) == [1, 2] and sorted({g.layers for g in states}) == [2, 3]


def test_vllm_plan_of_flash():
    site = site_from_argv(["vllm", "serve", "deepseek-ai/DeepSeek-V4-Flash", "--tensor-parallel-size", "4",
                           "--max-model-len", "131072"])
    p = evaluate(site, Target(gpu="H200", gpus=4, engine_version="0.33.0")).plan
    assert p.outcome == "started" and p.kv_bytes_per_token == 3915
    assert p.detail.block_size == 256 and p.detail.kv_groups == 5
    assert p.memory.kv_cache == p.detail.num_gpu_blocks * 1_002_240
    # 0.33 admits two batches in flight (VllmConfig.max_in_flight_tokens: 2 x 8192): per request
    # 512 + 2 x (cdiv(127 + 16384, 64) + 1) + (cdiv(7 + 16384, 4) + 1) + (cdiv(127 + 16384, 8) + 1) blocks
    per_request = 512 + 2 * 259 + 4099 + 2065
    assert p.kv_cache_tokens == int(p.detail.num_gpu_blocks / per_request * 131072)
    assert any("fp8_ds_mla" in a for a in p.assumptions)


def test_fp4_experts_weigh_half_an_fp8_byte_plus_their_scales():
    s = scheme_for(flash().quantization)
    assert (s.bytes_per_param, s.experts_bytes) == (1.0, 0.5 + 1 / 32)
    experts = 43 * 256 * 3 * 4096 * 2048
    base = catalog.lookup("deepseek-ai/DeepSeek-V4-Flash-Base")
    gap = weight_bytes(base, 2, scheme_for(base.quantization)) - weight_bytes(flash(), 2, s)
    assert abs(gap - experts * (1 - 0.53125)) <= 1


@pytest.mark.parametrize("argv,engine", [
    (["text-generation-launcher", "--model-id", "deepseek-ai/DeepSeek-V4-Flash", "--num-shard", "8"], "TGI"),
    (["llama-server", "-hf", "unsloth/DeepSeek-V4-Flash-GGUF:Q4_K_M"], "llama.cpp"),
])
def test_engines_whose_v4_cache_is_not_modelled_say_so(argv, engine):
    with pytest.raises(UsageError, match=f"^servefit does not model how {engine} serves deepseek-ai/DeepSeek-V4-Flash \\(its compressed DeepSeek-V4 attention: .*vLLM / SGLang is modelled"):
        evaluate(site_from_argv(argv), Target(gpu="H200", gpus=8))
