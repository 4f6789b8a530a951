"""vLLM KV capacity under decode context parallelism and DeepSeek-V3.2's fp8_ds_mla rows, by hand
(kv_cache_interface.py FullAttentionSpec.max_memory_usage_bytes / MLAAttentionSpec.real_page_size_bytes)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import H100, run  # noqa: E402

CMD = "vllm serve m --max-model-len 32769 -tp 2"


def test_dcp_request_holds_cdiv_of_its_context_per_rank():
    # a request at 32769 tokens holds cdiv(32769, 16) = 2049 blocks; with -dcp 2 each rank keeps
    # cdiv(32769, 2) = 16385 tokens: cdiv(16385, 16) = 1025 blocks (before this fix servefit kept 2049)
    _, plain = run(CMD, gpu=H100, count=2, version="0.22.0")
    _, dcp = run(CMD + " -dcp 2", gpu=H100, count=2, version="0.22.0")
    blocks = plain.detail.num_gpu_blocks
    assert dcp.detail.num_gpu_blocks == blocks
    assert plain.max_concurrency == blocks / 2049
    assert dcp.max_concurrency == blocks / 1025
    # from 0.20.1 the logged tokens are int(concurrency x max_model_len)
    assert dcp.kv_cache_tokens == int(blocks / 1025 * 32769)


def test_dcp_before_0201_logs_blocks_times_dcp():
    # 0.11: num_blocks // groups x block_size, "Multiplying the GPU KV cache size by the dcp_world_size"
    _, dcp = run(CMD + " -dcp 2", gpu=H100, count=2, version="0.11.0")
    blocks = dcp.detail.num_gpu_blocks
    assert dcp.kv_cache_tokens == blocks * 16 * 2
    assert dcp.max_concurrency == blocks / 1025


def _v32_bytes(argv: str, cc: int, version: str) -> int:
    from servefit.hardware.spec import GpuSpec
    from servefit.models.catalog import lookup

    model = lookup("deepseek-ai/DeepSeek-V3.2")
    assert model is not None and model.architecture == "DeepseekV32ForCausalLM"
    gpu = GpuSpec(key=f"cc{cc}", name=f"test {cc}", vendor="nvidia", memory_bytes=150_000_000_000,
                  compute_capability=cc, fp8=True)
    _, plan = run("vllm serve m --max-model-len 32768 -tp 8 " + argv, model=model, gpu=gpu, count=8, version=version)
    return plan.kv_bytes_per_token


INDEXER = 128 + 128 // 128 * 4  # one fp8 key of index_head_dim plus a 4-byte scale per 128
DS_MLA = 61 * (656 + INDEXER)    # 512 fp8 NoPE + 16 scale bytes + 64 bf16 RoPE per layer
PLAIN_FP8 = 61 * (576 + INDEXER)
BF16 = 61 * (576 * 2 + INDEXER)


def test_deepseek_v32_fp8_ds_mla_rows_by_release_and_gpu():
    # 0.11: DeepseekV32ForCausalLM.verify_and_update_config turns auto and fp8 into fp8_ds_mla
    assert _v32_bytes("", 90, "0.11.0") == DS_MLA == 48_068
    assert _v32_bytes("--kv-cache-dtype fp8", 100, "0.11.0") == DS_MLA
    # 0.12 - 0.17: fp8 only
    assert _v32_bytes("", 90, "0.14.0") == BF16
    assert _v32_bytes("--kv-cache-dtype fp8", 100, "0.14.0") == DS_MLA
    # from 0.18 by backend: Hopper runs FLASHMLA_SPARSE (fp8_ds_mla); Blackwell prefers FlashInfer's
    # sparse backend for an fp8 cache from 0.20 (plain fp8 rows) unless FLASHMLA_SPARSE is forced
    assert _v32_bytes("--kv-cache-dtype fp8", 90, "0.22.0") == DS_MLA
    assert _v32_bytes("--kv-cache-dtype fp8", 100, "0.22.0") == PLAIN_FP8 == 43_188
    assert _v32_bytes("--kv-cache-dtype fp8 --attention-backend FLASHMLA_SPARSE", 100, "0.22.0") == DS_MLA
    assert _v32_bytes("", 90, "0.22.0") == BF16
    # 0.18 - 0.19 on Blackwell: FLASHMLA_SPARSE first above 16 query heads per rank (128 / 8 = 16: FlashInfer)
    assert _v32_bytes("--kv-cache-dtype fp8", 100, "0.18.0") == PLAIN_FP8
    # 12.x (0.24 on): FLASHINFER_MLA_SPARSE_SM120 stores fp8_ds_mla rows even for "auto"
    assert _v32_bytes("", 120, "0.24.0") == DS_MLA


def test_eagle_and_mtp_drafter_layer_pages_with_the_target():
    # Llama-3.1-8B: 32 layers of 16 tokens x 2 x 8 KV heads x 128 x 2 bytes; an EAGLE head's one decoder
    # layer takes a 33rd page in every block (gpu_model_runner.py::get_kv_cache_spec sees its Attention)
    page = 16 * 2 * 8 * 128 * 2
    spec = """ --speculative-config {"method":"eagle","model":"yuhuili/EAGLE-LLaMA3.1-Instruct-8B","num_speculative_tokens":3}"""
    for version, layers in (("0.22.0", 33), ("0.11.0", 33), ("0.6.4", 32)):  # V0 pages the target alone
        _, plan = run("vllm serve m --max-model-len 8192" + spec, gpu=H100, version=version)
        assert plan.detail.num_gpu_blocks == plan.detail.available_kv_cache_bytes // (page * layers), version


def test_mtp_loads_one_full_attention_layer_and_its_fc_with_the_model():
    from servefit.models.catalog import lookup

    model = lookup("Qwen/Qwen3.6-27B")
    spec = ' --speculative-config {"method":"mtp","num_speculative_tokens":2}'
    _, base = run("vllm serve m --max-model-len 8192", model=model, gpu=H100, version="0.22.0")
    _, mtp = run("vllm serve m --max-model-len 8192" + spec, model=model, gpu=H100, version="0.22.0")
    attn = 5120 * 24 * 256 * 2 + 2 * 5120 * 4 * 256 + 24 * 256 * 5120 + 2 * 256  # gated q, k, v, o, q/k norms
    mlp = 3 * 5120 * 17408
    fc = 2 * 5120 * 5120  # qwen3_5_mtp.py fc: 2 x hidden -> hidden; embed_tokens / lm_head shared with the target
    assert attn + mlp + fc == 424_673_792  # the checkpoint's mtp.* module: 424,699,392 with its norms
    assert mtp.memory.weights - base.memory.weights == (attn + mlp + fc) * 2
    _, tp2 = run("vllm serve m --max-model-len 8192 -tp 2" + spec, model=model, gpu=H100, count=2, version="0.22.0")
    _, tp2_base = run("vllm serve m --max-model-len 8192 -tp 2", model=model, gpu=H100, count=2, version="0.22.0")
    assert tp2.memory.weights - tp2_base.memory.weights == (attn + mlp + fc) * 2 // 2


def test_pcp_shards_the_request_from_012_to_025_only():
    # 0.12 - 0.25: cdiv(32769, dcp 1 x pcp 2) = 16385 tokens a rank -> 1025 blocks; 0.26 on: 2049
    cmd = CMD + " -pcp 2"
    _, p22 = run(cmd, gpu=H100, count=4, version="0.22.0")
    assert p22.max_concurrency == p22.detail.num_gpu_blocks / 1025
    assert p22.kv_cache_tokens == int(p22.detail.num_gpu_blocks / 1025 * 32769)
    _, p14 = run(cmd, gpu=H100, count=4, version="0.14.0")  # tokens: blocks x 16 x pcp x dcp
    assert p14.kv_cache_tokens == p14.detail.num_gpu_blocks * 16 * 2
    _, p26 = run(cmd, gpu=H100, count=4, version="0.26.0")
    assert p26.max_concurrency == p26.detail.num_gpu_blocks / 2049


def test_glm5_takes_an_fp8_cache_on_blackwell_from_032():
    # GlmMoeDsaForCausalLM.verify_and_update_config (0.32 on): "auto" -> fp8_e4m3 on compute 10.x, where
    # FLASHINFER_MLA_SPARSE then stores plain fp8 latents (576 B); the 21 indexer layers keep 128 + 4 B
    from servefit.pipeline import Target, evaluate, site_from_argv

    def kv(gpu: str, version: str) -> int:
        argv = ["vllm", "serve", "zai-org/GLM-5.2-FP8", "--max-model-len", "8192", "-tp", "8"]
        return evaluate(site_from_argv(argv), Target(gpu=gpu, engine_version=version)).plan.kv_bytes_per_token

    assert kv("B200", "0.33.0") == kv("B200", "0.32.0") == 78 * 576 + 21 * 132
    assert kv("B200", "0.31.0") == kv("H200", "0.33.0") == 78 * 576 * 2 + 21 * 132


def test_pcp_ranks_count_in_the_world_size():
    from test_vllm_engine import codes

    cfg, plan = run(CMD + " -pcp 2", gpu=H100, count=2, version="0.22.0")
    assert "VLLM008" in codes(cfg, plan)  # world 2 x 2 on two GPUs
    assert any("World size (4)" in f.message for f in plan.findings)
    cfg, plan = run(CMD + " -pcp 2", gpu=H100, count=4, version="0.22.0")
    assert "VLLM008" not in codes(cfg, plan)


def test_dcp_estimated_max_model_len_counts_a_ranks_share():
    # estimate_max_model_len searches with max_memory_usage_bytes, which holds cdiv(len, dcp) per rank:
    # 2172 blocks of 16 fit 34,752 tokens a rank, so 69,504 with -dcp 2 (34,752 without)
    from test_vllm_engine import L4

    cmd = "vllm serve m --max-model-len 131072 -tp 2 --gpu-memory-utilization 0.5"
    _, plain = run(cmd, gpu=L4, count=2, version="0.22.0")
    _, dcp = run(cmd + " -dcp 2", gpu=L4, count=2, version="0.22.0")
    assert plain.outcome == dcp.outcome == "refused_max_model_len"
    assert plain.detail.num_gpu_blocks == dcp.detail.num_gpu_blocks == 2172
    assert plain.fitting_max_model_len == 2172 * 16 and dcp.fitting_max_model_len == 2 * 2172 * 16
