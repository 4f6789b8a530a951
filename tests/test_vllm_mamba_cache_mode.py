"""Prefix caching and the Mamba cache mode of hybrid models by vLLM release (engines/vllm/mamba_cache.py),
from engine/arg_utils.py (the prefix-caching default), model_executor/models/config.py::MambaModelConfig
(the mode) and config/cache.py (the modes --mamba-cache-mode accepts), read in the 0.15.0 - 0.33.0 wheels."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import H100, codes, run  # noqa: E402

from servefit.engines.vllm.era import era  # noqa: E402
from servefit.engines.vllm.mamba_cache import all_mode_note, hybrid_prefix_caching, mamba_cache_mode  # noqa: E402
from servefit.models.catalog import lookup  # noqa: E402

NEMOTRON = "nvidia/NVIDIA-Nemotron-Nano-9B-v2"
QWEN36 = "Qwen/Qwen3.6-27B"
ON = {"enable_prefix_caching": True}


def test_prefix_caching_default_for_hybrids():
    assert not hybrid_prefix_caching({}, (0, 25, 1))
    assert not hybrid_prefix_caching({}, (0, 26, 0))  # supported, opt-in
    assert not hybrid_prefix_caching({}, (0, 27, 1))
    assert hybrid_prefix_caching({}, (0, 28, 0))
    assert hybrid_prefix_caching(ON, (0, 27, 1))
    assert not hybrid_prefix_caching({"enable_prefix_caching": False}, (0, 33, 0))


def test_mode_by_release_and_architecture():
    nem, qwen = lookup(NEMOTRON), lookup(QWEN36)
    assert mamba_cache_mode({}, nem, (0, 27, 1), False) == "none"
    assert mamba_cache_mode(ON, nem, (0, 14, 0), True) == "none"  # no mamba_cache_mode before 0.15
    assert mamba_cache_mode(ON, nem, (0, 15, 0), True) == "all"  # SupportsMambaPrefixCaching
    assert mamba_cache_mode(ON, nem, (0, 27, 1), True) == "all"
    assert mamba_cache_mode(ON, nem, (0, 28, 0), True) == "align"  # 0.28 picks align for everyone
    assert mamba_cache_mode({"mamba_cache_mode": "all"}, nem, (0, 31, 0), True) == "all"
    assert mamba_cache_mode({"mamba_cache_mode": "all"}, nem, (0, 32, 0), True) == "align"  # no "all" from 0.32
    assert mamba_cache_mode(ON, qwen, (0, 27, 1), True) == "align"  # Gated DeltaNet: no "all" support
    assert mamba_cache_mode({"mamba_cache_mode": "all"}, qwen, (0, 28, 0), True) == "align"  # falls back


def test_plan_says_when_it_plans_all_as_align():
    nem = lookup(NEMOTRON)
    cmd = "vllm serve nvidia/NVIDIA-Nemotron-Nano-9B-v2 --max-model-len 32768 --max-num-seqs 64"
    _, plan = run(cmd + " --enable-prefix-caching", model=nem, gpu=H100, version="0.27.1")
    assert any("'all' cache mode" in a for a in plan.assumptions)
    for extra, version in (("", "0.27.1"), (" --enable-prefix-caching", "0.28.0"),
                           (" --enable-prefix-caching --mamba-cache-mode align", "0.27.1")):
        _, plan = run(cmd + extra, model=nem, gpu=H100, version=version)
        assert not any("'all' cache mode" in a for a in plan.assumptions), (extra, version)
    assert all_mode_note({"mamba_cache_mode": "all"}, nem, (0, 30, 0)) is not None  # prefix caching on from 0.28
    assert all_mode_note({"mamba_cache_mode": "all"}, lookup(QWEN36), (0, 30, 0)) is None


# ---- the "all" mode planned exactly (platforms/interface.py::_align_hybrid_block_size and
# kv_cache_interface.py::MambaSpec.max_memory_usage_bytes, read in the 0.20.0 wheel) ----

NEM_H8 = "nvidia/Nemotron-H-8B-Base-8K"  # config.json chunk_size 128
GRANITE_TINY = "ibm-granite/granite-4.0-h-tiny"  # config.json mamba_chunk_size 256
# Nemotron-H-8B's Mamba2 state on one rank: conv (128 x 64 + 2 x 8 x 128) x 3 bf16 + ssm 128 x 64 x 128 fp32
NEM_PAGE = (128 * 64 + 2 * 8 * 128) * 3 * 2 + 128 * 64 * 128 * 4
NEM_ATTN_1 = 2 * 8 * 128 * 2  # K and V, 8 KV heads x 128, bf16: bytes per token of one attention layer


def test_catalog_records_the_chunk_sizes():
    from servefit.engines.vllm.mamba_cache import mamba_chunk_size

    assert mamba_chunk_size(lookup(NEM_H8)) == 128
    assert mamba_chunk_size(lookup(GRANITE_TINY)) == 256
    assert mamba_chunk_size(lookup("tiiuae/Falcon-H1-7B-Instruct")) == 128
    assert mamba_chunk_size(lookup("ai21labs/Jamba-v0.1")) == 2048  # Mamba1: get_mamba_chunk_size's fallback
    assert mamba_chunk_size(lookup(NEMOTRON)) is None  # Nano-9B-v2: not recorded


def test_config_json_chunk_size_is_read():
    from servefit.models.config_json import from_config

    cfg = {"architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid", "hidden_size": 512,
           "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 1024,
           "vocab_size": 1000, "layer_types": ["mamba", "mamba", "mamba", "attention"], "mamba_n_heads": 8,
           "mamba_d_head": 128, "mamba_d_state": 128, "mamba_n_groups": 1, "mamba_chunk_size": 256}
    assert from_config(cfg, "x/granite-h").mamba["chunk_size"] == 256
    nem = {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 512,
           "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 1024,
           "vocab_size": 1000, "hybrid_override_pattern": "M-M*", "mamba_num_heads": 8, "mamba_head_dim": 64,
           "ssm_state_size": 128, "n_groups": 1, "chunk_size": 128}
    assert from_config(nem, "x/nemotron-h").mamba["chunk_size"] == 128


def test_all_mode_nemotron_h_020_prefix_caching_exact():
    cmd = f"vllm serve {NEM_H8} --max-model-len 8192 --enable-prefix-caching"
    _, plan = run(cmd, model=lookup(NEM_H8), gpu=H100, version="0.20.0")
    d = plan.detail
    tokens_per_state = -(-NEM_PAGE // NEM_ATTN_1)
    assert (NEM_PAGE, tokens_per_state) == (4_255_744, 1039)
    # lcm(chunk 128, kernel max(16, --block-size 16)) = 128; 128 x cdiv(1039, 128)
    assert d.block_size == 128 * 9 == 1152
    # 4 attention and 24 Mamba layers: groups of 4 (24 >= 1.5 x 4), 1 attention + 6 Mamba groups
    assert d.kv_groups == 7
    assert d.num_gpu_blocks == d.available_kv_cache_bytes // (4 * 1152 * NEM_ATTN_1) == 3155
    # every group, Mamba included, holds cdiv(8192, 1152) = 8 blocks a request
    assert plan.max_concurrency == 3155 / (7 * 8)
    assert plan.kv_cache_tokens == 3155 // 7 * 1152  # 0.20.0: num_blocks // groups x the smallest block
    assert not any("'all' cache mode" in a for a in plan.assumptions)
    _, align = run(cmd + " --mamba-cache-mode align", model=lookup(NEM_H8), gpu=H100, version="0.20.0")
    assert align.detail.block_size == 16 * -(-NEM_PAGE // (16 * NEM_ATTN_1)) == 1040
    assert align.max_concurrency == align.detail.num_gpu_blocks / (8 + 6 * 2)


def test_all_mode_granite_4_h_020_prefix_caching_exact():
    cmd = f"vllm serve {GRANITE_TINY} --max-model-len 32768 --enable-prefix-caching"
    _, plan = run(cmd, model=lookup(GRANITE_TINY), gpu=H100, version="0.20.0")
    d = plan.detail
    page = (48 * 64 + 2 * 128) * 3 * 2 + 48 * 64 * 128 * 2  # bf16 conv and ssm state
    attn_1 = 2 * 4 * 128 * 2
    assert (page, -(-page // attn_1)) == (806_400, 394)
    assert d.block_size == 256 * 2 == 512  # lcm(256, 16) x cdiv(394, 256)
    assert d.kv_groups == 10  # 4 attention, 36 Mamba layers: 1 + 9 groups of 4
    assert d.num_gpu_blocks == d.available_kv_cache_bytes // (4 * 512 * attn_1) == 14719
    assert plan.max_concurrency == 14719 / (10 * 64)  # cdiv(32768, 512) = 64 blocks per group
    assert plan.kv_cache_tokens == 14719 // 10 * 512


def test_all_mode_block_by_release_and_block_size():
    from servefit.engines.vllm.kvcache import hybrid_state, layer_kinds, layout

    nem = lookup(NEM_H8)
    # up to 0.19 the kernel alignment is a fixed 16: a larger --block-size stays, the Mamba block is 1152
    assert hybrid_state(ON, nem, "bfloat16", 1, (0, 19, 0), 2048, 2) == (0, 2048, NEM_PAGE, 1152)
    # from 0.20 it is max(16, --block-size): lcm(128, 2048) x cdiv(1039, 2048)
    assert hybrid_state(ON, nem, "bfloat16", 1, (0, 20, 0), 2048, 2) == (0, 2048, NEM_PAGE, 2048)
    # --mamba-block-size replaces the chunk size: 256 x cdiv(1039, 256)
    assert hybrid_state({**ON, "mamba_block_size": 256}, nem, "bfloat16", 1, (0, 20, 0), 16, 2)[1] == 1280
    e = era("0.19.0")
    lay = layout(nem, layer_kinds(nem, True, False, 0, True), 2, 1, 2048, e, NEM_PAGE, 1152)
    # 1 attention group of cdiv(8192, 2048) = 4 blocks, 6 Mamba groups of cdiv(8192, 1152) = 8
    assert lay.blocks_per_request(8192, 8192) == 4 + 6 * 8


def test_all_mode_with_speculative_decoding():
    from servefit.engines.vllm.kvcache import hybrid_state

    nem = lookup(NEM_H8)
    spec = {**ON, "speculative_config": {"method": "ngram", "num_speculative_tokens": 3}}
    assert mamba_cache_mode(spec, nem, (0, 19, 0), True) == "all"
    assert mamba_cache_mode(spec, nem, (0, 20, 0), True) == "align"  # 0.20 - 0.21 pick align with spec decode
    assert mamba_cache_mode(spec, nem, (0, 21, 0), True) == "align"
    assert mamba_cache_mode(spec, nem, (0, 22, 0), True) == "all"
    assert mamba_cache_mode({**spec, "mamba_cache_mode": "all"}, nem, (0, 20, 0), True) == "all"
    # "all" adds num_speculative_blocks from 0.22, not before
    assert hybrid_state(spec, nem, "bfloat16", 1, (0, 22, 0), 16, 2)[0] == 3
    assert hybrid_state(spec, nem, "bfloat16", 1, (0, 19, 0), 16, 2)[0] == 0


def test_graph_capture_check_counts_all_mode_groups():
    # 0.20: a full-graph capture needs a Mamba block per decode sequence (outcome.py::mamba_blocks_short)
    cmd = f"vllm serve {NEM_H8} --max-model-len 8192 --enable-prefix-caching --gpu-memory-utilization 0.3"
    cfg, plan = run(cmd, model=lookup(NEM_H8), gpu=H100, version="0.20.0")
    assert plan.detail.num_gpu_blocks < 1024
    assert plan.outcome == "rejected_config"
    assert "VLLM025" in codes(cfg, plan)


def test_schema_types_the_chunk_size():
    import json

    import jsonschema

    schema = json.loads((Path(__file__).parent.parent / "src/servefit/schemas/models.schema.json").read_text())
    mamba = jsonschema.Draft202012Validator(schema["$defs"]["model"]["properties"]["mamba"])
    assert mamba.is_valid({"kind": "mamba2", "chunk_size": 128})
    assert not mamba.is_valid({"kind": "mamba2", "chunk_size": 0})
    assert not mamba.is_valid({"kind": "mamba2", "chunk_size": "128"})
