"""The forward and the closing step of vLLM's profiling run, by model kind: the fused-MoE intermediate
caches (model_executor/layers/fused_moe/fused_moe.py::fused_experts_impl, read in the 0.11.0 wheel)
and the pooler that replaces the dummy sampler for pooling models (v1/worker/gpu_model_runner.py::
profile_run). Every figure is computed by hand from the engine's shapes."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from servefit.models.spec import ModelSpec

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import H100, LLAMA8B, run  # noqa: E402

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
    """A 40960-token batch runs in one forward; the MoE caches hold 32768 of its tokens at a time."""
    _, p = run("vllm serve m --max-model-len 40960 --max-num-seqs 4 --max-num-batched-tokens 40960",
               model=QWEN3_MOE, gpu=H100, version="0.11.0")
    t, m = 40960, 32768
    assert p.memory.activation_peak == t * 4 * 2048 * 2 + m * 8 * (2048 + 768) * 2 + t * 128 * 2 * 2


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
    # --runner generate keeps the sampler
    _, forced = run("vllm serve m --max-model-len 8192 --runner generate", model=emb, version="0.11.0")
    assert forced.memory.activation_peak == 256 * 128256 * 39
