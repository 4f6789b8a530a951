"""vLLM's DFlash drafter (engines/vllm/dflash.py), by hand: its weights (qwen3_dflash.py
DFlashQwen3ForCausalLM, embed_tokens / lm_head shared with the target) and its attention layers as a
KV-cache type of their own beside a hybrid Qwen3.6 target (kv_cache_utils.py
_get_kv_cache_groups_uniform_page_size), as the club-3090 logs show them."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import H100, run  # noqa: E402

from servefit.engines.vllm import dflash  # noqa: E402
from servefit.models.catalog import lookup  # noqa: E402

DRAFTER = dflash.DRAFTERS["z-lab/qwen3.6-27b-dflash"]
SPEC = ' --speculative-config {"method":"dflash","model":"z-lab/Qwen3.6-27B-DFlash","num_speculative_tokens":5}'
CMD = "vllm serve m --max-model-len 200000 -tp 2 --max-num-seqs 1 --enable-prefix-caching"


def test_drafter_weights_on_a_tp2_rank():
    qkv = 5120 * (32 // 2 + 2 * (8 // 2)) * 128  # QKVParallelLinear: 16 query + 2 x 4 KV heads per rank
    o = 32 * 128 * 5120 // 2
    mlp = 3 * 5120 * 17408 // 2
    norms = 2 * 5120 + 2 * 128  # input / post-attention RMSNorm, q / k norms
    fc = 5120 * 5 * 5120  # ReplicatedLinear over the 5 target layers' hidden states
    params = 5 * (qkv + o + mlp + norms) + fc + 2 * 5120  # hidden_norm, norm; no embed_tokens / lm_head
    assert params == 930_673_920
    assert dflash.weight_bytes(DRAFTER, 2, 2) == params * 2
    assert dflash.weight_bytes(DRAFTER, 1, 2) == (5 * (5120 * 48 * 128 + 4096 * 5120 + 3 * 5120 * 17408
                                                       + 2 * 5120 + 256) + fc + 2 * 5120) * 2


def test_drafter_kv_dtype_follows_the_cache_config_from_022():
    # 0.20: the drafter's Attention gets cache_config=None ("auto": the model dtype) whatever --kv-cache-dtype
    assert dflash.kv_bytes_per_token(DRAFTER, 2, 1, 2, (0, 20, 1)) == 2 * 4 * 128 * 2
    assert dflash.kv_bytes_per_token(DRAFTER, 2, 1, 2, (0, 22, 0)) == 2 * 4 * 128 * 1
    assert dflash.kv_bytes_per_token(DRAFTER, 16, 2, 2, (0, 22, 0)) == 2 * 1 * 128 * 2  # max(1, 8 // 16)


def test_drafter_is_named_only_for_dflash_from_020():
    assert dflash.drafter({"speculative_config": {"method": "dflash", "model": "z-lab/Qwen3.6-27B-DFlash"}},
                          (0, 20, 1)) == (DRAFTER, "")
    assert dflash.drafter({"speculative_config": {"method": "eagle", "model": "z-lab/Qwen3.6-27B-DFlash"}},
                          (0, 20, 1)) == (None, "")
    assert dflash.drafter({"speculative_config": {"method": "dflash", "model": "z-lab/Qwen3.6-27B-DFlash"}},
                          (0, 19, 1)) == (None, "")
    d, note = dflash.drafter({"speculative_config": {"method": "dflash", "model": "me/Other-DFlash"}}, (0, 22, 0))
    assert d is None and note == ("the DFlash drafter me/Other-DFlash is not in servefit's list; its weights "
                                  "and KV-cache layers are not counted")


def test_hybrid_target_and_drafter_pages_as_the_club3090_log_shows():
    model = lookup("Qwen/Qwen3.6-27B")
    _, base = run(CMD, model=model, gpu=H100, count=2, version="0.20.1")
    _, plan = run(CMD + SPEC, model=model, gpu=H100, count=2, version="0.20.1")
    # GatedDeltaNet page at TP2 with 5 speculative tokens: conv (2 x 16 x 128 + 48 x 128) / 2 x (3 + 5) in
    # bf16 + ssm 24 x 128 x 128 in fp32; the attention block is raised to 16 x cdiv(page, 16 x 2048)
    state = (2 * 16 * 128 + 48 * 128) // 2 * 8 * 2 + 24 * 128 * 128 * 4
    block = 16 * -(-state // (16 * 2048))
    assert plan.detail.block_size == block == 816
    # 48 state + 16 full + 5 drafter layers: group size 5 ("Add 2 padding layers", "Add 4 padding layers"),
    # 10 + 4 + 1 groups; the target alone pages 48 + 16 in groups of 16
    assert plan.detail.kv_groups == 15 and base.detail.kv_groups == 4
    page = block * 2 * 2 * 256 * 2  # 2 KV heads of 256 per rank, bf16 (the drafter's 4 x 128 is the same)
    assert plan.detail.num_gpu_blocks == plan.detail.available_kv_cache_bytes // (page * 5)
    # the drafter's 5 layers + fc load with the model
    assert plan.memory.weights - base.memory.weights == 930_673_920 * 2
    # a request of 200000 tokens: 5 attention groups of cdiv(200000, 816) blocks + 10 x (2 + 5) state blocks
    per_request = 5 * -(-200000 // 816) + 10 * 7
    assert plan.max_concurrency == plan.detail.num_gpu_blocks / per_request


def test_layer_types_are_read_from_025_and_a_mixed_drafter_needs_the_v2_runner():
    assert dflash.layer_kinds(DRAFTER, (0, 24, 0)) == [("draft", 0)] * 5  # no per-layer sliding window up to 0.24
    assert dflash.layer_kinds(DRAFTER, (0, 26, 0)) == [("sliding", 2048)] * 4 + [("draft", 0)]
    assert dflash.refusal(DRAFTER, (0, 24, 0), False) == ""
    assert "vLLM 0.25.1 refuses at start" in dflash.refusal(DRAFTER, (0, 25, 1), True)
    assert dflash.refusal(DRAFTER, (0, 26, 0), False) == (
        "this DFlash drafter mixes sliding and full attention layers: vLLM refuses it at start "
        "without the V2 model runner (set VLLM_USE_V2_MODEL_RUNNER=1)")
    assert dflash.refusal(DRAFTER, (0, 26, 0), True) == ""


def test_plan_says_when_the_release_refuses_the_drafter():
    model = lookup("Qwen/Qwen3.6-27B")
    _, plan = run(CMD + SPEC, model=model, gpu=H100, count=2, version="0.25.1")
    assert any("refuses at start" in a for a in plan.assumptions)
    _, ok = run(CMD + SPEC, model=model, gpu=H100, count=2, version="0.24.0")
    assert not any("DFlash" in a for a in ok.assumptions)


def test_target_forward_keeps_the_drafters_five_hidden_states():
    # gpu_model_runner.py::_get_eagle3_aux_layers_from_config: dflash_config.target_layer_ids (5 layers);
    # _maybe_add_hidden_state appends hidden_states + residual (tokens x 5120 bf16, whole on every TP rank)
    model = lookup("Qwen/Qwen3.6-27B")
    _, base = run(CMD + " --language-model-only", model=model, gpu=H100, count=2, version="0.20.1")
    _, plan = run(CMD + " --language-model-only" + SPEC, model=model, gpu=H100, count=2, version="0.20.1")
    tokens = plan.detail.max_num_batched_tokens
    assert plan.memory.activation_peak - base.memory.activation_peak == 5 * tokens * 5120 * 2
