"""How TGI's warm-up turns free memory into KV blocks, release by release, each against the tag's
models/flash_causal_lm.py::FlashCausalLM.warmup: the 0.95 wiggle room from 1.4.1, the warm-up blocks
not added back in 2.1.0 - 2.4.0 when every warm-up request finished in the prefill, the caching
allocator's release-and-retry when the prefill's cached blocks do not fit, the gathered lm_head's
shard slice, the max_position_embeddings cap on the shard's default total from 3.0.1, and the memory
other processes hold."""

from __future__ import annotations

import dataclasses
import math

from test_tgi_engine import A10G, H100, LLAMA2_7B, LLAMA8B, run

from servefit.engines.tgi import defaults as d
from servefit.engines.tgi import memory as mem
from servefit.engines.tgi.era import era
from servefit.hardware.spec import GpuSpec

GiB = 2**30
MiB = 2**20
LLAMA70B = dataclasses.replace(LLAMA8B, name="meta-llama/Llama-3.1-70B-Instruct", num_hidden_layers=80,
                               hidden_size=8192, num_attention_heads=64, intermediate_size=28672,
                               params=70_553_706_496)
A100 = GpuSpec(key="a100-sxm4-80gb", name="NVIDIA A100-SXM4-80GB", vendor="nvidia", memory_bytes=84_988_133_376,
               compute_capability=80, smi_memory_bytes=85_899_345_920)


def test_the_wiggle_room_starts_at_1_4_1():
    # v1.4.0: int(free_memory // total_cache_size); v1.4.1: int((free_memory * 0.95) // total_cache_size)
    assert (era("1.4.0").wiggle, era("1.4.1").wiggle, era("1.4.5").wiggle) == (1.0, 0.95, 0.95)
    block = 2 * MiB  # Llama-3-8B: 16 tokens x 32 layers x 8 KV heads x 128 x (K, V) x 2 bytes
    free = 4 * GiB
    assert mem.kv_blocks(era("1.4.0"), 24 * GiB, 20 * GiB, 1.0, 1.0, block, 512).num_blocks == 2048 + 512
    assert mem.kv_blocks(era("1.4.1"), 24 * GiB, 20 * GiB, 1.0, 0.95, block, 512).num_blocks == \
        int(free * 0.95 // block) + 512 == 2457


def test_warm_up_batch_finishes_in_the_prefill_when_every_request_asks_one_token():
    # the router asks max_total_tokens - truncate new tokens per request (1 without a total, from 3.0)
    assert mem.warmup_batch(era("2.2.0"), 4095, 4095, 4096, 16, 0, None).finished
    assert mem.warmup_batch(era("2.2.0"), 8190, 4095, 4096, 16, 0, None).finished  # two requests of 4095
    # the launcher's 2.x default prefill (input + 50) adds a request of 50 tokens asking 4046
    assert not mem.warmup_batch(era("2.2.0"), 4145, 4095, 4096, 16, 0, None).finished
    assert not mem.warmup_batch(era("1.1.0"), 4095, 4095, 4096, 16, 0, None).finished  # max_new_tokens: 2
    assert mem.warmup_batch(era("3.0.0"), 4096, None, None, 1, 0, None).finished


def test_2_1_to_2_4_0_add_back_no_warm_up_blocks_when_the_batch_finished():
    # 2.1.0 - 2.4.0 warmup: `batch_num_blocks = batch.num_blocks if batch is not None else 0` of the batch
    # generate_token returns, None when all requests stopped; 2.0.x adds cache_manager.num_blocks, 2.4.1
    # batch.num_blocks read before the prefill
    assert [era(v).blocks_of_returned_batch for v in ("2.0.4", "2.1.0", "2.4.0", "2.4.1", "3.0.0")] == \
        [False, True, True, False, False]
    cmd = ("text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct --max-input-tokens 4095 "
           "--max-total-tokens 4096 --max-batch-prefill-tokens 4095")
    warm = math.ceil(4095 / 16)  # one request of 4095 tokens asking 1: 256 blocks of 16
    before = run(cmd, version="2.0.4")[1]
    inside = run(cmd, version="2.2.0")[1]
    assert before.detail.kv_cache_blocks - inside.detail.kv_cache_blocks == warm == 256
    assert before.kv_cache_tokens - inside.kv_cache_tokens == 256 * 16
    assert inside.outcome == before.outcome == "started"
    # with the default prefill (4145: a second request that does not finish) both add the blocks back
    cmd = "text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct"
    assert run(cmd, version="2.0.4")[1].kv_cache_tokens == run(cmd, version="2.2.0")[1].kv_cache_tokens


def test_gathered_head_keeps_the_shards_slice_cached():
    # layers/tensor_parallel.py::TensorParallelHead.forward: gather_input (vocab / shards x rows) and
    # world_out (vocab x rows); before 3.0 rows = every prompt token
    n, v, h = 10049, 128256, 8192
    fwd = n * (4 * h + 3 * (28672 // 2)) * 2
    cached = fwd + n * v * (2 + 4) + n * h * 2 + n * (v // 2) * 2  # 2.4.0: 6 bytes a logit less the in-place 2
    assert mem.activation_peak(LLAMA70B, era("2.4.0"), n, 2, 2, 2, False) == cached
    # one shard: no slice; a vocabulary the shards do not divide is loaded whole and not gathered
    assert mem.activation_peak(LLAMA70B, era("2.4.0"), n, 2, 2, 1, False) == \
        n * (4 * h + 3 * 28672) * 2 + n * v * 6 + n * h * 2
    odd = dataclasses.replace(LLAMA70B, vocab_size=v + 1)
    assert mem.activation_peak(odd, era("2.4.0"), n, 2, 2, 2, False) == fwd + n * (v + 1) * 6 + n * h * 2


def test_the_allocator_releases_its_cache_when_the_prefill_would_not_fit():
    # tgi-2744's command (calibration) on two A100 80GB, 2.4.0: what the prefill would leave cached (layers,
    # gather_input, world_out, log_softmax's copy and result) does not fit beside 65.7 GiB of weights and
    # the warm-up KV, so a cudaMalloc fails and the allocator frees its cached segments and retries
    # (CUDACachingAllocator.cpp::release_cached_blocks): the live tensors stay, world_out and log_softmax's
    # contiguous copy and result, 3 x 10049 x 128256 bf16
    cfg, plan = run("text-generation-launcher --model-id meta-llama/Meta-Llama-3.1-70B-Instruct --num-shard 2 "
                    "--max-input-tokens 9999 --max-total-tokens 10000", version="2.4.0", model=LLAMA70B, gpu=A100,
                    count=2)
    live = 3 * 10049 * 128256 * 2
    assert plan.detail.warmup_activation_bytes == live == plan.memory.activation_peak
    weights = 70_553_706_496 * 2 // 2  # bf16, halved by the shards
    assert plan.memory.weights == weights
    bpt = 80 * (8 // 2) * 128 * 2 * 2  # per shard, flashinfer blocks of one token
    warm = (9999 + 1 - 1) + (50 + 9950 - 1)  # two requests: 9999 prompt + 1 new, 50 prompt + 9950 new
    # CUDA context, NCCL, flashinfer's workspace and its three wrappers' 8 MiB int workspaces
    context = int(0.40 * GiB) + int(0.25 * GiB) + 128 * MiB + 3 * 8 * MiB
    # each layer's key and value tensor of the warm-up cache is 19998 x 4 x 128 x 2 = 20,477,952 bytes: the
    # caching allocator cudaMallocs a 20 MiB segment for it and does not split off the 493,568-byte tail
    # (1 MiB or less), so the 160 tensors hold 160 x 20 MiB
    assert warm * 4 * 128 * 2 == 20_477_952
    held = 160 * 20 * MiB
    free = A100.memory_bytes - context - weights - held - live
    blocks = int(free * 0.90 // bpt) + warm  # 2.4.0: TGI_WIGGLE_ROOM 0.90 of the free memory
    assert plan.kv_cache_tokens == blocks == 33668
    # logged: "Setting max batch total tokens to 30816" (+9.3%: the rest is not explained by the code read)


def test_shard_default_total_is_capped_by_max_position_embeddings_from_3_0_1():
    # 3.0.0: min(num_blocks x BLOCK_SIZE, tokenizer.model_max_length); 3.0.1 adds
    # config.max_position_embeddings (3.0.2 only makes it a getattr with a fallback)
    cmd = "text-generation-launcher --model-id meta-llama/Llama-2-7b-hf"
    old = run(cmd, version="3.0.0", model=LLAMA2_7B, gpu=H100)[1]
    new = run(cmd, version="3.0.1", model=LLAMA2_7B, gpu=H100)[1]
    assert old.detail.max_total_tokens == old.kv_cache_tokens > 4096
    assert new.detail.max_total_tokens == 4096 and new.detail.max_input_tokens == 4095
    assert "Maximum total tokens defaulted to 4096" in new.messages


def test_memory_other_processes_hold_is_not_free_at_warm_up():
    # get_free_memory reads torch.cuda.mem_get_info: another process's gigabyte is a gigabyte less of KV
    cmd = "text-generation-launcher --model-id meta-llama/Llama-3.1-8B-Instruct --max-total-tokens 4096"
    alone = run(cmd, version="3.3.7", gpu=H100)[1]
    shared = run(cmd, version="3.3.7", gpu=dataclasses.replace(H100, in_use_bytes=GiB))[1]
    per_token = 32 * 8 * 128 * 2 * 2
    assert abs((alone.kv_cache_tokens - shared.kv_cache_tokens) - GiB // per_token) <= 1
    assert GiB // per_token == 8192
    # and the weights must fit beside it
    crowded = dataclasses.replace(A10G, in_use_bytes=8 * GiB)
    cfg, plan = run(cmd, version="3.3.7", gpu=crowded)
    assert plan.outcome == "oom_at_load" and "TGI014" in [f.code for f in plan.findings]
    assert run(cmd, version="3.3.7", gpu=A10G)[1].outcome == "started"


MISTRAL_V01 = dataclasses.replace(LLAMA8B, name="mistralai/Mistral-7B-v0.1", architecture="MistralForCausalLM",
                                  model_type="mistral", vocab_size=32000, max_position_embeddings=32768,
                                  sliding_window=4096, rope_scaling=None, params=7_241_732_096)


def test_1_1_to_2_0_cap_each_warm_up_requests_blocks_at_the_sliding_window():
    # models/flash_mistral.py::FlashMistralBatch.from_pb (1.1.0 - 2.0.x): needed_blocks = min(needed_blocks,
    # SLIDING_WINDOW_BLOCKS), SLIDING_WINDOW_BLOCKS = ceil(4096 / 16) = 256 for Mistral-7B-v0.1
    e = era("2.0.0")
    capped = mem.warmup_batch(e, 32768, 8000, 8512, 16, 0, None, 256)
    whole = mem.warmup_batch(e, 32768, 8000, 8512, 16, 0, None)
    assert (capped.requests, capped.blocks) == (5, 5 * 256)
    assert whole.blocks == 4 * math.ceil((8000 + 512 - 1) / 16) + math.ceil((768 + 7744 - 1) / 16) == 2660
    # tgi-1831's command (calibration): 1380 fewer warm-up blocks held, so 0.05 of them fewer in the pool;
    # unwindowed, each of the 64 warm-up KV tensors is 2660 x 16 x 8 x 128 x 2 = 83.125 MiB in an 84 MiB
    # segment whose 0.875 MiB tail the caching allocator does not split off, 0.95 x 64 x 0.875 MiB / 2 MiB
    # blocks less; windowed, 1280 blocks make 40 MiB tensors, no tail
    cmd = ("text-generation-launcher --model-id mistralai/Mistral-7B-v0.1 --max-input-length 8000 "
           "--max-total-tokens 8512 --max-batch-prefill-tokens 32768")
    windowed = run(cmd, version="2.0.4", model=MISTRAL_V01, gpu=A100)[1]
    after = run(cmd, version="2.1.0", model=MISTRAL_V01, gpu=A100)[1]  # 2.1.0 has no cap
    tail = 84 * 2**20 - 2660 * 16 * 8 * 128 * 2
    assert tail == 917_504
    diff = 0.05 * (2660 - 1280) - 0.95 * 64 * tail / (2 * 2**20)
    assert abs((after.detail.kv_cache_blocks - windowed.detail.kv_cache_blocks) - diff) <= 1
    # Llama has no window; Mixtral's batch is the windowed one from 1.3.0, Qwen2's and Starcoder2's from 1.4.3
    assert d.warmup_window_blocks(LLAMA8B, e, 16) is None
    mixtral = dataclasses.replace(MISTRAL_V01, model_type="mixtral")
    assert d.warmup_window_blocks(mixtral, era("1.2.0"), 16) is None
    assert d.warmup_window_blocks(mixtral, era("1.3.0"), 16) == 256
    assert d.warmup_window_blocks(dataclasses.replace(MISTRAL_V01, model_type="qwen2"), era("1.4.2"), 16) is None
    assert d.warmup_window_blocks(dataclasses.replace(MISTRAL_V01, model_type="starcoder2"), e, 16) == 256
    assert d.warmup_window_blocks(MISTRAL_V01, era("2.1.0"), 16) is None
    assert d.warmup_window_blocks(dataclasses.replace(MISTRAL_V01, sliding_window=0), e, 16) is None
    assert d.warmup_window_blocks(dataclasses.replace(MISTRAL_V01, sliding_window=4001), e, 16) == 251  # ceil


def test_warm_up_kv_tensors_as_the_caching_allocator_reserves_them():
    # models/flash_causal_lm.py::init_kv_cache: a key and a value tensor per layer (layers/attention/kv_cache.py::
    # KVCache), each cudaMalloc'd by PyTorch's caching allocator (CUDACachingAllocator.cpp): a request of 10 MiB
    # or more gets a segment rounded up to 2 MiB, one under 10 MiB a share of a 20 MiB segment, and a block is
    # split only when more than 1 MiB would remain. Llama-3.1-8B: 32 layers x 8 KV heads x 128 x fp16, so one
    # tensor is 2048 bytes per token and the cache 64 tensors.
    assert (LLAMA8B.num_hidden_layers, LLAMA8B.num_key_value_heads, LLAMA8B.head_dim) == (32, 8, 128)
    # 10000 tokens: 20,480,000 bytes in a 20 MiB segment; the 491,520-byte tail stays with it
    assert mem.kv_tensors_reserved(LLAMA8B, 2, 1, 10_000, 1) == 64 * 20 * 2**20
    # 1280 blocks of 16: 40 MiB tensors fill their segments exactly
    assert mem.kv_tensors_reserved(LLAMA8B, 2, 1, 1280, 16) == 64 * 40 * 2**20
    # 2660 blocks of 16: 83.125 MiB in 84 MiB segments, tails of 0.875 MiB kept
    assert mem.kv_tensors_reserved(LLAMA8B, 2, 1, 2660, 16) == 64 * 84 * 2**20
    # 2056 blocks of 16: 64.25 MiB in 66 MiB segments, the 1.75 MiB tail split off and free for others
    assert mem.kv_tensors_reserved(LLAMA8B, 2, 1, 2056, 16) == 64 * 2056 * 16 * 2048
    # 3328 tokens: 6.5 MiB tensors share 20 MiB segments, 6.5 + 6.5 and a third that keeps the last 7 MiB
    # (0.5 MiB would remain): 21 full segments hold 63 tensors, the 64th is split off a new one
    assert mem.kv_tensors_reserved(LLAMA8B, 2, 1, 3328, 1) == 21 * 20 * 2**20 + 3328 * 2048
    # sharded over 2, fp8: 4 heads x 128 x 1 byte per token and tensor; 5120 tokens are 2.5 MiB, eight a
    # 20 MiB segment exactly
    assert mem.kv_tensors_reserved(LLAMA8B, 1, 2, 5120, 1) == 64 * 5120 * 512
    assert mem.kv_tensors_reserved(LLAMA8B, 2, 1, 0, 16) == 0
