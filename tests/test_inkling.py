"""Inkling (models/arch_inkling.py): the layout counted by hand from transformers 5.24.0 modeling_inkling.py
and SGLang 0.5.23 inkling_common/hmlp.py, against the Hub totals the catalog notes quote; SGLang's hybrid
pools and short-convolution state pool (engines/sglang/state_pool.py); the engines that are not modelled."""

from __future__ import annotations

import pytest

from servefit.core import UsageError
from servefit.memory.params import param_groups
from servefit.models import catalog, count_params
from servefit.models.arch_inkling import (
    conv_state_bytes,
    count_vision,
    hmlp_scales,
    layer_attention,
    layer_mlp,
    mtp_params,
)
from servefit.models.config_json import from_config
from servefit.pipeline import Target, evaluate, site_from_argv

SMALL, BIG = "thinkingmachines/Inkling-Small", "thinkingmachines/Inkling"
# Inkling-Small, one global layer: q / o 4096 x 32 x 128 each, k / v 4096 x 8 x 128 each, r_proj 4096 x 32 x 16,
# k / v sconv 2 x 1024 x 4, q / k norms 2 x 128, relative bank 16 x 1024; a sliding layer has the same heads and
# a 16 x 512 bank
SMALL_GLOBAL = 2 * 16777216 + 2 * 4194304 + 2097152 + 8192 + 256 + 16384
SMALL_LOCAL = SMALL_GLOBAL - 16 * 512
# a routed layer: 256 experts of 3 x 4096 x 2048, router 258 x 4096 + global scale + 256 biases, two shared experts
SMALL_MOE = (256 * 25165824, 258 * 4096 + 1 + 256 + 2 * 25165824)
SMALL_DENSE = 3 * 4096 * 16384 + 1


def test_layer_terms_by_hand():
    m = catalog.lookup(SMALL)
    assert (layer_attention(m, "full"), layer_attention(m, "sliding")) == (SMALL_GLOBAL, SMALL_LOCAL)
    assert layer_mlp(m, 0) == (0, SMALL_DENSE) and layer_mlp(m, 2) == SMALL_MOE
    big = catalog.lookup(BIG)  # global 64 / 8 heads, sliding 64 / 16
    assert layer_attention(big, "sliding") - layer_attention(big, "full") == 2 * 6144 * 8 * 128 + 2 * 8 * 128 * 4 \
        - 16 * 512


def test_text_model_reproduces_the_hub_counts():
    m = catalog.lookup(SMALL)
    per_layer_rest = 2 * 4096 + 2 * 4096 * 4  # two norms, the attention / MLP stream sconvs
    text = (2 * 201024 * 4096 + 2 * 4096 + 7 * SMALL_GLOBAL + 35 * SMALL_LOCAL + 2 * SMALL_DENSE
            + 40 * sum(SMALL_MOE) + 42 * per_layer_rest + 80 * 16 * 4096 + 4096)
    assert text + m.vision_params == count_params(m) == m.params == 263724526634  # mlx-community ...-mlx-2bit
    assert count_params(m) + mtp_params(m) == 265956439090  # thinkingmachines/Inkling-Small
    big = catalog.lookup(BIG)
    assert count_params(big) - big.vision_params - 80 * 16 * 6144 - 6144 == 947025564226  # ...-NVFP4-mlx-4bit
    assert count_params(big) == big.params == 947117177922 and count_params(big) + mtp_params(big) == 952377623626
    assert param_groups(m).total == count_params(m)


def test_hmlp_tower_by_hand():
    assert hmlp_scales(2, 40, 4) == [(1, 1, 1, 3), (1, 5, 5, 128), (1, 10, 10, 320), (1, 40, 40, 4800), (2, 40, 40, 9600)]
    v = {"model_type": "inkling_vision", "patch_size": 40, "temporal_patch_size": 2, "num_hidden_layers": 4}
    by_hand = (75 * 128 + 128) + (512 * 320 + 320) + (5120 * 4800 + 4800) + 9600 * 4096 + 4096
    assert count_vision(v, 4096) == by_hand == 64080384
    # fewer layers than scales: the cheapest one-to-one assignment (16 = 2^4: five scales, two layers)
    assert hmlp_scales(1, 16, 2) == [(1, 1, 1, 3), (1, 4, 4, 64), (1, 16, 16, 768)]
    # four layers over five scales: every scale once (a nearest-scale pick would repeat the last one)
    assert hmlp_scales(1, 16, 4) == [(1, 1, 1, 3), (1, 2, 2, 64), (1, 4, 4, 64), (1, 8, 8, 192), (1, 16, 16, 768)]


def test_config_json_gives_the_catalogs_count():
    text = {"model_max_length": 1048576, "hidden_size": 4096, "num_hidden_layers": 42, "vocab_size": 201024,
            "unpadded_vocab_size": 200058, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
            "swa_num_attention_heads": 32, "swa_num_key_value_heads": 8, "swa_head_dim": 128, "d_rel": 16,
            "rel_extent": 1024, "sconv_kernel_size": 4, "sliding_window_size": 512,
            "local_layer_ids": [i for i in range(42) if (i + 1) % 6], "dense_mlp_idx": 2,
            "dense_intermediate_size": 16384, "intermediate_size": 2048, "n_routed_experts": 256,
            "num_experts_per_tok": 6, "n_shared_experts": 2}
    cfg = {"architectures": ["InklingForConditionalGeneration"], "model_type": "inkling_mm_model", "text_config": text,
           "vision_config": {"patch_size": 40, "temporal_patch_size": 2, "n_layers": 4, "use_vision_norm": True},
           "audio_config": {"n_mel_bins": 80, "mel_vocab_size": 16},
           "mtp_config": {"num_nextn_predict_layers": 8, "local_layer_ids": [0, 2, 4, 5, 6, 7]}}
    s = from_config(cfg, name="local/inkling-small")
    assert (s.params, s.max_position_embeddings, s.kinds().count("full")) == (263724526634, 1048576, 7)
    assert mtp_params(s) == 2231912456


def test_conv_state_per_request_follows_sglangs_shape():
    # (kernel - 1) rows of: full KV width twice, sliding KV width twice, the hidden stream twice; bf16; every layer
    assert conv_state_bytes(catalog.lookup(BIG), 1) == 3 * (2 * 1024 + 2 * 2048 + 2 * 6144) * 2 * 66 == 7299072
    assert conv_state_bytes(catalog.lookup(SMALL), 8) == 3 * (2 * 128 + 2 * 128 + 2 * 4096) * 2 * 42 == 2193408


SGL = ["python", "-m", "sglang.launch_server", "--model-path", SMALL, "--tp", "8", "--context-length", "131072"]


def _plan(extra=()):
    return evaluate(site_from_argv(SGL + list(extra)), Target(gpu="H200", gpus=8, engine_version="0.5.23")).plan


def test_sglang_hybrid_pools_and_state_pool():
    p = _plan()
    # TP 8: one KV head of 128 (+128) a layer on both kinds: 7 global and 35 sliding layers
    assert p.kv_bytes_per_token == 42 * 512 == 21504
    x = p.detail
    state = p.memory.kv_cache - int(p.kv_cache_tokens * (7 * 512 + 0.1 * 35 * 512))  # swa_full_tokens_ratio 0.1
    slots = state // 2193408 - 1
    assert state % 2193408 == 0 and x.max_running_requests == slots // 5  # 3 + two extra-buffer tracking slots
    assert x.swa_max_total_num_tokens == int(p.kv_cache_tokens * 0.1)
    rest = p.memory.kv_cache  # state pool + KV pool: what was left after the weights, to under one cell
    assert abs(state - rest * 0.1 / 1.1) < 2193408 + 7 * 512 + 3.5 * 512
    assert any(m.startswith(f"Mamba Cache is allocated. max_mamba_cache_size: {slots}, ") for m in p.messages)


def test_sglang_prices_each_layer_kind_with_its_own_kv_heads():
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "thinkingmachines/Inkling-NVFP4", "--tp", "8"]
    p = evaluate(site_from_argv(argv), Target(gpu="B200", gpus=8, engine_version="0.5.23")).plan
    assert p.kv_bytes_per_token == 11 * 1 * 256 * 2 + 55 * 2 * 256 * 2  # 8 / 8 global, 16 / 8 sliding KV heads


def test_sglang_flags_that_move_the_pools():
    base, lazy = _plan(), _plan(["--disable-overlap-schedule"])
    slots = (base.memory.kv_cache - int(base.kv_cache_tokens * (7 * 512 + 0.1 * 35 * 512))) // 2193408 - 1
    assert lazy.detail.max_running_requests == slots // 4  # one tracking slot without the overlap schedule
    half = _plan(["--swa-full-tokens-ratio", "0.5"])
    assert half.detail.swa_max_total_num_tokens == int(half.kv_cache_tokens * 0.5)
    assert half.kv_cache_tokens < base.kv_cache_tokens
    more = _plan(["--mamba-full-memory-ratio", "0.5"])
    assert more.kv_cache_tokens < base.kv_cache_tokens


@pytest.mark.parametrize("argv,engine", [
    (["vllm", "serve", "thinkingmachines/Inkling-Small-NVFP4", "--tensor-parallel-size", "8"], "vLLM"),
    (["text-generation-launcher", "--model-id", SMALL, "--num-shard", "8"], "TGI"),
    (["llama-server", "-hf", "unsloth/Inkling-Small-GGUF:Q4_K_M"], "llama.cpp"),
])
def test_engines_not_modelled_say_so_in_one_line(argv, engine):
    with pytest.raises(UsageError, match=f"^servefit does not model how {engine} serves {SMALL} .*SGLang is modelled"):
        evaluate(site_from_argv(argv), Target(gpu="H200", gpus=8))
