"""llama-server: flags and LLAMA_ARG_* parsing, and llama.cpp's own memory accounting."""

from __future__ import annotations

import pytest

from servefit.core import LaunchSite, Span, Token
from servefit.engines.llamacpp import ENGINE
from servefit.hardware.spec import GpuSpec
from servefit.models.spec import ModelSpec

MIB, GIB = 2**20, 2**30
RTX4090 = GpuSpec(key="rtx-4090", name="NVIDIA GeForce RTX 4090", vendor="nvidia", memory_bytes=24111 * MIB,
                  compute_capability=89)


def gpu(mib: int, name: str = "test GPU") -> GpuSpec:
    return GpuSpec(key="x", name=name, vendor="nvidia", memory_bytes=mib * MIB, compute_capability=89)


def llama8b() -> ModelSpec:
    return ModelSpec(name="meta-llama/Llama-3.1-8B-Instruct", architecture="LlamaForCausalLM", model_type="llama",
                     num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                     head_dim=128, intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072)


def gemma3_12b() -> ModelSpec:
    return ModelSpec(name="google/gemma-3-12b-it", architecture="Gemma3ForCausalLM", model_type="gemma3",
                     num_hidden_layers=48, hidden_size=3840, num_attention_heads=16, num_key_value_heads=8,
                     head_dim=256, intermediate_size=15360, vocab_size=262208, max_position_embeddings=131072,
                     sliding_window=1024, tie_word_embeddings=True,
                     layer_types=["full" if (i + 1) % 6 == 0 else "sliding" for i in range(48)])


def gpt_oss_20b() -> ModelSpec:
    return ModelSpec(name="openai/gpt-oss-20b", architecture="GptOssForCausalLM", model_type="gpt_oss",
                     num_hidden_layers=24, hidden_size=2880, num_attention_heads=64, num_key_value_heads=8,
                     head_dim=64, intermediate_size=2880, vocab_size=201088, max_position_embeddings=131072,
                     num_experts=32, num_experts_per_tok=4, moe_intermediate_size=2880, sliding_window=128,
                     layer_types=["sliding" if i % 2 == 0 else "full" for i in range(24)])


def site(cmd: str, env: dict[str, str] | None = None) -> LaunchSite:
    return LaunchSite(file="t", line=0, argv=[Token(w) for w in cmd.split()],
                      env={k: Token(v) for k, v in (env or {}).items()}, name="t")


def run(cmd: str, spec=llama8b, g=RTX4090, n=1, version=None, env=None):
    cfg = ENGINE.parse(site(cmd, env), version)
    return cfg, ENGINE.plan(cfg, spec(), g, n)


def codes(cfg, plan=None):
    return {f.code for f in cfg.findings + (plan.findings if plan else [])}


# ---------------------------------------------------------------- command line and environment

def test_command_length():
    assert ENGINE.command_length(["llama-server", "-m", "x"]) == 1
    assert ENGINE.command_length(["/app/llama-server"]) == 1
    assert ENGINE.command_length(["llama-cli"]) == 0 and ENGINE.command_length(["vllm", "serve"]) == 0


def test_long_and_short_flags_and_env():
    cfg = ENGINE.parse(site("llama-server --model a-Q8_0.gguf --ctx-size 4096 -np 2 -ctk q4_0 -fa on -ngl 20 -ts 3,1"),
                       None)
    s = cfg.settings
    assert (s["ctx_size"], s["parallel"], s["cache_type_k"], s["flash_attn"], s["n_gpu_layers"]) == \
        (4096, 2, "q4_0", "on", 20)
    assert s["tensor_split"] == [3.0, 1.0] and s["gguf_quant"] == "Q8_0" and not s["kv_unified"]
    env = {"LLAMA_ARG_CTX_SIZE": "8192", "LLAMA_ARG_N_PARALLEL": "3", "LLAMA_ARG_FLASH_ATTN": "enabled",
           "LLAMA_ARG_NO_MMAP": "1", "LLAMA_ARG_MODEL": "/m/x.gguf", "LLAMA_ARG_KV_UNIFIED": "true"}
    s = ENGINE.parse(site("llama-server -c 2048", env), None).settings
    assert s["ctx_size"] == 2048  # the flag wins over LLAMA_ARG_CTX_SIZE
    assert (s["parallel"], s["flash_attn"], s["mmap"], s["model"], s["kv_unified"]) == (3, "on", False, "/m/x.gguf", True)


def test_defaults_by_build():
    new = ENGINE.parse(site("llama-server -m x.gguf"), "b10309").settings
    assert (new["parallel"], new["kv_unified"], new["n_gpu_layers"], new["flash_attn"], new["fit"]) == \
        (4, True, "auto", "auto", True)
    mid = ENGINE.parse(site("llama-server -m x.gguf"), "b6500").settings
    assert (mid["parallel"], mid["kv_unified"], mid["n_gpu_layers"], mid["fit"]) == (1, False, "all", False)
    old = ENGINE.parse(site("llama-server -m x.gguf"), "b4000").settings
    assert (old["n_gpu_layers"], old["flash_attn"]) == (0, "off")


def test_unknown_flag_and_bad_values():
    cfg = ENGINE.parse(site("llama-server -m x.gguf --ctx 8192 -ctk q8 -ngl lots stray"), None)
    msgs = [f.message for f in cfg.findings]
    assert any("--ctx" in m for m in msgs) and any("q8" in m for m in msgs)
    assert any("-ngl" in m for m in msgs) and any("invalid argument: stray" in m for m in msgs)
    assert {"LCPP001", "LCPP002"} <= codes(cfg)


def test_numbers_are_read_the_way_std_stoi_and_stof_read_them():
    # common/arg.cpp: std::stoi(val) / std::stof: the number at the start counts, the rest is ignored
    cfg = ENGINE.parse(site("llama-server -m x.gguf --top-k 0.0 -c 8192.0 -ub 256x --temp 0.7x"), None)
    assert (cfg.settings["ctx_size"], cfg.settings["ubatch_size"]) == (8192, 256)
    assert "LCPP002" not in codes(cfg)
    cfg = ENGINE.parse(site("llama-server -m x.gguf --top-k x0 --temp .5e1 --min-p abc"), None)
    assert sorted(f.message for f in cfg.findings if f.code == "LCPP002") == [
        "argument --min-p: invalid float value: 'abc'", "argument --top-k: invalid int value: 'x0'"]
    env = ENGINE.parse(site("llama-server -m x.gguf", {"LLAMA_ARG_CTX_SIZE": "4096.5"}), None)
    assert env.settings["ctx_size"] == 4096 and "LCPP002" not in codes(env)


def test_flash_attn_value_by_build():
    assert "LCPP002" in codes(ENGINE.parse(site("llama-server -m x.gguf -fa -ngl 99"), "b7000"))
    old = ENGINE.parse(site("llama-server -m x.gguf -fa -ngl 99"), "b5000")
    assert old.settings["flash_attn"] == "on" and "LCPP002" not in codes(old)
    assert "LCPP001" in codes(ENGINE.parse(site("llama-server -m x.gguf -fa on"), "b5000"))


def test_fit_flags_need_b7407():
    assert "LCPP001" in codes(ENGINE.parse(site("llama-server -m x.gguf -fit off"), "b7000"))
    assert "LCPP001" not in codes(ENGINE.parse(site("llama-server -m x.gguf -fit off"), "b8000"))


def test_llama_swap_macros_are_not_errors():
    cfg = ENGINE.parse(site("/app/llama-server --port ${PORT} -m /models/Qwen3-8B-Q4_K_M.gguf -c 16384"), None)
    assert not [f for f in cfg.findings if f.severity == "error"]
    assert cfg.settings["ctx_size"] == 16384 and cfg.settings["gguf_quant"] == "Q4_K_M"


def test_spans_point_at_values():
    sp = Span("compose.yaml", 3, 20, 3, 25, 40, 45)
    s = LaunchSite(file="compose.yaml", line=3, argv=[Token("llama-server"), Token("-c"), Token("32768", sp)], name="x")
    assert ENGINE.parse(s, None).spans["ctx_size"] == sp


def test_hf_repo_quant_and_catalog_name():
    s = ENGINE.parse(site("llama-server -hf bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:Q5_K_M"), None).settings
    assert (s["gguf_base"], s["gguf_quant"]) == ("Meta-Llama-3.1-8B-Instruct", "Q5_K_M")


# ---------------------------------------------------------------- KV cache

def test_done_when_kv_buffer_np4_q8():
    cfg, p = run("llama-server -m Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf -c 32768 -np 4 -ctk q8_0 -ctv q8_0 -fa on")
    assert p.outcome == "started"
    assert p.detail.kv_buffer_mib == 2176.0 and p.detail.n_ctx_per_seq == 8192 and p.max_model_len == 8192
    assert "llama_kv_cache:      CUDA0 KV buffer size =  2176.00 MiB" in p.messages
    assert p.detail.model_buffer_mib == 4403.49
    assert "LCPP007" in codes(cfg, p)


@pytest.mark.parametrize("cmd, version, want", [
    # -c C x N -np N is how N requests of C tokens are written (tune writes it): said, not warned
    ("-c 32768 -np 4", None, ("info", "-c 32768 is shared by 4 slots: each request can use at most 8192 tokens "
                                      "(n_ctx_seq)")),
    ("-c 32768 -np 4 -n 8192", None, ("info", "-c 32768 is shared by 4 slots")),
    # no -c: the model's context, split; -n longer than a slot: the file asks for more per request
    ("-np 4 -fit off", None, ("warning", "no -c: the context (131072 tokens) is shared by 4 slots: each request "
                                         "can use at most 32768 tokens (n_ctx_seq); set -c to the context each "
                                         "request needs x 4 or add -kvu")),
    ("-c 32768 -np 4 -n 16384", None, ("warning", "-n 16384 lets a request generate 16384 tokens, but -c 32768 is "
                                                  "shared by 4 slots")),
    ("-c 32768 -np 4 -n 16384", "b5000", ("warning", "-n 16384 lets a request")),  # no -kvu before b5913
    ("-c 32768 -np 4 -kvu", None, None),
    ("-c 32768", None, None),  # no -np: 4 slots with a unified cache since b6925
    ("-np 4", "b5000", ("warning", "no -c")),
])
def test_context_split_warns_only_where_the_file_expects_more(cmd, version, want):
    cfg, p = run(f"llama-server -m Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf {cmd}", version=version)
    got = [(f.severity, f.message) for f in p.findings if f.code == "LCPP007"]
    if want is None:
        assert got == []
    else:
        assert len(got) == 1 and got[0][0] == want[0] and got[0][1].startswith(want[1])
        assert ("-kvu" in got[0][1]) == (want[0] == "warning" and version is None)


def test_done_when_without_fa_rejected_on_old_builds_and_explained_on_new():
    cfg, p = run("llama-server -m Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf -c 32768 -np 4 -ctk q8_0 -ctv q8_0",
                 version="b6000")
    assert p.outcome == "rejected_config"
    assert any("quantized V cache requires flash_attn" in m for m in p.messages)
    cfg, p = run("llama-server -m Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf -c 32768 -np 4 -ctk q8_0 -ctv q8_0")
    assert p.outcome == "started" and p.detail.flash_attn is True
    info = [f for f in cfg.findings if f.code == "LCPP003"]
    assert info and info[0].severity == "info"


def test_fa_off_with_quantized_v_is_rejected():
    cfg, p = run("llama-server -m x-Q4_K_M.gguf -c 8192 -ctk q8_0 -ctv q8_0 -fa off")
    assert p.outcome == "rejected_config" and "LCPP003" in codes(cfg)


def test_asymmetric_quantized_v_on_cuda_has_no_fa_kernel():
    cfg, p = run("llama-server -m x-Q4_K_M.gguf -c 8192 --cache-type-v q4_0")
    assert p.outcome == "rejected_config"


@pytest.mark.parametrize("ctk,mib", [("f16", 1024.0), ("q8_0", 544.0), ("q4_0", 288.0)])
def test_kv_bytes_by_type(ctk, mib):
    _, p = run(f"llama-server -m x-Q4_K_M.gguf -c 8192 -np 1 -ctk {ctk} -ctv {ctk} -fa on")
    assert p.detail.kv_buffer_mib == mib


def test_ctx_padding_and_streams():
    _, p = run("llama-server -m x-Q4_K_M.gguf -c 10000 -np 3 -fa on")  # PAD(10000)=10240; 10240/3 -> PAD 3584
    assert (p.detail.n_ctx_per_seq, p.detail.n_ctx) == (3584, 3584 * 3)
    _, p = run("llama-server -m x-Q4_K_M.gguf -c 10000 -np 3 -kvu -fa on")
    assert (p.detail.n_ctx_per_seq, p.detail.n_ctx) == (10240, 10240)
    # b5913 - b6867 (llama_model::create_memory, Ollama's vendored b6646 / b6840): each stream holds
    # PAD(ceil(n_ctx / np), padding) cells, padding 32 with FA off: ceil(10000 / 3) = 3334 -> 3360
    _, p = run("llama-server -m x-Q4_K_M.gguf -c 10000 -np 3", version="b6000")
    assert (p.detail.n_ctx_per_seq, p.detail.n_ctx, p.detail.kv_buffer_mib) == (3360, 3 * 3360, 3 * 3360 / 8)
    _, p = run("llama-server -m x-Q4_K_M.gguf -c 4096 -np 3 -fa", version="b6000")  # ceil 1366 -> PAD 256 = 1536
    assert (p.detail.kv_cache_cells, p.detail.kv_buffer_mib) == (1536, 3 * 1536 / 8)
    _, p = run("llama-server -m x-Q4_K_M.gguf -c 8193 -np 2 -fa", version="b6000")  # ceil 4097 -> 4352, not 4096
    assert p.detail.kv_cache_cells == 4352
    _, p = run("llama-server -m x-Q4_K_M.gguf -c 4000 -np 3 -kvu -fa", version="b6000")  # unified: PAD(4000, 256)
    assert (p.detail.kv_cache_cells, p.detail.n_ctx_per_seq) == (4096, 4096)


def test_sliding_window_gemma3():
    _, p = run("llama-server -m gemma-3-12b-it-Q4_K_M.gguf -c 32768 -fa on", spec=gemma3_12b, g=gpu(80000))
    assert p.detail.kv_cache_cells_swa == 4608
    assert p.detail.kv_buffer_mib == 2048.0 + 1440.0
    _, p = run("llama-server -m gemma-3-12b-it-Q4_K_M.gguf -c 32768 -fa on --swa-full", spec=gemma3_12b,
               g=gpu(80000))
    assert p.detail.kv_buffer_mib == 48 * 32768 * 8192 / MIB


def test_sliding_window_gpt_oss_unified_vs_np():
    _, p = run("llama-server -m gpt-oss-20b-mxfp4.gguf -c 131072 -fa on", spec=gpt_oss_20b, g=gpu(80000))
    assert p.detail.kv_buffer_mib == 3072.0 + 24.0
    _, p = run("llama-server -m gpt-oss-20b-mxfp4.gguf -c 131072 -np 4 -fa on", spec=gpt_oss_20b, g=gpu(80000))
    assert p.detail.kv_buffer_mib == 3072.0 + 72.0


def test_mla_stores_k_only_and_needs_equal_types():
    spec = lambda: ModelSpec(name="ds", architecture="X", model_type="deepseek_v3", num_hidden_layers=4,  # noqa: E731
                             hidden_size=512, num_attention_heads=8, num_key_value_heads=8, head_dim=64,
                             intermediate_size=1024, vocab_size=1000, max_position_embeddings=8192, kv_lora_rank=512,
                             qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, q_lora_rank=256)
    _, p = run("llama-server -m ds-Q4_K_M.gguf -c 4096 -fa on", spec=spec)
    assert p.detail.kv_buffer_mib == 4 * 576 * 2 * 4096 / MIB
    cfg, p = run("llama-server -m ds-Q4_K_M.gguf -c 4096 -fa on -ctk q8_0 -ctv f16", spec=spec)
    assert p.outcome == "rejected_config" and "LCPP005" in codes(cfg, p)


def test_recurrent_state_is_f32_per_sequence():
    spec = lambda: ModelSpec(name="m", architecture="X", model_type="mamba2", num_hidden_layers=4,  # noqa: E731
                             hidden_size=256, num_attention_heads=4, num_key_value_heads=4, head_dim=64,
                             intermediate_size=512, vocab_size=1000, max_position_embeddings=8192,
                             layer_types=["mamba", "mamba", "full", "mamba"],
                             mamba={"d_inner": 512, "d_state": 16, "d_conv": 4, "n_groups": 1})
    _, p = run("llama-server -m m-Q8_0.gguf -c 4096 -np 2 -fa on", spec=spec)
    rs = 3 * 4 * ((4 - 1) * (512 + 2 * 16) + 16 * 512) * 2
    assert p.detail.rs_buffer_mib == round(rs / MIB, 2)


# ---------------------------------------------------------------- placement, fit, outcome

def test_ngl_places_output_layer_first_since_b7467():
    _, new = run("llama-server -m x-Q4_K_M.gguf -c 4096 -ngl 1 -fa on")
    _, old = run("llama-server -m x-Q4_K_M.gguf -c 4096 -ngl 1 -fa on", version="b7000")
    assert new.detail.model_buffer_mib == 410.99  # output.weight (Q6_K) + output_norm
    assert 100 < old.detail.model_buffer_mib < 200  # the last repeating layer
    assert new.detail.n_gpu_layers_offloaded == old.detail.n_gpu_layers_offloaded == 1


@pytest.mark.parametrize("version,layers", [("b5285", 0), ("b6500", 33), ("b7500", 33)])
def test_ngl_minus_one_before_b7553_is_the_library_default(version, layers):
    # common_model_params_to_llama copies -ngl only `if (params.n_gpu_layers != -1)`: -1 leaves
    # llama_model_default_params' n_gpu_layers, 0 before #15434 (b6325) and 999 after; -1 = auto from b7553.
    # A public b5285 log (Yudeg1128/Alpy@c68d2be llama_server.log, `-ngl -1 -c 4096`) offloads 0/37 layers.
    _, unset = run("llama-server -m x-Q4_K_M.gguf -c 4096", version=version)
    _, minus_one = run("llama-server -m x-Q4_K_M.gguf -c 4096 -ngl -1", version=version)
    assert minus_one.detail.n_gpu_layers_offloaded == unset.detail.n_gpu_layers_offloaded == layers


def test_fit_lowers_unset_context():
    cfg, p = run("llama-server -m x-Q4_K_M.gguf", g=gpu(12000))
    assert p.outcome == "started" and p.detail.fit["changed_ctx"]
    assert 4096 <= p.detail.n_ctx < 131072 and p.detail.n_ctx % 256 == 0
    assert {"LCPP008", "LCPP010"} <= codes(cfg, p)


def test_fit_moves_layers_when_context_is_explicit():
    cfg, p = run("llama-server -m x-Q4_K_M.gguf -c 131072 -np 1", g=gpu(12000))
    assert p.outcome == "started" and 0 < p.detail.n_gpu_layers_offloaded < 33
    assert "LCPP009" in codes(cfg, p)


def test_explicit_ngl_and_ctx_can_oom():
    cfg, p = run("llama-server -m x-Q4_K_M.gguf -c 131072 -np 1 -ngl 99", g=gpu(12000))
    assert p.outcome == "oom_at_load" and "LCPP006" in codes(cfg, p)
    assert any("out of memory" in m for m in p.messages)


def test_no_fit_before_b7407_means_oom_with_the_training_context():
    # -c 0 is the training context (131072 cells: 16 GiB of KV) and nothing lowers it before --fit
    _, p = run("llama-server -m x-Q4_K_M.gguf -c 0 -ngl 99", g=gpu(12000), version="b7000")
    assert p.outcome == "oom_at_load"


@pytest.mark.parametrize(("version", "cells"), [("b3900", 131072), ("b4500", 4096), ("b7000", 4096)])
def test_unset_context_is_the_builds_default(version, cells):
    # common/common.h common_params::n_ctx: 0 (training context) before PR #10136, 4096 from it until --fit
    # (b7407) made it 0 again; llama-server took it as is
    _, p = run("llama-server -m x-Q4_K_M.gguf -np 1 -ngl 99", g=gpu(80000), version=version)
    assert (p.detail.kv_cache_cells, p.detail.kv_buffer_mib) == (cells, cells / 8)
    assert any(f.code == "LCPP008" and ("defaults to -c 4096" in f.message) == (cells == 4096) for f in p.findings)


def test_two_gpus_split_layers_and_pipeline_copies():
    _, p = run("llama-server -m x-Q4_K_M.gguf -c 16384 -np 1 -fa on", n=2)
    assert len(p.devices) == 2 and p.parallel["pipeline"] == 2
    dev = p.detail.devices_mib
    assert abs(dev["CUDA0"]["kv"] - dev["CUDA1"]["kv"]) <= 128  # 17 / 16 of 33 layers
    _, p = run("llama-server -m x-Q4_K_M.gguf -c 16384 -np 1 -fa on -ts 3,1", n=2)
    dev = p.detail.devices_mib
    assert dev["CUDA0"]["model"] > 2 * dev["CUDA1"]["model"]


def test_no_kv_offload_and_cpu_moe():
    cfg, p = run("llama-server -m x-Q4_K_M.gguf -c 8192 -np 1 -nkvo -fa on")
    assert p.detail.kv_buffer_gpu_mib == 0 and p.detail.kv_buffer_mib == 1024.0
    assert "LCPP016" in codes(cfg, p)
    _, full = run("llama-server -m gpt-oss-20b-mxfp4.gguf -c 8192 -fa on", spec=gpt_oss_20b, g=gpu(80000))
    _, cmoe = run("llama-server -m gpt-oss-20b-mxfp4.gguf -c 8192 -fa on --cpu-moe", spec=gpt_oss_20b, g=gpu(80000))
    assert cmoe.detail.model_buffer_mib < 0.2 * full.detail.model_buffer_mib


def test_unified_memory_warning():
    spark = GpuSpec(key="dgx-spark", name="NVIDIA GB10", vendor="nvidia", memory_bytes=128 * GIB,
                    compute_capability=121, unified_memory=True)
    cfg, p = run("llama-server -m x-Q8_0.gguf -c 131072 -np 4 -fa on", g=spark, spec=lambda: ModelSpec(
        name="big", architecture="X", model_type="llama", num_hidden_layers=80, hidden_size=8192,
        num_attention_heads=64, num_key_value_heads=8, head_dim=128, intermediate_size=28672, vocab_size=128256,
        max_position_embeddings=131072))
    assert "LCPP014" in codes(cfg, p) or p.outcome == "oom_at_load"


def test_local_gguf_file_is_read(tmp_path):
    pytest.importorskip("gguf")
    from test_gguf_reader import write_tiny

    path = str(tmp_path / "tiny.gguf")
    write_tiny(path)
    cfg = ENGINE.parse(site(f"llama-server -m {path} -c 1024 -np 1 -fa on"), None)
    assert cfg.model_ref == path
    spec = ENGINE.resolve_model(cfg)
    p = ENGINE.plan(cfg, spec, RTX4090, 1)
    assert p.detail.model_source == "gguf"
    assert p.detail.kv_buffer_mib == round(2 * 2 * 32 * 2 * 1024 / MIB, 2)  # 2 layers, K+V 2x16 wide, f16


def test_knobs():
    cfg = ENGINE.parse(site("llama-server -m x.gguf"), None)
    names = {k.name for k in ENGINE.knobs(cfg, llama8b(), RTX4090, 1)}
    assert {"ctx_size", "cache_type_k", "parallel"} <= names


@pytest.mark.parametrize(("cmd", "env", "router", "warned"), [
    ("llama-server --models-dir /models", None, True, "up to 4 at once"),  # default --models-max 4
    ("llama-server --models-dir /models --models-max 0", None, True, "with no limit"),
    ("llama-server --models-preset /etc/models.ini --models-max 2", None, True, "up to 2 at once"),
    ("llama-server --models-dir /models --models-max 1", None, True, None),  # one at a time
    ("llama-server", {"LLAMA_ARG_MODELS_MAX": "3"}, True, "up to 3 at once"),
    ("llama-server -m /models/qwen2.5-7b-instruct-q4_k_m.gguf --models-dir /models", None, False, None),
    ("llama-server -hf Qwen/Qwen2.5-7B-Instruct-GGUF --models-max 4", None, False, None),
    ("llama-server --models-dir /models", {"LLAMA_ARG_MODEL": "/models/qwen2.5-7b-instruct-q4_k_m.gguf"}, False, None),
])
def test_router_mode_is_a_server_without_a_model(cmd, env, router, warned):
    """tools/server/server.cpp: is_router_server = model path and hf_repo empty. --models-dir
    beside -m (or LLAMA_ARG_MODEL) changes nothing; LCPP015 used to fire there, and a real
    router was reported as SF002 "no model given"."""
    cfg = ENGINE.parse(site(cmd, env), None)
    assert (cfg.model_ref is None) is router
    found = [f for f in cfg.findings if f.code == "LCPP015"]
    assert [warned in f.message for f in found] == ([True] if warned else [])
    if warned:
        assert "servefit cannot size models this file does not name" in found[0].message


def test_router_mode_is_reported_at_models_max_and_not_as_an_unknown_model(tmp_path, capsys):
    from servefit.cli import main

    f = tmp_path / "serve.sh"
    f.write_text("llama-server --models-dir /models --models-max 4 --port 8080\n")
    rc = main(["lint", str(f), "--gpu", "L4", "--format", "json"])
    import json

    found = [(x["code"], x["location"]["line"], x["location"]["column"]) for x in json.loads(capsys.readouterr().out)]
    assert rc == 0 and found == [("LCPP015", 1, 48)]


def test_before_router_mode_no_model_is_the_default_path():
    """Builds before router mode load common.h's DEFAULT_MODEL_PATH when -m is missing."""
    cfg = ENGINE.parse(site("llama-server --port 8080"), "b6000")
    assert cfg.settings["model"] == "models/7B/ggml-model-f16.gguf"
    assert "no -m: llama-server b6000 loads its default models/7B/ggml-model-f16.gguf (router mode came in b7389)" \
        in cfg.assumptions
    assert not [f for f in cfg.findings if f.code == "LCPP015"]
