"""ZAYA1 (models/arch_zaya.py, engines/sglang/state_pool.py): the layout counted by hand from
transformers 5.24.0 modeling_zaya.py, SGLang 0.5.23's CCA state pool beside the KV pool
(kv_cache_configurator.py _handle_max_mamba_cache), and the engines that have no ZAYA model."""

from __future__ import annotations

import pytest

from servefit.core import EngineConfig, UsageError
from servefit.engines.sglang.state_pool import state_pool
from servefit.memory.params import param_groups
from servefit.models import catalog, count_params
from servefit.models.arch_zaya import cca_state_bytes, layer_attention, layer_router
from servefit.models.config_json import from_config
from servefit.pipeline import Target, evaluate, site_from_argv

GiB = 2**30
NAME = "Zyphra/ZAYA1-8B"
# one attention layer: q 2048 x 1024, k 2048 x 256, v current + delayed 2 x 2048 x 128, depthwise conv
# (1280 channels, kernel 2, bias) 3840, grouped conv (10 groups of 128, kernel 2, bias) 328960, 2 temperatures,
# o_proj 1024 x 2048
ATTN = 2097152 + 524288 + 524288 + 3840 + 328960 + 2 + 2097152
# router: down_proj 2048 x 256 + 256, RMSNorm 256, fc1 / fc2 256 x 256 + 256, out_proj 256 x 17, 17 stored
# balancing biases; every layer but the first adds router_states_scale (256)
ROUTER0 = 524288 + 256 + 256 + 2 * 65792 + 4352 + 17
# CCA state of one request, bf16: per layer (1280 / TP) x 2 conv padding + 2048 previous hidden state
STATE_TP1 = (1280 * 2 + 2048) * 2 * 40  # 368640
STATE_TP2 = (640 * 2 + 2048) * 2 * 40  # 266240


def zaya():
    return catalog.lookup(NAME)


def test_layer_terms_by_hand():
    m = zaya()
    assert layer_attention(m) == ATTN == 5575682
    assert (layer_router(m, 0), layer_router(m, 1)) == (ROUTER0, ROUTER0 + 256)


def test_total_reproduces_the_base_models_hub_count():
    # tied 262272 x 2048 embedding, final norm, input scale / bias, 40 x (attention, router, 16 experts of
    # 3 x 2048 x 2048, two norms, two residual scalings of 4 x 2048)
    m = zaya()
    by_hand = 262272 * 2048 + 3 * 2048 + 40 * (ATTN + ROUTER0 + 16 * 3 * 2048 * 2048 + 10 * 2048) + 39 * 256
    assert count_params(m) == by_hand == 8840489464 == catalog.lookup("Zyphra/ZAYA1-base").params
    assert param_groups(m).total == by_hand


def test_both_config_spellings_give_the_same_layout():
    hf = {"architectures": ["ZayaForCausalLM"], "model_type": "zaya", "hidden_size": 2048, "num_hidden_layers": 40,
          "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128, "moe_intermediate_size": 2048,
          "num_experts": 16, "num_experts_per_tok": 1, "vocab_size": 262272, "router_hidden_size": 256,
          "max_position_embeddings": 131072}
    zyphra = {"architectures": ["ZayaForCausalLM"], "model_type": "zaya", "hidden_size": 2048, "num_hidden_layers": 80,
              "zaya_layers": ["a", 16] * 40, "cca_num_q_heads": [8, 0] * 40, "num_query_groups": 2,
              "num_key_value_heads": 2, "num_attention_heads": 16, "kv_channels": 128, "ffn_hidden_size": 4096,
              "num_experts": 16, "zaya_mlp_expansion": [256, 0] * 40, "vocab_size": 262272,
              "max_position_embeddings": 32768}
    for c in (hf, zyphra):
        s = from_config(c, name="local/zaya")
        assert (s.num_hidden_layers, s.num_attention_heads, s.moe_intermediate_size, s.tie_word_embeddings) == \
            (40, 8, 2048, True)
        assert count_params(s) == 8840489464


def test_cca_state_per_request_follows_sglangs_shape():
    assert cca_state_bytes(zaya(), 1) == STATE_TP1
    assert cca_state_bytes(zaya(), 2) == STATE_TP2


def _cfg(**settings):
    return EngineConfig(engine="sglang", model_ref=NAME, settings=settings)


def test_state_pool_split_by_hand():
    rest = 10 * GiB
    p = state_pool(_cfg(), zaya(), 1, 1, 1, rest)
    slots = int((rest * 0.9 / 1.9 - STATE_TP1) // STATE_TP1)
    assert (p.per_req, p.slots, p.bytes, p.running_cap) == (STATE_TP1, slots, (slots + 1) * STATE_TP1, slots // 3)
    assert slots == 13796
    q = state_pool(_cfg(mamba_full_memory_ratio="0.1"), zaya(), 1, 1, 1, rest)
    assert q.slots == int((rest * 0.1 / 1.1 - STATE_TP1) // STATE_TP1) == 2646
    r = state_pool(_cfg(disable_radix_cache=True, max_running_requests=8), zaya(), 1, 1, 1, rest)
    assert (r.slots, r.running_cap, r.bytes) == (8, 8, 9 * STATE_TP1)
    assert state_pool(_cfg(), catalog.lookup("Qwen/Qwen3-8B"), 1, 1, 1, rest) is None


SGL = ["python", "-m", "sglang.launch_server", "--model-path", NAME, "--context-length", "32768"]


def _plan(extra=(), gpu="H100", gpus=1):
    return evaluate(site_from_argv(SGL + list(extra)), Target(gpu=gpu, gpus=gpus, engine_version="0.5.23")).plan


def test_sglang_plan_carves_the_state_pool_before_the_kv_pool():
    small, large = _plan(["--max-mamba-cache-size", "1000"]), _plan(["--max-mamba-cache-size", "2000"])
    assert small.kv_bytes_per_token == large.kv_bytes_per_token == 2 * 128 * 2 * 2 * 40  # 40960
    # 1000 more slots of 368640 bytes are 9 x 1000 tokens of 40960 bytes
    assert small.kv_cache_tokens - large.kv_cache_tokens == 9000
    assert small.memory.kv_cache - small.kv_cache_tokens * 40960 == 1001 * STATE_TP1
    assert small.detail.max_running_requests == 1000 // 3
    assert "Mamba Cache is allocated. max_mamba_cache_size: 1000, conv_state size: 0.34GB, ssm_state size: 0.00GB" \
        in small.messages


def test_default_split_gives_the_state_pool_nine_nineteenths():
    p = _plan()
    state = p.memory.kv_cache - p.kv_cache_tokens * 40960
    rest = state + p.kv_cache_tokens * 40960  # what was left after the weights, to under one token
    assert state % STATE_TP1 == 0 and abs(state - rest * 0.9 / 1.9) < STATE_TP1 + 40960
    assert any(a.startswith("the KV cache figure includes SGLang's per-request state pool") for a in p.assumptions)


def test_a_state_pool_of_no_slots_fails_as_sglang_does():
    p = _plan(["--max-mamba-cache-size", "0"])
    assert p.outcome == "oom_at_load"
    assert any(f.code == "SGL004" and "state cache. Computed max_mamba_cache_size=0" in f.message for f in p.findings)


@pytest.mark.parametrize("argv,engine", [
    (["vllm", "serve", NAME], "vLLM"),
    (["text-generation-launcher", "--model-id", NAME], "TGI"),
    (["llama-server", "-hf", "someone/ZAYA1-8B-GGUF:Q4_K_M"], "llama.cpp"),
])
def test_engines_without_a_zaya_model_say_so_in_one_line(argv, engine):
    with pytest.raises(UsageError, match=f"^servefit does not model how {engine} serves Zyphra/ZAYA1-8B .*SGLang is modelled") as e:
        evaluate(site_from_argv(argv), Target(gpu="H100", gpus=1))
    assert "\n" not in str(e.value)
