"""Kimi-Linear-48B-A3B (KDA linear attention + NoPE MLA, 256 experts): the catalog entry, the AWQ repack
the accuracy case serves, and vLLM's KDA state and hybrid block size by release, by hand."""

from __future__ import annotations

from dataclasses import replace

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
    blocks, block, state, _ = hybrid_state({}, m, "bfloat16", 2, (0, 11, 1), 16, 2)
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


def _resolved(scheme, version):
    from servefit.engines.vllm.plan import Resolved

    return Resolved(dtype="bfloat16", tp=2, pp=1, util=0.95, max_model_len=120000, derived_len=120000, max_num_seqs=8,
                    max_num_batched_tokens=64000, chunked_prefill=True, block_size=16, kv_dtype="auto", scheme=scheme,
                    enforce_eager=False, version=version)


def test_awq_experts_size_marlins_caches_for_every_batched_token():
    from servefit.engines.vllm.forward import marlin_moe_unchunked, mlp_bytes
    from servefit.memory.weights import scheme_for

    m = lookup(KIMI)
    assert m is not None
    awq = scheme_for({"quant_method": "awq", "bits": 4, "group_size": 128})
    gptq = scheme_for({"quant_method": "gptq", "bits": 4, "group_size": 128})
    t, h, inter = 64000, 2304, 1024 // 2  # the case's batch; 256 experts of 1024 at TP 2
    shared = t * h * 2  # the shared expert's output beside the routed intermediates
    router = t * 256 * 2 * 2
    # fused_marlin_moe (called by AWQMoEMethod.apply in 0.11.1): cache13 of t x 8 x max(2 x 512, 2304) and
    # cache2 of t x 8 x 512, for all 64000 tokens
    assert mlp_bytes(m, _resolved(awq, (0, 11, 1)), t, 2) == t * 8 * (h + inter) * 2 + router + shared
    # unquantized experts run fused_experts in chunks of VLLM_FUSED_MOE_CHUNK_SIZE (32768)
    assert mlp_bytes(m, _resolved(None, (0, 11, 1)), t, 2) == 32768 * 8 * (h + inter) * 2 + router + shared
    assert marlin_moe_unchunked(_resolved(gptq, (0, 19, 1))) and not marlin_moe_unchunked(_resolved(gptq, (0, 20, 0)))
    assert marlin_moe_unchunked(_resolved(awq, (0, 21, 0))) and not marlin_moe_unchunked(_resolved(awq, (0, 22, 0)))
    assert not marlin_moe_unchunked(_resolved(awq, (0, 8, 4)))  # earlier wheels not read
    # gptq.py hands a GPTQ MoE to moe_wna16 (chunked) on a GPU below gptq_marlin's capability; AWQ stays on Marlin
    old_card = replace(_resolved(gptq, (0, 11, 1)), marlin_cc=False)
    assert not marlin_moe_unchunked(old_card) and marlin_moe_unchunked(replace(old_card, scheme=awq))
    forced = scheme_for({"quant_method": "awq", "bits": 4, "group_size": 128}, "awq_marlin")  # --quantization awq_marlin
    assert forced is not None and forced.name == "awq_marlin" and marlin_moe_unchunked(_resolved(forced, (0, 11, 1)))
