"""vLLM's CUDA-graph capture, replayed from the engine's code release by release: which mode
(CUDAGraphMode) a command captures in, which sizes each mode captures, and the sets V0 captures per
pipeline stage. Every count is what capture_model would loop over for that command."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from servefit.engines.vllm.graphs import GRAPH_FULL_PER_LAYER, GRAPH_PIECEWISE_PER_LAYER

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import L4, run  # noqa: E402

# At max_num_seqs 128 from 0.11: piecewise sizes [1, 2, 4] + 8..256 step 8 = 35, full decode sizes up to 128 = 19
ARGV = "vllm serve m --max-model-len 8192 --max-num-seqs 128 "


def graphs(extra: str, version: str):
    _, p = run(ARGV + extra, gpu=L4, version=version)
    return p.detail.cuda_graph_sizes, p.memory.cuda_graphs


MiB = 2**20
# The full graphs' own pool (V0's CUDAGraphRunner, V1's FULL-only modes) as PyTorch's caching allocator
# reserves it for Llama-3.1-8B's forwards, bf16, largest size first (graph_pool.py). 35 sizes up to 256
# tokens: a 20 MiB segment (kLargeBuffer) for the 2 - 7 MiB tensors (hidden 2, qkv 3, attention output 2,
# SiluAndMul 7) and gate_up's 14 MiB rounded to 2 MiB; 248 tokens' slightly smaller tensors split those
# blocks and take another 20 MiB segment; below 128 tokens the <= 1 MiB tensors fill two 2 MiB small-pool
# segments (kSmallBuffer). 19 sizes up to 128: the 1 MiB hidden and attention tensors are small (two
# 2 MiB segments), qkv 1.5, SiluAndMul 3.5 and gate_up 7 MiB share one 20 MiB segment.
OWN_POOL = {256: (20 + 14 + 20 + 2 + 2) * MiB, 128: (2 + 20 + 2) * MiB}


def pool(piecewise: int, full: int, layers: int = 32, largest: int = 0) -> int:
    """Per-layer graph terms; where no piecewise graph is captured, the full graphs' own pool (OWN_POOL)."""
    own = OWN_POOL[largest] if not piecewise else 0
    return layers * (piecewise * GRAPH_PIECEWISE_PER_LAYER + full * GRAPH_FULL_PER_LAYER) + own


def test_the_default_mode_per_release():
    # 0.10: V1 captures piecewise graphs only
    assert graphs("", "0.10.1") == (35, pool(35, 0))
    # 0.11 on: FULL_AND_PIECEWISE
    assert graphs("", "0.11.0") == (35 + 19, pool(35, 19))
    assert graphs("", "0.13.0") == (35 + 19, pool(35, 19))


def test_compilation_levels_up_to_011_capture_only_at_level_3():
    # -O<n> is the compilation level up to 0.11: levels 1 and 2 compile without splitting the model,
    # and VllmConfig.__post_init__ leaves cudagraph_mode NONE
    assert graphs("-O2", "0.10.1") == (0, 0)
    assert graphs("-O1", "0.11.0") == (0, 0)
    assert graphs("--compilation-config 2", "0.11.0") == (0, 0)
    assert graphs("-O3", "0.11.0") == (35 + 19, pool(35, 19))
    # 0.9 / 0.10.0: use_cuda_graph needs level 3 and use_cudagraph
    assert graphs('--compilation-config {"level":1}', "0.9.2") == (0, 0)
    assert graphs('--compilation-config {"use_cudagraph":false}', "0.10.0") == (0, 0)


def test_optimization_levels_from_012():
    # OPTIMIZATION_LEVEL_01: PIECEWISE; _02 / _03: FULL_AND_PIECEWISE
    assert graphs("-O1", "0.12.0") == (35, pool(35, 0))
    assert graphs("-O3", "0.12.0") == (35 + 19, pool(35, 19))
    assert graphs("-O0", "0.12.0") == (0, 0)


def test_an_explicit_cudagraph_mode_is_captured_as_written():
    # FULL: every size as one full graph of a mixed batch, no separate decode graphs
    assert graphs("-O.cudagraph_mode=FULL", "0.12.0") == (35, pool(0, 35, largest=256))
    # FULL_DECODE_ONLY: the uniform decode sizes only
    assert graphs('--compilation-config {"cudagraph_mode":"FULL_DECODE_ONLY"}', "0.12.0") == (19, pool(0, 19, largest=128))
    assert graphs('--compilation-config {"cudagraph_mode":"PIECEWISE"}', "0.11.0") == (35, pool(35, 0))
    assert graphs('--compilation-config {"cudagraph_mode":"NONE"}', "0.20.0") == (0, 0)
    # 0.10.0: full_cuda_graph captures the whole forward as one graph per size
    assert graphs('--compilation-config {"full_cuda_graph":true}', "0.10.0") == (35, pool(0, 35, largest=256))


def test_a_compilation_mode_other_than_vllm_compile_drops_the_graphs_it_cannot_capture():
    full_decode = '--compilation-config {"mode":0,"cudagraph_mode":"FULL_DECODE_ONLY"}'
    # 0.12 overrides every mode to NONE; from 0.13 only modes that need the piecewise split
    assert graphs(full_decode, "0.12.0") == (0, 0)
    assert graphs(full_decode, "0.13.0") == (19, pool(0, 19, largest=128))
    assert graphs('--compilation-config {"mode":2}', "0.13.0") == (0, 0)
    # up to 0.11 a full mode runs at any level
    assert graphs('--compilation-config {"level":0,"cudagraph_mode":"FULL"}', "0.11.0") == (35, pool(0, 35, largest=256))


def test_pooling_models_capture_piecewise_graphs_only():
    assert graphs("--runner pooling", "0.11.0") == (35, pool(35, 0))
    assert graphs("--runner pooling", "0.20.0") == (35, pool(35, 0))
    # decode context parallel in 0.12 only
    _, dcp12 = run(ARGV + "-tp 2 -dcp 2", gpu=L4, version="0.12.0", count=2)
    _, dcp13 = run(ARGV + "-tp 2 -dcp 2", gpu=L4, version="0.13.0", count=2)
    assert dcp12.detail.cuda_graph_sizes == 35 and dcp13.detail.cuda_graph_sizes == 35 + 19
    # prefill context parallel too, in 0.12 only (VllmConfig.__post_init__'s PCP branch)
    pcp = ARGV + '--prefill-context-parallel-size 2'
    assert run(pcp, gpu=L4, version="0.12.0", count=2)[1].detail.cuda_graph_sizes == 35
    assert run(pcp, gpu=L4, version="0.13.0", count=2)[1].detail.cuda_graph_sizes == 35 + 19


def test_v0_captures_a_set_of_graphs_per_pipeline_stage():
    # worker/model_runner.py::capture_model loops over the virtual engines: each rank captures its
    # stage's layers once per stage. 0.7.3 at 256 sequences: [1, 2, 4] + 8..256 step 8 = 35 sizes
    _, one = run("vllm serve m --max-model-len 8192", gpu=L4, version="0.7.3")
    _, two = run("vllm serve m --max-model-len 8192 -pp 2", gpu=L4, version="0.7.3", count=2)
    # One pool for every graph (graph_memory_pool), holding the largest batch's forward: 256 tokens
    assert one.detail.cuda_graph_sizes == 35 and one.memory.cuda_graphs == pool(0, 35, largest=256)
    assert two.detail.cuda_graph_sizes == 2 * 35
    assert two.memory.cuda_graphs == pool(0, 2 * 35, layers=16, largest=256)
    # V0's -O0 is compilation level 0 (its default): the decode graphs are still captured
    _, o0 = run("vllm serve m --max-model-len 8192 -O0", gpu=L4, version="0.7.3")
    assert o0.detail.cuda_graph_sizes == 35


def test_hopper_capture_stream_holds_a_32_mib_cublas_workspace():
    from test_vllm_engine import H100

    from servefit.engines.vllm.graphs import CUBLAS_WORKSPACE, CUBLAS_WORKSPACE_SM90

    # 4096 x 8 KiB on sm90 against 4096 x 2 + 16 x 8 KiB elsewhere (PyTorch's default per stream)
    assert CUBLAS_WORKSPACE_SM90 - CUBLAS_WORKSPACE == 32 * 2**20 - (8 * 2**20 + 128 * 2**10)
    # 0.10.1: piecewise graphs only, so no FA3 split buffers: the workspace is the whole difference
    _, hopper = run(ARGV, gpu=H100, version="0.10.1")
    _, ada = run(ARGV, gpu=L4, version="0.10.1")
    assert hopper.memory.cuda_graphs - ada.memory.cuda_graphs == CUBLAS_WORKSPACE_SM90 - CUBLAS_WORKSPACE
    # eager: no capture stream, no workspace
    _, eager = run(ARGV + "--enforce-eager", gpu=H100, version="0.10.1")
    assert eager.memory.cuda_graphs == 0


def test_the_official_image_autotunes_before_the_capture_from_0102():
    # the vllm/vllm-openai image installs FlashInfer with its JIT toolchain, so on Hopper the capture log
    # reads the autotune forward (max_num_batched_tokens 8192 on an 80 GB H100) lower from 0.10.2 on;
    # `pip install vllm` brings FlashInfer only from 0.11.1. What comes back is the segments the caching
    # allocator reserved for that forward (test_vllm_profile.py works them out: 1024 MiB for Llama-3.1-8B)
    from test_vllm_engine import ENGINE, H100, LLAMA8B

    from servefit.pipeline import site_from_argv

    released = 1024 * 2**20

    def plan(version: str, image: str | None):
        site = site_from_argv("vllm serve m --max-model-len 8192".split(), {})
        site.image = image
        return ENGINE.plan(ENGINE.parse(site, version), LLAMA8B, H100, 1)

    pool = plan("0.11.0", None).memory.cuda_graphs
    assert plan("0.11.0", None).detail.logged_cuda_graph_bytes == pool
    assert plan("0.11.0", "vllm/vllm-openai:v0.11.0").detail.logged_cuda_graph_bytes == pool - released
    assert plan("0.12.0", None).detail.logged_cuda_graph_bytes == plan("0.12.0", None).memory.cuda_graphs - released
    assert plan("0.11.1", None).detail.logged_cuda_graph_bytes == plan("0.11.1", None).memory.cuda_graphs - released
    # 0.10.1 autotunes after the capture, 0.18 empties the cache before its first reading: image or not
    for version in ("0.10.1", "0.18.0"):
        p = plan(version, "vllm/vllm-openai:v" + version)
        assert p.detail.logged_cuda_graph_bytes == p.memory.cuda_graphs


def test_fused_moe_layers_add_their_kernels_to_every_graph():
    from dataclasses import replace

    from test_vllm_engine import LLAMA8B

    from servefit.engines.vllm.graphs import GRAPH_NODE, moe_extra_kernels

    # a node is the FULL graph's per-layer term over its 10 kernels
    assert GRAPH_NODE == GRAPH_FULL_PER_LAYER / 10 == int(0.10 * 2**20) / 10
    moe = replace(LLAMA8B, num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768)
    assert moe_extra_kernels(LLAMA8B) == 0 and moe_extra_kernels(moe) == 4
    # DeepSeek-style: two leading dense layers, a shared expert on each MoE layer (gate_up, act, down)
    shared = replace(moe, first_k_dense_replace=2, num_shared_experts=1)
    assert moe_extra_kernels(shared) == 7 * 30 / 32
    # Llama-4-style interleave: every second layer
    assert moe_extra_kernels(replace(moe, moe_layer_step=2)) == 4 * 16 / 32
    # 0.10.1 at 128 sequences: 35 piecewise graphs, each layer 4 nodes more
    _, dense = run(ARGV, gpu=L4, version="0.10.1")
    _, sparse = run(ARGV, model=moe, gpu=L4, version="0.10.1")
    assert dense.memory.cuda_graphs == pool(35, 0)
    assert sparse.memory.cuda_graphs == 32 * (35 * GRAPH_PIECEWISE_PER_LAYER + int(35 * 4 * GRAPH_NODE))
    # 0.11: 35 piecewise + 19 full graphs
    _, sparse11 = run(ARGV, model=moe, gpu=L4, version="0.11.0")
    assert sparse11.memory.cuda_graphs == pool(35, 19) + 32 * int(54 * 4 * GRAPH_NODE)


def test_layers_without_a_mixer_have_no_piece_of_their_own():
    from dataclasses import replace

    from test_vllm_engine import LLAMA8B

    from servefit.engines.vllm.graphs import GRAPH_NODE, GRAPH_PIECE, split_layers_per_layer
    from servefit.models.catalog import lookup

    # the piecewise term splits into the piece's graph and its 8 kernel nodes
    assert GRAPH_PIECE + 8 * GRAPH_NODE == GRAPH_PIECEWISE_PER_LAYER
    # Nemotron-H: mamba, MLP, attention, MLP: 2 pieces; nodes 3 per mixer, 4 per MLP layer; a FULL graph
    # adds 2 per mixer
    nh = replace(LLAMA8B, architecture="NemotronHForCausalLM", num_hidden_layers=4,
                 layer_types=["mamba", "none", "full", "none"])
    nodes = 2 * 3 + 2 * 4
    assert split_layers_per_layer(nh, 35, 19) == int((35 * (2 * GRAPH_PIECE + nodes * GRAPH_NODE)
                                                      + 19 * (nodes + 4) * GRAPH_NODE) / 4)
    # its MoE layers: add + RMSNorm, router and the fused-MoE op (8)
    nh_moe = replace(nh, num_experts=128, num_experts_per_tok=6)
    assert split_layers_per_layer(nh_moe, 1, 0) == int((2 * GRAPH_PIECE + (2 * 3 + 2 * 8) * GRAPH_NODE) / 4)
    # Nemotron-NAS: a dense layer and a no-op-attention layer (its MLP: 4 nodes)
    nas = replace(LLAMA8B, architecture="DeciLMForCausalLM", num_hidden_layers=2, layer_types=["full", "none"])
    assert split_layers_per_layer(nas, 1, 1) == int((GRAPH_PIECE + 12 * GRAPH_NODE + 14 * GRAPH_NODE) / 2)
    # through the plan: Nemotron-3-Nano-4B's 42 layers hold 25 mixers
    model = lookup("nvidia/NVIDIA-Nemotron-3-Nano-4B-BF16")
    assert model is not None and model.kinds().count("none") == 17
    _, p = run(ARGV, model=model, gpu=L4, version="0.11.0")
    assert p.memory.cuda_graphs == 42 * split_layers_per_layer(model, 35, 19)


def test_flashinfer_allreduce_fusion_takes_the_per_call_cost_off_hopper_graphs_from_017():
    """config/vllm.py::enable_allreduce_rms_fusion (0.17 on, -O2 / -O3): the all-reduces of the sizes up to
    FI_ALLREDUCE_FUSION_MAX_SIZE_MB[cc][tp] / (hidden x 2 bytes) run as FlashInfer's fused all-reduce +
    RMSNorm, with no custom all-reduce buffers registered per graph."""
    from test_vllm_engine import H100

    from servefit.engines.vllm.graph_allreduce import CUSTOM_AR_GRAPH_COLLECTIVE

    a100 = replace(H100, key="a100", name="NVIDIA A100-SXM4-80GB", compute_capability=80)
    per_graph = (2 * 32 + 1) * CUSTOM_AR_GRAPH_COLLECTIVE
    tp2 = ARGV + "-tp 2"

    def pool(argv: str, version: str, gpu=H100, count: int = 2) -> int:
        return run(argv, gpu=gpu, version=version, count=count)[1].memory.cuda_graphs

    # TP2 on Hopper: 64 MB / (4096 x 2) = 8192 tokens, so all 35 + 19 graphs are fused from 0.17, none in 0.16
    assert pool(tp2, "0.16.0") - pool(tp2, "0.17.0") == 54 * per_graph
    # -O1 and an explicit pass_config turn it off; an A100 never has it
    assert pool(tp2 + " -O1", "0.16.0") == pool(tp2 + " -O1", "0.17.0")
    off = ' --compilation-config {"pass_config":{"fuse_allreduce_rms":false}}'
    assert pool(tp2 + off, "0.17.0") == pool(tp2, "0.16.0")
    assert pool(tp2, "0.16.0", a100) == pool(tp2, "0.17.0", a100)
    # TP4 on Hopper: 2 MB / 8192 = 256 tokens; at 256 sequences the 16 piecewise sizes 272..512 keep their cost
    tp4 = "vllm serve m --max-model-len 8192 --max-num-seqs 256 -tp 4"
    assert pool(tp4, "0.16.0", count=4) - pool(tp4, "0.17.0", count=4) == (51 + 35 - 16) * per_graph
    # 0.17 - 0.20 skip the fusion under pipeline parallelism; 0.25.1 no longer checks
    pp = tp2 + " -pp 2"
    assert pool(pp, "0.20.0", count=4) - pool(pp, "0.16.0", count=4) == 0
    assert pool(pp + off, "0.25.1", count=4) - pool(pp, "0.25.1", count=4) == 54 * (2 * 16 + 1) * CUSTOM_AR_GRAPH_COLLECTIVE


def test_speculative_decoding_on_mamba_layers_drops_the_full_decode_graphs_up_to_016():
    """_check_and_update_cudagraph_mode: Mamba-style metadata builders support single-token decode only
    up to 0.16, so a speculative batch (query 4) cannot replay full decode graphs: FULL_AND_PIECEWISE
    becomes PIECEWISE, and the sizes are not rounded to multiples of 4 (adjust_cudagraph_sizes_for_spec_decode
    runs after the fallback, only for a FULL decode mode). 0.13 at 64 sequences, 3 speculative tokens:
    51 piecewise sizes (1, 2, 4, 8 ... 256, 272 ... 512) after the fallback; 49 piecewise + 33 full with
    FULL decode graphs (every size rounded up to a multiple of 4)."""
    from test_vllm_engine import LLAMA8B

    hybrid = replace(LLAMA8B, architecture="NemotronHForCausalLM", layer_types=["mamba", "full"] * 16)
    spec = ' --speculative-config {"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}'
    argv = "vllm serve m --max-model-len 8192 --max-num-seqs 64"

    def sizes(model, extra: str, version: str) -> int:
        return run(argv + extra, model=model, version=version)[1].detail.cuda_graph_sizes

    assert sizes(hybrid, spec, "0.13.0") == 51
    assert sizes(hybrid, spec, "0.16.0") == 51
    assert sizes(hybrid, spec, "0.17.0") == 49 + 33  # UNIFORM_BATCH from 0.17
    assert sizes(LLAMA8B, spec, "0.13.0") == 49 + 33  # attention alone (FlashAttention: UNIFORM_BATCH)
    assert sizes(hybrid, "", "0.13.0") == 19 + 11  # no speculative tokens: single-token decode graphs


def test_hybrid_and_mamba_models_default_to_full_and_piecewise_from_0102():
    """models/config.py::MambaModelConfig.verify_and_update_config (0.10.2, 0.11.0): a hybrid or Mamba model
    without a cudagraph_mode gets FULL_AND_PIECEWISE before the release's PIECEWISE default (0.10.x) and before
    0.11's pooling fallback; Lfm2 and MiniMax-Text-01 are left out (FCG_NOT_SUPPORTED_MODELS); 0.10.1 has no
    such rule (and runs these models on V0). At 128 sequences: 35 piecewise sizes, 19 full decode sizes up to 128."""
    from test_vllm_engine import LLAMA8B

    hybrid = replace(LLAMA8B, architecture="NemotronHForCausalLM", layer_types=["mamba", "full"] * 16)
    gdn = replace(LLAMA8B, architecture="Qwen3NextForCausalLM", layer_types=["linear", "linear", "linear", "full"] * 8)
    lfm2 = replace(hybrid, architecture="Lfm2ForCausalLM")

    def captured(model, extra: str, version: str):
        p = run(ARGV + extra, model=model, gpu=L4, version=version)[1]
        return p.detail.cuda_graph_sizes, p.memory.cuda_graphs

    assert captured(hybrid, "", "0.10.2") == (35 + 19, pool(35, 19))
    assert captured(gdn, "", "0.10.2") == (35 + 19, pool(35, 19))
    assert captured(hybrid, "", "0.10.1")[0] == 19  # V0 still runs Mamba-style layers there: its 19 decode graphs
    assert captured(lfm2, "", "0.10.2") == (35, pool(35, 0))  # listed as lacking full graphs
    assert captured(LLAMA8B, "", "0.10.2") == (35, pool(35, 0))  # attention only: the release default
    # an explicit mode still wins
    assert captured(hybrid, ' --compilation-config {"cudagraph_mode":"PIECEWISE"}', "0.10.2")[0] == 35
    # 0.11: set before the pooling fallback, which then leaves it
    assert captured(hybrid, " --runner pooling", "0.11.0")[0] == 35 + 19
    assert captured(LLAMA8B, " --runner pooling", "0.11.0")[0] == 35


def test_full_decode_sizes_follow_the_decode_query_length_from_0101():
    """capture_model keeps the full decode sizes between uniform_decode_query_len and max_num_seqs x it
    (read in the 0.10.1.1 and 0.10.2 wheels). 0.10.2 at 64 sequences with 3 speculative tokens: 19 sizes
    (1, 2, 4, 8 ... 128). Qwen3-Next's GDN builder supports uniform batches, so its default FULL_AND_PIECEWISE
    keeps full graphs for sizes 4 ... 128 (17); Mamba layers support single-token decode only
    (mamba_attn.py), so a Nemotron-H falls back to PIECEWISE (initialize_cudagraph_capture)."""
    from test_vllm_engine import LLAMA8B

    hybrid = replace(LLAMA8B, architecture="NemotronHForCausalLM", layer_types=["mamba", "full"] * 16)
    gdn = replace(LLAMA8B, architecture="Qwen3NextForCausalLM", layer_types=["linear", "linear", "linear", "full"] * 8)
    spec = ' --speculative-config {"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}'
    argv = "vllm serve m --max-model-len 8192 --max-num-seqs 64"
    assert run(argv + spec, model=gdn, version="0.10.2")[1].detail.cuda_graph_sizes == 19 + 17
    assert run(argv + spec, model=hybrid, version="0.10.2")[1].detail.cuda_graph_sizes == 19


def test_fp8_quant_kernels_captured_inside_opaque_custom_ops():
    from test_vllm_engine import LLAMA8B

    from servefit.engines.vllm.graphs import GRAPH_NODE
    from servefit.hardware.catalog import resolve_gpu

    per_tensor = replace(LLAMA8B, quantization={"quant_method": "fp8"})
    block = replace(LLAMA8B, quantization={"quant_method": "fp8", "weight_block_size": [128, 128]})
    moe = dict(num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768)
    # 0.11 at 128 sequences: 35 piecewise + 19 full graphs. Per-tensor FP8's QuantFP8 is fused by Inductor
    _, dense = run(ARGV, gpu=L4, version="0.11.0")
    _, fp8 = run(ARGV, model=per_tensor, gpu=L4, version="0.11.0")
    assert dense.memory.cuda_graphs == fp8.memory.cuda_graphs == pool(35, 19)
    # a block-FP8 checkpoint up to 0.11.0 runs each linear as apply_w8a8_block_fp8_linear, its group quant
    # inside: 4 nodes more per layer in each of the 54 graphs; from 0.11.1 QuantFP8 again, fused
    _, blk = run(ARGV, model=block, gpu=L4, version="0.11.0")
    assert blk.memory.cuda_graphs == pool(35, 19) + 32 * int(54 * 4 * GRAPH_NODE)
    _, blk111 = run(ARGV, model=block, gpu=L4, version="0.11.1")
    assert blk111.memory.cuda_graphs == pool(35, 19)
    # an FP8 MoE layer's fused-MoE op quantizes its two GEMMs' inputs inside the op, in every release:
    # the MoE's 4 kernels and these 2, on every layer
    _, sp = run(ARGV, model=replace(LLAMA8B, **moe), gpu=L4, version="0.12.0")
    _, sp8 = run(ARGV, model=replace(per_tensor, **moe), gpu=L4, version="0.12.0")
    assert sp.memory.cuda_graphs == pool(35, 19) + 32 * int(54 * 4 * GRAPH_NODE)
    assert sp8.memory.cuda_graphs == sp.memory.cuda_graphs + 32 * int(54 * 2 * GRAPH_NODE)
    # block FP8 MoE up to 0.11.0: qkv and o_proj through the opaque op, the MoE's two: 4, not 4 + 2
    _, sp_blk = run(ARGV, model=replace(block, **moe), gpu=L4, version="0.11.0")
    assert sp_blk.memory.cuda_graphs == pool(35, 19) + 32 * (int(54 * 4 * GRAPH_NODE) + int(54 * 4 * GRAPH_NODE))
    # compressed-tensors: float 8-bit weights are FP8 (Fp8LinearOp's QuantFP8), int 8-bit ones int8 (4 nodes)
    def ct(kind: str) -> dict:
        return {"quant_method": "compressed-tensors",
                "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": kind, "strategy": "channel"}}}}
    _, ct_fp8 = run(ARGV, model=replace(LLAMA8B, quantization=ct("float")), gpu=L4, version="0.11.0")
    _, ct_int8 = run(ARGV, model=replace(LLAMA8B, quantization=ct("int")), gpu=L4, version="0.11.0")
    assert ct_fp8.memory.cuda_graphs == pool(35, 19)
    assert ct_int8.memory.cuda_graphs == pool(35, 19) + 32 * int(54 * 4 * GRAPH_NODE)
    _, ct_moe = run(ARGV, model=replace(LLAMA8B, quantization=ct("float"), **moe), gpu=L4, version="0.12.0")
    assert ct_moe.memory.cuda_graphs == sp8.memory.cuda_graphs
    # below compute capability 8.9 FP8 is weight-only Marlin: no activation quant, whatever the release
    a100 = resolve_gpu("A100-80GB")
    for version in ("0.9.2", "0.11.0", "0.12.0"):
        base = run(ARGV, model=replace(LLAMA8B, **moe), gpu=a100, version=version)[1].memory.cuda_graphs
        for q in (per_tensor, block):
            assert run(ARGV, model=replace(q, **moe), gpu=a100, version=version)[1].memory.cuda_graphs == base


def test_gpt_oss_raises_the_largest_capture_size():
    """model_executor/models/config.py::GptOssForCausalLMConfig.verify_and_update_config (graphs.py
    GPT_OSS_CAPTURE): the largest size goes to 1024 (992 in 0.11.0) whatever max_num_seqs."""
    from test_vllm_engine import GPT_OSS_20B

    def count(extra: str, version: str) -> int:
        _, p = run(ARGV + extra, model=GPT_OSS_20B, gpu=L4, version=version)
        return p.detail.cuda_graph_sizes

    # 0.10.0 has no hook: [1, 2, 4] + 8..256 step 8 (256 = 2 x 128 sequences)
    assert count("", "0.10.0") == 35
    # 0.10.1 / 0.10.2: the list [1, 2, 4] + 8..248 step 8 + 256..1024 step 16 (3 + 31 + 49), piecewise only
    assert count("", "0.10.1") == 83
    assert count("", "0.10.2") == 83
    assert count("--cuda-graph-sizes 64", "0.10.2") == 83  # one size below 1024: replaced too
    # 0.11.0: up to 992 (3 + 31 + 47 piecewise), full decode graphs up to 128 sequences (19)
    assert count("", "0.11.0") == 81 + 19
    # 0.11.1 on: max_cudagraph_capture_size 1024 (stride 16 from 256), still clipped by the token budget
    assert count("", "0.11.2") == 83 + 19
    assert count("", "0.29.0") == 83 + 19
    assert count("--max-num-batched-tokens 512", "0.12.0") == 51 + 19
    # a size the user set is kept
    assert count("--max-cudagraph-capture-size 256", "0.12.0") == 35 + 19
    # other models keep the default ceiling, min(2 x max_num_seqs, 512)
    _, llama = run(ARGV, gpu=L4, version="0.12.0")
    assert llama.detail.cuda_graph_sizes == 35 + 19
