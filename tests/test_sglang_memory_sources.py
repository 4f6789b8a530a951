"""Where SGLang's memory figures come from, against hand computations: what --cpu-offload-gb moves
(utils/offloader.py, decoder layers only), what a unified-memory GPU reports as available
(utils/common.py::get_available_gpu_memory) and as its capacity (get_nvgpu_memory_capacity)."""

from __future__ import annotations

import dataclasses

from test_sglang_engine import H100, LAUNCH, LLAMA8B, run

from servefit.engines.sglang import plan as sp
from servefit.memory.weights import weight_bytes

GiB = 2**30


def test_cpu_offload_moves_decoder_layers_only():
    """Llama-3.1-8B at TP 2: offloading more than the layers hold leaves the vocab-parallel embedding and
    lm_head (128256 x 4096 x 2 bytes each, halved by TP) on each GPU; a smaller budget moves just that many
    bytes."""
    _, big = run(f"{LAUNCH} --tp 2 --cpu-offload-gb 48 --mem-fraction-static 0.8", count=2)
    kept = 2 * 128256 * 4096 * 2 // 2
    assert big.memory.weights == kept + sp.LOAD_EXTRA
    _, small = run(f"{LAUNCH} --tp 2 --cpu-offload-gb 2 --mem-fraction-static 0.8", count=2)
    per_rank = int(weight_bytes(LLAMA8B, 2, None) / 2)
    assert small.memory.weights == per_rank - 2 * GiB + sp.LOAD_EXTRA
    _, none = run(f"{LAUNCH} --tp 2 --mem-fraction-static 0.8", count=2)
    assert none.memory.weights == per_rank + sp.LOAD_EXTRA
    assert big.detail.max_total_num_tokens > small.detail.max_total_num_tokens > none.detail.max_total_num_tokens


def test_cpu_offload_with_tied_embeddings_keeps_one_table():
    tied = dataclasses.replace(LLAMA8B, tie_word_embeddings=True)
    _, plan = run(f"{LAUNCH} --cpu-offload-gb 100 --mem-fraction-static 0.8", model=tied, gpu=H100)
    assert plan.memory.weights == 128256 * 4096 * 2 + sp.LOAD_EXTRA
