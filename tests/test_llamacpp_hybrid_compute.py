"""llama.cpp's compute buffer for hybrid models (gated delta net + full attention, Qwen3.5/3.6):
the logits do not stack on the attention masks as they do in dense models (engines/llamacpp/compute.py;
issue 16's nbchat Qwen3.5-9B log, b8193: 1972.00 MiB)."""

from __future__ import annotations

import shlex

from servefit.pipeline import Target, evaluate, site_from_argv

MIB = 2**20


def _compute_mib(cmd: str, gpu: str, version: str) -> float:
    plan = evaluate(site_from_argv(shlex.split(cmd)), Target(gpu=gpu, engine_version=version)).plan
    return float(plan.detail.as_dict()["compute_buffer_mib"])


def test_qwen35_9b_ub2048_is_logits_plus_final_norm():
    # before b9460 the reserve makes logits for all n_ubatch tokens: 248320 x 2048 f32, plus the final
    # norm 4096 x 2048 f32; the FA masks (6 x 131072 x 2048 = 1536 MiB) are not added on top
    want = (248320 * 2048 * 4 + 4096 * 2048 * 4) / MIB
    assert want == 1972.0
    got = _compute_mib("llama-server -hf unsloth/Qwen3.5-9B-GGUF:Q8_0 -np 1 -c 131072 -ngl 999 -fa 1 "
                       "-ctk q8_0 -ctv q8_0 -ub 2048", "Tesla T4", "b8193")
    assert got == want


def test_qwen36_35b_a3b_ub512_is_the_attention_phase():
    # the attention phase outgrows the logits at n_ctx 262144: f32 mask + f16 copy 6 x 262144 x 512
    # (768 MiB) + residual 4 x 512 x 2048 f32 (16 MiB); logits 248320 x 512 f32 + norm = 489 MiB
    want = (6 * 262144 * 512 + 4 * 512 * 4 * 2048) / MIB
    assert want == 784.0
    got = _compute_mib("llama-server -hf unsloth/Qwen3.6-35B-A3B-GGUF:Q6_K -np 1 -c 262144 -ngl 999 -fa 1 "
                       "-b 2048 -ub 512", "NVIDIA RTX PRO 6000 Blackwell Server Edition", "b8836")
    assert got == want


def test_a_dense_model_stacks_the_logits_on_the_masks_only_when_they_outgrow_the_hole():
    # ggml-alloc.c ggml_dyn_tallocr_alloc: best fit among freed blocks, the buffer grows only when none holds the
    # tensor. Qwen3-8B (dense, vocab 151936, n_embd 4096) at ub 2048, b8193: at 8192 cells the logits (1187 MiB)
    # outgrow the freed masks (6 x 8192 x 2048 = 96 MiB) and stack on them, less two residual rows ...
    stacked = (151936 * 2048 * 4 + 4096 * 2048 * 4 + 6 * 8192 * 2048 - 8 * 4096 * 2048) / MIB
    got = _compute_mib("llama-server -hf Qwen/Qwen3-8B-GGUF:Q8_0 -np 1 -c 8192 -ngl 999 -fa 1 -ub 2048",
                       "NVIDIA RTX PRO 6000 Blackwell Server Edition", "b8193")
    assert got == stacked == 1251.0
    # ... at 131072 the 1536 MiB mask hole holds them: the attention phase (masks + 4 residual rows) is the peak
    attention = (6 * 131072 * 2048 + 4 * 2048 * 4 * 4096) / MIB
    got = _compute_mib("llama-server -hf Qwen/Qwen3-8B-GGUF:Q8_0 -np 1 -c 131072 -ngl 999 -fa 1 -ub 2048",
                       "NVIDIA RTX PRO 6000 Blackwell Server Edition", "b8193")
    assert got == attention == 1664.0


def test_llama31_8b_in_ollamas_llama_runner_logs_the_attention_phase_at_131072():
    # Ollama 0.21.0's llama runner (calibration ollm-robustness-8xa100-...): n_ctx 131072, ub 512, flash attention
    # on, one sequence: CUDA1 compute buffer 416.01 MiB = masks 6 x 131072 x 512 (384) + residual 32; the logits
    # (128256 x 512 x 4 = 250.5 MiB) reuse the freed mask block
    got = _compute_mib("llama-server -hf bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:Q4_K_M -np 1 -c 131072 -b 512 "
                       "-ub 512 -ngl 99 -fa on", "NVIDIA A100-SXM4-80GB", "b7440")
    assert got == 416.0


def test_qwen35_recurrent_state_from_the_catalog():
    # llama_hparams::n_embd_r / n_embd_s for Qwen3.5-9B (24 gated-delta-net layers of 32): conv state
    # (4 - 1) x (32 x 128 + 2 x 16 x 128) = 24576 and state 128 x (32 x 128) = 524288 f32 per layer, one
    # sequence: 4 x (24576 + 524288) x 24 = 50.25 MiB, logged beside the 2176 MiB KV buffer (8 attention
    # layers x 131072 cells x 2 x 1088-byte q8_0 rows), which leaves it out
    rs = 4 * (24576 + 524288) * 24
    plan = evaluate(site_from_argv(shlex.split(
        "llama-server -hf unsloth/Qwen3.5-9B-GGUF:Q8_0 -np 1 -c 131072 -ngl 999 -fa 1 -ctk q8_0 -ctv q8_0 -ub 2048")),
        Target(gpu="Tesla T4", engine_version="b8193")).plan
    d = plan.detail.as_dict()
    assert rs / MIB == 50.25 and d["rs_buffer_mib"] == 50.25
    assert d["kv_buffer_mib"] == 8 * 131072 * 2 * 1088 / MIB == 2176.0
    assert plan.memory.kv_cache == 8 * 131072 * 2 * 1088 + rs
    assert "llama_memory_recurrent:      CUDA0 RS buffer size =    50.25 MiB" in plan.messages
    assert "llama_kv_cache:      CUDA0 KV buffer size =  2176.00 MiB" in plan.messages
    # llama_params_fit_impl's projection counts the RS buffer: the log's 12243 MiB
    assert any("projected to use 12243 MiB of device memory" in m for m in plan.messages)
