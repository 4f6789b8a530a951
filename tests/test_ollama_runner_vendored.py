"""The llama runner Ollama started before 0.30 runs the llama.cpp it vendored (llama/build-info.cpp
LLAMA_COMMIT per release) with llama_context_default_params (kv_unified false, swa_full true): its KV
buffer follows that build's rules."""

from __future__ import annotations

import pytest
from test_llamacpp_engine import MIB, gpu, llama8b

from servefit.engines.ollama.runner import runner_buffers, vendored_build
from servefit.models import resolve_model


@pytest.mark.parametrize(("v", "build"), [((0, 10, 1), "b5340"), ((0, 11, 5), "b6150"), ((0, 12, 4), "b6646"),
                                          ((0, 12, 11), "b6840"), ((0, 13, 2), "b7108"), ((0, 15, 5), "b7440")])
def test_vendored_build_by_release(v, build):
    assert vendored_build(v) == build


@pytest.mark.parametrize(("v", "cells"), [
    ((0, 12, 11), 3008),  # b6840: llama_kv_cache::get_padding, 32 without flash attention
    ((0, 13, 2), 3072),  # b7108: llama_context pads n_ctx to 256 whatever flash attention does
])
def test_runner_cache_padding_follows_the_vendored_build(v, cells):
    rb, _ = runner_buffers({"quant": "Q4_K_M"}, llama8b(), gpu(80000), 1, v, 3000, 1, 512, 33, False, "f16")
    assert rb is not None
    assert (rb.kv_cache_cells, rb.kv_buffer_mib) == (cells, cells * 32 * 8 * 128 * 2 * 2 / MIB)


def test_runner_hybrid_model_holds_the_whole_context_per_sequence():
    # granite-4.0-h-tiny: 4 attention layers x 4 KV heads x 128. Ollama runs `--ctx-size num_ctx x np --parallel
    # np` without a unified cache, and until llama.cpp PR #19559 (after every build Ollama vendored) the hybrid
    # attention cache held all n_ctx cells in each of the np streams
    spec = resolve_model("ibm-granite/granite-4.0-h-tiny")
    rb, _ = runner_buffers({"quant": "Q4_K_M"}, spec, gpu(80000), 1, (0, 13, 5), 8192, 2, 512, 41, True, "f16")
    assert rb is not None
    assert (rb.kv_cache_cells, rb.kv_buffer_mib) == (16384, 4 * 4 * 128 * 2 * 2 * 16384 * 2 / MIB)


def _kv_line(name: str, cmd: str, version: str, np_: str = "2") -> list[str]:
    from test_ollama_engine import ENGINE, site
    from test_ollama_engine import gpu as ogpu

    s = site(cmd, env={"OLLAMA_NUM_PARALLEL": np_, "OLLAMA_CONTEXT_LENGTH": "8192"})
    cfg = ENGINE.parse(s, version)
    p = ENGINE.plan(cfg, resolve_model(name), ogpu(200000), 1)
    return [m for m in p.messages if '"kv cache"' in m]


def test_ollama_engine_counts_the_recurrent_state_as_cache():
    # Qwen3-Next on the Ollama engine (v0.15.5+) and forced to one slot (server/sched.go): 12 attention layers x 2 KV
    # heads x 256 x K,V f16 at 8192 cells = 192 MiB, plus 36 state layers of f32 conv 3 x 8192 and delta state
    # 128 x 128 x 32 for one slot (kvcache/recurrent.go, created in each layer's context) = 75.375 MiB
    assert _kv_line("Qwen/Qwen3-Next-80B-A3B-Instruct", "ollama run qwen3-next:80b", "0.20.0") == [
        'msg="kv cache" device=CUDA0 size="267.4 MiB"']
    # Nemotron-Nano-9B-v2 (v0.17.1+): 4 attention layers x 8 x 128 (128 MiB) + 27 Mamba-2 layers of conv
    # 3 x (10240 + 2 x 8 x 128) and state 128 x 80 x 128 (138.8 MiB)
    assert _kv_line("nvidia/NVIDIA-Nemotron-Nano-9B-v2", "ollama run nemotron-nano:9b", "0.20.0") == [
        'msg="kv cache" device=CUDA0 size="266.8 MiB"']


@pytest.mark.parametrize(("v", "num_batch", "ubatch"), [
    ((0, 12, 6), 1024, 512),  # n_batch = 1024 only: llama_context_default_params' n_ubatch 512 stays
    ((0, 12, 6), 256, 256),  # cparams.n_ubatch = min(n_batch, n_ubatch)
    ((0, 13, 3), 1024, 1024),  # llama/llama.go NewContextParams: n_batch = 1024 x np, n_ubatch = 1024
])
def test_runner_ubatch_follows_new_context_params(v, num_batch, ubatch):
    rb, _ = runner_buffers({"quant": "Q4_K_M"}, llama8b(), gpu(80000), 1, v, 8192, 2, num_batch, 33, True, "f16")
    assert rb is not None
    assert rb.n_ubatch == ubatch
