"""Model Runner V2's GPU tensors built before the profile (engines/vllm/runner_v2.py), hand-computed."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from servefit.engines.vllm.runner_v2 import persistent_bytes

sys.path.insert(0, str(Path(__file__).parent))
from test_vllm_engine import LLAMA8B, run  # noqa: E402

QWEN_VOCAB = replace(LLAMA8B, vocab_size=151936)  # cdiv(151936, 32) = 4748 bitmask words


def r(version=(0, 28, 0), seqs=256, tokens=2048):
    return SimpleNamespace(version=version, max_num_seqs=seqs, max_num_batched_tokens=tokens, dtype="bfloat16")


def test_sampler_tables_bitmask_request_and_input_buffers_at_256_requests():
    # penalties 256 x (151936 + 4748) x 4 = 160,444,416; logit bias / stop / bad words / logprob ids
    # 256 x 17,924 = 4,588,544; grammar bitmask + logits_indices 256 x (1 + 4748) x 4 = 4,862,976;
    # RequestState / InputBuffers per request 256 x 32 + 4 = 8,196; input ids / positions / padding 2048 x 13
    want = 160_444_416 + 4_588_544 + 4_862_976 + 8_196 + 26_624
    assert persistent_bytes(QWEN_VOCAB, r(), {}, True, True, False, 40960) == want == 169_930_756
    # the V1 runner has none of them; before 0.26.1 nothing charges them (torch memory from before the profile)
    assert persistent_bytes(QWEN_VOCAB, r(), {}, False, True, False, 40960) == 0
    assert persistent_bytes(QWEN_VOCAB, r(version=(0, 26, 0)), {}, True, True, False, 40960) == 0


def test_only_the_last_stage_of_a_generating_model_builds_the_sampler():
    # load_model builds Sampler and StructuredOutputsWorker where is_last_pp_rank and not is_pooling_model:
    # a first pipeline stage or a pooling model keeps only the request and input buffers
    assert persistent_bytes(QWEN_VOCAB, r(), {}, True, False, False, 40960) == 8_196 + 26_624
    assert persistent_bytes(QWEN_VOCAB, r(), {}, True, True, True, 40960) == 8_196 + 26_624


def test_speculative_steps_widen_the_bitmask_and_draft_tokens():
    # 3 MTP steps: decode_query_len 4 -> bitmask for 4 logits a request, draft_tokens 3 int64 a request
    spec = {"speculative_config": {"method": "mtp", "num_speculative_tokens": 3}}
    base = persistent_bytes(QWEN_VOCAB, r(), {}, True, True, False, 40960)
    assert persistent_bytes(QWEN_VOCAB, r(), spec, True, True, False, 40960) - base == \
        3 * 4_862_976 + 256 * 3 * 8


def test_probabilistic_drafting_caches_the_draft_logits():
    # draft_sample_method "probabilistic": draft_logits, 256 requests x 2 steps x 151,936 in bf16 from 0.28
    # (head_dtype), fp32 before; greedy (the default) keeps none, nor does a first pipeline stage
    mtp = {"method": "mtp", "num_speculative_tokens": 2}
    prob = {"speculative_config": {**mtp, "draft_sample_method": "probabilistic"}}
    greedy = {"speculative_config": mtp}
    for version, per in (((0, 28, 0), 2), ((0, 27, 0), 4)):
        diff = persistent_bytes(QWEN_VOCAB, r(version=version), prob, True, True, False, 40960) - \
            persistent_bytes(QWEN_VOCAB, r(version=version), greedy, True, True, False, 40960)
        assert diff == 256 * 2 * 151936 * per
    assert diff == 311_164_928
    assert persistent_bytes(QWEN_VOCAB, r(), prob, True, False, False, 40960) == \
        persistent_bytes(QWEN_VOCAB, r(), greedy, True, False, False, 40960)


def test_ngram_keeps_the_token_ids_on_the_gpu_from_0_32():
    # use_dense_all_token_ids: max_num_seqs x max_model_len int32, 256 x 32768 x 4 = 32 MiB; 0.31 keeps it in UVA
    ngram = {"speculative_config": {"method": "ngram", "num_speculative_tokens": 4}}
    old = persistent_bytes(QWEN_VOCAB, r(version=(0, 31, 0)), ngram, True, True, False, 32768)
    new = persistent_bytes(QWEN_VOCAB, r(version=(0, 32, 0)), ngram, True, True, False, 32768)
    assert new - old == 256 * 32768 * 4 == 33_554_432


def test_plan_charges_them_on_a_pipeline_stage_that_samples_only():
    # PP2 on 0.31: the first stage's non-torch differs from the last's by the sampler's share (64 requests,
    # Llama's 128,256 vocabulary: 64 x (128256 + 4008) x 4 + 64 x 17,924 + 64 x (1 + 4008) x 4)
    argv = "vllm serve m --max-model-len 8192 --max-num-seqs 64 --pipeline-parallel-size 2"
    _, plan = run(argv, count=2, version="0.31.0")
    first, last = plan.devices[0], plan.devices[1]
    assert last.non_torch - first.non_torch == 33_859_584 + 1_147_136 + 1_026_304
