"""FlashInfer attention in vLLM's CUDA-graph capture: which runs use it (attn_backend.py, the 0.12 -
0.24 priority lists) and what its decode wrappers and float workspace add to the logged capture
(graphs.py FLASHINFER_DECODE_WORKSPACE / FLASHINFER_FLOAT_WORKSPACE). Numbers by hand."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from servefit.engines.vllm.attn_backend import flashinfer_attention, flashinfer_decode_wrappers
from servefit.engines.vllm.era import era
from servefit.engines.vllm.plan import resolve
from servefit.hardware.catalog import resolve_gpu

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import LLAMA8B, run  # noqa: E402

MiB = 2**20
A100, H100, B200, GB10 = (resolve_gpu(n) for n in ("A100-80GB", "H100", "B200", "GB10"))
ARGV = "vllm serve m --max-model-len 8192"


def _flashinfer(argv, gpu, version, env=None, model=LLAMA8B):
    cfg, _ = run(argv, model=model, gpu=gpu, version=version, env=env)
    r, e = resolve(cfg, model, gpu, era(version, env)), era(version, env)
    return (flashinfer_attention(model, r, e, gpu, cfg.settings, cfg.env),
            flashinfer_decode_wrappers(model, r, e, gpu, cfg.settings, cfg.env))


def test_which_runs_use_flashinfer_attention():
    fp8 = ARGV + " --kv-cache-dtype fp8"
    # FLASH_ATTN first off Blackwell; it refuses an fp8 KV cache unless FA3 runs on Hopper
    assert _flashinfer(ARGV, A100, "0.19.0") == (False, False)
    assert _flashinfer(fp8, A100, "0.19.0") == (True, True)
    assert _flashinfer(fp8, GB10, "0.24.0") == (True, True)
    assert _flashinfer(fp8, H100, "0.19.0") == (False, False)
    # before the 0.12 priority list: FlashAttention unless chosen
    assert _flashinfer(fp8, A100, "0.11.0") == (False, False)
    # FLASHINFER first on the 10.x family, whose decode runs TRT-LLM's kernels, not the wrappers
    assert _flashinfer(ARGV, B200, "0.19.0") == (True, False)
    # chosen by flag or variable
    assert _flashinfer(ARGV + " --attention-backend FLASHINFER", A100, "0.19.0") == (True, True)
    assert _flashinfer(fp8, A100, "0.19.0", env={"VLLM_ATTENTION_BACKEND": "TRITON_ATTN"}) == (False, False)
    # attention sinks (gpt-oss) need TRT-LLM attention: off the 10.x family they fall through to Triton
    oss = replace(LLAMA8B, architecture="GptOssForCausalLM", head_dim=64)
    assert _flashinfer(fp8, A100, "0.19.0", model=oss) == (False, False)
    assert _flashinfer(fp8, B200, "0.19.0", model=oss) == (True, False)
    # head sizes FlashInfer lacks (64 / 128 / 256 only) fall through to Triton
    assert _flashinfer(fp8, A100, "0.19.0", model=replace(LLAMA8B, head_dim=96)) == (False, False)


def test_each_full_decode_size_pays_a_flashinfer_int_workspace():
    # 0.19 on an A100, default 256 sequences: FULL_AND_PIECEWISE, 35 FULL decode sizes (1, 2, 4, 8 ... 256);
    # an fp8 KV cache moves attention to FlashInfer, one 8 MiB int workspace per FULL size. The KV dtype
    # changes nothing else in the graph term.
    _, fa = run(ARGV + " --kv-cache-dtype fp8", gpu=A100, version="0.19.0",
                env={"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"})
    _, fi = run(ARGV + " --kv-cache-dtype fp8", gpu=A100, version="0.19.0")
    assert fi.memory.cuda_graphs - fa.memory.cuda_graphs == 35 * 8 * MiB
    # 128 sequences: 19 FULL sizes (1, 2, 4, 8 ... 128)
    _, fa128 = run(ARGV + " --kv-cache-dtype fp8 --max-num-seqs 128", gpu=A100, version="0.19.0",
                   env={"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"})
    _, fi128 = run(ARGV + " --kv-cache-dtype fp8 --max-num-seqs 128", gpu=A100, version="0.19.0")
    assert fi128.memory.cuda_graphs - fa128.memory.cuda_graphs == 19 * 8 * MiB
    # PIECEWISE only: no FULL graph, no wrapper
    pw = ARGV + " --kv-cache-dtype fp8 -cc.cudagraph_mode=PIECEWISE"
    _, fa_pw = run(pw, gpu=A100, version="0.19.0", env={"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"})
    _, fi_pw = run(pw, gpu=A100, version="0.19.0")
    assert fi_pw.memory.cuda_graphs == fa_pw.memory.cuda_graphs


def test_a_hybrid_allocates_the_float_workspace_inside_the_capture():
    # Mamba layers run their own backend, so kernel_warmup.py skips the FlashInfer warm-up and the first
    # FULL warm-up allocates the 394 MiB float workspace (from 0.18, on a cache emptied at the start)
    hybrid = replace(LLAMA8B, layer_types=["mamba", "mamba", "mamba", "full"] * 8)
    fp8 = ARGV + " --kv-cache-dtype fp8"
    _, fa = run(fp8, model=hybrid, gpu=A100, version="0.24.0", env={"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"})
    _, fi = run(fp8, model=hybrid, gpu=A100, version="0.24.0")
    assert fi.memory.cuda_graphs - fa.memory.cuda_graphs == 35 * 8 * MiB + 394 * MiB
    _, sized = run(fp8, model=hybrid, gpu=A100, version="0.24.0",
                   env={"VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE": str(128 * MiB)})
    assert fi.memory.cuda_graphs - sized.memory.cuda_graphs == (394 - 128) * MiB
    # before 0.18 capture_model reads free memory without emptying the cache first: not counted
    _, fa17 = run(fp8, model=hybrid, gpu=A100, version="0.17.0", env={"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"})
    _, fi17 = run(fp8, model=hybrid, gpu=A100, version="0.17.0")
    assert fi17.memory.cuda_graphs - fa17.memory.cuda_graphs == 35 * 8 * MiB
    # a dense model runs the warm-up first: no float workspace in the capture
    _, dense_fa = run(fp8, gpu=A100, version="0.24.0", env={"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"})
    _, dense_fi = run(fp8, gpu=A100, version="0.24.0")
    assert dense_fi.memory.cuda_graphs - dense_fa.memory.cuda_graphs == 35 * 8 * MiB



def test_speculative_decoding_takes_flashinfer_off_full_decode_graphs():
    # FlashInfer without TRT-LLM decode supports single-token decode graphs only: a 4-token uniform
    # decode batch falls back to PIECEWISE, unrounded: 51 sizes (1, 2, 4, 8 ... 256, 272 ... 512) at 64
    # sequences; FlashAttention (UNIFORM_BATCH) keeps 49 rounded piecewise + 33 full sizes
    spec = ' --speculative-config {"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}'
    argv = ARGV + " --kv-cache-dtype fp8 --max-num-seqs 64" + spec

    def graphs(gpu, env=None, extra=""):
        return run(argv + extra, gpu=gpu, version="0.19.0", env=env)[1].detail.cuda_graph_sizes

    assert graphs(A100) == 51
    assert graphs(A100, {"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"}) == 49 + 33
    # the 10.x family decodes with TRT-LLM's kernels (UNIFORM_BATCH): full graphs stay
    assert graphs(B200) == 49 + 33
    # FULL_DECODE_ONLY compiles attention in: no piecewise graphs to fall back to, none at all
    assert graphs(A100, extra=" -cc.cudagraph_mode=FULL_DECODE_ONLY") == 0
    assert graphs(A100, {"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"}, " -cc.cudagraph_mode=FULL_DECODE_ONLY") == 33


def test_the_plan_says_where_flashinfer_runs():
    fp8 = ARGV + " --kv-cache-dtype fp8"
    spec = ' --speculative-config {"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}'
    _, p = run(fp8, gpu=A100, version="0.19.0")
    notes = [a for a in p.assumptions if a.startswith("attention:")]
    assert notes == ["attention: vLLM 0.19.0 runs FlashInfer here (FlashAttention takes an fp8 KV cache only on "
                     "Hopper); each of its 35 full decode graphs keeps a decode wrapper with an 8 MiB workspace "
                     "(280 MiB in the CUDA-graph memory)"]
    _, s = run(fp8 + spec, gpu=A100, version="0.19.0")
    assert [a for a in s.assumptions if a.startswith("attention:")] == [
        "attention: vLLM 0.19.0 runs FlashInfer here (FlashAttention takes an fp8 KV cache only on Hopper); its "
        "decode graphs take one token per request, so with speculative decoding vLLM captures no full decode "
        "graphs (piecewise graphs only)"]
    _, c = run(ARGV + " --attention-backend FLASHINFER --max-num-seqs 128", gpu=A100, version="0.19.0")
    assert [a for a in c.assumptions if a.startswith("attention:")] == [
        "attention: vLLM 0.19.0 runs FlashInfer here (chosen); each of its 19 full decode graphs keeps a decode "
        "wrapper with an 8 MiB workspace (152 MiB in the CUDA-graph memory)"]
    for quiet in (run(ARGV, gpu=A100, version="0.19.0")[1], run(fp8, gpu=H100, version="0.19.0")[1],
                  run(fp8 + " --enforce-eager", gpu=A100, version="0.19.0")[1],
                  run(fp8 + " --enforce-eager" + spec, gpu=A100, version="0.19.0")[1]):
        assert not [a for a in quiet.assumptions if a.startswith("attention:")]
