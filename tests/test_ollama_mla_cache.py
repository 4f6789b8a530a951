"""MLA models on Ollama's own engine keep a V: model/models/deepseek2 (and glm4moelite) call nn.AttentionWithVMLA with
key = rope + kv_lora_rank latent and value = the kv_lora_rank latent, and kvcache/causal.go Causal.Put allocates a
value tensor of the value's width in every layer (llama.cpp from PR #19067 caches K only). GLM-4.7-Flash's catalog
model_type glm4_moe_lite is Ollama's glm4moelite, an Ollama-engine architecture from v0.14.3."""

from __future__ import annotations

from servefit.pipeline import Target, evaluate, site_from_argv

GIB = 2**30


def plan(tag: str, version: str) -> dict:
    site = site_from_argv(f"ollama run {tag}".split(), {"OLLAMA_CONTEXT_LENGTH": "8192", "OLLAMA_NUM_PARALLEL": "1"})
    site.engine = "ollama"
    return evaluate(site, Target(gpu="H100", gpus=8, engine_version=version)).plan.detail.as_dict()


def test_deepseek_v31_keeps_the_latent_as_v():
    d = plan("deepseek-v3.1", "0.13.5")
    assert "kv_buffer_mib" not in d  # the Ollama engine (deepseek2 from v0.13.0): no llama runner buffers
    # 61 layers x 8192 cells x (K 64 + 512, V 512) x f16
    assert d["kv_cache_gib"] == round(61 * 8192 * (576 + 512) * 2 / GIB, 3)


def test_glm47_flash_runs_on_the_ollama_engine():
    d = plan("glm-4.7-flash", "0.15.0")
    assert "kv_buffer_mib" not in d  # no llama runner buffers
    assert d["kv_cache_gib"] == round(47 * 8192 * (576 + 512) * 2 / GIB, 3)
