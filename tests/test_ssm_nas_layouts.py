"""Layouts of issue 13's fourth round: pure state-space models (Mamba, Falcon-Mamba: vLLM
mamba.py; Mamba2 / Mamba-Codestral: mamba2.py), Jamba (jamba.py: Mamba1 mixers, attention and
MoE) and DeciLM (Llama-Nemotron Super / Ultra: nemotron_nas.py, per-layer block_configs). Each is
checked against a parameter count and a KV / state size written out by hand."""

from __future__ import annotations

import pytest

from servefit.budget import BadValue
from servefit.core import UsageError
from servefit.engines.vllm.era import era
from servefit.engines.vllm.kvcache import capacity, layer_kinds, layout, mamba_page_bytes
from servefit.models import count_params, resolve_model
from servefit.models.config_json import from_config
from servefit.pipeline import Target, evaluate, site_from_argv


def mamba1(h: int, d: int, state: int = 16, kernel: int = 4, bc_norms: bool = False) -> int:
    """One Mamba1 mixer (vLLM mamba_mixer.py MambaMixer), bias-free in / out projections."""
    rank = -(-h // 16)
    n = (h * 2 * d  # in_proj
         + d * kernel + d  # conv1d with bias
         + d * (rank + 2 * state)  # x_proj
         + rank * d + d  # dt_proj with bias
         + d * state + d  # A_log, D
         + d * h)  # out_proj
    return n + (rank + 2 * state if bc_norms else 0)


def plan(*argv: str, version: str = "0.33.0", gpu: str = "L4"):
    return evaluate(site_from_argv(list(argv)), Target(gpu=gpu, engine_version=version)).plan


# --- Mamba / Falcon-Mamba / Mamba2 ---------------------------------------------------------------

def test_mamba_130m_by_hand():
    h, v = 768, 50280
    total = v * h + 24 * (h + mamba1(h, 2 * h)) + h  # tied embeddings, one RMSNorm a layer, norm_f
    m = resolve_model("state-spaces/mamba-130m-hf")
    assert count_params(m) == total == m.params == 129_135_360


def test_falcon_mamba_unties_its_head_and_has_weightless_bc_norms():
    h, v = 4096, 65024
    total = 2 * v * h + 64 * (h + mamba1(h, 8192)) + h
    assert resolve_model("tiiuae/falcon-mamba-7b").params == total == 7_272_665_088


def test_mamba_state_page_by_hand():
    m = resolve_model("state-spaces/mamba-2.8b-hf")
    d = 5120  # conv state (kernel - 1) x d_inner, ssm state d_inner x 16, bf16
    assert mamba_page_bytes(m, 1, 2, 2, 0) == 3 * d * 2 + d * 16 * 2 == 194_560
    assert mamba_page_bytes(m, 2, 2, 4, 0) == 3 * (d // 2) * 2 + (d // 2) * 16 * 4


def test_vllm_plans_a_pure_mamba_pool_of_state_pages():
    p = plan("vllm", "serve", "state-spaces/mamba-2.8b-hf")
    assert p.kv_bytes_per_token == 0 and p.outcome == "started"
    per_request = 64 * 194_560  # one state block per layer ("none" mode: no prefix caching for attention-free)
    blocks = p.detail.num_gpu_blocks
    assert blocks == p.detail.available_kv_cache_bytes // per_request
    conc = blocks / 1
    assert f"Maximum concurrency for 2,048 tokens per request: {conc:.2f}x" in " ".join(p.messages)
    assert not any("not counted in the KV cache" in a for a in p.assumptions)


def test_pure_mamba_layout_is_one_page_per_layer():
    m = resolve_model("mistralai/Mamba-Codestral-7B-v0.1")
    page = mamba_page_bytes(m, 1, 2, 2, 0)
    # Mamba2: conv (8192 + 2 x 8 x 128) x 3, ssm 128 heads x 64 x 128
    assert page == (8192 + 2048) * 3 * 2 + 128 * 64 * 128 * 2
    e = era("0.33.0")
    lay = layout(m, layer_kinds(m, True, False, 1), 2, 1, 16, e, page)
    assert lay.bytes_per_block == 64 * page and lay.blocks_per_request(2048, 8192) == 1
    tokens, conc = capacity(lay, 40, 2048, 8192, e)
    assert (tokens, conc) == (40 * 2048, 40.0)


def test_before_the_hybrid_manager_a_pure_mamba_keeps_no_kv_pool():
    p = plan("vllm", "serve", "state-spaces/mamba-2.8b-hf", version="0.8.5")
    assert p.outcome == "started" and p.memory.kv_cache == 0
    assert not any(f.code in ("VLLM004", "VLLM019") for f in p.findings)
    assert any("recurrent state is not sized" in m for m in p.messages)


def test_mamba_has_no_heads_to_split():
    p = plan("vllm", "serve", "tiiuae/falcon-mamba-7b", "--tensor-parallel-size", "4", gpu="H100")
    assert not any(f.code == "VLLM007" for f in p.findings)


@pytest.mark.parametrize("argv", [["python", "-m", "sglang.launch_server", "--model-path"],
                                  ["text-generation-launcher", "--model-id"]])
def test_engines_without_a_pure_mamba_model_say_so(argv):
    with pytest.raises(UsageError, match="state-space model"):
        plan(*argv, "state-spaces/mamba-130m-hf")


# --- Jamba --------------------------------------------------------------------------------------

def test_jamba_by_hand():
    h, v, inter, e = 4096, 65536, 14336, 16
    attn = 2 * h * 4096 + 2 * h * 8 * 128  # q, o; k, v (8 KV heads)
    total = 2 * v * h + h
    for i in range(32):
        total += 2 * h + (attn if i % 8 == 4 else mamba1(h, 8192, bc_norms=True))
        total += e * 3 * h * inter + h * e if i % 2 == 1 else 3 * h * inter
    m = resolve_model("ai21labs/AI21-Jamba-1.5-Mini")
    assert count_params(m) == total == m.params == 51_570_323_328


def test_jamba_kv_bytes_and_state_by_hand():
    p = plan("vllm", "serve", "ai21labs/Jamba-v0.1", "--tensor-parallel-size", "4", gpu="H100")
    assert p.kv_bytes_per_token == 4 * 2 * 2 * 128 * 2  # 4 attention layers, K and V, 8/4 heads, bf16
    m = resolve_model("ai21labs/Jamba-v0.1")
    assert mamba_page_bytes(m, 4, 2, 2, 0) == 2048 * 3 * 2 + 2048 * 16 * 2


# --- DeciLM (Llama-Nemotron NAS) ----------------------------------------------------------------

def ffn(mult: float, h: int) -> int:
    n = int(2 * mult * h / 3)
    return n if n % 256 == 0 else n + 256 - n % 256


def test_nemotron_super_49b_by_hand():
    m = resolve_model("nvidia/Llama-3_3-Nemotron-Super-49B-v1")
    h = 8192
    attn = 2 * h * 8192 + 2 * h * 8 * 128 + h  # q, o, k, v, input_layernorm
    total = 2 * 128256 * h + h
    for kind, mult in zip(m.kinds(), m.layout["ffn_mult"], strict=True):
        total += attn if kind == "full" else 0
        total += 3 * h * ffn(mult, h) + h if mult else 0
    assert m.kinds().count("full") == 49
    assert count_params(m) == total == m.params == 49_867_145_216


def test_nemotron_super_kv_counts_only_its_attention_layers():
    p = plan("vllm", "serve", "nvidia/Llama-3_3-Nemotron-Super-49B-v1", "--tensor-parallel-size", "4", gpu="H100")
    assert p.kv_bytes_per_token == 49 * 2 * 2 * 128 * 2  # 49 attention layers, 8 KV heads over TP4, bf16


def test_nemotron_ultra_skips_whole_blocks():
    m = resolve_model("nvidia/Llama-3_1-Nemotron-Ultra-253B-v1")
    assert m.kinds().count("full") == 64 and m.layout["ffn_mult"].count(0) == 81
    assert m.params == count_params(m) == 253_401_268_224


def decilm_config(blocks: list[dict]) -> dict:
    return {"architectures": ["DeciLMForCausalLM"], "model_type": "nemotron-nas", "hidden_size": 1024,
            "num_hidden_layers": len(blocks), "num_attention_heads": 8, "num_key_value_heads": None,
            "vocab_size": 1000, "max_position_embeddings": 4096, "block_configs": blocks}


def test_decilm_config_json_reads_block_configs():
    blocks = [{"attention": {"n_heads_in_group": 4, "no_op": False}, "ffn": {"ffn_mult": 1.5, "no_op": False}},
              {"attention": {"n_heads_in_group": None, "no_op": True}, "ffn": {"ffn_mult": 1.0}},
              {"attention": {"n_heads_in_group": 4}, "ffn": {"no_op": True}}]
    m = from_config(decilm_config(blocks), "x")
    assert m.kinds() == ["full", "none", "full"] and m.num_key_value_heads == 2
    h, hd = 1024, 128
    attn = 2 * h * 8 * hd + 2 * h * 2 * hd + h
    assert ffn(1.5, h) == 1024 and ffn(1.0, h) == 768  # 682 rounds up to 768
    assert m.params == 2 * 1000 * h + h + 2 * attn + (3 * h * 1024 + h) + (3 * h * 768 + h)


def test_decilm_config_json_rejects_a_bad_ffn_mult():
    blocks = [{"attention": {"n_heads_in_group": 4}, "ffn": {"ffn_mult": "wide"}}]
    with pytest.raises(BadValue, match=r"block_configs\[0\]\.ffn\.ffn_mult"):
        from_config(decilm_config(blocks), "x")


MAMBA_CONFIGS = {
    "state-spaces/mamba-130m-hf": {"architectures": ["MambaForCausalLM"], "model_type": "mamba", "hidden_size": 768,
                                   "num_hidden_layers": 24, "vocab_size": 50280, "state_size": 16, "expand": 2,
                                   "conv_kernel": 4, "intermediate_size": 1536, "time_step_rank": 48},
    "mistralai/Mamba-Codestral-7B-v0.1": {"architectures": ["Mamba2ForCausalLM"], "model_type": "mamba2",
                                          "hidden_size": 4096, "num_hidden_layers": 64, "vocab_size": 32768,
                                          "num_heads": 128, "head_dim": 64, "n_groups": 8, "state_size": 128,
                                          "conv_kernel": 4, "expand": 2, "tie_word_embeddings": False},
    "ai21labs/Jamba-v0.1": {"architectures": ["JambaForCausalLM"], "model_type": "jamba", "hidden_size": 4096,
                            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                            "intermediate_size": 14336, "vocab_size": 65536, "num_experts": 16,
                            "num_experts_per_tok": 2, "expert_layer_period": 2, "expert_layer_offset": 1,
                            "attn_layer_period": 8, "attn_layer_offset": 4, "mamba_d_state": 16, "mamba_d_conv": 4,
                            "mamba_expand": 2, "mamba_dt_rank": 256, "tie_word_embeddings": False},
}


@pytest.mark.parametrize("name", sorted(MAMBA_CONFIGS))
def test_ssm_config_json_counts_and_states_match_the_catalog(name):
    got, want = from_config(MAMBA_CONFIGS[name], name), resolve_model(name)
    assert (got.params, got.kinds(), got.mamba["ssm_state_elems"], got.mamba["conv_state_elems"]) == (
        want.params, want.kinds(), want.mamba["ssm_state_elems"], want.mamba["conv_state_elems"])
