"""Gemma 4 (data/models/gemma4.yaml, models/arch_gemma4.py): parameter counts by hand, and the
KV pages vLLM sizes per layer kind (full layers: global_head_dim 512 and the global KV heads;
sliding layers: head_dim 256) - a single head_dim would double the full layers' cache."""

from __future__ import annotations

from servefit.engines.vllm.era import era
from servefit.engines.vllm.kvcache import Group, layout
from servefit.memory.kv import full_kv_bytes_per_token, kind_bytes_per_token
from servefit.models import catalog, count_params
from servefit.pipeline import Target, evaluate, site_from_argv

V = 262144


def g31():
    return catalog.lookup("google/gemma-4-31B-it")


def test_31b_text_and_vision_counts_by_hand():
    h, inter = 5376, 21504
    sliding = h * 32 * 256 + 2 * h * 16 * 256 + 32 * 256 * h + 2 * 256 + 3 * h * inter + 4 * h + 1
    full = h * 32 * 512 + h * 4 * 512 + 32 * 512 * h + 2 * 512 + 3 * h * inter + 4 * h + 1  # k_eq_v: no v_proj
    text = V * h + h + 50 * sliding + 10 * full
    hv = 1152
    vision = 3 * 16 * 16 * hv + 2 * 10240 * hv + 27 * (4 * hv * hv + 2 * 72 + 3 * hv * 4304 + 4 * hv) + 2 * hv + hv * h
    m = g31()
    assert (text, vision) == (30_697_345_340, 575_743_536)
    assert m.vision_params == vision and count_params(m) == text + vision == m.params


def test_26b_a4b_experts_beside_the_dense_mlp_by_hand():
    h = 2816
    attn_s = h * 16 * 256 + 2 * h * 8 * 256 + 16 * 256 * h + 2 * 256
    attn_f = h * 16 * 512 + h * 2 * 512 + 16 * 512 * h + 2 * 512
    ffn = 3 * h * 2112 + 128 * 3 * h * 704 + h * 128 + h + 128 + 3 * h  # dense MLP + experts, router, norms
    text = V * h + h + 25 * (attn_s + ffn + 4 * h + 1) + 5 * (attn_f + ffn + 4 * h + 1)
    m = catalog.lookup("google/gemma-4-26B-A4B")
    assert text == 25_233_141_790
    assert (m.name, count_params(m), m.params) == ("google/gemma-4-26B-A4B-it", text + 572_794_416, 25_805_936_206)


def test_kv_bytes_per_layer_kind():
    m = g31()
    assert kind_bytes_per_token(m, "sliding", 2) == 2 * 16 * 256 * 2 == 16384
    assert kind_bytes_per_token(m, "full", 2) == 2 * 4 * 512 * 2 == 8192
    assert kind_bytes_per_token(m, "full", 2, tp=2) == 2 * 2 * 512 * 2
    assert kind_bytes_per_token(m, "full", 2, tp=8) == 2 * 1 * 512 * 2  # max(1, 4 // 8)
    assert full_kv_bytes_per_token(m, 2) == 50 * 16384 + 10 * 8192


def test_vllm_unifies_the_pages_of_the_two_kinds():
    """unify_kv_cache_spec_page_size: the full layers' 128 KiB page (16 tokens) becomes a 32-token
    block of the sliding layers' 256 KiB page; 50 sliding + 10 full layers -> 6 groups of 10."""
    m = g31()
    kinds = [("sliding", 1024) if k == "sliding" else ("full", 0) for k in m.kinds()]
    lay = layout(m, kinds, 2, 1, 16, era("0.19.0"))
    assert lay.page_bytes == 16 * 16384 and lay.bytes_per_block == 10 * 16 * 16384
    assert lay.groups == [Group("sliding", 1024, 10, 16)] * 5 + [Group("full", 0, 10, 32)]
    # one request of 32768 tokens with 8192 in flight: 5 x (cdiv(1023 + 8192, 16) + 1) + 32768 / 32
    assert lay.blocks_per_request(32768, 8192) == 5 * (576 + 1) + 1024


def test_vllm_plan_uses_the_per_kind_pages():
    site = site_from_argv(["vllm", "serve", "google/gemma-4-31B-it", "--max-model-len", "32768"])
    ev = evaluate(site, Target(gpu="H200", gpus=1, engine_version="0.19.0"))
    p = ev.plan
    assert p.kv_bytes_per_token == 50 * 16384 + 10 * 8192
    assert p.detail.kv_groups == 6
    blocks = p.detail.num_gpu_blocks
    assert p.memory.kv_cache == blocks * 10 * 16 * 16384


def test_llamacpp_model_from_the_catalog_entry():
    """src/models/gemma4.cpp: full layers take the global head size (K and V) and KV heads, SWA
    layers key_length_swa; full layers have no attn_v (k_eq_v); the 26B's dense FFN runs beside
    its experts."""
    from servefit.engines.llamacpp.model import from_spec

    lm = from_spec(g31(), "Q4_K_M")
    assert (lm.head_k, lm.head_v, lm.head_k_swa, lm.head_v_swa, lm.n_swa) == (512, 512, 256, 256, 1024)
    assert lm.n_head_kv[:6] == [16] * 5 + [4] and lm.swa[:6] == [True] * 5 + [False]
    names = {t.name: t.shape for t in lm.tensors}
    assert names["blk.5.attn_q.weight"] == (5376, 32 * 512) and "blk.5.attn_v.weight" not in names
    assert names["blk.0.attn_k.weight"] == (5376, 16 * 256) and names["blk.0.attn_v.weight"] == (5376, 16 * 256)
    moe = {t.name: t.shape for t in from_spec(catalog.lookup("google/gemma-4-26B-A4B-it"), "Q4_K_M").tensors}
    assert moe["blk.0.ffn_gate.weight"] == (2816, 2112) and moe["blk.0.ffn_gate_exps.weight"] == (2816, 704, 128)


def test_llamacpp_kv_cache_per_layer_kind(tmp_path):
    """-c 32768: 10 full layers x 32768 cells x 2 x 4 x 512 x 2 B + 50 SWA layers x
    (llama-kv-cache-iswa.cpp: 1024 window x 4 sequences + 512 ubatch = 4608 cells) x 2 x 16 x 256 x 2 B."""
    site = site_from_argv(["llama-server", "-hf", "unsloth/gemma-4-31B-it-GGUF:Q4_K_M", "-c", "32768"])
    ev = evaluate(site, Target(gpu="H100", gpus=1))
    assert ev.plan.kv_bytes_per_token == 50 * 16384 + 10 * 8192
    assert ev.plan.memory.kv_cache == 10 * 32768 * 8192 + 50 * 4608 * 16384


def e2b():
    return catalog.lookup("google/gemma-4-E2B-it")


def test_e2b_counts_by_hand():
    """Per-layer embeddings, 15 layers with their own K/V then 20 KV-shared layers (q/o only,
    double-wide MLP), 4 sliding : 1 full; the vision and audio towers; the raw safetensors total
    (llmfit) also holds k/v/k_norm of the shared layers."""
    h, ple, L = 1536, 256, 35
    text = V * h + h + V * L * ple + h * L * ple + ple
    for i in range(L):
        hd = 512 if i % 5 == 4 else 256
        text += 2 * 8 * hd * h + hd  # q, o, q_norm
        if i < 15:
            text += 2 * h * 1 * hd + hd  # k, v (1 KV head), k_norm
        text += 3 * h * (6144 * 2 if i >= 15 else 6144) + 4 * h + 1 + 2 * h * ple + h
    hv = 768
    vision = 3 * 256 * hv + 2 * 10240 * hv + 16 * (4 * hv * hv + 2 * 64 + 3 * hv * 3072 + 4 * hv) + hv * h
    ha = 1024
    audio = (9 * 128 + 128 + 9 * 128 * 32 + 32 + 32 * 32 * ha
             + 12 * (2 * (8 * ha * ha + 2 * ha) + 5 * ha * ha + 128 + 3 * ha * ha + 5 * ha + 2 * ha + 3 * ha)
             + ha * 1536 + 1536 + 1536 * h)
    m = e2b()
    assert (text, vision, audio) == (4_628_569_379, 168_544_256, 307_183_904)
    assert count_params(m) == m.params == text + vision + audio
    shared_kv = sum(2 * h * (512 if i % 5 == 4 else 256) + (512 if i % 5 == 4 else 256) for i in range(15, 35))
    assert m.params + shared_kv == 5_123_178_051  # llmfit's raw total for google/gemma-4-E2B-it


def test_e4b_count_plus_shared_kv_is_the_raw_total():
    m = catalog.lookup("google/gemma-4-E4B")
    shared_kv = sum(2 * 2560 * 2 * (512 if i % 6 == 5 else 256) + (512 if i % 6 == 5 else 256) for i in range(24, 42))
    assert count_params(m) == m.params and m.params + shared_kv == 7_996_156_490


def test_e2b_kv_shared_layers_hold_no_cache():
    m = e2b()
    # 15 cache-owning layers: 12 sliding (1 KV x 256) and 3 full (1 KV x 512)
    assert full_kv_bytes_per_token(m, 2) == 12 * 2 * 256 * 2 + 3 * 2 * 512 * 2
    site = site_from_argv(["vllm", "serve", "google/gemma-4-E2B-it", "--max-model-len", "8192"])
    p = evaluate(site, Target(gpu="L4", gpus=1, engine_version="0.19.0")).plan
    assert p.kv_bytes_per_token == 12 * 1024 + 3 * 2048
    # pages 16 x 1024 B (sliding) and 16 x 2048 B (full): the sliding block covers 32 tokens; 12 vs 3 layers -> 4 + 1 groups of 3
    assert p.detail.kv_groups == 5


def test_e2b_gguf_by_name_under_llama_cpp():
    from servefit.engines.llamacpp.model import from_spec

    lm = from_spec(e2b(), "Q4_K_M")
    assert lm.n_layer_kv_from_start == 15 and (lm.head_k, lm.head_k_swa) == (512, 256)
    names = {t.name: t.shape for t in lm.tensors}
    assert "blk.15.attn_k.weight" not in names and names["blk.14.attn_k.weight"] == (1536, 512)
    assert names["per_layer_token_embd.weight"] == (35 * 256, V) and names["blk.20.ffn_up.weight"] == (1536, 12288)
    site = site_from_argv(["llama-server", "-m", "/models/gemma-4-E2B-it-qat-UD-Q4_K_XL.gguf", "-c", "8192"])
    ev = evaluate(site, Target(gpu="L4", gpus=1))
    assert ev.model.name == "google/gemma-4-E2B-it"
    assert ev.plan.kv_bytes_per_token == 12 * 1024 + 3 * 2048


def _vllm_weights(model: str) -> int:
    site = site_from_argv(["vllm", "serve", model, "--max-model-len", "32768"])
    return evaluate(site, Target(gpu="H200", gpus=1, engine_version="0.20.0")).plan.memory.weights


def test_vllm_allocates_what_the_checkpoint_count_lacks(monkeypatch):
    """gemma4.py (0.20.0 wheel): every layer's QKVParallelLinear has K and V slots (a k_eq_v full layer
    loads K into both) and the KV-shared layers keep k/v and k_norm; the full layers' proportional RoPE
    caches global_head_dim (512) values per position beside the sliding layers' 256."""
    from servefit.engines.vllm import weights
    from servefit.models.arch_gemma4 import vllm_unloaded_params

    e4b, a4b = catalog.lookup("google/gemma-4-E4B"), catalog.lookup("google/gemma-4-26B-A4B")
    shared_kv = sum(2 * 2560 * 2 * (512 if i % 6 == 5 else 256) + (512 if i % 6 == 5 else 256) for i in range(24, 42))
    assert vllm_unloaded_params(e4b) == shared_kv == 55_055_616  # the raw total's surplus (test above)
    assert vllm_unloaded_params(a4b) == 5 * 2816 * 2 * 512  # the V slot of the 5 full layers
    with_extras = {m: _vllm_weights(m) for m in ("google/gemma-4-E4B-it", "google/gemma-4-26B-A4B-it")}
    monkeypatch.setattr(weights, "is_gemma4", lambda s: False)
    for m, positions, extra in (("google/gemma-4-E4B-it", 131072, shared_kv),
                                ("google/gemma-4-26B-A4B-it", 262144, 5 * 2816 * 2 * 512)):
        assert with_extras[m] - _vllm_weights(m) == positions * 512 * 2 + extra * 2, m
