"""Which all-reduce each captured call runs under tensor parallelism, by the bytes of its input
(graph_allreduce.allreduce_kind), and what the graphs then hold: vLLM's custom all-reduce under its
buffer's max size, the symmetric-memory all-reduce above it on NVSwitch Hopper / Blackwell, else NCCL."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from servefit.engines.vllm.graph_allreduce import (
    CUSTOM_AR_GRAPH_COLLECTIVE,
    NCCL_GRAPH_COLLECTIVE_CUMEM,
)
from servefit.engines.vllm.graphs import GRAPH_NODE, SYMM_MEM_GRAPH_COLLECTIVE
from servefit.hardware.catalog import resolve_gpu

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import LLAMA8B, run  # noqa: E402

H100 = resolve_gpu("H100-SXM")  # an HGX board: NVSwitch, multicast

# 128 sequences: piecewise sizes 1, 2, 4, 8..256 step 8 (35), full decode sizes up to 128 (19)
ARGV = "vllm serve m --max-model-len 8192 --max-num-seqs 128 -tp {tp}"
PIECEWISE = [1, 2, 4] + list(range(8, 257, 8))
FULL = [1, 2, 4] + list(range(8, 129, 8))
CALLS = 2 * 32 + 1  # two all-reduces per decoder layer and the embedding's, per graph


def graphs(tp: int, gpu=H100, version="0.12.0", env=None, model=LLAMA8B, extra=""):
    return run(ARGV.format(tp=tp) + extra, model=model, gpu=gpu, count=tp, env=env, version=version)[1].memory.cuda_graphs


def test_symmetric_memory_takes_the_inputs_above_the_lowered_custom_all_reduce_size():
    assert SYMM_MEM_GRAPH_COLLECTIVE == int(3 * GRAPH_NODE) == 31457
    # H100 SXM (NVSwitch) at TP8, 0.12: the custom all-reduce's max size drops to 256 KiB; Llama-3.1-8B's
    # bf16 rows are 8 KiB, so sizes from 32 tokens up run the symmetric-memory all-reduce
    on, off = graphs(8), graphs(8, env={"VLLM_ALLREDUCE_USE_SYMM_MEM": "0"})
    symm = sum(1 for x in PIECEWISE + FULL if x * 8192 >= 256 * 1024)
    assert symm == 29 + 13
    assert off - on == symm * CALLS * (CUSTOM_AR_GRAPH_COLLECTIVE - SYMM_MEM_GRAPH_COLLECTIVE)
    # off by default in 0.10.2 (on with the variable), on from 0.11.0; 0.10.2 captures the 35 piecewise sizes only
    assert graphs(8, version="0.10.2") == graphs(8, version="0.10.2", env={"VLLM_ALLREDUCE_USE_SYMM_MEM": "0"})
    assert graphs(8, version="0.10.2") - graphs(8, version="0.10.2", env={"VLLM_ALLREDUCE_USE_SYMM_MEM": "1"}) == \
        29 * CALLS * (CUSTOM_AR_GRAPH_COLLECTIVE - SYMM_MEM_GRAPH_COLLECTIVE)
    assert graphs(8, version="0.11.0") == graphs(8, version="0.11.0", env={"VLLM_ALLREDUCE_USE_SYMM_MEM": "1"})
    # TP2 on Hopper keeps the custom all-reduce's own 8 MiB: nothing moves
    assert graphs(2) == graphs(2, env={"VLLM_ALLREDUCE_USE_SYMM_MEM": "0"})
    # fp16 inputs are not the communicator's bf16: they fall through to NCCL
    fp16 = graphs(8, extra=" --dtype float16")
    assert fp16 - graphs(8, extra=" --dtype float16", env={"VLLM_ALLREDUCE_USE_SYMM_MEM": "0"}) == \
        symm * CALLS * (NCCL_GRAPH_COLLECTIVE_CUMEM - CUSTOM_AR_GRAPH_COLLECTIVE)
    # without NVSwitch there is no multicast: no symmetric memory (H100 NVL cards)
    nvl = resolve_gpu("H100 NVL")
    assert graphs(8, gpu=nvl) == graphs(8, gpu=nvl, env={"VLLM_ALLREDUCE_USE_SYMM_MEM": "0"})


def test_blackwell_lowers_the_custom_all_reduce_to_2_mib_at_tp2():
    b200 = resolve_gpu("B200")
    # 2 MiB / 8 KiB rows: sizes from 256 tokens run the symmetric-memory all-reduce (one piecewise size)
    on, off = graphs(2, gpu=b200), graphs(2, gpu=b200, env={"VLLM_ALLREDUCE_USE_SYMM_MEM": "0"})
    assert off - on == 1 * CALLS * (CUSTOM_AR_GRAPH_COLLECTIVE - SYMM_MEM_GRAPH_COLLECTIVE)


def test_inputs_of_8_mib_and_more_leave_the_custom_all_reduce_for_nccl():
    # A100 (no symmetric memory): a 16384-wide model's rows are 32 KiB, so 256 tokens make 8 MiB, which
    # the custom all-reduce refuses (inp_size < max_size): those calls are NCCL's
    wide = replace(LLAMA8B, hidden_size=16384, num_attention_heads=128, intermediate_size=53248)
    a100 = resolve_gpu("A100-80GB")
    narrow = graphs(2, gpu=a100, model=replace(wide, hidden_size=16376))
    full = graphs(2, gpu=a100, model=wide)
    assert full - narrow == 1 * CALLS * (NCCL_GRAPH_COLLECTIVE_CUMEM - CUSTOM_AR_GRAPH_COLLECTIVE)
