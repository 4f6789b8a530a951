"""Kimi-Linear-48B-A3B (KDA linear attention + NoPE MLA, 256 experts): the catalog entry, the AWQ repack
the accuracy case serves, and vLLM's KDA state and hybrid block size by release, by hand."""

from __future__ import annotations

import pytest

from servefit.engines.vllm.kvcache import hybrid_alignment, hybrid_state
from servefit.memory.kv import full_kv_bytes_per_token
from servefit.models import count_params, resolve_model
from servefit.models.catalog import lookup

KIMI = "moonshotai/Kimi-Linear-48B-A3B-Instruct"


def test_entry_matches_the_checkpoint_count_and_layer_mix():
    m = lookup(KIMI)
    assert m is not None and count_params(m) == m.params == 49_122_681_728
    kinds = m.kinds()
    assert [i + 1 for i, k in enumerate(kinds) if k == "full"] == [4, 8, 12, 16, 20, 24, 27]  # 1-based in config.json
    assert kinds.count("linear") == 20 and m.max_position_embeddings == 1_048_576
    assert (m.kv_lora_rank, m.qk_rope_head_dim, m.num_experts, m.num_experts_per_tok) == (512, 64, 256, 8)
    assert resolve_model("moonshotai/Kimi-Linear-48B-A3B-Base").name == KIMI


def test_awq_repack_resolves_with_its_assumption_said():
    m = resolve_model("cyankiwi/Kimi-Linear-48B-A3B-Instruct-AWQ-4bit")
    assert (m.name, m.resolved_from, m.params) == (KIMI, "derivative", 49_122_681_728)
    assert m.quantization["quant_method"] == "awq" and m.quantization["bits"] == 4
    assert any("cyankiwi" in a and "AWQ 4-bit" in a for a in m.assumptions)


def test_kda_state_at_tp2_as_vllm_0_11_sizes_it():
    m = lookup(KIMI)
    assert m is not None
    # MLAAttentionSpec: one 512 + 64 latent per MLA layer, not split by TP
    assert full_kv_bytes_per_token(m, 2, 2) == 7 * 576 * 2
    # mamba_utils.py kda_state_shape (0.11.1): q, k, v conv windows of (kernel - 1) x 4096 / 2 in bf16,
    # the recurrent state 16 x 128 x 128 in float32 (kda_state_dtype)
    page = 3 * 3 * 2048 * 2 + 16 * 128 * 128 * 4
    blocks, block, state = hybrid_state({}, m, "bfloat16", 2, (0, 11, 1), 16, 2)
    assert state == page == 1_085_440
    # models/config.py HybridAttentionMambaModelConfig: an MLA page is raised in multiples of 64
    assert block == 64 * -(-page // (64 * 576 * 2)) == 960
    assert blocks == 1
    # speculative tokens do not lengthen the KDA conv window before 0.27.1; from then on they do
    spec = {"speculative_config": {"method": "ngram", "num_speculative_tokens": 2}}
    assert hybrid_state(spec, m, "bfloat16", 2, (0, 11, 1), 16, 2)[2] == page
    assert hybrid_state(spec, m, "bfloat16", 2, (0, 29, 0), 16, 2)[2] == 3 * 5 * 2048 * 2 + 16 * 128 * 128 * 4
    # --mamba-ssm-cache-dtype is not read for KDA before 0.30 (the recurrent state stays float32)
    bf16 = {"mamba_ssm_cache_dtype": "bfloat16"}
    assert hybrid_state(bf16, m, "bfloat16", 2, (0, 11, 1), 16, 2)[2] == page
    assert hybrid_state(bf16, m, "bfloat16", 2, (0, 30, 0), 16, 2)[2] == 3 * 3 * 2048 * 2 + 16 * 128 * 128 * 2


@pytest.mark.parametrize(("version", "env", "alignment"), [
    ((0, 11, 0), {}, 16),  # before the MLA rule
    ((0, 11, 1), {}, 64),
    ((0, 19, 1), {"VLLM_ATTENTION_BACKEND": "CUTLASS_MLA"}, 128),
    ((0, 24, 0), {}, 16),  # the backend's smallest kernel block: Triton MLA's MultipleOf(16)
    ((0, 27, 1), {}, 128),
])
def test_mla_hybrid_block_alignment_by_release(version, env, alignment):
    m = lookup(KIMI)
    assert m is not None
    assert hybrid_alignment(m, version, env) == alignment
    gqa = lookup("Qwen/Qwen3.6-35B-A3B")
    assert gqa is not None and hybrid_alignment(gqa, version, env) == 16
