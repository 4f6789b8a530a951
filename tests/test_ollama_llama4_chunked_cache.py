"""Llama 4 on Ollama's own engine: model/models/llama4/model.go wraps kvcache.NewChunkedAttentionCache(chunk_size)
and a causal cache. NewChunkedAttentionCache sets only chunkSize, so kvcache/causal.go::Causal.Init sees
swaWindowSize 0 -> math.MaxInt32 and gives the chunked layers maxSequences x capacity cells too: unlike
llama.cpp's iSWA cache (chunk 8192 + ubatch), every layer holds the whole context."""

from __future__ import annotations

from servefit.engines.ollama.layout import cache_cells
from servefit.pipeline import Target, evaluate, site_from_argv

GIB = 2**30


def test_chunked_layers_get_the_full_context():
    assert cache_cells((0, 12, 3), "llama4", 16384, 1, 512, True, 8192) == (16384, 16384)
    assert cache_cells((0, 12, 3), "llama4", 16384, 2, 512, True, 8192) == (32768, 32768)
    # a sliding-window cache still gets its window: gemma3, PAD(1 x 1024 + 512, 256) = 1536
    assert cache_cells((0, 12, 3), "gemma3", 16384, 1, 512, True, 1024) == (16384, 1536)


def test_llama4_scout_kv_on_the_ollama_engine():
    site = site_from_argv("ollama run llama4:scout".split(), {"OLLAMA_CONTEXT_LENGTH": "16384",
                                                                "OLLAMA_NUM_PARALLEL": "1"})
    site.engine = "ollama"
    d = evaluate(site, Target(gpu="H100", gpus=1, engine_version="0.12.3")).plan.detail.as_dict()
    assert d["era"] == "layout"
    # Llama-4-Scout: 48 layers x 8 KV heads x 128 x (K, V) x f16 = 4 KiB per layer per cell, 16384 cells each
    assert d["kv_cache_gib"] == round(48 * 16384 * 8 * 128 * 2 * 2 / GIB, 3) == 3.0
