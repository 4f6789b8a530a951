"""Where SGLang's memory figures come from, against hand computations: what --cpu-offload-gb moves
(utils/offloader.py, decoder layers only), what a unified-memory GPU reports as available
(utils/common.py::get_available_gpu_memory) and as its capacity (get_nvgpu_memory_capacity)."""

from __future__ import annotations

import dataclasses

from test_sglang_engine import H100, LAUNCH, LLAMA8B, run

from servefit.engines.sglang import defaults as d
from servefit.engines.sglang import device_memory as dm
from servefit.engines.sglang import plan as sp
from servefit.hardware.catalog import resolve_gpu
from servefit.memory.weights import weight_bytes
from servefit.models.spec import ModelSpec

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


QWEN15 = ModelSpec(
    name="Qwen/Qwen2.5-1.5B-Instruct", architecture="Qwen2ForCausalLM", model_type="qwen2", num_hidden_layers=28,
    hidden_size=1536, num_attention_heads=12, num_key_value_heads=2, head_dim=128, intermediate_size=8960,
    vocab_size=151936, max_position_embeddings=32768, tie_word_embeddings=True, params=1_543_714_304)
SPARK_CMD = "python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-1.5B-Instruct --page-size 1"


def test_gb10_pool_starts_from_mem_available_not_the_device_total():
    """get_available_gpu_memory on an integrated GPU is MemAvailable: the OS's share comes off before
    mem_fraction_static applies; rest = (pre - weights) - pre x 0.6 by hand."""
    spark = resolve_gpu("DGX Spark")
    _, plan = run(f"{SPARK_CMD} --mem-fraction-static 0.40", version="0.5.11", model=QWEN15, gpu=spark)
    pre = spark.memory_bytes - sp.CONTEXT - dm.GB10_OS_HELD
    assert dm.GB10_OS_HELD == int(5.84 * GiB)
    assert plan.memory.total - plan.memory.non_torch == pre
    weights = int(weight_bytes(QWEN15, 2, None)) + sp.LOAD_EXTRA
    assert plan.memory.weights == weights
    cell = 2 * 128 * 2 * 28 * 2  # KV heads x head_dim x (K, V) x layers x bf16
    assert plan.detail.max_total_num_tokens == int(((pre - weights) - pre * 0.6) // cell)
    assert any("MemAvailable" in a and "5.84 GiB held by an idle DGX OS" in a for a in plan.assumptions)
    # measured on this machine (--gpu local): MemTotal - MemAvailable replaces the idle figure
    busy = dataclasses.replace(spark, in_use_bytes=20 * GiB)
    _, local = run(f"{SPARK_CMD} --mem-fraction-static 0.40", version="0.5.11", model=QWEN15, gpu=busy)
    assert local.memory.total - local.memory.non_torch == spark.memory_bytes - sp.CONTEXT - 20 * GiB
    assert any("20.00 GiB not available now on this machine" in a for a in local.assumptions)


def test_gb10_capacity_is_cudas_total_since_nvidia_smi_has_none():
    """The default fraction is picked from torch.cuda.mem_get_info()'s total (124611 MiB), not the 128 GiB box."""
    spark = resolve_gpu("DGX Spark")
    assert dm.capacity_mib(spark) == 124611 and spark.smi_memory_bytes == 131072 * 2**20
    _, plan = run(SPARK_CMD, version="0.5.11", model=QWEN15, gpu=spark)
    e = d.era("0.5.11")
    chunk, bs = d.chunk_and_graph_bs(e, 124611, 1)
    want, _ = d.mem_fraction_static(e, 124611, 1, 1, chunk, 16384, bs, True, 1, None, False)
    wrong, _ = d.mem_fraction_static(e, 131072, 1, 1, chunk, 16384, bs, True, 1, None, False)
    assert plan.detail.mem_fraction_static == want != wrong
    assert dm.capacity_mib(H100) == 81559  # a discrete card: nvidia-smi's figure


def test_free_memory_not_total_on_a_discrete_gpu_and_other_integrated_devices():
    """mem_get_info's free figure: memory another process holds on the card shrinks the pool by
    mem_fraction_static of it; a Jetson's OS share is not known and is said so."""
    _, idle = run(f"{LAUNCH} --mem-fraction-static 0.88")
    _, shared = run(f"{LAUNCH} --mem-fraction-static 0.88", gpu=dataclasses.replace(H100, in_use_bytes=10 * GiB))
    assert idle.memory.non_torch == sp.CONTEXT and shared.memory.non_torch == sp.CONTEXT + 10 * GiB
    lost = idle.detail.max_total_num_tokens - shared.detail.max_total_num_tokens
    assert abs(lost - 0.88 * 10 * GiB / idle.kv_bytes_per_token) < 2
    assert not any("MemAvailable" in a for a in idle.assumptions)
    orin = resolve_gpu("Orin")
    assert dm.held_by_others(orin) == 0 and dm.capacity_mib(orin) == orin.memory_bytes / 2**20
    assert "nothing held by the OS" in dm.notes(orin)[0]
    assert dm.held_by_others(resolve_gpu("GH200 144GB")) == 0  # its HBM is its own


def test_deepseek_v4_rank_keeps_replicated_parts_and_rope_tables():
    """DeepSeek-V4-Flash-Base at TP 8 (SGLang 0.5.12 models/deepseek_v4.py): wqkv_a, the compressors, the
    indexer's projections, the router and the hyper-connections are whole on every rank, and two complex64
    rope tables of 1048576 x 32 sit on the GPU; summed here per kind of layer (21 rate-4, 20 rate-128,
    2 sliding) rather than per layer as the module does."""
    from servefit.engines.sglang import dsv4_weights
    from servefit.memory.weights import scheme_for
    from servefit.models import catalog

    m = catalog.lookup("deepseek-ai/DeepSeek-V4-Flash-Base")
    fb = scheme_for(m.quantization).bytes_per_param
    n4, n128, n0 = 21, 20, 2
    fp8 = 43 * 4096 * (1024 + 512) + n4 * 1024 * 64 * 128  # wqkv_a, indexer wq_b
    bf16 = n4 * 4096 * 2048 + n128 * 4096 * 1024 + n4 * (4096 * 64 + 4096 * 512) + 43 * 256 * 4096
    fp32 = n4 * 4 * 1024 + n128 * 128 * 512 + n4 * 4 * 256
    hc = 43 * 2 * 6 * 4 * 4 * 4096
    rope = 2 * 1048576 * 32 * 8
    want = fp8 * fb * 7 / 8 + bf16 * (2 - fb / 8) + fp32 * (4 - fb / 8) + hc * (4 - 2 / 8) + rope
    assert n0 + n4 + n128 == 43
    assert abs(dsv4_weights.extra_bytes(m, 8, fb) - want) <= 1
    assert 1.55 * GiB < want < 1.65 * GiB
    cmd = ("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V4-Flash-Base --tp 8 "
           "--mem-fraction-static 0.60 --kv-cache-dtype fp8_e4m3 --disable-radix-cache")
    _, plan = run(cmd, version="0.5.12", model=m, gpu=resolve_gpu("H20"), count=8)
    assert plan.memory.weights == int(weight_bytes(m, 2, scheme_for(m.quantization)) / 8) + int(want) + sp.LOAD_EXTRA
