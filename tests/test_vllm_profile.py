"""vLLM's start-up profile terms, replayed from the engine's code: which rank runs the dummy
sampler, which graphs get captured in which era, the FA3 split buffers, and the non-torch
snapshot semantics per release. Every number here is computed by hand from the engine's shapes."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from servefit.engines.vllm.graph_allreduce import (
    CUSTOM_AR_GRAPH_COLLECTIVE,
    NCCL_GRAPH_COLLECTIVE,
    NCCL_GRAPH_COLLECTIVE_CUMEM,
)
from servefit.engines.vllm.graphs import (
    CUBLAS_WORKSPACE,
    CUBLAS_WORKSPACE_SM90,
    FA3_MAX_SPLITS,
    GRAPH_FULL_PER_LAYER,
    GRAPH_PIECEWISE_PER_LAYER,
)
from servefit.engines.vllm.non_torch import CUDA_CONTEXT, PCIE_NON_TORCH_GIB, non_torch_bytes
from servefit.engines.vllm.profile import SAMPLER_BYTES_PER_LOGIT
from servefit.hardware.catalog import resolve_gpu

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import H100, L4, LLAMA8B, T4, codes, run  # noqa: E402

GiB = 2**30
PADDED_VOCAB = 128256  # Llama-3's vocab is already a multiple of vLLM's padding (64)


def test_v0_driver_peaks_at_the_dummy_sampler_not_on_top_of_the_forward():
    # V0 0.7: 2048-token chunks with chunked prefill off at 4096 -> 4096 tokens over 256 requests.
    # The forward's peak (4096 x (4 x 4096 + 3 x 14336) x 2 B = 0.45 GiB) is freed before the
    # driver samples 256 x 128256 logits at 39 B each (1.19 GiB): the peak is the larger one.
    _, p = run("vllm serve m --max-model-len 4096", version="0.7.3")
    fwd = 4096 * (4 * 4096 + 3 * 14336) * 2
    sampler = 256 * PADDED_VOCAB * SAMPLER_BYTES_PER_LOGIT
    assert sampler > fwd
    assert p.memory.activation_peak == sampler


def test_v0_forward_wins_when_it_is_larger_than_the_sampler():
    _, p = run("vllm serve m --max-model-len 32768 --max-num-seqs 8", version="0.7.3")
    assert p.memory.activation_peak == 32768 * (3 * 4096 + 3 * 14336) * 2  # V0 runs eagerly: profile.EAGER_HIDDEN


def test_graph_count_per_era():
    # 0.10: piecewise only, sizes [1, 2, 4] + 8..512 step 8 (max_num_seqs 256 -> cap 512)
    _, p10 = run("vllm serve m --max-model-len 8192", version="0.10.1")
    assert p10.detail.cuda_graph_sizes == 3 + 64
    assert p10.memory.cuda_graphs == 67 * 32 * GRAPH_PIECEWISE_PER_LAYER
    # 0.11 (FULL_AND_PIECEWISE): 35 piecewise sizes at max_num_seqs 128 (cap 256), plus full decode
    # graphs for the sizes up to 128: [1, 2, 4] + 8..128 step 8 = 19
    _, p11 = run("vllm serve m --max-model-len 8192 --max-num-seqs 128", version="0.11.0")
    assert p11.detail.cuda_graph_sizes == 35 + 19
    assert p11.memory.cuda_graphs == 32 * (35 * GRAPH_PIECEWISE_PER_LAYER + 19 * GRAPH_FULL_PER_LAYER)


def test_fa3_split_buffers_only_on_hopper_full_graphs():
    argv = "vllm serve m --max-model-len 8192 --max-num-seqs 128"
    _, hopper = run(argv, gpu=H100, version="0.11.0")
    _, ada = run(argv, gpu=L4, version="0.11.0")
    # [32 splits, 32 heads, 128 tokens, 128 head_dim] fp32 + the fp32 LSE [32, 32, 128]
    split = FA3_MAX_SPLITS * 32 * 128 * (128 + 1) * 4
    workspace = CUBLAS_WORKSPACE_SM90 - CUBLAS_WORKSPACE  # the capture stream's cuBLAS workspace (graphs.py)
    assert hopper.memory.cuda_graphs - ada.memory.cuda_graphs == split + workspace
    # no full graphs before 0.11, so no split buffers on Hopper either
    _, h10 = run(argv, gpu=H100, version="0.10.1")
    _, l10 = run(argv, gpu=L4, version="0.10.1")
    assert h10.memory.cuda_graphs == l10.memory.cuda_graphs + workspace


def test_graph_pool_grows_with_tp_and_activation_quantization():
    # on L4: Hopper adds a fixed cuBLAS workspace that neither factor scales (graphs.py CUBLAS_WORKSPACE_SM90)
    _, one = run("vllm serve m --max-model-len 8192", gpu=L4, version="0.10.1")
    _, two = run("vllm serve m --max-model-len 8192 -tp 2", gpu=L4, version="0.10.1", count=2)
    # TP2: 67 piecewise graphs, each with 2 all-reduces per layer + the embedding's, priced per captured call
    assert two.memory.cuda_graphs == one.memory.cuda_graphs + 67 * (2 * 32 + 1) * CUSTOM_AR_GRAPH_COLLECTIVE
    # int8 W8A8: the quant is an opaque custom op, one more kernel before each of the 4 linears of every
    # layer in every graph: 67 piecewise graphs x 32 layers x 4 nodes of GRAPH_FULL_PER_LAYER / 10
    int8 = replace(LLAMA8B, quantization={"quant_method": "compressed-tensors", "bits": 8})
    _, w8a8 = run("vllm serve m --max-model-len 8192", model=int8, gpu=L4, version="0.10.1")
    assert w8a8.memory.cuda_graphs == one.memory.cuda_graphs + 32 * int(67 * 4 * GRAPH_FULL_PER_LAYER / 10)
    # the all-reduces are their own nodes: the quant kernels do not multiply them
    _, w8a8_tp2 = run("vllm serve m --max-model-len 8192 -tp 2", model=int8, gpu=L4, version="0.10.1", count=2)
    assert w8a8_tp2.memory.cuda_graphs == w8a8.memory.cuda_graphs + 67 * (2 * 32 + 1) * CUSTOM_AR_GRAPH_COLLECTIVE
    # FP8: QuantFP8 (a CustomOp from 0.10.0) is fused by Inductor into its neighbours, no extra node;
    # before 0.10 (ops.scaled_fp8_quant) it was a kernel of its own
    _, fp8 = run("vllm serve m --max-model-len 8192 --quantization fp8", gpu=L4, version="0.10.1")
    assert fp8.memory.cuda_graphs == one.memory.cuda_graphs
    _, one9 = run("vllm serve m --max-model-len 8192", gpu=L4, version="0.9.2")
    _, fp89 = run("vllm serve m --max-model-len 8192 --quantization fp8", gpu=L4, version="0.9.2")
    assert fp89.memory.cuda_graphs == one9.memory.cuda_graphs + 32 * int(67 * 4 * GRAPH_FULL_PER_LAYER / 10)


def test_nccl_all_reduces_captured_where_the_custom_all_reduce_is_off():
    # 0.10.1 piecewise: 67 graphs x 32 layers; every graph holds 2 all-reduces per layer + 1
    base = 67 * 32 * GRAPH_PIECEWISE_PER_LAYER
    nccl = base + 67 * (2 * 32 + 1) * NCCL_GRAPH_COLLECTIVE
    rtx, l40s, a100 = resolve_gpu("RTX 4090"), resolve_gpu("L40S"), resolve_gpu("A100-80GB")
    argv = "vllm serve m --max-model-len 8192 -tp {tp}"
    # GeForce cards have no P2P: NCCL in the graphs, no custom all-reduce buffers
    _, g2 = run(argv.format(tp=2), gpu=rtx, version="0.10.1", count=2)
    assert g2.memory.cuda_graphs == nccl
    # PCIe cards with P2P keep the custom all-reduce at TP2, lose it beyond two GPUs
    _, p2 = run(argv.format(tp=2), gpu=l40s, version="0.10.1", count=2)
    assert p2.memory.cuda_graphs == base + 67 * (2 * 32 + 1) * CUSTOM_AR_GRAPH_COLLECTIVE
    _, p4 = run(argv.format(tp=4), gpu=l40s, version="0.10.1", count=4)
    assert p4.memory.cuda_graphs == nccl
    _, n4 = run(argv.format(tp=4), gpu=a100, version="0.10.1", count=4)
    assert n4.memory.cuda_graphs == base + 67 * (2 * 32 + 1) * CUSTOM_AR_GRAPH_COLLECTIVE
    _, off = run(argv.format(tp=2) + " --disable-custom-all-reduce", gpu=a100, version="0.10.1", count=2)
    assert off.memory.cuda_graphs == nccl



def test_nccl_all_reduces_cost_more_once_vllm_stops_turning_cumem_off():
    # vLLM <= 0.10.1 sets NCCL_CUMEM_ENABLE=0 (env_override.py); 0.10.2 drops the override, so NCCL
    # allocates with cuMem: 53 KiB vs 145 KiB per captured all-reduce. RTX 4090 TP2: NCCL, 67 graphs
    # (0.10.x piecewise) x (2 x 32 + 1) all-reduces over 67 x 32 piecewise layer terms
    rtx = resolve_gpu("RTX 4090")
    base = 67 * 32 * GRAPH_PIECEWISE_PER_LAYER
    calls = 67 * (2 * 32 + 1)
    assert (NCCL_GRAPH_COLLECTIVE, NCCL_GRAPH_COLLECTIVE_CUMEM) == (53 * 1024, 145 * 1024)
    argv = "vllm serve m --max-model-len 8192 -tp 2"
    _, old = run(argv, gpu=rtx, version="0.10.1", count=2)
    assert old.memory.cuda_graphs == base + calls * 53 * 1024
    _, new = run(argv, gpu=rtx, version="0.10.2", count=2)
    assert new.memory.cuda_graphs == base + calls * 145 * 1024
    # the variable, where set, decides either way
    _, forced_on = run(argv, gpu=rtx, version="0.10.1", count=2, env={"NCCL_CUMEM_ENABLE": "1"})
    assert forced_on.memory.cuda_graphs == new.memory.cuda_graphs
    _, forced_off = run(argv, gpu=rtx, version="0.10.2", count=2, env={"NCCL_CUMEM_ENABLE": "0"})
    assert forced_off.memory.cuda_graphs == old.memory.cuda_graphs

def test_awq_dequantized_weight_sits_in_the_graph_pool():
    awq = replace(LLAMA8B, quantization={"quant_method": "awq", "bits": 4, "group_size": 128})
    argv = "vllm serve m --max-model-len 8192"
    _, marlin = run(argv, model=awq, gpu=L4, version="0.13.0")
    _, forced = run(argv + " --quantization awq", model=awq, gpu=L4, version="0.13.0")
    # gate_up_proj is the largest: [4096, 2 x 14336] dequantized to fp16 plus its output at 512 tokens
    assert forced.memory.cuda_graphs - marlin.memory.cuda_graphs == (4096 * 28672 + 512 * 28672) * 2
    # on Turing awq_marlin is unavailable, so the AWQ kernel runs without the flag too
    _, turing = run(argv, model=awq, gpu=T4, version="0.13.0")
    _, turing16 = run(argv, gpu=T4, version="0.13.0")
    assert turing.memory.cuda_graphs - turing16.memory.cuda_graphs == (4096 * 28672 + 512 * 28672) * 2
    # no captured size reaches 256 tokens, yet V1's torch.compile traced the branch at the profile run's
    # 2048 tokens: every size dequantizes, the largest (128) sets the pool
    _, small = run(argv + " --quantization awq --max-num-seqs 64", model=awq, gpu=L4, version="0.13.0")
    _, small16 = run(argv + " --max-num-seqs 64", gpu=L4, version="0.13.0")
    assert small.memory.cuda_graphs - small16.memory.cuda_graphs == (4096 * 28672 + 128 * 28672) * 2
    # a trace under 256 tokens bakes the AWQ GEMM kernel in: nothing is dequantized
    tiny = " --max-num-seqs 64 --max-num-batched-tokens 128"
    _, small = run(argv + " --quantization awq" + tiny, model=awq, gpu=L4, version="0.13.0")
    _, small16 = run(argv + tiny, gpu=L4, version="0.13.0")
    assert small.memory.cuda_graphs == small16.memory.cuda_graphs
    # without torch.compile (V0) the branch is taken per captured size: 64 sequences stay under 256
    _, v0 = run(argv + " --quantization awq --max-num-seqs 64", model=awq, gpu=L4, version="0.6.5")
    _, v016 = run(argv + " --max-num-seqs 64", gpu=L4, version="0.6.5")
    assert v0.memory.cuda_graphs == v016.memory.cuda_graphs
    # V1 with an explicit compilation level other than 3 (0.13: FULL graphs without compile) decides per size
    eager = " --max-num-seqs 64 -cc.mode=0 -cc.cudagraph_mode=FULL"
    _, nc = run(argv + " --quantization awq" + eager, model=awq, gpu=L4, version="0.13.0")
    _, nc16 = run(argv + eager, gpu=L4, version="0.13.0")
    assert nc.memory.cuda_graphs == nc16.memory.cuda_graphs and nc16.memory.cuda_graphs > 0


def test_non_torch_by_snapshot_era_and_interconnect():
    a100, rtx = resolve_gpu("A100-80GB"), resolve_gpu("RTX 4090")
    # a lone GPU's growth by resident threads: 108 SMs x 2048 threads x 516 B (non_torch.lmem_growth_bytes)
    alone = 108 * 2048 * 516
    # 0.6.4 charged all device memory torch had not allocated: the CUDA context too; up to 0.6.3 the
    # baseline (init_gpu_memory) is read once the context exists, as from 0.6.5
    assert non_torch_bytes(1, 1, a100, (0, 6, 4)) == alone + CUDA_CONTEXT
    assert non_torch_bytes(1, 1, a100, (0, 6, 3)) == non_torch_bytes(1, 1, a100, (0, 5, 3)) == alone
    assert non_torch_bytes(1, 1, a100, (0, 7, 3)) == alone
    # the V1 engine charged it too up to 0.9.0 (gpu_worker.py: mem_get_info used - torch allocated), not V0
    assert non_torch_bytes(1, 1, a100, (0, 8, 5), v1=True) == non_torch_bytes(1, 1, a100, (0, 9, 0), v1=True) \
        == alone + CUDA_CONTEXT
    assert non_torch_bytes(1, 1, a100, (0, 8, 5), v1=False) == alone
    assert non_torch_bytes(1, 1, a100, (0, 9, 1), v1=True) == non_torch_bytes(1, 1, a100, (0, 11, 0), v1=True) \
        == alone
    # PCIe cards: few NCCL channels, no custom all-reduce, flat in the world size
    assert non_torch_bytes(2, 2, rtx, (0, 7, 3)) == non_torch_bytes(8, 8, rtx, (0, 7, 3)) == int(PCIE_NON_TORCH_GIB * GiB)
    # NVLink: the communicators' share logged on H100 at TP2 (0.55 GiB less the H100's lone growth), plus
    # the A100's own lone growth
    assert non_torch_bytes(2, 2, a100, (0, 7, 3)) == int(0.55 * GiB) - 132 * 2048 * 516 + alone
    # over PCIe the share is the 4090 total's (0.25 GiB) less the 4090's lone growth: a 3090 pair has less
    rtx3090 = resolve_gpu("RTX 3090")
    assert non_torch_bytes(2, 2, rtx3090, (0, 7, 3)) == int(PCIE_NON_TORCH_GIB * GiB) - 128 * 1536 * 516 + 82 * 1536 * 516
    assert non_torch_bytes(1, 1, rtx, (0, 7, 3)) == 128 * 1536 * 516


def test_capture_sizes_follow_each_release():
    from servefit.engines.vllm.defaults import capture_sizes
    from servefit.engines.vllm.era import era

    base_300 = [1, 2, 4] + list(range(8, 256, 8)) + [256, 272, 288]
    # max_num_batched_tokens 300 under the 512 ceiling: captured itself from 0.20.1, not in 0.20.0
    assert capture_sizes(era("0.20.0"), 256, 300) == base_300
    assert capture_sizes(era("0.20.1"), 256, 300) == base_300 + [300]
    # max_num_seqs 100 (ceiling 200, off the 8-stride) joins the list in 0.33, not in 0.25.1
    base_200 = [1, 2, 4] + list(range(8, 201, 8))
    assert capture_sizes(era("0.25.1"), 100, 8192) == base_200
    assert capture_sizes(era("0.33.0"), 100, 8192) == sorted(base_200 + [100])
    # data-centre Blackwell: a 1024 ceiling in 0.33 only
    assert capture_sizes(era("0.33.0"), 1024, 8192, blackwell=True)[-1] == 1024
    assert capture_sizes(era("0.33.0"), 1024, 8192)[-1] == 512
    assert capture_sizes(era("0.25.1"), 1024, 8192, blackwell=True)[-1] == 512
    # above 256 the sizes step by 16 from 0.11.1 (51 sizes up to 512), by 8 in 0.11.0 (67)
    assert len(capture_sizes(era("0.11.0"), 256, 8192)) == 67
    assert capture_sizes(era("0.11.1"), 256, 8192) == [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16))
    assert len(capture_sizes(era("0.11.2"), 256, 8192)) == 51
    # V0: up to 256 sequences at most up to 0.6.4; from 0.6.5 up to the first size holding max_num_seqs
    v0 = {"VLLM_USE_V1": "0"}
    assert capture_sizes(era("0.6.4"), 512, 8192)[-1] == 256
    assert capture_sizes(era("0.6.5"), 512, 8192) == [1, 2, 4] + list(range(8, 513, 8))
    assert capture_sizes(era("0.8.5", v0), 300, 2048) == [1, 2, 4] + list(range(8, 305, 8))
    assert capture_sizes(era("0.6.4"), 100, 8192) == capture_sizes(era("0.7.3"), 100, 8192) == [1, 2, 4] + list(range(8, 105, 8))


def test_speculative_decoding_rounds_and_widens_the_capture_sizes():
    # 3 speculative tokens (decode query 4) at max_num_seqs 64. 0.11: ceiling 128, sizes as they are
    # (19 piecewise; full decode graphs for the 17 sizes from 4 to 64 x 4); 0.12: the same ceiling,
    # every size rounded up to a multiple of 4 ([4] + 8..128 step 8 = 17, both modes); 0.13: the
    # ceiling counts the query too (64 x 4 x 2 -> 512): [4] + 8..248 step 8 + 256..512 step 16 = 49
    # piecewise, and the 33 of them up to 256 full.
    spec = ' --speculative-config {"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}'
    argv = "vllm serve m --max-model-len 8192 --max-num-seqs 64" + spec
    _, p11 = run(argv, version="0.11.0")
    assert p11.detail.cuda_graph_sizes == 19 + 17  # 1 and 2 are below the 4-token decode query
    _, p12 = run(argv, version="0.12.0")
    assert p12.detail.cuda_graph_sizes == 17 + 17
    _, p13 = run(argv, version="0.13.0")
    assert p13.detail.cuda_graph_sizes == 49 + 33
    assert p13.memory.cuda_graphs == 32 * (49 * GRAPH_PIECEWISE_PER_LAYER + 33 * GRAPH_FULL_PER_LAYER)


def test_lora_captures_every_graph_twice_from_012():
    argv = "vllm serve m --max-model-len 8192 --max-num-seqs 128 --enable-lora"
    _, p11 = run(argv, version="0.11.0")
    assert p11.detail.cuda_graph_sizes == 35 + 19
    _, p12 = run(argv, version="0.12.0")
    assert p12.detail.cuda_graph_sizes == 2 * (35 + 19)
    assert p12.memory.cuda_graphs == 2 * 32 * (35 * GRAPH_PIECEWISE_PER_LAYER + 19 * GRAPH_FULL_PER_LAYER)
    _, off = run(argv + ' --compilation-config {"cudagraph_specialize_lora":false}', version="0.12.0")
    assert off.detail.cuda_graph_sizes == 35 + 19


def test_eagle_and_mtp_drafters_capture_piecewise_graphs_from_012():
    # one speculative token at max_num_seqs 128 on 0.12: sizes [1, 2, 4] + 8..256 rounded to even
    # -> [2, 4, 8, ..., 256] = 34 piecewise and 34 full; an MTP / EAGLE drafter adds its one layer's
    # piecewise graph per size (34), an n-gram proposer has no model; 0.11 captures no drafter graph
    spec = ' --speculative-config {"method":"%s","num_speculative_tokens":1,"model":"d"}'
    argv = "vllm serve m --max-model-len 8192 --max-num-seqs 128"
    target = 32 * (34 * GRAPH_PIECEWISE_PER_LAYER + 34 * GRAPH_FULL_PER_LAYER)
    _, ngram = run(argv + spec % "ngram", version="0.12.0")
    assert ngram.memory.cuda_graphs == target
    for method in ("mtp", "eagle3"):
        _, p = run(argv + spec % method, version="0.12.0")
        assert p.memory.cuda_graphs == target + 34 * GRAPH_PIECEWISE_PER_LAYER
    _, p11 = run(argv + spec % "mtp", version="0.11.0")
    _, n11 = run(argv + spec % "ngram", version="0.11.0")
    assert p11.memory.cuda_graphs == n11.memory.cuda_graphs
    # with LoRA the drafter captures only in the half without LoRA: still 34 drafter graphs
    _, lora = run(argv + " --enable-lora" + spec % "mtp", version="0.12.0")
    assert lora.memory.cuda_graphs == 2 * target + 34 * GRAPH_PIECEWISE_PER_LAYER


def test_the_drafter_graphs_sit_on_the_last_pipeline_stage():
    spec = ' --speculative-config {"method":"mtp","num_speculative_tokens":1}'
    _, p = run("vllm serve m --max-model-len 8192 --max-num-seqs 128 -pp 2" + spec, count=2, version="0.12.0")
    first, last = p.devices
    assert first.cuda_graphs == 16 * (34 * GRAPH_PIECEWISE_PER_LAYER + 34 * GRAPH_FULL_PER_LAYER)
    assert last.cuda_graphs == first.cuda_graphs + 34 * GRAPH_PIECEWISE_PER_LAYER


def test_v1_before_010_captures_up_to_512_whatever_max_num_seqs():
    # 0.9.2 config.py: SchedulerConfig.cuda_graph_sizes defaults to [512], filtered by
    # max_num_batched_tokens; 0.10.0 defaults it to [min(max_num_seqs x 2, 512)]
    from servefit.engines.vllm.defaults import capture_sizes
    from servefit.engines.vllm.era import era

    assert capture_sizes(era("0.9.2"), 128, 2048) == [1, 2, 4] + list(range(8, 513, 8))  # 67 sizes
    assert capture_sizes(era("0.10.0"), 128, 2048) == [1, 2, 4] + list(range(8, 257, 8))  # 35
    assert capture_sizes(era("0.9.2"), 128, 256) == [1, 2, 4] + list(range(8, 257, 8))


def test_model_runner_v2_default_per_release():
    """config/vllm.py::VllmConfig.use_v2_model_runner as read in the 0.21.0 ... 0.29.0 wheels."""
    from types import SimpleNamespace

    from servefit.engines.vllm.graphs import model_runner_v2

    def arch(name, moe=False, kinds=None):
        return replace(LLAMA8B, architecture=name, num_experts=8 if moe else 0,
                       layer_types=kinds or [])

    def at(v, scheme=None):
        return SimpleNamespace(version=v, scheme=scheme)

    llama, qwen3, qwen2 = arch("LlamaForCausalLM"), arch("Qwen3ForCausalLM"), arch("Qwen2ForCausalLM")
    qwen3moe, qwen2moe = arch("Qwen3MoeForCausalLM", moe=True), arch("Qwen2MoeForCausalLM", moe=True)
    hybrid = arch("NemotronHForCausalLM", kinds=["mamba", "full"] * 16)
    assert not model_runner_v2(llama, at((0, 21, 0)))
    assert model_runner_v2(qwen3, at((0, 22, 0))) and not model_runner_v2(llama, at((0, 22, 0)))
    assert model_runner_v2(llama, at((0, 23, 0))) and not model_runner_v2(llama, at((0, 23, 0), scheme="awq"))
    assert model_runner_v2(qwen2moe, at((0, 24, 0))) and not model_runner_v2(qwen3moe, at((0, 24, 0)))
    assert not model_runner_v2(qwen2, at((0, 24, 0)))
    assert model_runner_v2(qwen2, at((0, 25, 1))) and not model_runner_v2(qwen3moe, at((0, 25, 1)))
    gdn = arch("Qwen3NextForCausalLM", moe=True, kinds=["linear", "linear", "linear", "full"] * 12)
    assert not model_runner_v2(hybrid, at((0, 27, 1))) and not model_runner_v2(gdn, at((0, 28, 0)))
    assert not model_runner_v2(replace(gdn, num_experts=0), at((0, 25, 1)))
    kimi = arch("KimiK3ForConditionalGeneration", moe=True)  # listed from 0.27 (0.26.0 / 0.27.1 wheels)
    assert not model_runner_v2(kimi, at((0, 26, 0))) and model_runner_v2(kimi, at((0, 27, 1)))
    assert model_runner_v2(qwen3moe, at((0, 29, 0))) and model_runner_v2(hybrid, at((0, 29, 0)))
    assert not model_runner_v2(qwen2, at((0, 31, 0)), {"VLLM_USE_V2_MODEL_RUNNER": "0"})
    assert model_runner_v2(llama, at((0, 20, 0)), {"VLLM_USE_V2_MODEL_RUNNER": "1"})
    assert not model_runner_v2(qwen2, at((0, 31, 0)), None, {"runner": "pooling"})


def test_model_runner_v2_graph_pool_by_hand():
    # Llama-3.1-8B, max_num_seqs 128 on 0.29.0 (Model Runner V2, whose profile_cudagraph_memory captures
    # every piecewise graph before the logged capture): 35 piecewise + 19 full sizes as on 0.11; per layer
    # 35 x 262144 + 19 x 104857 = 11,167,323 B, x 0.38 -> 4,243,582 B, x 32 layers = 135,794,624 B.
    # On 0.21.0 (V1 runner) the same sizes give 32 x 11,167,323 = 357,354,336 B, and so does V2 on 0.25.1:
    # its profile_cudagraph_memory is a stub up to 0.28, so the logged capture is the process's first.
    argv = "vllm serve m --max-model-len 8192 --max-num-seqs 128"
    _, v2 = run(argv, version="0.29.0")
    assert v2.detail.cuda_graph_sizes == 35 + 19
    assert v2.memory.cuda_graphs == 135_794_624
    _, v1 = run(argv, version="0.21.0")
    assert v1.memory.cuda_graphs == 357_354_336
    _, v2_025 = run(argv, version="0.25.1")
    assert v2_025.detail.cuda_graph_sizes == 35 + 19
    assert v2_025.memory.cuda_graphs == 357_354_336
    # the same V2 run at 0.28 and at 0.29: x0.38 from 0.29 only
    assert run(argv, version="0.28.0")[1].memory.cuda_graphs == 357_354_336


def test_total_consumed_from_027_counts_persistent_buffers():
    # 0.26.0's gpu_worker adds non_torch_increase; 0.27.1's charges total_consumed (mem_utils.py)
    from servefit.engines.vllm.non_torch import CONSUMED_EXTRA

    a100 = resolve_gpu("A100-80GB")
    assert CONSUMED_EXTRA == int(0.09 * GiB)
    assert non_torch_bytes(1, 1, a100, (0, 26, 0)) == 108 * 2048 * 516
    assert non_torch_bytes(1, 1, a100, (0, 27, 0)) == 108 * 2048 * 516 + int(0.09 * GiB)


def test_model_runner_v2_samples_a_greedy_dummy_batch_before_033():
    # Llama-3.1-8B (LlamaForCausalLM, dense: Model Runner V2 from 0.25) on an L4: 2048 tokens over 256
    # requests. Up to 0.32 the V2 dummy sampler holds the bf16 logits only (256 x 128256 x 2 B =
    # 63 MiB), below the forward's 2048 x (4 x 4096 + 3 x 14336) x 2 B = 232 MiB; 0.33's warm-up pass
    # runs the fp32 pipeline (profile.py V2_WARMUP_FP32_COPY): on the L4 FlashInfer's sampler draws, bf16
    # logits, their fp32 copy, the top-k-masked logits and their softmax, 2 + 4 + 4 + 4 = 14 B per logit
    # (438 MiB), which then sets the peak.
    fwd = 2048 * (4 * 4096 + 3 * 14336) * 2
    _, v31 = run("vllm serve m --max-model-len 8192", version="0.31.0")
    assert v31.memory.activation_peak == fwd
    # a 256-token batch: the forward (256 x 59392 x 2 B = 29 MiB) is below the 256 requests' logits
    _, small = run("vllm serve m --max-model-len 4096 --max-num-batched-tokens 256", version="0.31.0")
    assert small.memory.activation_peak == 256 * PADDED_VOCAB * 2
    _, v33 = run("vllm serve m --max-model-len 8192", version="0.33.0")
    assert v33.memory.activation_peak == 256 * PADDED_VOCAB * 14
    # without FlashInfer's sampler (VLLM_USE_FLASHINFER_SAMPLER=0, or a T4) the Triton kernel masks in
    # place: bf16 logits and their fp32 copy, 6 B per logit, plus the buffer it keeps, on an H100 (132 SMs)
    # 132 rows x 128256 x 4 B; a 256-token batch so that the sampler sets the peak
    off = {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
    _, tri = run("vllm serve m --max-model-len 4096 --max-num-batched-tokens 256 --enforce-eager", gpu=H100, env=off,
                 version="0.33.0")
    assert tri.memory.activation_peak == 256 * PADDED_VOCAB * 6 + 132 * 128256 * 4 == 264_720_384
    assert tri.memory.activation_peak - tri.detail.logged_activation_bytes == 132 * 128256 * 4  # kept: consumed
    # the V1 runner (VLLM_USE_V2_MODEL_RUNNER=0) keeps its 15 B per logit on 0.31
    _, v1 = run("vllm serve m --max-model-len 8192", env={"VLLM_USE_V2_MODEL_RUNNER": "0"}, version="0.31.0")
    assert v1.memory.activation_peak == 256 * PADDED_VOCAB * 15


def test_model_runner_v2_copies_the_logits_to_fp32_before_028():
    # 0.22 - 0.27: Sampler.apply_sampling_params copies the logits to a new fp32 tensor for every batch
    # (0.28 returns first when no request needs processing): bf16 + fp32 = 6 B per logit. A 256-token
    # batch of Llama-3.1-8B (29 MiB of forward) on 0.27 then peaks at 256 x 128256 x 6 B = 188 MiB
    argv = "vllm serve m --max-model-len 4096 --max-num-batched-tokens 256"
    _, v27 = run(argv, version="0.27.0")
    assert v27.memory.activation_peak == 256 * PADDED_VOCAB * 6
    _, v28 = run(argv, version="0.28.0")
    assert v28.memory.activation_peak == 256 * PADDED_VOCAB * 2


def test_v2_runner_budgets_its_graph_estimate_and_logs_it_with_the_activation():
    # 0.31 (V2 runner, FULL and piecewise graphs): the KV budget subtracts the pool plus the FULL graphs'
    # extrapolation baseline (0.17 GiB), and "X GiB for peak activation" is the torch peak plus that
    # estimate (gpu_worker.py: peak_activation_memory = transient_peak_headroom + estimate applied)
    _, p = run("vllm serve m --max-model-len 8192", version="0.31.0")
    m = p.memory
    estimate = m.cuda_graphs + int(0.17 * GiB)
    assert p.detail.available_kv_cache_bytes == m.budget - m.weights - m.activation_peak - m.non_torch - estimate
    assert p.detail.logged_activation_bytes == m.activation_peak + estimate
    # the V1 runner's estimate is its pool; 0.26.0 still logs the torch peak alone
    _, v1 = run("vllm serve m --max-model-len 8192", env={"VLLM_USE_V2_MODEL_RUNNER": "0"}, version="0.31.0")
    assert v1.detail.logged_activation_bytes == v1.memory.activation_peak + v1.memory.cuda_graphs
    _, old = run("vllm serve m --max-model-len 8192", env={"VLLM_USE_V2_MODEL_RUNNER": "0"}, version="0.26.0")
    assert old.detail.logged_activation_bytes == old.memory.activation_peak
    # eager: no graphs, nothing estimated
    _, eager = run("vllm serve m --max-model-len 8192 --enforce-eager", version="0.31.0")
    assert eager.detail.logged_activation_bytes == eager.memory.activation_peak
    # V2 up to 0.28: profile_cudagraph_memory returns 0, so the KV budget subtracts nothing for the graphs
    # it captures and the logged peak is the torch peak alone
    _, v2_028 = run("vllm serve m --max-model-len 8192", version="0.28.0")
    m = v2_028.memory
    assert m.cuda_graphs > 0
    assert v2_028.detail.available_kv_cache_bytes == m.budget - m.weights - m.activation_peak - m.non_torch
    assert v2_028.detail.logged_activation_bytes == m.activation_peak


def test_v2_runner_before_029_budgets_no_graph_estimate():
    # 0.18 - 0.28: Model Runner V2's profile_cudagraph_memory returns 0 (v1/worker/gpu/model_runner.py,
    # "TBD whether we keep this API"), so determine_available_memory subtracts nothing for its graphs
    # although it captures them; 0.29 calls _profile_cudagraph_memory (the pool + 0.17 GiB above)
    argv = "vllm serve m --max-model-len 8192"
    for version in ("0.24.0", "0.28.0"):
        _, p = run(argv, version=version)
        m = p.memory
        assert m.cuda_graphs > 0, version
        assert p.detail.available_kv_cache_bytes == m.budget - m.weights - m.activation_peak - m.non_torch, version
    _, v29 = run(argv, version="0.29.0")
    m = v29.memory
    estimate = m.cuda_graphs + int(0.17 * GiB)
    assert v29.detail.available_kv_cache_bytes == m.budget - m.weights - m.activation_peak - m.non_torch - estimate
    # the V1 runner on 0.28 still subtracts its pool
    _, v1 = run(argv, env={"VLLM_USE_V2_MODEL_RUNNER": "0"}, version="0.28.0")
    m = v1.memory
    assert v1.detail.available_kv_cache_bytes == m.budget - m.weights - m.activation_peak - m.non_torch - m.cuda_graphs


def test_v2_runner_before_029_warns_its_graphs_fall_outside_the_budget():
    # what vLLM does not budget must fit outside it: Llama-3.1-8B on an H100 at 0.99, 0.28 V2 runner,
    # leaves 0.31 GiB beside 0.49 GiB of graphs (VLLM016, and the plan says why); the V1 runner on 0.28
    # and V2 on 0.29 subtract their estimate, so neither warns
    argv = "vllm serve m --max-model-len 8192 --gpu-memory-utilization 0.99"
    cfg, p = run(argv, gpu=H100, version="0.28.0")
    assert "VLLM016" in codes(cfg, p)
    assert ("CUDA graphs are captured after the KV cache is sized (Model Runner V2 budgets no estimate for "
            "them before 0.29)") in p.assumptions
    for env, version in (({"VLLM_USE_V2_MODEL_RUNNER": "0"}, "0.28.0"), (None, "0.29.0")):
        cfg, p = run(argv, gpu=H100, env=env, version=version)
        assert "VLLM016" not in codes(cfg, p), (env, version)
        assert not [a for a in p.assumptions if "captured after the KV cache" in a], (env, version)


def test_consumed_memory_from_the_0261_main_builds():
    # 0.26.1 was never released: 0.26.1rc1.devN builds are main on the way to 0.27 and budget the
    # consumed memory (+0.09 GiB on one GPU), which 0.26.0 does not
    assert non_torch_bytes(1, version=(0, 26, 1)) - non_torch_bytes(1, version=(0, 26, 0)) == int(0.09 * GiB)


def test_warm_compile_cache_is_assumed_where_vllm_compiles():
    # V1 compiles the model inside the profiled forward (gpu_worker.py::determine_available_memory), so
    # a cold compile cache raises the measured peak; servefit predicts the warm start and says so. The
    # figure quoted is the calibration pair's torch peaks, 0.44 (cold, A100) - 0.12 (warm, T4) GiB.
    def note(p):
        return [a for a in p.assumptions if "torch.compile" in a]

    _, v1 = run("vllm serve m --max-model-len 8192", version="0.31.0")
    assert len(note(v1)) == 1 and note(v1)[0].startswith("a warm torch.compile cache")
    assert "0.32 GiB more for a 1.5B model at 2,048 batched tokens" in note(v1)[0]
    # the warm figure is what the plan charges: the forward alone (see the V2 sampler test above)
    assert v1.memory.activation_peak == 2048 * (4 * 4096 + 3 * 14336) * 2
    # nothing is compiled: eager (either spelling), compilation mode 0, or V0
    for argv, version in (("vllm serve m --max-model-len 8192 --enforce-eager", "0.31.0"),
                          ("vllm serve m --max-model-len 8192 -O0", "0.31.0"),
                          ("vllm serve m --max-model-len 8192 --compilation-config {\"level\":0}", "0.11.0"),
                          ("vllm serve m --max-model-len 8192 --compilation-config {\"mode\":\"NONE\"}", "0.31.0"),
                          ("vllm serve m --max-model-len 8192", "0.7.3")):
        assert note(run(argv, version=version)[1]) == [], (argv, version)
    # a compilation config that keeps compiling still gets the note
    _, mode3 = run("vllm serve m --max-model-len 8192 --compilation-config {\"mode\":3}", version="0.31.0")
    assert len(note(mode3)) == 1


def test_capture_log_reads_the_autotune_forward_lower_from_0102_to_017():
    # kernel_warmup's FlashInfer autotune (compute capability >= 9.0) runs a forward of
    # max_num_batched_tokens (8192 on an 80 GB H100) before capture_model, which reads free memory
    # without emptying the cache; the first capture's empty_cache hands that forward's segments back.
    # FlashInfer runs with flashinfer-cubin or nvcc: VLLM_HAS_FLASHINFER_CUBIN=1 says so; from 0.11.1 the
    # wheel depends on FlashInfer and the plan takes it to run (capture.py autotune_known).
    # What comes back is what the caching allocator cudaMalloc'd for that forward, not its peak (0.91 GiB):
    # at 8192 tokens the embedding output and the normed input (64 MiB each) get a segment each, then the
    # first layer's qkv (96 MiB), attention output and o_proj output (64 MiB each), gate_up (448 MiB; no
    # freed block fits) and SiluAndMul's output (224 MiB; the freed 96 / 64 MiB blocks are too small). The
    # down projection takes the freed 64 MiB attention block, and every later layer fits the freed blocks
    # best-fit, so the segments stay 64 + 64 + 96 + 64 + 64 + 448 + 224 = 1024 MiB.
    argv = "vllm serve m --max-model-len 8192"
    cubin = {"VLLM_HAS_FLASHINFER_CUBIN": "1"}
    released = (64 + 64 + 96 + 64 + 64 + 448 + 224) * 2**20
    _, h12 = run(argv, gpu=H100, version="0.12.0", env=cubin)
    assert h12.detail.max_num_batched_tokens == 8192
    assert h12.detail.logged_cuda_graph_bytes == h12.memory.cuda_graphs - released
    assert any("1.00 GiB lower than the graphs hold" in a for a in h12.assumptions)
    _, plain = run(argv, gpu=H100, version="0.12.0")
    assert plain.detail.logged_cuda_graph_bytes == h12.detail.logged_cuda_graph_bytes
    assert any("1.00 GiB lower" in a and "nvcc" in a for a in plain.assumptions)
    # 0.11.1's wheel requires flashinfer-python already (0.5.2 in its METADATA)
    _, h111 = run(argv, gpu=H100, version="0.11.1")
    assert h111.detail.logged_cuda_graph_bytes == h111.memory.cuda_graphs - released
    # 0.11.0 (FlashInfer an optional extra of the wheel): predicted at the graphs' size, the note says by how
    # much it may read lower, and that `pip install vllm` leaves FlashInfer out before 0.11.1
    _, h11 = run(argv, gpu=H100, version="0.11.0")
    assert h11.detail.logged_cuda_graph_bytes == h11.memory.cuda_graphs
    assert any("up to 1.00 GiB lower" in a and "where FlashInfer is installed" in a
               and "before 0.11.1" in a for a in h11.assumptions)
    # 0.18 empties the cache before its first reading; 0.10.1 autotunes after the capture
    for version in ("0.18.0", "0.10.1"):
        _, p = run(argv, gpu=H100, version=version, env=cubin)
        assert p.detail.logged_cuda_graph_bytes == p.memory.cuda_graphs
        assert not any("autotune" in a for a in p.assumptions)
    _, h102 = run(argv, gpu=H100, version="0.10.2", env=cubin)
    assert h102.detail.logged_cuda_graph_bytes == h102.memory.cuda_graphs - released
    # below compute capability 9.0 there is no autotune; from 0.17 the flag can switch it off
    _, ada = run(argv, gpu=L4, version="0.12.0", env=cubin)
    assert ada.detail.logged_cuda_graph_bytes == ada.memory.cuda_graphs
    _, off = run(argv + " --no-enable-flashinfer-autotune", gpu=H100, version="0.17.0", env=cubin)
    assert off.detail.logged_cuda_graph_bytes == off.memory.cuda_graphs
    _, v2 = run(argv, gpu=H100, version="0.14.0", env={**cubin, "VLLM_USE_V2_MODEL_RUNNER": "1"})
    assert v2.detail.logged_cuda_graph_bytes == v2.memory.cuda_graphs > 0  # V2 empties the cache first
    _, eager = run(argv + " --enforce-eager", gpu=H100, version="0.12.0", env=cubin)
    assert eager.detail.logged_cuda_graph_bytes == eager.memory.cuda_graphs == 0


def test_model_runner_v2_penalty_statistics_are_consumed_memory_from_0_26_1():
    # Model Runner V2's sampler (built in load_model after the weights are measured) keeps
    # output_bin_counts (requests x vocab int32) and prompt_bin_mask (requests x cdiv(vocab, 32) int32):
    # Llama-3.1-8B at 64 requests, 64 x (128256 + 4008) x 4 = 33,859,584 B, charged from 0.26.1's
    # total_consumed; the V1 runner has no such buffers, and 0.26.0 charges nothing for them
    argv = "vllm serve m --max-model-len 8192 --max-num-seqs 64"
    v1_runner = {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    _, v2 = run(argv, version="0.31.0")
    _, v1 = run(argv, env=v1_runner, version="0.31.0")
    penalties = 64 * (128256 + 4008) * 4
    assert penalties == 33_859_584
    # with the sampler's other tables, the grammar bitmask and the request / input buffers (runner_v2.py):
    # 64 x 17,924 + 64 x (1 + 4008) x 4 + 64 x 32 + 4 + 2048 x 13
    assert v2.memory.non_torch - v1.memory.non_torch == penalties + 1_147_136 + 1_026_304 + 2_052 + 26_624
    _, v2_old = run(argv, version="0.26.0")
    _, v1_old = run(argv, env=v1_runner, version="0.26.0")
    assert v2_old.memory.non_torch == v1_old.memory.non_torch
    # the mask's width rounds up (cdiv): a 151655-token vocabulary takes 4740 int32 words a request
    from types import SimpleNamespace

    from servefit.engines.vllm.profile import v2_sampler_state_bytes

    r = SimpleNamespace(version=(0, 27, 1), max_num_seqs=2)
    assert v2_sampler_state_bytes(replace(LLAMA8B, vocab_size=151655), r, True) == 2 * (151655 + 4740) * 4


def test_awq_kernel_dequantizes_in_the_profile_forward():
    """awq.py::AWQLinearMethod.apply dequantizes the whole weight to fp16 from 256 tokens on, in the profile
    run's forward too: its peak is gate_up's stage (hidden tensors, its output and the fp16 [4096, 28672]
    weight) where it beats the MLP's own (gate_up and SiluAndMul outputs); awq_marlin does not dequantize."""
    awq = replace(LLAMA8B, quantization={"quant_method": "awq", "bits": 4, "group_size": 128})
    argv = "vllm serve m --max-model-len 8192 --max-num-seqs 4"  # a small dummy sampler: the forward peaks
    _, marlin = run(argv, model=awq, gpu=L4, version="0.13.0")
    _, forced = run(argv + " --quantization awq", model=awq, gpu=L4, version="0.13.0")
    assert marlin.memory.activation_peak == 2048 * (4 * 4096 + 3 * 14336) * 2
    gate_up = 2048 * (4 * 4096 + 2 * 14336) * 2 + 4096 * 2 * 14336 * 2
    down = 2048 * (4 * 4096 + 3 * 14336) * 2 + 14336 * 4096 * 2
    assert forced.memory.activation_peak == max(gate_up, down) == gate_up
    # under 256 tokens the AWQ GEMM kernel runs as it is: no fp16 weight
    tiny = " --max-num-batched-tokens 128 --max-model-len 128"
    _, small = run("vllm serve m --max-num-seqs 4" + tiny + " --quantization awq", model=awq, gpu=L4, version="0.13.0")
    _, small_marlin = run("vllm serve m --max-num-seqs 4" + tiny, model=awq, gpu=L4, version="0.13.0")
    assert small.memory.activation_peak == small_marlin.memory.activation_peak
    # from 0.21 awq_marlin runs on Turing (get_min_capability 75): a T4 no longer takes the plain kernel
    _, t4_013 = run(argv, model=awq, gpu=T4, version="0.13.0")
    _, t4_021 = run(argv, model=awq, gpu=T4, version="0.21.0")
    assert t4_013.memory.activation_peak == gate_up
    assert t4_021.memory.activation_peak == 2048 * (4 * 4096 + 3 * 14336) * 2
