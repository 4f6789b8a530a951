"""The forward and the closing step of vLLM's profiling run, by model kind: the fused-MoE intermediate
caches (model_executor/layers/fused_moe/fused_moe.py::fused_experts_impl, read in the 0.11.0 wheel)
and the pooler that replaces the dummy sampler for pooling models (v1/worker/gpu_model_runner.py::
profile_run). Every figure is computed by hand from the engine's shapes."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from unittest import mock

from servefit.models.spec import ModelSpec

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import H100, LLAMA8B, T4, run  # noqa: E402

# Qwen3-30B-A3B's shapes (config.json): 128 experts of 768, 8 per token, hidden 2048
QWEN3_MOE = ModelSpec(
    name="Qwen/Qwen3-30B-A3B", architecture="Qwen3MoeForCausalLM", model_type="qwen3_moe",
    num_hidden_layers=48, hidden_size=2048, num_attention_heads=32, num_key_value_heads=4, head_dim=128,
    intermediate_size=6144, vocab_size=151936, max_position_embeddings=40960, params=30_532_122_624,
    num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768)
# a few requests, so that the forward and not the sampler is the peak
FEW = "vllm serve m --max-model-len 8192 --max-num-seqs 4"


def test_moe_forward_holds_the_w2_output_at_full_hidden_width_under_tp():
    """TP2 on H100 (0.11: 8192 batched tokens): N = 2 x 768 / 2 = 768 < K = 2048, so cache13 is
    8192 x 8 x 2048 and cache2 8192 x 8 x 384, beside the router logits (8192 x 128, twice) and the
    4 hidden-width tensors."""
    _, p = run(FEW + " --tensor-parallel-size 2", model=QWEN3_MOE, gpu=H100, count=2, version="0.11.0")
    t = 8192
    assert p.memory.activation_peak == t * 4 * 2048 * 2 + t * 8 * (2048 + 384) * 2 + t * 128 * 2 * 2


def test_moe_expert_parallel_keeps_whole_experts_per_rank():
    _, p = run(FEW + " --tensor-parallel-size 2 --enable-expert-parallel", model=QWEN3_MOE, gpu=H100, count=2,
               version="0.11.0")
    t = 8192
    assert p.memory.activation_peak == t * 4 * 2048 * 2 + t * 8 * (max(1536, 2048) + 768) * 2 + t * 128 * 2 * 2


def test_moe_caches_are_sized_for_one_chunk_of_tokens():
    """A 40960-token batch runs in one forward; the MoE caches hold one chunk of its tokens at a time:
    32768 up to 0.11, 16384 in 0.12 - 0.19, all of them from 0.20 (no chunking). Up to 0.13
    fused_experts_impl holds cache13 (max(N, K) = 2048) and cache2 (N / 2 = 768) per slot; from 0.14 the
    modular TritonExperts' workspace holds max(N / 2, K) + max(N, K) = 2048 + 2048; that workspace stays
    allocated through the next layer's attention, whose QKV (4096 + 2 x 512) and attention output (4096)
    beside it top the MLP half there."""
    argv = "vllm serve m --max-model-len 40960 --max-num-seqs 4 --max-num-batched-tokens 40960"
    t = 40960
    for version, m, per_slot in (("0.11.0", 32768, 2048 + 768), ("0.13.0", 16384, 2048 + 768),
                                 ("0.17.0", 16384, 2048 + 2048), ("0.20.0", 40960, 2048 + 2048)):
        _, p = run(argv, model=QWEN3_MOE, gpu=H100, version=version)
        mlp_half = t * 4 * 2048 * 2 + m * 8 * per_slot * 2 + t * 128 * 2 * 2
        attention_half = t * (4 * 2048 + 2 * 4096 + 2 * 512) * 2 + (m * 8 * per_slot * 2 if per_slot == 4096 else 0)
        assert p.memory.activation_peak == max(mlp_half, attention_half), version
        assert (attention_half > mlp_half) == (version >= "0.17"), version



def test_before_0_8_the_w1_and_w2_outputs_had_buffers_of_their_own():
    """0.7.3 (V0, chunked prefill off at 8192): cache1 (8192 x 8 x 1536), cache2 (x 768) and cache3
    (x 2048) side by side, where 0.8.5's cache13 shares the first and the last."""
    argv = "vllm serve m --max-model-len 8192 --max-num-seqs 4"
    t = 8192
    _, old = run(argv, model=QWEN3_MOE, gpu=H100, version="0.7.3")
    assert old.memory.activation_peak == t * 3 * 2048 * 2 + t * 8 * (1536 + 768 + 2048) * 2 + t * 128 * 2 * 2  # V0: eager
    _, new = run(argv, model=QWEN3_MOE, gpu=H100, version="0.8.5", env={"VLLM_USE_V1": "0"})
    assert new.memory.activation_peak == t * 3 * 2048 * 2 + t * 8 * (2048 + 768) * 2 + t * 128 * 2 * 2  # V0


def test_data_parallel_gathers_every_rank_tokens_into_the_moe_layer():
    """DP2 without EP: the experts are sharded over both ranks (768 / 2), and the MoE layer runs both
    ranks' 8192 tokens, holding the gathered input and the combined output besides its caches."""
    _, p = run(FEW + " --data-parallel-size 2", model=QWEN3_MOE, gpu=H100, count=2, version="0.11.0")
    t, g = 8192, 16384
    moe = g * 8 * (2048 + 384) * 2 + g * 128 * 2 * 2 + 2 * g * 2048 * 2
    assert p.memory.activation_peak == t * 4 * 2048 * 2 + moe


def test_shared_expert_output_stays_beside_the_routed_caches_and_dense_layers_can_win():
    shared = replace(QWEN3_MOE, num_shared_experts=1)
    _, p = run(FEW, model=shared, gpu=H100, version="0.11.0")
    t = 8192
    routed = t * 8 * (2048 + 768) * 2 + t * 128 * 2 * 2
    assert p.memory.activation_peak == t * 4 * 2048 * 2 + routed + t * 2048 * 2
    # a leading dense layer of 12288 (3 x 12288 = 36864 per token) is above the routed caches (22528 + 256)
    dense_first = replace(QWEN3_MOE, first_k_dense_replace=1, intermediate_size=12288)
    _, d = run(FEW, model=dense_first, gpu=H100, version="0.11.0")
    assert d.memory.activation_peak == t * 4 * 2048 * 2 + t * 3 * 12288 * 2


def test_pooling_models_profile_the_pooler_not_the_sampler():
    """An embedding run ends with _dummy_pooler_run: 256 requests x 128,256 logits (1.19 GiB) are not
    sampled, so the 2048-token forward is the peak."""
    fwd = 2048 * (4 * 4096 + 3 * 14336) * 2
    _, gen = run("vllm serve m --max-model-len 8192", version="0.11.0")
    assert gen.memory.activation_peak == 256 * 128256 * 39
    _, conv = run("vllm serve m --max-model-len 8192 --convert embed", version="0.11.0")
    _, runner = run("vllm serve m --max-model-len 8192 --runner pooling", version="0.11.0")
    emb = replace(LLAMA8B, architecture="LlamaForSequenceClassification")
    _, arch = run("vllm serve m --max-model-len 8192", model=emb, version="0.11.0")
    _, bare = run("vllm serve m --max-model-len 8192", model=replace(LLAMA8B, architecture="MistralModel"),
                  version="0.11.0")
    assert conv.memory.activation_peak == runner.memory.activation_peak == arch.memory.activation_peak == fwd
    assert bare.memory.activation_peak == fwd
    # a bare *Model the registry serves as a generative model keeps the sampler
    _, glm = run("vllm serve m --max-model-len 8192", model=replace(LLAMA8B, architecture="ChatGLMModel"),
                 version="0.11.0")
    assert glm.memory.activation_peak == 256 * 128256 * 39
    # --runner generate keeps the sampler
    _, forced = run("vllm serve m --max-model-len 8192 --runner generate", model=emb, version="0.11.0")
    assert forced.memory.activation_peak == 256 * 128256 * 39


# Gemma 3 27B's shapes (config.json): SigLIP 896 px / patch 14 (4096 patches, 256 tokens an image)
GEMMA3 = ModelSpec(
    name="google/gemma-3-27b-it", architecture="Gemma3ForConditionalGeneration", model_type="gemma3",
    num_hidden_layers=62, hidden_size=5376, num_attention_heads=32, num_key_value_heads=16, head_dim=128,
    intermediate_size=21504, vocab_size=262208, max_position_embeddings=131072, params=27_432_406_640,
    vision={"model_type": "siglip_vision_model", "hidden_size": 1152, "num_hidden_layers": 27,
            "intermediate_size": 4304, "num_attention_heads": 16, "image_size": 896, "patch_size": 14})
# Mistral-Small-3.2's Pixtral: 1540 px / patch 14 (110 x 110 patches), merged 2 x 2 -> 55 x 55 tokens
MISTRAL3 = ModelSpec(
    name="mistralai/Mistral-Small-3.2-24B-Instruct-2506", architecture="Mistral3ForConditionalGeneration",
    model_type="mistral3", num_hidden_layers=40, hidden_size=5120, num_attention_heads=32, num_key_value_heads=8,
    head_dim=128, intermediate_size=32768, vocab_size=131072, max_position_embeddings=131072,
    params=24_011_361_280,
    vision={"model_type": "pixtral", "hidden_size": 1024, "num_hidden_layers": 24, "intermediate_size": 4096,
            "num_attention_heads": 16, "head_dim": 64, "image_size": 1540, "patch_size": 14, "spatial_merge_size": 2})
PIXELS = 3 * 14 * 14  # pixel values per patch, held in fp32 and in bf16 (6 bytes)
FP32_PIXELS = PIXELS * 4  # the float32 copy, held through the LM forward (encoder.py EncoderProfile.inputs)


def test_gemma3_siglip_profile_runs_a_budget_of_images():
    """H100, 0.12: 8192 batched tokens -> 32 images of 256 tokens, 131,072 patches. The tower's peak
    (hidden, residual, norm and fc1 / GELU outputs per patch) is above the LM forward with the cached
    outputs (1.41 GiB + 32 x 256 x 5376 x 2 B) and the 8-request sampler."""
    _, p = run("vllm serve m --max-model-len 16384 --max-num-seqs 8", model=GEMMA3, gpu=H100, version="0.12.0")
    patches = 32 * 4096
    assert p.memory.activation_peak == patches * (PIXELS * 6 + (3 * 1152 + 2 * 4304) * 2)
    # over two GPUs the tower's MLP is sharded (SiglipMLP: ColumnParallelLinear / RowParallelLinear)
    _, tp2 = run("vllm serve m --max-model-len 16384 --max-num-seqs 8 --tensor-parallel-size 2", model=GEMMA3,
                 gpu=H100, count=2, version="0.12.0")
    fwd2 = 8192 * (4 * 5376 + 3 * 21504 // 2) * 2
    assert tp2.memory.activation_peak == max(patches * (PIXELS * 6 + (3 * 1152 + 2 * 4304 // 2) * 2),
                                             fwd2 + 32 * 256 * 5376 * 2)


def test_0_11_caches_each_dummy_image_at_the_full_encoder_budget():
    """0.11 copies each of the 32 outputs into a zero tensor of 8192 rows before caching it: 2.63 GiB
    held through the LM forward, which then tops the tower's peak (with the 32 images' float32 pixels)."""
    _, p = run("vllm serve m --max-model-len 16384 --max-num-seqs 8", model=GEMMA3, gpu=H100, version="0.11.0")
    fwd = 8192 * (4 * 5376 + 3 * 21504) * 2
    assert p.memory.activation_peak == 32 * 8192 * 5376 * 2 + fwd + 32 * 4096 * FP32_PIXELS


def test_v0_gemma3_dummy_prompts_carry_one_image_each():
    """V0 (0.8 with VLLM_USE_V1=0): no chunked prefill for a multimodal model, so 16384 tokens over
    min(max_num_seqs, 16384 // 256) prompts, each with one image (V0's default limit)."""
    argv = "vllm serve m --max-model-len 16384 --max-num-seqs {}"
    _, few = run(argv.format(8), model=GEMMA3, gpu=H100, version="0.8.5", env={"VLLM_USE_V1": "0"})
    # 8 images: the forward wins, their float32 pixels beside it
    assert few.memory.activation_peak == 16384 * (3 * 5376 + 3 * 21504) * 2 + 8 * 4096 * FP32_PIXELS  # V0: eager
    _, many = run(argv.format(256), model=GEMMA3, gpu=H100, version="0.8.5", env={"VLLM_USE_V1": "0"})
    assert many.memory.activation_peak == 64 * 4096 * (PIXELS * 6 + (3 * 1152 + 2 * 4304) * 2)  # 64 images


def test_mistral3_pixtral_tokens_per_image():
    """0.12 on H100 with 4 requests: ceil(1540 / 28)^2 = 3025 tokens an image -> 2 images in the 8192
    budget, 24,200 patches; the LM forward with their outputs is the peak. The tower holds the dense
    block-diagonal mask over its patches from 0.12 (no xformers; tests/test_vllm_pixtral_mask.py)."""
    _, p = run("vllm serve m --max-model-len 16000 --max-num-seqs 4", model=MISTRAL3, gpu=H100, version="0.12.0")
    fwd = 8192 * (4 * 5120 + 3 * 32768) * 2
    assert p.memory.activation_peak == fwd + 2 * 3025 * 5120 * 2 + 2 * 12100 * FP32_PIXELS
    # 2048 batched tokens hold no full image: the budget is one image (3025 tokens), whose 12,100 patches
    # peak at 0.39 GiB in the tower, plus the 12100^2 bf16 mask (12100 % 8 = 4: SDPA's padded copy of it,
    # 12100 x 12104, stays below the MLP's working set): 0.66 GiB, above the 2048-token forward with that
    # image's outputs
    _, small = run("vllm serve m --max-model-len 16000 --max-num-seqs 4 --max-num-batched-tokens 2048",
                   model=MISTRAL3, gpu=H100, version="0.12.0")
    tower = 12100 * (PIXELS * 6 + (3 * 1024 + 3 * 4096) * 2)
    mask = 12100 * 12100 * 2
    lm = 2048 * (4 * 5120 + 3 * 32768) * 2 + 3025 * 5120 * 2 + 12100 * FP32_PIXELS
    assert tower < lm < tower + mask and small.memory.activation_peak == tower + mask == 707_220_800
    # with xformers (0.11) no mask: the LM forward is the peak (0.11 caches the output at the budget's rows)
    _, x = run("vllm serve m --max-model-len 16000 --max-num-seqs 4 --max-num-batched-tokens 2048",
               model=MISTRAL3, gpu=H100, version="0.11.0")
    assert x.memory.activation_peak == lm
    # alone at 1024 tokens the LM forward is smaller than the tower
    _, tiny = run("vllm serve m --max-model-len 16000 --max-num-seqs 4 --max-num-batched-tokens 1024",
                  model=MISTRAL3, gpu=H100, version="0.12.0")
    assert tiny.memory.activation_peak == tower + mask


def test_0_11_expansion_applies_to_qwen_vl_items_shorter_than_the_budget():
    """Qwen2.5-VL at max_pixels 200704: 4 videos of 1792 tokens in an 8192 budget; 0.11 caches each at
    8192 rows of the LM width (3584), other releases at its own 1792."""
    import json

    from test_vision_models import CONFIG_7B

    from servefit.engines.vllm import encoder
    from servefit.models.config_json import from_config

    m = from_config(json.loads(json.dumps(CONFIG_7B)), "local/qwen25vl")
    args = dict(v1=True, max_model_len=32768, max_num_seqs=256, max_num_batched_tokens=8192, chunked_prefill=True,
                db=2)
    kw = {"mm_processor_kwargs": '{"max_pixels": 200704}'}
    p11 = encoder.profile(m, kw, **args, version=(0, 11, 0))
    p12 = encoder.profile(m, kw, **args, version=(0, 12, 0))
    assert p11 is not None and p12 is not None and p11.items == p12.items == 4
    assert p11.outputs == 4 * 8192 * 3584 * 2 and p12.outputs == 4 * 1792 * 3584 * 2


INTERNVL3 = ModelSpec(
    name="OpenGVLab/InternVL3-8B", architecture="InternVLChatModel", model_type="qwen2", num_hidden_layers=28,
    hidden_size=3584, num_attention_heads=28, num_key_value_heads=4, head_dim=128, intermediate_size=18944,
    vocab_size=151674, max_position_embeddings=32768, params=7_944_373_760,
    vision={"model_type": "internvl_vision", "hidden_size": 1024, "intermediate_size": 4096, "image_size": 448,
            "patch_size": 14, "downsample_ratio": 0.5})
LLAVA15 = ModelSpec(
    name="llava-hf/llava-1.5-7b-hf", architecture="LlavaForConditionalGeneration", model_type="llava",
    num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, num_key_value_heads=32, head_dim=128,
    intermediate_size=11008, vocab_size=32064, max_position_embeddings=4096, params=7_063_427_072,
    vision={"model_type": "clip_vision_model", "hidden_size": 1024, "intermediate_size": 4096, "image_size": 336,
            "patch_size": 14})


def test_internvl_profiles_twelve_tiles_and_the_thumbnail():
    """(448 / 14 x 0.5)^2 = 256 tokens a tile, 13 tiles: 3328 tokens an image, 2 in 0.12's 8192 budget,
    each tile 1024 patches and a class token. The LM forward with the 2 outputs is the peak."""
    _, p = run("vllm serve m --max-model-len 16384 --max-num-seqs 4", model=INTERNVL3, gpu=H100, version="0.12.0")
    fwd = 8192 * (4 * 3584 + 3 * 18944) * 2
    assert p.memory.activation_peak == fwd + 2 * 3328 * 3584 * 2 + 2 * 13 * 1024 * FP32_PIXELS
    assert any("2 dummy image item(s) of 3,328 tokens" in a for a in p.assumptions)
    # at 1024 batched tokens one image: the tower's 13 x 1025 patches (InternMLP: fc1 and GELU) peak
    _, small = run("vllm serve m --max-model-len 16384 --max-num-seqs 4 --max-num-batched-tokens 1024",
                   model=INTERNVL3, gpu=H100, version="0.12.0")
    assert small.memory.activation_peak == 13 * 1025 * (PIXELS * 6 + (3 * 1024 + 2 * 4096) * 2)


def test_llava_and_paligemma_encode_one_fixed_image():
    """LLaVA-1.5 on V0 0.6.3: 576 tokens an image (577 patches with the class token), min(256, 4096 // 576)
    = 7 dummy prompts of 4096 // 7 = 585 tokens: the 4095-token forward is the peak."""
    from servefit.engines.vllm.encoder import fixed_tower

    _, p = run("vllm serve m --max-model-len 4096", model=LLAVA15, gpu=H100, version="0.6.3")
    assert p.memory.activation_peak == 4095 * (3 * 4096 + 3 * 11008) * 2 + 7 * 576 * FP32_PIXELS  # V0: eager
    assert any("7 dummy image item(s) of 576 tokens; the LM profiling forward runs 4,095" in a for a in p.assumptions)
    pali = replace(LLAVA15, model_type="paligemma", vision={"model_type": "siglip_vision_model", "hidden_size": 1152,
                                                            "intermediate_size": 4304, "image_size": 224,
                                                            "patch_size": 14})
    assert fixed_tower(LLAVA15) == (576, 577, 1024, 2 * 4096, PIXELS)
    assert fixed_tower(pali) == (256, 256, 1152, 2 * 4304, PIXELS)
    assert fixed_tower(replace(LLAVA15, model_type="llama")) is None


def test_ungated_mlps_hold_two_intermediates():
    """An up / down MLP (Falcon, OPT, ... and Nemotron-H's relu2) holds fc1's output and its activation,
    2 x intermediate a token; Nemotron-H's relu2 experts have a w1 output of one intermediate width."""
    argv = "vllm serve m --max-model-len 8192 --max-num-seqs 4"
    t = 8192
    falcon = replace(LLAMA8B, architecture="FalconForCausalLM", model_type="falcon")
    _, p = run(argv, model=falcon, gpu=H100, version="0.11.0")
    assert p.memory.activation_peak == t * (4 * 4096 + 2 * 14336) * 2
    nem = replace(QWEN3_MOE, architecture="NemotronHForCausalLM", model_type="nemotron_h", moe_intermediate_size=1856,
                  num_experts_per_tok=6)
    _, n = run(argv, model=nem, gpu=H100, version="0.11.0")
    assert n.memory.activation_peak == t * 4 * 2048 * 2 + t * 6 * (max(1856, 2048) + 1856) * 2 + t * 128 * 2 * 2


def test_logged_activation_leaves_out_the_moe_workspace_from_0_26_1():
    """From 0.26.1 vLLM logs the transient torch peak (peak - allocated after the run): the MoE workspace
    the run keeps is consumed memory, not activation; 0.26.0 logs the whole increase. The budget, and so
    the KV cache, is the same. Eager, so no CUDA-graph estimate joins the logged figure."""
    t = 2048
    argv = "vllm serve m --max-model-len 8192 --max-num-seqs 4 --max-num-batched-tokens 2048 --enforce-eager"
    workspace = t * 8 * (2048 + 2048) * 2
    attention_half = t * (3 * 2048 + 2 * 4096 + 2 * 512) * 2  # eager: profile.EAGER_HIDDEN
    _, new = run(argv, model=QWEN3_MOE, gpu=H100, version="0.27.1")
    _, old = run(argv, model=QWEN3_MOE, gpu=H100, version="0.26.0")
    assert new.memory.activation_peak == old.memory.activation_peak == attention_half + workspace
    assert new.detail.logged_activation_bytes == attention_half
    assert old.detail.logged_activation_bytes == attention_half + workspace
    # what stays is in the consumed memory 0.27 logs (mem_utils.py total_consumed); 0.26.0 logs none
    assert new.detail.logged_consumed_bytes == new.memory.weights + new.memory.non_torch + workspace
    assert old.detail.logged_consumed_bytes == 0
    import servefit.engines.vllm.plan as plan_mod  # the budget does not move with the logged split

    with mock.patch.object(plan_mod, "held_after_profile", return_value=0):
        _, unsplit = run(argv, model=QWEN3_MOE, gpu=H100, version="0.27.1")
    assert unsplit.detail.logged_activation_bytes == attention_half + workspace
    assert unsplit.detail.available_kv_cache_bytes == new.detail.available_kv_cache_bytes
    # a quantized MoE runs other expert kernels (no workspace counted): nothing is held back
    _, dense = run(argv, model=LLAMA8B, gpu=H100, version="0.27.1")
    assert dense.detail.logged_activation_bytes == dense.memory.activation_peak


def test_attention_half_is_per_tensor_parallel_rank():
    """TP2 at 0.20: 16 query heads (2048) and 2 KV heads (256) a rank; the workspace's N = 2 x 384 stays
    below K, so it is still 2048 + 2048 per slot; the attention half tops the MLP half."""
    t = 8192
    _, p = run(FEW + " --tensor-parallel-size 2", model=QWEN3_MOE, gpu=H100, count=2, version="0.20.0")
    workspace = t * 8 * (2048 + 2048) * 2
    mlp_half = t * 4 * 2048 * 2 + workspace + t * 128 * 2 * 2
    attention_half = t * (4 * 2048 + 2 * 2048 + 2 * 256) * 2 + workspace
    assert attention_half > mlp_half and p.memory.activation_peak == attention_half


def test_triton_topk_buffer_is_consumed_memory_from_0_26_1():
    """The V1 runner's dummy sampler (top-k = vocab - 1, top-p 0.9) runs vLLM's Triton top-k/top-p where
    FlashInfer's sampler is not selected (VLLM_USE_FLASHINFER_SAMPLER=0, or compute capability below 8.0),
    and keeps its per-program buffer (topk_topp_triton.py::apply_top_k_top_p_triton): on an H100 (132 SMs)
    at 256 requests min(next_pow2(132), 132) = 132 rows x 128256 x 4 B = 67,719,168 B. From 0.26.1 vLLM
    logs it in consumed memory, not peak activation (the transient peak less what stays: the forward of
    8192 tokens sets the peak here, 1,970,012,160 B as the activation tests price it); the budget does not
    move. Eager: no graph estimate."""
    argv = "vllm serve m --max-model-len 8192 --enforce-eager"
    v1_runner = {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    buffer = 132 * 128256 * 4
    _, native = run(argv, gpu=H100, env={**v1_runner, "VLLM_USE_FLASHINFER_SAMPLER": "0"}, version="0.27.1")
    _, fi = run(argv, gpu=H100, env=v1_runner, version="0.27.1")
    assert native.detail.logged_activation_bytes == native.memory.activation_peak - buffer == 1_902_292_992
    assert native.detail.logged_consumed_bytes == native.memory.weights + native.memory.non_torch + buffer
    assert native.detail.available_kv_cache_bytes == fi.detail.available_kv_cache_bytes
    # FlashInfer samples by default on an H100 (8.0 <= 9.0 <= 12.1): nothing kept
    assert fi.detail.logged_activation_bytes == fi.memory.activation_peak
    assert fi.detail.logged_consumed_bytes == fi.memory.weights + fi.memory.non_torch
    # fewer than 8 requests take the PyTorch path in 0.27 (apply_top_k_top_p); from 0.30 the Triton one,
    # 4 rows here
    off = {**v1_runner, "VLLM_USE_FLASHINFER_SAMPLER": "0"}
    _, few = run(argv + " --max-num-seqs 4", gpu=H100, env=off, version="0.27.1")
    assert few.detail.logged_activation_bytes == few.memory.activation_peak
    _, few30 = run(argv + " --max-num-seqs 4", gpu=H100, env=off, version="0.30.0")
    assert few30.memory.activation_peak - few30.detail.logged_activation_bytes == 4 * 128256 * 4
    # Model Runner V2 samples its dummy batch greedily up to 0.32; 0.33's warm-up pass (temperature 0.9,
    # top-k 50, top-p 0.9) takes the fused sampler, FlashInfer's where the V1 runner's would
    # (v1/worker/gpu/sample/sampler.py::Sampler._sample_random), the Triton kernel where FlashInfer is off;
    # 0.26.0 logs no split
    _, v2 = run(argv, gpu=H100, env={"VLLM_USE_FLASHINFER_SAMPLER": "0"}, version="0.27.1")
    assert v2.detail.logged_activation_bytes == v2.memory.activation_peak
    _, v2_33 = run(argv, gpu=H100, version="0.33.0")
    assert v2_33.memory.activation_peak == v2_33.detail.logged_activation_bytes
    _, v2_33_off = run(argv, gpu=H100, env={"VLLM_USE_FLASHINFER_SAMPLER": "0"}, version="0.33.0")
    assert v2_33_off.memory.activation_peak - v2_33_off.detail.logged_activation_bytes == buffer
    _, old = run(argv, gpu=H100, env=off, version="0.26.0")
    assert old.detail.logged_activation_bytes == old.memory.activation_peak and old.detail.logged_consumed_bytes == 0


def test_triton_topk_buffer_rows_stop_at_the_sm_count():
    """A T4 (7.5: below FlashInfer's 8.0 floor, so the Triton path by default) has 40 SMs: 256 requests give
    min(next_pow2(40), 40) = 40 rows; 20 requests give min(next_pow2(20), 40) = 32 rows."""
    from servefit.engines.vllm.profile import triton_topk_buffer

    _, p = run("vllm serve m --max-model-len 4096 --dtype half --enforce-eager", gpu=T4,
               env={"VLLM_USE_V2_MODEL_RUNNER": "0"}, version="0.30.0")
    assert p.memory.activation_peak - p.detail.logged_activation_bytes == 40 * 128256 * 4
    from types import SimpleNamespace

    r = SimpleNamespace(version=(0, 30, 0), max_num_seqs=20, max_num_batched_tokens=2048)
    assert triton_topk_buffer(LLAMA8B, r, T4, None, False, True) == 32 * 128256 * 4
    assert triton_topk_buffer(LLAMA8B, r, T4, None, False, False) == 0  # a rank that does not sample


def test_v0_eager_forward_holds_three_hidden_tensors():
    """V0 runs the model eagerly (profile.py EAGER_HIDDEN, read in the 0.6.4.post1 wheel's models/llama.py): at
    SiluAndMul the loop's reference to the layer's input, the residual and the MLP's input beside gate_up's and
    the activation's outputs. vLLM issue #10517's 0.6.4 logs of Llama-3.1-8B (peak_torch_memory 17.06 / 17.98
    GiB at 20,000 / 29,000 batched tokens, weights 14.99 GiB: no chunked prefill below 32K) rise by 109,760 B a
    token: 3 x 4096 x 2 + 3 x 14336 x 2 = 110,592. V1 compiles the layers and keeps four, unless eager."""
    for tokens in (20000, 29000):
        _, p = run(f"vllm serve m --max-model-len {tokens}", version="0.6.4")
        assert p.memory.activation_peak == tokens * (3 * 4096 + 3 * 14336) * 2 == tokens * 110_592
    # the same forward on V1 (8192 batched tokens on a card of 70 GiB and more, 4 requests: the forward is the peak)
    _, p = run("vllm serve m --max-model-len 8192 --max-num-seqs 4", gpu=H100, version="0.11.0")
    assert p.memory.activation_peak == 8192 * (4 * 4096 + 3 * 14336) * 2
    # V1 does not compile with --enforce-eager or compilation level 0 (0.11.0 config/__init__.py: NO_COMPILATION)
    for flag in ("--enforce-eager", "--compilation-config 0"):
        _, p = run("vllm serve m --max-model-len 8192 --max-num-seqs 4 " + flag, gpu=H100, version="0.11.0")
        assert p.memory.activation_peak == 8192 * (3 * 4096 + 3 * 14336) * 2, flag


def test_attention_half_counts_the_same_hidden_width_tensors():
    """The attention half (forward.py attention_stage_bytes) holds as many hidden-width tensors as the MLP
    half: three in V0's eager forward (the layer's input, the residual, o_proj's output), four compiled,
    beside qkv (q + 2 kv) and the attention output (q): Llama-3.1-8B, 32 x 128 q, 8 x 128 kv."""
    from servefit.engines.vllm.forward import attention_stage_bytes
    from servefit.engines.vllm.plan import Resolved

    r = Resolved(dtype="bfloat16", tp=1, pp=1, util=0.9, max_model_len=8192, derived_len=8192, max_num_seqs=256,
                 max_num_batched_tokens=8192, chunked_prefill=False, block_size=16, kv_dtype="bfloat16", scheme=None,
                 enforce_eager=False, version=(0, 6, 4))
    assert attention_stage_bytes(LLAMA8B, r, 1000, 2, 3) == 1000 * (3 * 4096 + 2 * 4096 + 2 * 1024) * 2
    assert attention_stage_bytes(LLAMA8B, r, 1000, 2) == 1000 * (4 * 4096 + 2 * 4096 + 2 * 1024) * 2


def test_flashinfer_sampler_needs_more_than_16_sms_from_0_31():
    """From 0.31 flashinfer_sampler_supported refuses a card of 16 SMs or fewer (v1/sample/ops/
    topk_topp_sampler.py: "top-k masking requires more than 16 SMs"): an A2 (8.6, 10 SMs) takes the
    Triton path there, min(next_pow2(10), 10) = 10 rows x 128256 x 4 B kept; 0.30 samples with FlashInfer."""
    from types import SimpleNamespace

    from servefit.engines.vllm.profile import triton_topk_buffer
    from servefit.hardware.catalog import resolve_gpu

    a2 = resolve_gpu("A2")
    assert a2 is not None and a2.compute_capability == 86
    for version, want in (((0, 30, 0), 0), ((0, 31, 0), 10 * 128256 * 4), ((0, 33, 0), 10 * 128256 * 4)):
        r = SimpleNamespace(version=version, max_num_seqs=256, max_num_batched_tokens=2048)
        assert triton_topk_buffer(LLAMA8B, r, a2, None, False, True) == want
    # Model Runner V2 from 0.33 (its warm-up pass) the same; before, its greedy dummy batch samples no top-k
    assert triton_topk_buffer(LLAMA8B, SimpleNamespace(version=(0, 33, 0), max_num_seqs=256, max_num_batched_tokens=2048),
                              a2, None, True, True) == 10 * 128256 * 4
    assert triton_topk_buffer(LLAMA8B, SimpleNamespace(version=(0, 32, 0), max_num_seqs=256, max_num_batched_tokens=2048),
                              a2, None, True, True) == 0
