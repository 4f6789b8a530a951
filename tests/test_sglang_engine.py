"""SGLang plugin: command forms, argparse's flag handling (prefixes, no `_` spelling), the
GPU-dependent defaults by release and the launch checks."""

from __future__ import annotations

import pytest

from servefit.core import LaunchSite, Token
from servefit.engines.sglang import ENGINE
from servefit.engines.sglang import defaults as d
from servefit.hardware.spec import GpuSpec
from servefit.models.spec import ModelSpec
from servefit.pipeline import site_from_argv

LLAMA8B = ModelSpec(
    name="meta-llama/Llama-3.1-8B-Instruct", architecture="LlamaForCausalLM", model_type="llama",
    num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
    intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072, params=8_030_261_248,
    rope_scaling={"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192})
MISTRAL7B = ModelSpec(
    name="mistralai/Mistral-7B-Instruct-v0.3", architecture="MistralForCausalLM", model_type="mistral",
    num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
    intermediate_size=14336, vocab_size=32768, max_position_embeddings=32768, params=7_248_023_552)
H100 = GpuSpec(key="h100-sxm", name="NVIDIA H100 80GB HBM3", vendor="nvidia", memory_bytes=85_029_027_840,
               compute_capability=90, fp8=True, smi_memory_bytes=85_520_809_984)
L4 = GpuSpec(key="l4", name="NVIDIA L4", vendor="nvidia", memory_bytes=23_659_020_288, compute_capability=89,
             fp8=True, smi_memory_bytes=24_152_899_584)
H100_MIB = 85_520_809_984 / 2**20  # 81559 MiB, what nvidia-smi (get_device_memory_capacity) reports


def parse(argv: str, env=None, version=None):
    return ENGINE.parse(site_from_argv(argv.split(), env), version)


def run(argv: str, env=None, version=None, model=LLAMA8B, gpu=H100, count=1):
    cfg = parse(argv, env, version)
    return cfg, ENGINE.plan(cfg, model, gpu, count)


def codes(cfg, plan=None) -> list[str]:
    return [f.code for f in cfg.findings + (plan.findings if plan else [])]


LAUNCH = "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct"


def test_command_forms():
    assert ENGINE.command_length(["python", "-m", "sglang.launch_server", "--model-path", "x"]) == 3
    assert ENGINE.command_length(["python3", "-u", "-m", "sglang.launch_server"]) == 4
    assert ENGINE.command_length(["sglang", "serve", "--model-path", "x"]) == 2
    assert ENGINE.command_length(["python", "-m", "vllm.entrypoints.openai.api_server"]) == 0
    assert ENGINE.matches_image("lmsysorg/sglang:v0.5.5-cu126")
    assert ENGINE.name == "sglang" and ENGINE.default_version == "0.5.23"
    for cmd in (LAUNCH, "sglang serve --model-path meta-llama/Llama-3.1-8B-Instruct",
                "python3 -m sglang.launch_server --model meta-llama/Llama-3.1-8B-Instruct"):
        cfg = parse(cmd)
        assert cfg.model_ref == "meta-llama/Llama-3.1-8B-Instruct" and not cfg.findings, cmd


def test_flag_forms_and_prefixes():
    for flags in ("--tp 2", "--tp-size 2", "--tp-size=2", "--tensor-parallel-size 2"):
        assert parse(f"{LAUNCH} {flags}").settings["tp_size"] == 2, flags
    cfg = parse(f"{LAUNCH} --context-length 32768 --mem-fraction-static 0.85 --chunked-prefill-size 4096 "
                "--max-running-requests 64 --max-total-tokens 200000 --kv-cache-dtype fp8_e4m3 --dp-size 2 "
                "--pp-size 2 --quantization fp8")
    s = cfg.settings
    assert (s["context_length"], s["mem_fraction_static"], s["chunked_prefill_size"]) == (32768, 0.85, 4096)
    assert (s["max_running_requests"], s["max_total_tokens"], s["kv_cache_dtype"]) == (64, 200000, "fp8_e4m3")
    assert (s["dp_size"], s["pp_size"], s["quantization"], s["tp_size"]) == (2, 2, "fp8", 1)
    assert not cfg.findings


def test_unknown_flags_with_cross_engine_hints():
    cfg = parse(f"{LAUNCH} --mem_fraction_static 0.8 --max-model-len 8192 --gpu-memory-utilization 0.9 --pp 2")
    ms = [f.message for f in cfg.findings if f.code == "SGL001"]
    assert ms[0] == "unrecognized argument: --mem_fraction_static (did you mean --mem-fraction-static?)"
    assert ms[1].endswith("(--max-model-len is vllm's context setting; SGLang calls it --context-length)")
    assert "SGLang calls it --mem-fraction-static" in ms[2]
    assert ms[3].startswith("ambiguous option: --pp could match") and "--pp-size" in ms[3]
    assert parse(f"{LAUNCH} stray").findings[0].message == "unrecognized arguments: stray"


def test_invalid_values():
    cfg = parse(f"{LAUNCH} --kv-cache-dtype fp8_e4m3fn --tp-size two --quantization exl2")
    ms = [f.message for f in cfg.findings]
    assert any("invalid choice: 'fp8_e4m3fn'" in m and "SGLang spells it fp8_e4m3" in m for m in ms)
    assert any(m.startswith("argument --tp-size: invalid int value") for m in ms)
    assert any("'exl2'" in m for m in ms)
    assert {f.code for f in cfg.findings} == {"SGL002"}


def test_context_length_suffixes_by_release():
    assert parse(f"{LAUNCH} --context-length 32k").settings["context_length"] == 32000
    assert parse(f"{LAUNCH} --context-length 32Ki").settings["context_length"] == 32768
    assert parse(f"{LAUNCH} --context-length 1.5M").settings["context_length"] == 1_500_000
    cfg = parse(f"{LAUNCH} --context-length 32K")
    assert cfg.findings[0].message.startswith("argument --context-length: invalid human_readable_int value: '32K'")
    assert "context_length" not in cfg.settings or cfg.settings["context_length"] is None
    old = parse(f"{LAUNCH} --context-length 32k", version="0.5.5")
    assert "suffixes are accepted from SGLang 0.5.16" in old.findings[0].message
    with pytest.raises(ValueError, match="Decimals"):
        d.human_readable_int("1.5Ki", d.era("0.5.23"))


def test_config_file_is_spliced_and_cli_wins(tmp_path):
    conf = tmp_path / "sglang.yaml"
    conf.write_text("tp_size: 4\nmem_fraction_static: 0.7\nenable_metrics: true\n")
    cfg = parse(f"{LAUNCH} --config {conf} --mem-fraction-static 0.8")
    assert cfg.settings["tp_size"] == 4 and cfg.settings["mem_fraction_static"] == 0.8


def test_missing_model_path_is_a_finding():
    cfg = parse("python -m sglang.launch_server --tp 2")
    assert cfg.model_ref is None and "the following arguments are required: --model-path" in cfg.findings[0].message


# --- defaults by release -------------------------------------------------------------------

def test_mem_fraction_static_table_before_0_4_8():
    e = d.era("0.4.1.post7")
    assert d.mem_fraction_static(e, H100_MIB, 1, 1, 8192, 16384, 160, True, 1, None, False)[0] == 0.88
    assert d.mem_fraction_static(e, 24_000, 4, 1, 2048, 16384, 80, True, 1, None, False)[0] == 0.85
    assert d.mem_fraction_static(e, 24_000, 8, 1, 2048, 16384, 80, True, 1, None, False)[0] == 0.81
    # > 96 GiB cards are raised: min(f + 48 GiB x (1 - f) / mem, (mem - 18 GiB) / mem)
    h200 = 143_771.0
    f = d.mem_fraction_static(e, h200, 1, 1, 8192, 16384, 160, True, 1, None, False)[0]
    assert f == pytest.approx(min(0.88 + 48 * 1024 * 0.12 / h200, (h200 - 18 * 1024) / h200))


def test_mem_fraction_static_tiers_0_4_8_to_0_5_2():
    e = d.era("0.5.0")
    f, reserved = d.mem_fraction_static(e, H100_MIB, 1, 1, 8192, 16384, 160, True, 1, None, False)
    assert reserved == (9.5 + 1 / 2) * 1024 and f == round((H100_MIB - 10 * 1024) / H100_MIB, 3)


def test_mem_fraction_static_formula_0_5_23_by_hand():
    e = d.era("0.5.23")
    chunk, bs = d.chunk_and_graph_bs(e, H100_MIB, 1)
    assert (chunk, bs) == (8192, 256)
    sizes = d.prefill_graph_sizes(8192)
    assert sizes == 8 + 14 + 8 + 8 + 12 + 8  # 4..32/4, 48..256/16, 288..512/32, 576..1024/64, 1280..4096/256, 4608..8192/512
    reserved = 512 + 8192 * 1.5 + 1 / 8 * 1024 + 256 * 2 + sizes * 8
    f, got = d.mem_fraction_static(e, H100_MIB, 1, 1, chunk, 16384, bs, True, 1, None, False)
    assert got == reserved and f == round((H100_MIB - reserved) / H100_MIB, 3) == 0.83
    # 24 GB cards: chunked prefill 4096 and 48 cuda graphs from 0.5.20
    assert d.chunk_and_graph_bs(e, 24_564, 1) == (4096, 48)
    assert d.chunk_and_graph_bs(d.era("0.5.5"), 24_564, 1) == (2048, 24)
    # unknown GPU memory: 0.88, 0.95 from 0.5.20
    assert d.mem_fraction_static(e, None, 1, 1, 4096, 16384, 160, True, 1, None, False)[0] == 0.95


# --- checks --------------------------------------------------------------------------------

def test_context_length_over_derived():
    cfg, plan = run("python -m sglang.launch_server --model-path mistralai/Mistral-7B-Instruct-v0.3 "
                    "--context-length 65536", model=MISTRAL7B)
    f = next(f for f in plan.findings if f.code == "SGL003")
    assert f.message.startswith("ValueError: User-specified context_length (65536) is greater than the derived "
                                "context_length (32768).")
    assert plan.outcome == "rejected_config"
    cfg, plan = run("python -m sglang.launch_server --model-path mistralai/Mistral-7B-Instruct-v0.3 "
                    "--context-length 65536", {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}, model=MISTRAL7B)
    assert "SGL003" not in codes(cfg, plan) and plan.detail.context_len == 65536


def test_llama3_rope_does_not_stretch_the_derived_length():
    cfg, plan = run(LAUNCH)
    assert plan.detail.context_len == 131072  # llama3 rope type: factor ignored by get_context_length


def test_parallel_checks():
    cfg, plan = run(f"{LAUNCH} --tp-size 3", count=4)
    assert "SGL009" in codes(cfg, plan) and plan.outcome == "rejected_config"
    cfg, plan = run(f"{LAUNCH} --tp-size 4", count=2)
    f = next(f for f in plan.findings if f.code == "SGL010")
    assert f.message == "tp_size x pp_size = 4 GPUs, but only 2 are available"


def test_max_total_tokens_name_clash_and_cap():
    cfg, plan = run(f"{LAUNCH} --max-total-tokens 8192")
    assert "SGL008" in codes(cfg, plan)
    assert plan.detail.max_total_num_tokens == 8192 and plan.outcome == "started"
    cfg, plan = run(f"{LAUNCH} --max-total-tokens 5000000")
    f = next(f for f in plan.findings if f.code == "SGL007")
    assert f.message == (f"max_total_tokens=5000000 is larger than the profiled value "
                         f"{plan.detail.max_total_num_tokens}. Use the profiled value instead.")


def test_mem_fraction_too_high_warns():
    cfg, plan = run(f"{LAUNCH} --mem-fraction-static 0.99")
    assert "SGL011" in codes(cfg, plan)
    # SGLang's own reserve (1.5 MiB per chunked-prefill token) only picks its default: above it is no finding
    assert "SGL011" not in codes(*run(f"{LAUNCH} --mem-fraction-static 0.9"))


def test_env_span_kept_for_overwrite_variable():
    from servefit.core import Span

    sp = Span("c.yaml", 3, 10, 3, 11, 40, 41)
    site = LaunchSite(file="c.yaml", line=1, argv=[Token(w) for w in LAUNCH.split()],
                      env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": Token("1", sp)})
    assert ENGINE.parse(site).spans["env:SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"] == sp


@pytest.mark.parametrize("flag,version", [("--cuda-graph-max-bs-decode 36", "0.5.23"), ("--cuda-graph-max-bs 36", "0.5.5"),
                                          ("--cuda-graph-max-bs 36", "0.5.18")])
def test_the_decode_graph_batch_size_under_either_name(flag, version):
    """server_args.py: --cuda-graph-max-bs became a deprecated alias of --cuda-graph-max-bs-decode
    (0.5.16); the graph reserve is sized from whichever the command sets."""
    _, p = run(f"{LAUNCH} {flag}", version=version)
    assert p.detail.cuda_graph_max_bs == 36
    _, q = run(LAUNCH, version=version)
    assert q.detail.cuda_graph_max_bs != 36
