"""llama.cpp's KV and recurrent-state buffers by build for the model families whose caches changed shape:
hybrid attention + state models (the attention cache per stream), MLA models (V cached or not), Falcon-H1
(attention and Mamba-2 in every layer), and which layers of a GGUF hold state (load_hparams)."""

from __future__ import annotations

import pytest
from test_llamacpp_engine import MIB, gpu, run

from servefit.engines.llamacpp import kv as K
from servefit.engines.llamacpp.model import from_gguf
from servefit.models import resolve_model
from servefit.models.gguf import GgufInfo


def detail(name: str, cmd: str, version: str):
    _, p = run(f"llama-server -m x-Q4_K_M.gguf {cmd}", spec=lambda: resolve_model(name), version=version,
               g=gpu(400000))
    return p.detail


# Qwen3-Next-80B-A3B (catalog, from its config.json): 48 layers, every 4th full attention (12), 2 KV heads x 256;
# 36 gated-delta-net layers with conv (4 - 1) x (32 x 128 + 2 x 16 x 128) and state 128 x 32 x 128 f32 values
QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
ATTN_CELL = 12 * 2 * 256 * 2 * 2  # K and V, f16, all attention layers
RS_SEQ = 36 * 4 * (3 * (32 * 128 + 2 * 16 * 128) + 128 * 32 * 128)


@pytest.mark.parametrize(("version", "cells_per_stream"), [
    # before PR #19559 (llama_model::create_memory gave the hybrid attention cache cparams.n_ctx per stream)
    ("b6500", 8192), ("b7500", 8192),
    ("b8100", 4096),  # from it n_ctx_seq, as every other model
])
def test_hybrid_attention_cache_per_stream_by_build(version, cells_per_stream):
    d = detail(QWEN3_NEXT, "-c 8192 -np 2 -fa on", version)
    assert d.kv_cache_cells == cells_per_stream
    assert d.kv_buffer_mib == ATTN_CELL * cells_per_stream * 2 / MIB  # 2 streams
    assert d.rs_buffer_mib == round(RS_SEQ * 2 / MIB, 2)  # one state per sequence on every build
    assert d.n_ctx_per_seq == 4096


def test_hybrid_with_unified_cache_is_one_stream_on_every_build():
    for version in ("b6500", "b7500", "b8100"):
        d = detail(QWEN3_NEXT, "-c 8192 -np 2 -kvu -fa on", version)
        assert (d.kv_cache_cells, d.kv_buffer_mib) == (8192, ATTN_CELL * 8192 / MIB)


def test_hybrid_era_pads_the_whole_context_before_b6868():
    # b6646 / b6840 create_memory, hybrid branch: cparams.n_ctx = PAD(n_ctx, padding) (32 without flash
    # attention), no per-stream split, and that many cells in each of the -np streams
    d = detail(QWEN3_NEXT, "-c 5000 -np 3 -fa off", "b6500")
    assert (d.kv_cache_cells, d.n_ctx_per_seq) == (5024, 5024 // 3)
    assert d.kv_buffer_mib == ATTN_CELL * 5024 * 3 / MIB


# DeepSeek-V2-Lite (27 layers) and Kimi K2 (61 layers): kv_lora_rank 512, rope 64 -> K row 576, V row 512
@pytest.mark.parametrize(("name", "layers"), [("deepseek-ai/DeepSeek-V2-Lite-Chat", 27),
                                              ("moonshotai/Kimi-K2-Instruct", 61)])
@pytest.mark.parametrize(("version", "v_row"), [("b6500", 512), ("b7800", 512), ("b7900", 0)])
def test_mla_caches_v_until_the_v_less_cache(name, layers, version, v_row):
    # PR #19067: has_v = !is_mla; before it V held n_embd_head_v = kv_lora_rank per cell
    d = detail(name, "-c 8192 -np 1 -fa on", version)
    assert d.kv_buffer_mib == layers * (576 + v_row) * 2 * 8192 / MIB


# Falcon-H1-1.5B (catalog, config.json): 24 layers each with attention (2 KV heads x 128) and a Mamba-2 mixer
# (48 heads x 64 = d_inner 3072, 1 group, d_state 256, d_conv 4)
def test_falcon_h1_holds_attention_and_state_in_every_layer():
    d = detail("tiiuae/Falcon-H1-1.5B-Instruct", "-c 8192 -np 2 -fa on", "b8100")
    assert d.kv_buffer_mib == 24 * 2 * 128 * 2 * 2 * 4096 * 2 / MIB
    assert d.rs_buffer_mib == round(24 * 4 * (3 * (3072 + 2 * 256) + 256 * 3072) * 2 / MIB, 2)


def _gguf(arch: str, **kv: object) -> GgufInfo:
    return GgufInfo(path="m.gguf", version=3, tensors=[], kv={"general.architecture": arch,
                                                               **{f"{arch}.{k}": v for k, v in kv.items()}})


def test_qwen3_next_gguf_state_layers_follow_the_interval_not_head_count_kv():
    # convert_hf_to_gguf.py writes one head_count_kv for every layer; load_hparams marks layer i recurrent
    # unless (i + 1) % full_attention_interval == 0
    lm = from_gguf(_gguf("qwen3next", block_count=48, embedding_length=2048, context_length=262144,
                         **{"attention.head_count": 16, "attention.head_count_kv": 2, "attention.key_length": 256,
                            "attention.value_length": 256, "ssm.conv_kernel": 4, "ssm.state_size": 128,
                            "ssm.group_count": 16, "ssm.inner_size": 4096, "full_attention_interval": 4}))
    assert [il for il in range(48) if lm.has_kv(il)] == list(range(3, 48, 4))
    cp = K.context(lm, 8192, 1, True, 2048, 512, True, 9000)
    kv = K.layout(lm, cp, "f16", "f16", True, False, 9000)
    assert kv.total - kv.rs_bytes == ATTN_CELL * 8192
    assert kv.rs_bytes == RS_SEQ


def test_nemotron_h_gguf_mlp_blocks_hold_no_state():
    # load_hparams LLM_ARCH_NEMOTRON_H: recurrent = n_head_kv(i) == 0 && n_ff(i) == 0; a block with a
    # feed-forward is an MLP block (no KV, no state), one with KV heads attention
    heads_kv = [0, 0, 8, 0]
    ff = [0, 15680, 0, 0]
    lm = from_gguf(_gguf("nemotron_h", block_count=4, embedding_length=4480, context_length=131072,
                         feed_forward_length=ff, **{"attention.head_count": 40, "attention.head_count_kv": heads_kv,
                                                    "attention.key_length": 128, "attention.value_length": 128,
                                                    "ssm.conv_kernel": 4, "ssm.state_size": 128,
                                                    "ssm.group_count": 8, "ssm.inner_size": 10240}))
    assert lm.recurrent == [True, False, False, True]
    cp = K.context(lm, 4096, 1, True, 2048, 512, True, 9000)
    kv = K.layout(lm, cp, "f16", "f16", True, False, 9000)
    assert kv.rs_bytes == 2 * 4 * (3 * (10240 + 2 * 8 * 128) + 128 * 10240)
    assert kv.total - kv.rs_bytes == 8 * 128 * 2 * 2 * 4096


def phi2():
    # microsoft/phi-2 config.json: 32 layers, hidden 2560, 32 heads (no GQA) of 80
    from servefit.models.spec import ModelSpec

    return ModelSpec(name="microsoft/phi-2", architecture="PhiForCausalLM", model_type="phi", num_hidden_layers=32,
                     hidden_size=2560, num_attention_heads=32, num_key_value_heads=32, head_dim=80,
                     intermediate_size=10240, vocab_size=51200, max_position_embeddings=2048)


@pytest.mark.parametrize(("fa", "version", "rejected"), [
    ("auto", "b9000", True),  # the check runs only for LLAMA_FLASH_ATTN_TYPE_AUTO: 80 % 32 != 0
    ("on", "b9000", False),
    ("off", "b9000", False),
])
def test_block_size_check_is_for_fa_auto_only(fa, version, rejected):
    cfg, p = run(f"llama-server -m phi-2-Q4_K_M.gguf -c 2048 -np 1 -ctk q4_0 -fa {fa}", spec=phi2, version=version)
    codes = {f.code for f in cfg.findings + p.findings}
    assert ("LCPP004" in codes) == rejected
    assert (p.outcome == "rejected_config") == rejected
    if not rejected:  # K rows of 2560 q4_0 values (80 blocks of 18 bytes), V f16
        assert p.detail.kv_buffer_mib == 32 * (2560 // 32 * 18 + 2560 * 2) * 2048 / MIB


def test_no_block_size_check_before_fa_auto():
    cfg, p = run("llama-server -m phi-2-Q4_K_M.gguf -c 2048 -np 1 -ctk q4_0", spec=phi2, version="b6000")
    assert p.outcome != "rejected_config"


@pytest.mark.parametrize(("version", "rejected"), [("b9000", False), ("b10300", True)])
def test_mla_differing_cache_types_refused_from_pr_25871(version, rejected):
    cfg, p = run("llama-server -m x-Q4_K_M.gguf -c 8192 -np 1 -fa on -ctk q8_0 -ctv f16",
                 spec=lambda: resolve_model("deepseek-ai/DeepSeek-V2-Lite-Chat"), version=version, g=gpu(400000))
    assert (p.outcome == "rejected_config") == rejected
    if not rejected:  # V-less: -ctv does nothing; K rows of 576 q8_0 values
        assert p.detail.kv_buffer_mib == round(27 * (576 // 32 * 34) * 8192 / MIB, 2)


# OpenELM-270M (catalog: its configuration_openelm.py entry): KV heads per layer 3 x5, 4 x7, 5 x4 of 64 (layer-wise
# scaling, as convert_hf_to_gguf.py writes head_count_kv per layer)
@pytest.mark.parametrize(("fa", "per_cell"), [
    ("on", 63 * 64 * 2 * 2),  # each layer its own K and V width
    # without flash attention V is stored transposed at hparams.n_embd_v_gqa_max() (5 x 64) in every layer
    ("off", 63 * 64 * 2 + 16 * 320 * 2),
])
def test_openelm_kv_heads_per_layer(fa, per_cell):
    d = detail("apple/OpenELM-270M", f"-c 2048 -np 1 -fa {fa}", "b9000")
    assert d.kv_buffer_mib == round(per_cell * 2048 / MIB, 2)


# Sliding-window families at -c 32768 -np 1 -fa on, b9000: the SWA cache holds PAD(min(n_ctx, n_swa + n_ubatch), 256)
# cells (llama_kv_cache_iswa); per layer-cell K + V f16 = KV heads x head x 4 bytes. Layer facts from each catalog
# entry (its config.json) and the arch's set_swa_pattern in llama-model.cpp load_hparams.
@pytest.mark.parametrize(("name", "full", "swa", "cell", "swa_cells"), [
    # Gemma 2 9B: 42 layers, pattern 2 (even layers SWA, window 4096), 8 KV heads x 256
    ("google/gemma-2-9b-it", 21, 21, 8 * 256 * 4, 4608),
    # Gemma 3n E2B: 30 layers, pattern 5 (window 512), the last 10 share earlier layers' KV
    # (n_layer_kv_from_start = 20): 4 full + 16 SWA layers of 2 KV heads x 256 hold a cache
    ("google/gemma-3n-E2B-it", 4, 16, 2 * 256 * 4, 1024),
    # Llama 4 Scout: chunked attention, n_swa 8192, pattern 4, 8 KV heads x 128
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", 12, 36, 8 * 128 * 4, 8704),
    # Command R7B (cohere2): pattern 4, window 4096, 8 KV heads x 128
    ("CohereLabs/c4ai-command-r7b-12-2024", 8, 24, 8 * 128 * 4, 4608),
])
def test_sliding_window_families(name, full, swa, cell, swa_cells):
    d = detail(name, "-c 32768 -np 1 -fa on", "b9000")
    assert d.kv_cache_cells_swa == swa_cells
    assert d.kv_buffer_swa_mib == swa * cell * swa_cells / MIB
    assert d.kv_buffer_mib == (full * 32768 + swa * swa_cells) * cell / MIB


@pytest.mark.parametrize(("name", "per_cell"), [
    ("microsoft/Phi-3-mini-4k-instruct", 32 * 32 * 96 * 4),  # LLM_ARCH_PHI3: "Phi SWA is currently disabled"
    ("mistralai/Mistral-7B-Instruct-v0.1", 32 * 8 * 128 * 4),  # LLM_ARCH_LLAMA reads no sliding window
])
def test_windows_llama_cpp_ignores(name, per_cell):
    d = detail(name, "-c 32768 -np 1 -fa on", "b9000")
    assert d.kv_cache_cells_swa is None
    assert d.kv_buffer_mib == per_cell * 32768 / MIB


@pytest.mark.parametrize(("ctk", "ctv", "k_row", "v_row"), [
    ("q8_0", "q4_0", 1024 // 32 * 34, 1024 // 32 * 18),
    ("q5_1", "iq4_nl", 1024 // 32 * 24, 1024 // 32 * 18),
    ("q4_1", "q5_0", 1024 // 32 * 20, 1024 // 32 * 22),
    ("f32", "bf16", 1024 * 4, 1024 * 2),
])
def test_k_and_v_types_size_each_half(ctk, ctv, k_row, v_row):
    # Llama 3.1 8B: 32 layers, K and V rows of 8 heads x 128 = 1024 values; ggml_row_size per type
    # (block of 32: q8_0 34 B, q4_0 / iq4_nl 18, q4_1 20, q5_0 22, q5_1 24)
    _, p = run(f"llama-server -m x-Q4_K_M.gguf -c 4096 -np 1 -fa on -ctk {ctk} -ctv {ctv}", version="b9000")
    assert p.detail.kv_buffer_mib == 32 * (k_row + v_row) * 4096 / MIB


def test_gemma4_12b_unified_is_llama_cpp_gemma4_with_a_window_cache():
    # google/gemma-4-12B-it (model_type gemma4_unified): its GGUF is general.architecture = gemma4, so the 40 SWA
    # layers (8 KV heads x 256) hold n_swa + n_ubatch = 1024 + 2048 cells and the 8 full layers (1 KV head x 512,
    # V cached) the whole context: 128.00 + 960.00 MiB, as build 9849 logged it (HilbertRaum issue 399 sweep)
    d = detail("google/gemma-4-12B-it", "-c 8192 -np 1 -b 2048 -ub 2048 -fa on", "b9849")
    assert d.kv_buffer_swa_mib == 40 * 8 * 256 * 2 * 2 * 3072 / MIB == 960.0
    assert d.kv_buffer_mib == 960.0 + 8 * 512 * 2 * 2 * 8192 / MIB == 1088.0
