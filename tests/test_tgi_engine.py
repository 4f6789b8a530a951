"""TGI plugin: every flag form and its environment twin, the launcher defaults by release, and
the launcher / router checks in TGI's own words."""

from __future__ import annotations

from servefit.core import LaunchSite, Span, Token
from servefit.engines.tgi import ENGINE
from servefit.hardware.spec import GpuSpec
from servefit.models.spec import ModelSpec
from servefit.pipeline import site_from_argv

LLAMA8B = ModelSpec(
    name="meta-llama/Llama-3.1-8B-Instruct", architecture="LlamaForCausalLM", model_type="llama",
    num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
    intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072, params=8_030_261_248,
    rope_scaling={"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192})
LLAMA2_7B = ModelSpec(
    name="meta-llama/Llama-2-7b-hf", architecture="LlamaForCausalLM", model_type="llama",
    num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, num_key_value_heads=32, head_dim=128,
    intermediate_size=11008, vocab_size=32000, max_position_embeddings=4096, params=6_738_415_616,
    torch_dtype="float16")
A10G = GpuSpec(key="a10g", name="NVIDIA A10G", vendor="nvidia", memory_bytes=23_684_186_112, compute_capability=86,
               smi_memory_bytes=24_146_608_128)
H100 = GpuSpec(key="h100-sxm", name="NVIDIA H100 80GB HBM3", vendor="nvidia", memory_bytes=85_029_027_840,
               compute_capability=90, fp8=True, smi_memory_bytes=85_520_809_984)


def parse(argv: str, env: dict[str, str] | None = None, version: str | None = None):
    return ENGINE.parse(site_from_argv(argv.split(), env), version)


def run(argv: str, env=None, version=None, model=LLAMA8B, gpu=A10G, count=1):
    cfg = parse(argv, env, version)
    return cfg, ENGINE.plan(cfg, model, gpu, count)


def codes(cfg, plan=None) -> list[str]:
    return [f.code for f in cfg.findings + (plan.findings if plan else [])]


def msg(cfg, plan, code: str) -> str:
    return next(f.message for f in cfg.findings + plan.findings if f.code == code)


# --- command words and images --------------------------------------------------------------

def test_command_length_and_images():
    assert ENGINE.command_length(["text-generation-launcher", "--model-id", "x"]) == 1
    assert ENGINE.command_length(["/usr/local/bin/text-generation-launcher"]) == 1
    assert ENGINE.command_length(["vllm", "serve"]) == 0
    assert ENGINE.matches_image("ghcr.io/huggingface/text-generation-inference:3.3.7")
    assert ENGINE.matches_image("763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-tgi-inference:2.4")
    assert ENGINE.matches_image("ghcr.io/huggingface/tgi-gaudi:2.3.1")
    assert not ENGINE.matches_image("vllm/vllm-openai:latest")
    assert ENGINE.name == "tgi" and ENGINE.default_version == "3.3.7"


# --- flag forms and environment twins ------------------------------------------------------

def test_flag_forms():
    for argv in ("--max-total-tokens 8192", "--max-total-tokens=8192"):
        cfg = parse("text-generation-launcher --model-id m " + argv)
        assert cfg.settings["max_total_tokens"] == 8192 and "max_total_tokens" in cfg.explicit
    cfg = parse("text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct --num-shard 2 "
                "--quantize awq --kv-cache-dtype fp8_e4m3fn --cuda-memory-fraction 0.8 --dtype bfloat16 "
                "--max-batch-prefill-tokens 4096 --max-concurrent-requests 64 --cuda-graphs 1,2,4")
    s = cfg.settings
    assert cfg.model_ref == "meta-llama/Llama-3.1-8B-Instruct" == s["model_id"]
    assert (s["num_shard"], s["quantize"], s["kv_cache_dtype"], s["cuda_memory_fraction"], s["dtype"]) == \
        (2, "awq", "fp8_e4m3fn", 0.8, "bfloat16")
    assert (s["max_batch_prefill_tokens"], s["max_concurrent_requests"], s["cuda_graphs"]) == (4096, 64, [1, 2, 4])
    assert not cfg.findings


def test_every_memory_flag_has_its_env_twin():
    env = {"MODEL_ID": "meta-llama/Llama-3.1-8B-Instruct", "MAX_INPUT_TOKENS": "4000", "MAX_TOTAL_TOKENS": "5000",
           "MAX_BATCH_PREFILL_TOKENS": "6000", "MAX_BATCH_TOTAL_TOKENS": "90000", "MAX_CONCURRENT_REQUESTS": "32",
           "CUDA_MEMORY_FRACTION": "0.7", "QUANTIZE": "eetq", "KV_CACHE_DTYPE": "fp8_e5m2", "NUM_SHARD": "2",
           "DTYPE": "float16", "CUDA_GRAPHS": "0"}
    s = parse("text-generation-launcher", env).settings
    assert s["model_id"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert (s["max_input_tokens"], s["max_total_tokens"], s["max_batch_prefill_tokens"]) == (4000, 5000, 6000)
    assert (s["max_batch_total_tokens"], s["max_concurrent_requests"], s["cuda_memory_fraction"]) == (90000, 32, 0.7)
    assert (s["quantize"], s["kv_cache_dtype"], s["num_shard"], s["dtype"], s["cuda_graphs"]) == \
        ("eetq", "fp8_e5m2", 2, "float16", [0])
    assert parse("text-generation-launcher", {"MAX_INPUT_LENGTH": "3000"}).settings["max_input_length"] == 3000


def test_quantize_accepts_every_value():
    for q in ("awq", "compressed-tensors", "eetq", "exl2", "gptq", "marlin", "bitsandbytes", "bitsandbytes-nf4",
              "bitsandbytes-fp4", "fp8"):
        cfg = parse(f"text-generation-launcher --model-id m --quantize {q}")
        assert cfg.settings["quantize"] == q and not cfg.findings, q


def test_flag_beats_env_and_env_span_is_kept():
    span = Span("deploy.yaml", 12, 20, 12, 24, 300, 304)
    site = LaunchSite(file="deploy.yaml", line=1, argv=[Token("text-generation-launcher"), Token("--model-id"),
                                                        Token("m"), Token("--max-total-tokens"), Token("2048")],
                      env={"MAX_TOTAL_TOKENS": Token("4096", span), "MAX_INPUT_TOKENS": Token("1024", span)})
    cfg = ENGINE.parse(site)
    assert cfg.settings["max_total_tokens"] == 2048
    assert cfg.settings["max_input_tokens"] == 1024 and cfg.spans["max_input_tokens"] == span


def test_sagemaker_variables_map_to_launcher_ones():
    site = LaunchSite(file="m.py", line=1, argv=[], image="huggingface-pytorch-tgi-inference:2.4.0-tgi3.0.1",
                      env={"HF_MODEL_ID": Token("mistralai/Mistral-7B-v0.1"), "SM_NUM_GPUS": Token("4"),
                           "HF_MODEL_QUANTIZE": Token("awq")})
    cfg = ENGINE.parse(site)
    assert cfg.model_ref == "mistralai/Mistral-7B-v0.1"
    assert cfg.settings["num_shard"] == 4 and cfg.settings["quantize"] == "awq"


def test_unknown_flags_in_claps_words_with_hints():
    cfg = parse("text-generation-launcher --model-id m --max_total_tokens 5 --max-model-len 8192 --max-total 9 stray")
    ms = [f.message for f in cfg.findings if f.code == "TGI001"]
    assert ms[0] == "error: unexpected argument '--max_total_tokens' found; tip: a similar argument exists: " \
                    "'--max-total-tokens'"
    assert "--max-model-len is vllm's context setting; TGI calls it --max-total-tokens" in ms[1]
    assert ms[2].startswith("error: unexpected argument '--max-total' found")  # clap: no abbreviations
    assert ms[3] == "error: unexpected argument 'stray' found"
    assert all(f.severity == "error" for f in cfg.findings)


def test_invalid_values_are_findings_not_tracebacks():
    cfg = parse("text-generation-launcher --model-id m --kv-cache-dtype fp8 --max-total-tokens lots",
                {"NUM_SHARD": "two", "CUDA_GRAPHS": "1,x"})
    ms = {f.message for f in cfg.findings}
    assert any("'fp8'" in m and "TGI spells it fp8_e4m3fn" in m for m in ms)
    assert any("--max-total-tokens" in m for m in ms)
    assert any(m.startswith("NUM_SHARD:") for m in ms)
    assert any("--cuda-graphs" in m for m in ms)
    assert {f.code for f in cfg.findings} == {"TGI002"}
    plan = ENGINE.plan(cfg, LLAMA8B, A10G, 1)
    assert plan.outcome == "rejected_config"


def test_version_gated_flags():
    cfg = parse("text-generation-launcher --model-id m --kv-cache-dtype fp8_e5m2", version="2.0.4")
    assert "TGI001" in codes(cfg)
    assert not parse("text-generation-launcher --model-id m --max-input-length 100", version="1.4.0").findings


# --- launcher defaults by release ----------------------------------------------------------

def test_defaults_before_2_0():
    cfg, plan = run("text-generation-launcher --model-id meta-llama/Llama-2-7b-hf", version="1.4.0", model=LLAMA2_7B)
    assert (plan.detail.max_input_tokens, plan.detail.max_total_tokens, plan.detail.max_batch_prefill_tokens) \
        == (1024, 2048, 4096)


def test_defaults_2_0_from_max_position_embeddings_capped_at_4096():
    cfg, plan = run("text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct", version="2.0.3")
    assert (plan.detail.max_input_tokens, plan.detail.max_total_tokens, plan.detail.max_batch_prefill_tokens) \
        == (4095, 4096, 4145)
    assert "Default `max_batch_prefill_tokens` to 4145" in plan.messages


def test_defaults_2_4_1_prefill_and_shard_lengths():
    cfg, plan = run("text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct", version="2.4.1", gpu=H100)
    assert plan.detail.max_batch_prefill_tokens == 4096


def test_defaults_3x_compute_optimal_prefill_by_hand():
    # launcher Config::flop for Llama-3.1-8B: attention 2*32*128*4096*3 + 2*8*128*4096*2, mlp 2*3*4096*14336
    flop = (2 * 32 * 128 * 4096 * 3 + 2 * 8 * 128 * 4096 * 2 + 2 * 3 * 4096 * 14336) * 32
    assert flop == 15_032_385_536
    cfg, plan = run("text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct")
    assert plan.detail.max_batch_prefill_tokens == int(125e12 / flop) == 8315  # A10G: 125 TFLOP/s f16
    # the shard then derives max_total_tokens from the KV capacity (chunking on) and max_input = total - 1
    assert plan.detail.max_total_tokens == plan.detail.max_batch_total_tokens
    assert plan.detail.max_input_tokens == plan.detail.max_total_tokens - 1
    assert f"Maximum input tokens defaulted to {plan.detail.max_input_tokens}" in plan.messages


def test_unknown_gpu_name_falls_back_to_4096_prefill():
    t4ish = GpuSpec(key="x", name="NVIDIA Foo", vendor="nvidia", memory_bytes=A10G.memory_bytes, compute_capability=86)
    cfg, plan = run("text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct", gpu=t4ish)
    assert plan.detail.max_batch_prefill_tokens == 4096


# --- launcher and router checks, in TGI's words ---------------------------------------------

def test_done_when_k8s_env_equal_limits_gives_the_router_error_at_the_value():
    span_in = Span("deploy.yaml", 21, 20, 21, 26, 500, 506)
    span_tot = Span("deploy.yaml", 23, 20, 23, 26, 540, 546)
    site = LaunchSite(file="deploy.yaml", line=10, argv=[Token("text-generation-launcher"), Token("--model-id"),
                                                         Token("meta-llama/Llama-3.1-8B-Instruct")],
                      env={"MAX_INPUT_TOKENS": Token("8192", span_in), "MAX_TOTAL_TOKENS": Token("8192", span_tot)})
    cfg = ENGINE.parse(site)
    plan = ENGINE.plan(cfg, LLAMA8B, A10G, 1)
    f = next(f for f in plan.findings if f.code == "TGI003")
    assert f.message == "Invalid argument: `max_input_tokens`(8192) must be < `max_total_tokens`(8192)"
    assert f.severity == "error" and f.span == span_in and f.setting == "max_input_tokens"
    assert plan.outcome == "rejected_config"


def test_input_not_below_total_wording_by_release():
    a = "text-generation-launcher --model-id m --max-input-tokens 4096 --max-total-tokens 4096"
    assert "`max_input_tokens must be < `max_total_tokens`" in msg(*run(a, version="2.0.3"), "TGI003")
    b = "text-generation-launcher --model-id m --max-input-length 4096 --max-total-tokens 4096"
    assert "`max_input_length` must be < `max_total_tokens`" in msg(*run(b, version="1.4.0"), "TGI003")


def test_prefill_below_input_without_chunking():
    cfg, plan = run("text-generation-launcher --model-id m --max-input-tokens 4000 --max-total-tokens 4096 "
                    "--max-batch-prefill-tokens 2048", version="2.2.0")
    assert msg(cfg, plan, "TGI005") == ("Invalid argument: `max_batch_prefill_tokens` must be >= `max_input_tokens`. "
                                        "Given: 2048 and 4000")
    assert plan.outcome == "rejected_config"
    # 3.x chunks the prefill on flashinfer: the same limits start
    cfg, plan = run("text-generation-launcher --model-id m --max-input-tokens 4000 --max-total-tokens 4096 "
                    "--max-batch-prefill-tokens 2048")
    assert "TGI005" not in codes(cfg, plan) and plan.outcome == "started"


def test_prefill_and_total_above_batch_total():
    cfg, plan = run("text-generation-launcher --model-id m --max-input-tokens 1000 --max-total-tokens 9000 "
                    "--max-batch-prefill-tokens 8192 --max-batch-total-tokens 4096", version="2.0.3")
    assert msg(cfg, plan, "TGI006") == ("Invalid argument: `max_batch_prefill_tokens` must be <= "
                                        "`max_batch_total_tokens`. Given: 8192 and 4096")
    assert msg(cfg, plan, "TGI007") == ("Invalid argument: `max_total_tokens` must be <= `max_batch_total_tokens`. "
                                        "Given: 9000 and 4096")


def test_both_input_names_set():
    cfg, plan = run("text-generation-launcher --model-id m --max-input-tokens 100 --max-input-length 100")
    assert msg(cfg, plan, "TGI004").startswith("Invalid argument: Both `max_input_tokens` (100) and "
                                               "`max_input_length` (100) are set.")


def test_dtype_with_quantize():
    cfg, plan = run("text-generation-launcher --model-id m --quantize gptq --dtype float16")
    assert msg(cfg, plan, "TGI011").startswith("RuntimeError: Only 1 can be set between `dtype` and `quantize`")


def test_sharding_limits():
    cfg, plan = run("text-generation-launcher --model-id m --num-shard 3", gpu=H100, count=4)
    assert msg(cfg, plan, "TGI012") == ("ValueError: `num_heads` must be divisible by `num_shards` (got `num_heads`: "
                                        "32 and `num_shards`: 3")
    cfg, plan = run("text-generation-launcher --model-id m --num-shard 4", gpu=H100, count=2)
    assert "TGI015" in codes(cfg, plan)
    cfg, plan = run("text-generation-launcher --model-id m --sharded true --num-shard 1", gpu=H100, count=2)
    assert msg(cfg, plan, "TGI012") == "Invalid argument: `sharded` is true but `num_shard` <= 1"
    assert plan.outcome == "rejected_config"
    cfg, plan = run("text-generation-launcher --model-id m --sharded true", gpu=H100, count=1)
    assert "not enough cuda devices" in msg(cfg, plan, "TGI012")
    # find_num_shards: no NUM_SHARD -> the GPUs CUDA_VISIBLE_DEVICES names; a TGI image means all of them
    cfg, plan = run("text-generation-launcher --model-id m", {"CUDA_VISIBLE_DEVICES": "0,1"}, gpu=H100, count=2)
    assert plan.parallel["tensor"] == 2
    site = LaunchSite(file="d.yaml", line=1, argv=[Token("--model-id"), Token("m")],
                      image="ghcr.io/huggingface/text-generation-inference:3.3.7")
    assert ENGINE.plan(ENGINE.parse(site), LLAMA8B, H100, 4).parallel["tensor"] == 4


def test_fp8_kv_cache_backend_limits():
    cfg, plan = run("text-generation-launcher --model-id m --kv-cache-dtype fp8_e4m3fn", {"ATTENTION": "flashdecoding"})
    assert msg(cfg, plan, "TGI013").startswith("ValueError: FP8 KV cache is currently only supported for flashinfer")
    cfg, plan = run("text-generation-launcher --model-id m --kv-cache-dtype fp8_e4m3fn", gpu=H100)
    assert "TGI013" not in codes(cfg, plan) and plan.outcome == "started"
    assert plan.kv_bytes_per_token == 32 * 8 * 128 * 2 * 1  # one byte per element


def test_ignored_max_batch_total_tokens_is_a_warning():
    cfg, plan = run("text-generation-launcher --model-id m --max-batch-total-tokens 4294967295 --max-input-tokens 4000 "
                    "--max-total-tokens 4096", gpu=H100)
    f = next(f for f in plan.findings if f.code == "TGI010")
    assert f.severity == "warning"
    assert f.message.startswith("`--max-batch-total-tokens` is deprecated for Flash Attention models. Inferred max "
                                f"batch total tokens: {plan.detail.max_batch_total_tokens}")
    assert plan.outcome == "started"


def test_vlm_prefill_fallback_follows_the_release():
    # launcher/src/main.rs::main `default_optimal`: a VLM gets no compute_optimal (Config::flop is None
    # with a vision_config); 3.0.x / 3.1.0 fall back to 4096, 3.1.1 raises Qwen2-VL to 10000 and 3.2.0
    # Gemma 3 to 8000 (capped by max_position_embeddings; unknown card: no vram_maximum cap)
    card = GpuSpec(key="x", name="NVIDIA Foo", vendor="nvidia", memory_bytes=85_029_027_840, compute_capability=90)
    qwen = ModelSpec(**{**LLAMA8B.__dict__, "name": "Qwen/Qwen2.5-VL-7B-Instruct", "model_type": "qwen2_5_vl",
                        "multimodal": True, "max_position_embeddings": 128000})
    gemma = ModelSpec(**{**qwen.__dict__, "name": "google/gemma-3-27b-it", "model_type": "gemma3"})
    want = {("3.0.1", "qwen2_5_vl"): 4096, ("3.1.0", "qwen2_5_vl"): 4096, ("3.1.1", "qwen2_5_vl"): 10000,
            ("3.1.1", "gemma3"): 4096, ("3.2.0", "gemma3"): 8000, ("3.3.7", "qwen2_5_vl"): 10000,
            ("3.3.7", "gemma3"): 8000}
    for (version, mt), value in want.items():
        m = qwen if mt == "qwen2_5_vl" else gemma
        _, plan = run("text-generation-launcher --model-id m", version=version, model=m, gpu=card)
        assert plan.detail.max_batch_prefill_tokens == value, (version, mt)
