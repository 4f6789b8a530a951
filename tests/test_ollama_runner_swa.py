"""Ollama's llama runner (before 0.30) builds its context from llama_context_default_params(), whose swa_full
is true, and never changes it (llama/llama.go NewContextParams): from the vendored builds with separate
sliding-window caches (#13194) its SWA layers still hold the whole context, unlike llama-server's."""

from __future__ import annotations

from test_ollama_engine import ENGINE, gpu, site

from servefit.models.catalog import lookup


def runner_kv(version: str) -> float:
    cfg = ENGINE.parse(site("ollama run gemma2:9b", env={"OLLAMA_NUM_PARALLEL": "1"},
                            params={"num_ctx": "32768"}), version)
    p = ENGINE.plan(cfg, lookup("google/gemma-2-9b-it"), gpu(81090), 1)
    assert p.detail.era == "classic" and p.detail.runner is not None
    return p.detail.runner.kv_buffer_mib


def test_runner_sliding_window_layers_hold_the_whole_context():
    # gemma-2-9b: 42 layers (21 sliding-window, window 4096), 8 KV heads x 256 x (K, V) x f16 = 8 KiB per layer
    # per cell; num_ctx 32768 is cut to the training length 8192. 0.9.5 vendors b5600: 42 x 8192 cells x 8 KiB =
    # 2688 MiB, not 21 x (8192 + PAD(4096 + 512, 32)) x 8 KiB = 2100 MiB (what llama-server would allocate)
    assert runner_kv("0.9.5") == 42 * 8192 * 8 / 1024
    # 0.6.x vendors b5000, before separate SWA caches: every layer holds the context either way; and before
    # 0.9.3 llm/server.go does not cut num_ctx to the training length, so all 32768 cells
    assert runner_kv("0.6.8") == 42 * 32768 * 8 / 1024
