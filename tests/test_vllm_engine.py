"""vLLM engine: flag parsing in every form, the KV arithmetic by hand, and the start-up verdicts."""

from __future__ import annotations

import pytest

from servefit.core import Span, Token
from servefit.engines.vllm import ENGINE
from servefit.engines.vllm.era import era
from servefit.engines.vllm.kvcache import cdiv, layer_kinds, layout
from servefit.hardware.spec import GpuSpec
from servefit.memory.kv import full_kv_bytes_per_token
from servefit.models.spec import ModelSpec
from servefit.pipeline import site_from_argv

GiB = 2**30

LLAMA8B = ModelSpec(
    name="meta-llama/Llama-3.1-8B-Instruct", architecture="LlamaForCausalLM", model_type="llama",
    num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
    intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072, params=8_030_261_248,
    rope_scaling={"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192})
DSV3 = ModelSpec(
    name="deepseek-ai/DeepSeek-V3", architecture="DeepseekV3ForCausalLM", model_type="deepseek_v3",
    num_hidden_layers=61, hidden_size=7168, num_attention_heads=128, num_key_value_heads=128, head_dim=192,
    intermediate_size=18432, vocab_size=129280, max_position_embeddings=163840, params=671_026_419_200,
    num_experts=256, num_experts_per_tok=8, num_shared_experts=1, moe_intermediate_size=2048,
    first_k_dense_replace=3, kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64, qk_nope_head_dim=128,
    v_head_dim=128, quantization={"quant_method": "fp8"})
GPT_OSS_20B = ModelSpec(
    name="openai/gpt-oss-20b", architecture="GptOssForCausalLM", model_type="gpt_oss",
    num_hidden_layers=24, hidden_size=2880, num_attention_heads=64, num_key_value_heads=8, head_dim=64,
    intermediate_size=2880, vocab_size=201088, max_position_embeddings=131072, params=20_914_757_184,
    num_experts=32, num_experts_per_tok=4, moe_intermediate_size=2880, sliding_window=128,
    layer_types=["sliding", "full"] * 12, quantization={"quant_method": "mxfp4"})
L4 = GpuSpec(key="l4", name="NVIDIA L4", vendor="nvidia", memory_bytes=23_654_957_056, compute_capability=89, fp8=True)
H100 = GpuSpec(key="h100-sxm", name="NVIDIA H100 80GB HBM3", vendor="nvidia", memory_bytes=85_520_809_984,
               compute_capability=90, fp8=True)
T4 = GpuSpec(key="t4", name="Tesla T4", vendor="nvidia", memory_bytes=15_655_829_504, compute_capability=75, bf16=False)


def run(argv: str, model: ModelSpec = LLAMA8B, gpu: GpuSpec = L4, count: int = 1, env=None, version=None):
    cfg = ENGINE.parse(site_from_argv(argv.split(), env), version)
    return cfg, ENGINE.plan(cfg, model, gpu, count)


def codes(cfg, plan) -> list[str]:
    return [f.code for f in cfg.findings + plan.findings]


# --- hand-computed KV figures -------------------------------------------------------------

def test_llama31_8b_kv_bytes_per_token_bf16():
    # 2 (K and V) x 32 layers x 8 KV heads x 128 head_dim x 2 bytes
    assert full_kv_bytes_per_token(LLAMA8B, 2) == 2 * 32 * 8 * 128 * 2 == 131_072
    assert full_kv_bytes_per_token(LLAMA8B, 1) == 65_536  # fp8 KV
    assert full_kv_bytes_per_token(LLAMA8B, 2, tp=2) == 65_536  # 4 KV heads per rank


def test_mla_kv_is_one_latent_replicated_on_every_rank():
    # kv_lora_rank + qk_rope_head_dim = 576 elements, no factor 2, 61 layers, bf16
    assert full_kv_bytes_per_token(DSV3, 2) == 61 * 576 * 2 == 70_272
    assert full_kv_bytes_per_token(DSV3, 2, tp=8) == 70_272


def test_sliding_window_groups_and_blocks_per_request():
    e = era("0.33.0")
    kinds = layer_kinds(GPT_OSS_20B, hybrid_manager=True, disable_sliding_window=False)
    assert kinds.count(("sliding", 128)) == 12 and kinds.count(("full", 0)) == 12
    lay = layout(GPT_OSS_20B, kinds, 2, 1, 16, e)
    page = 16 * 2 * 8 * 64 * 2  # 16 tokens x K+V x 8 heads x 64 x bf16
    assert lay.page_bytes == page == 32_768
    assert len(lay.groups) == 2 and lay.bytes_per_block == 12 * page
    # full group: cdiv(8192, 16) = 512; sliding: cdiv(min(127 + 4096, 8192), 16) + 1 = 265
    assert lay.blocks_per_request(8192, in_flight=4096) == 512 + cdiv(127 + 4096, 16) + 1 == 777
    # the hybrid manager off turns every sliding layer into full attention
    off = layer_kinds(GPT_OSS_20B, hybrid_manager=False, disable_sliding_window=False)
    assert off == [("full", 0)] * 24


def test_gemma3_style_grouping_pads_to_group_size():
    model = ModelSpec(name="g", architecture="Gemma3ForCausalLM", model_type="gemma3_text", num_hidden_layers=62,
                      hidden_size=5376, num_attention_heads=32, num_key_value_heads=16, head_dim=128,
                      intermediate_size=21504, vocab_size=262208, max_position_embeddings=131072, sliding_window=1024,
                      layer_types=(["sliding"] * 5 + ["full"]) * 10 + ["sliding", "sliding"])
    lay = layout(model, layer_kinds(model, True, False), 2, 1, 16, era("0.33.0"))
    # 52 sliding + 10 full -> group size 10: 1 full group + 6 sliding groups, 8 padding layers
    assert len(lay.groups) == 7 and lay.padding_layers == 8


# --- the Done-when scenario ------------------------------------------------------------------

def test_llama8b_on_l4_default_length_is_refused_with_the_length_that_fits():
    cfg, plan = run("vllm serve meta-llama/Llama-3.1-8B-Instruct")
    assert plan.outcome == "refused_max_model_len"
    assert plan.max_model_len == 131072
    fit = plan.fitting_max_model_len
    assert fit is not None and 8192 < fit < 131072
    # the fitting length is exactly what the remaining blocks hold (null block reserved)
    blocks = plan.detail.num_gpu_blocks
    assert fit == (blocks - 1) * 16
    assert "VLLM003" in codes(cfg, plan)
    assert any("estimated maximum model length is" in m for m in plan.messages)


def test_llama8b_on_l4_at_8k_starts_with_tokens_and_concurrency():
    cfg, plan = run("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192")
    assert plan.outcome == "started"
    blocks = plan.detail.num_gpu_blocks
    assert plan.memory.kv_cache == blocks * 16 * 131_072
    assert plan.max_concurrency == pytest.approx(blocks / 512)
    assert plan.kv_cache_tokens == int(blocks / 512 * 8192)
    # budget = ceil(total x 0.92) and the stack adds up
    m = plan.memory
    assert m.budget == -(-L4.memory_bytes * 92 // 100)
    assert m.weights + m.activation_peak + m.non_torch + m.cuda_graphs + m.kv_cache <= m.budget


def test_weights_match_what_vllm_logs_for_llama8b():
    # "Model loading took 14.99 GiB" in vLLM logs for Llama-3.1-8B in bf16
    _, plan = run("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192")
    assert round(plan.memory.weights / GiB, 2) == 14.99


def test_v011_era_differences():
    _, new = run("vllm serve m --max-model-len 8192")
    _, old = run("vllm serve m --max-model-len 8192", version="0.11.0")
    assert new.detail.gpu_memory_utilization == 0.92 and old.detail.gpu_memory_utilization == 0.9
    assert old.memory.budget == int(L4.memory_bytes * 0.9)
    # before 0.20 the CUDA graphs are not subtracted from the KV budget: more KV blocks
    avail_old = old.detail.available_kv_cache_bytes
    m = old.memory
    assert avail_old == m.budget - m.weights - m.activation_peak - m.non_torch


def test_enforce_eager_frees_graph_memory():
    _, graphs = run("vllm serve m --max-model-len 8192")
    _, eager = run("vllm serve m --max-model-len 8192 --enforce-eager")
    assert eager.memory.cuda_graphs == 0 < graphs.memory.cuda_graphs
    assert eager.kv_cache_tokens > graphs.kv_cache_tokens


# --- flag forms ----------------------------------------------------------------------------

@pytest.mark.parametrize("argv, key, value", [
    ("vllm serve m --max-model-len 8192", "max_model_len", 8192),
    ("vllm serve m --max-model-len=8k", "max_model_len", 8000),
    ("vllm serve m --max-model-len 8K", "max_model_len", 8192),
    ("vllm serve m --max-model-len 25.6k", "max_model_len", 25600),
    ("vllm serve m --max_model_len 4096", "max_model_len", 4096),
    ("vllm serve m --max-model-len auto", "max_model_len", "auto"),
    ("vllm serve m --max-model-len -1", "max_model_len", "auto"),
    ("vllm serve m -tp 2", "tensor_parallel_size", 2),
    ("vllm serve m --tensor-parallel-size=4", "tensor_parallel_size", 4),
    ("vllm serve m -pp 2", "pipeline_parallel_size", 2),
    ("vllm serve m -q awq", "quantization", "awq"),
    ("vllm serve m --device-memory-utilization 0.8", "gpu_memory_utilization", 0.8),
    ("vllm serve m --no-enable-prefix-caching", "enable_prefix_caching", False),
    ("vllm serve m --enable-chunked-prefill", "enable_chunked_prefill", True),
    ("vllm serve m --enforce-eager", "enforce_eager", True),
    ("vllm serve m --kv-cache-dtype fp8", "kv_cache_dtype", "fp8"),
    ("vllm serve m --max-num-batched-tokens 16k", "max_num_batched_tokens", 16000),
    ("vllm serve m -O3", "optimization_level", "3"),
    ("vllm serve m --gpu-memory-util 0.7", "gpu_memory_utilization", 0.7),  # argparse prefix
    ("python3 -m vllm.entrypoints.openai.api_server --model m --max-model-len 2048", "max_model_len", 2048),
])
def test_flag_forms(argv, key, value):
    cfg = ENGINE.parse(site_from_argv(argv.split()))
    assert cfg.settings[key] == value
    assert key in cfg.explicit
    assert cfg.model_ref == "m"
    assert not cfg.findings


def test_api_server_form_and_model_positional():
    assert ENGINE.command_length(["vllm", "serve", "x"]) == 2
    assert ENGINE.command_length(["python3", "-u", "-m", "vllm.entrypoints.openai.api_server"]) == 4
    assert ENGINE.command_length(["llama-server"]) == 0


def test_unknown_flag_gets_did_you_mean_and_span():
    span = Span("k8s.yaml", 12, 11, 12, 29, 300, 318)
    site = site_from_argv(["vllm", "serve", "m"])
    site.argv.append(Token("--max-model-length", span))
    site.argv.append(Token("8192", None))
    cfg = ENGINE.parse(site)
    [f] = cfg.findings
    assert f.code == "VLLM001" and f.severity == "error"
    assert "did you mean --max-model-len?" in f.message
    assert f.span == span


def test_bad_values_are_findings():
    cfg = ENGINE.parse(site_from_argv("vllm serve m --max-model-len 12q".split()))
    assert [f.code for f in cfg.findings] == ["VLLM002"]
    assert "'12q'" in cfg.findings[0].message
    cfg, plan = run("vllm serve m --gpu-memory-utilization 1.5 --max-model-len 4096")
    assert "VLLM013" in codes(cfg, plan) and plan.outcome == "rejected_config"


def test_config_yaml_is_spliced_before_cli(tmp_path):
    conf = tmp_path / "vllm.yaml"
    conf.write_text("max-model-len: 4096\ntensor_parallel_size: 2\nenforce-eager: true\nenable-prefix-caching: false\n")
    cfg = ENGINE.parse(site_from_argv(["vllm", "serve", "m", "--config", str(conf), "--max-model-len", "2048"]))
    assert cfg.settings["max_model_len"] == 2048  # the command line wins
    assert cfg.settings["tensor_parallel_size"] == 2
    assert cfg.settings["enforce_eager"] is True
    assert cfg.settings["enable_prefix_caching"] is False


# --- rejections --------------------------------------------------------------------------

def test_rejections_in_vllms_words():
    cfg, plan = run("vllm serve m -tp 3 --max-model-len 4096", count=4)
    assert "Total number of attention heads (32) must be divisible by tensor parallel size (3)." in \
        [f.message for f in plan.findings]
    cfg, plan = run("vllm serve m -tp 4 --max-model-len 4096", count=2)
    assert "VLLM008" in codes(cfg, plan)
    cfg, plan = run("vllm serve m --dtype bfloat16 --max-model-len 2048", gpu=T4)
    assert "VLLM009" in codes(cfg, plan) and plan.outcome == "rejected_config"
    cfg, plan = run("vllm serve m --max-model-len 2048", gpu=T4)  # auto dtype falls back to fp16
    assert "VLLM021" in codes(cfg, plan) and plan.detail.dtype == "float16"
    cfg, plan = run("vllm serve m --max-num-batched-tokens 128 --max-num-seqs 256 --max-model-len 2048")
    assert "max_num_batched_tokens (128) must be greater than or equal to max_num_seqs (256)." in \
        [f.message for f in plan.findings]
    cfg, plan = run("vllm serve m --max-model-len 262144")
    assert "VLLM006" in codes(cfg, plan)
    cfg, plan = run("vllm serve m --max-model-len 262144", env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})
    assert "VLLM006" not in codes(cfg, plan)
    fp8 = ModelSpec(**{**LLAMA8B.__dict__, "quantization": {"quant_method": "fp8"}})
    v100 = GpuSpec(key="v100", name="Tesla V100-SXM2-16GB", vendor="nvidia", memory_bytes=16 * GiB, compute_capability=70)
    cfg, plan = run("vllm serve m --max-model-len 2048 --dtype half", model=fp8, gpu=v100)
    assert "VLLM010" in codes(cfg, plan)


def test_oom_at_load_and_no_kv_memory():
    big = ModelSpec(**{**LLAMA8B.__dict__, "params": 70_553_706_496, "num_hidden_layers": 80, "hidden_size": 8192,
                       "num_attention_heads": 64, "intermediate_size": 28672})
    _, plan = run("vllm serve m --max-model-len 4096", model=big, gpu=H100)
    assert plan.outcome == "oom_at_load"
    _, plan = run("vllm serve m --max-model-len 4096 --gpu-memory-utilization 0.6", gpu=L4)
    assert plan.outcome == "no_kv_memory"


def test_auto_max_model_len_fits_largest():
    _, plan = run("vllm serve m --max-model-len auto")
    assert plan.outcome == "started"
    assert 8192 < plan.max_model_len < 131072
    assert any(m.startswith("Auto-fit max_model_len") for m in plan.messages)


def test_tensor_parallel_shards_weights_and_kv():
    _, one = run("vllm serve m --max-model-len 8192", gpu=H100)
    _, two = run("vllm serve m --max-model-len 8192 -tp 2", gpu=H100, count=2)
    assert two.memory.weights < one.memory.weights * 0.52
    assert two.kv_bytes_per_token == one.kv_bytes_per_token // 2


@pytest.mark.parametrize("version,flags,model,tokens", [
    ("0.5.2", "", LLAMA8B, 131072),  # no auto-enable yet: the profile runs a full 131,072-token prefill
    ("0.5.3", "", LLAMA8B, 512),  # from 0.5.3: chunked prefill with 512 tokens for contexts over 32K
    ("0.5.3", "--enable-prefix-caching", LLAMA8B, 131072),  # not with prefix caching before 0.6.1
    ("0.6.3", "--enable-prefix-caching", LLAMA8B, 512),
    ("0.6.3", "--enable-lora", LLAMA8B, 131072),
    ("0.6.3", "", GPT_OSS_20B, 131072),  # sliding-window layers keep it off
    ("0.7.3", "", LLAMA8B, 2048),
    ("0.7.3", "--max-model-len 32768", LLAMA8B, 32768),  # 32K is not "over 32K"
])
def test_v0_turns_chunked_prefill_on_for_long_contexts_only_when_it_can(version, flags, model, tokens):
    cfg, plan = run(f"vllm serve {model.name} {flags}".strip(), model=model, gpu=H100,
                    env={"VLLM_USE_V1": "0"}, version=version)
    assert plan.detail.max_num_batched_tokens == tokens
