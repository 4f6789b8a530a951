"""SGLang's mamba state pool for hybrid Gated-DeltaNet and Mamba2 models (engines/sglang/state_pool.py):
per-request bytes from configs/mamba_utils.py Mamba2StateShape.create, the slots each release carves out of
rest_memory before the KV pool (0.5.2 - 0.5.23 model_runner.py / model_runner_kv_cache_mixin.py /
kv_cache_configurator.py handle_max_mamba_cache) and the max_running_requests cap. Every figure below is
worked by hand from those formulas."""

from __future__ import annotations

from servefit.core import EngineConfig
from servefit.engines.sglang.state_pool import recurrent_per_req, state_pool
from servefit.models import catalog
from servefit.pipeline import Target, evaluate, site_from_argv

GiB = 2**30
Q38 = "Qwen/Qwen3.8-27B-FP8"
QNEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
NEMO = "nvidia/NVIDIA-Nemotron-Nano-9B-v2"
# Qwen3.8-27B, 48 Gated-DeltaNet layers: conv (2 x 16 x 128 + 48 x 128 = 10240, 3) bf16, temporal (48, 128, 128) fp32
Q38_CONV, Q38_SSM = 10240 * 3 * 2 * 48, 48 * 128 * 128 * 4 * 48  # 2949120, 150994944
Q38_REQ = Q38_CONV + Q38_SSM  # 153944064
# Qwen3-Next-80B-A3B on attention-TP 4, 36 GDN layers: conv (8192 / 4, 3) bf16, temporal (32 / 4, 128, 128) fp32
QNEXT_TP4 = 2048 * 3 * 2 * 36 + 8 * 128 * 128 * 4 * 36  # 19316736
# Nemotron-Nano-9B-v2, 27 Mamba2 layers: conv (128 x 80 + 2 x 8 x 128 = 12288, 3) bf16, temporal (128, 80, 128) fp32
NEMO_REQ = 12288 * 3 * 2 * 27 + 128 * 80 * 128 * 4 * 27  # 143548416


def _cfg(version, **settings):
    return EngineConfig(engine="sglang", model_ref="m", version=version, settings=settings)


def test_per_request_state_bytes_by_hand():
    assert recurrent_per_req(catalog.lookup(Q38), 1, "float32") == (Q38_CONV, Q38_SSM) == (2949120, 150994944)
    assert recurrent_per_req(catalog.lookup(Q38), 2, "float32") == (10240 // 2 * 3 * 2 * 48, 24 * 128 * 128 * 4 * 48)
    assert recurrent_per_req(catalog.lookup(Q38), 1, "bfloat16") == (Q38_CONV, Q38_SSM // 2)  # --mamba-ssm-dtype
    # TP 3 does not divide the 16 key heads (n_groups): extra_groups_for_head_shards adds tp - n_groups = -13,
    # leaving 3 groups as SGLang computes it: conv 48 x 128 + 2 x 3 x 128 = 6912
    assert recurrent_per_req(catalog.lookup(Q38), 3, "float32") == (6912 // 3 * 3 * 2 * 48, 16 * 128 * 128 * 4 * 48)
    assert sum(recurrent_per_req(catalog.lookup(QNEXT), 4, "float32")) == QNEXT_TP4 == 19316736
    assert sum(recurrent_per_req(catalog.lookup(NEMO), 1, "float32")) == NEMO_REQ == 143548416
    # Granite-4.0-H-Small: 1 group raised to the TP size 4 (extra_groups_for_head_shards): conv 8192 + 2 x 4 x 128
    assert recurrent_per_req(catalog.lookup("ibm-granite/granite-4.0-h-small"), 4, "float32") == \
        ((8192 + 2 * 4 * 128) // 4 * 3 * 2 * 36, 32 * 64 * 128 * 4 * 36) == (497664, 37748736)
    # Falcon-H1 runs its Mamba2 mixer in all 44 layers (configs/falcon_h1.py linear_layer_ids)
    assert recurrent_per_req(catalog.lookup("tiiuae/Falcon-H1-7B-Instruct"), 1, "float32") == \
        (3584 * 3 * 2 * 44, 24 * 128 * 256 * 4 * 44) == (946176, 138412032)


def test_the_logged_pool_sizes_follow_from_124_slots():
    # "Mamba Cache is allocated. max_mamba_cache_size: 124, conv_state size: 0.34GB, ssm_state size: 17.58GB"
    assert (f"{125 * Q38_CONV / GiB:.2f}", f"{125 * Q38_SSM / GiB:.2f}") == ("0.34", "17.58")


def test_0518_ratio_split_keeps_the_padding_slot_and_caps_running_at_a_fifth():
    q38, rest = catalog.lookup(Q38), 38 * GiB
    p = state_pool(_cfg("0.5.18"), q38, 1, 1, 1, rest)
    # budget = 38 GiB x 0.9 / 1.9; slots = (budget - per_req) // per_req = 124; cap 124 // (3 + 2 ping-pong) = 24
    assert (p.per_req, p.slots, p.bytes, p.running_cap) == (Q38_REQ, 124, 125 * Q38_REQ, 24)
    assert (p.conv_bytes, p.ssm_bytes) == (125 * Q38_CONV, 125 * Q38_SSM)
    # 0.5.16 had no padding slot: budget // per_req = 125 slots taking 125 x per_req; no_buffer before 0.5.14
    old = state_pool(_cfg("0.5.16"), q38, 1, 1, 1, rest)
    assert (old.slots, old.bytes, old.running_cap) == (125, 125 * Q38_REQ, 125 // 5)
    assert state_pool(_cfg("0.5.13"), q38, 1, 1, 1, rest).running_cap == 125 // 3


def test_running_cap_follows_the_radix_cache_strategy():
    q38, rest = catalog.lookup(Q38), 38 * GiB
    cap = {k: state_pool(_cfg("0.5.18", **s), q38, 1, 1, 1, rest).running_cap for k, s in {
        "auto, no overlap": {"disable_overlap_schedule": True},  # auto resolves to no_buffer: 3
        "extra_buffer, no overlap": {"disable_overlap_schedule": True, "mamba_radix_cache_strategy": "extra_buffer"},
        "lazy": {"mamba_radix_cache_strategy": "extra_buffer_lazy"},
        "no_buffer": {"mamba_radix_cache_strategy": "no_buffer"},
    }.items()}
    assert cap == {"auto, no overlap": 124 // 3, "extra_buffer, no overlap": 124 // 4, "lazy": 124 // 4,
                   "no_buffer": 124 // 3}
    off = state_pool(_cfg("0.5.18", disable_radix_cache=True, max_running_requests=32), q38, 1, 1, 1, rest)
    assert (off.slots, off.running_cap, off.bytes) == (32, 32, 33 * Q38_REQ)
    # 0.5.7 added the two ping-pong slots whatever the strategy
    assert state_pool(_cfg("0.5.7"), catalog.lookup(QNEXT), 4, 1, 1, rest).running_cap == \
        int(rest * 0.9 / 1.9 // QNEXT_TP4) // 5


def test_qwen3_next_slots_across_releases():
    qn, rest = catalog.lookup(QNEXT), 20 * GiB
    budget = rest * 0.9 / 1.9
    # 0.5.2: no radix cache, 512 slots (or --max-running-requests, or --max-mamba-cache-size), cap = slots
    p = state_pool(_cfg("0.5.2"), qn, 4, 1, 1, rest)
    assert (p.slots, p.bytes, p.running_cap) == (512, 512 * QNEXT_TP4, 512)
    assert state_pool(_cfg("0.5.2", max_running_requests=64), qn, 4, 1, 1, rest).slots == 64
    assert state_pool(_cfg("0.5.3", max_mamba_cache_size=100), qn, 4, 1, 1, rest).slots == 100
    # 0.5.4 - 0.5.6: the ratio split, --max-mamba-cache-size ignored; a GDN model's slots // the DP-attention size
    p = state_pool(_cfg("0.5.5", max_mamba_cache_size=100), qn, 4, 1, 1, rest)
    assert (p.slots, p.bytes, p.running_cap) == (526, 526 * QNEXT_TP4, 526 // 3) == (526, 10160603136, 175)
    assert int(budget // QNEXT_TP4) == 526
    assert state_pool(_cfg("0.5.5", enable_dp_attention=True), qn, 4, 1, 2, rest).slots == 526 // 2
    # 0.5.9: the flag wins; without the radix cache and without --max-running-requests the ratio split
    assert state_pool(_cfg("0.5.9", max_mamba_cache_size=100), qn, 4, 1, 1, rest).slots == 100
    assert state_pool(_cfg("0.5.9", disable_radix_cache=True), qn, 4, 1, 1, rest).slots == 526
    # 0.5.17+: the padding slot
    p = state_pool(_cfg("0.5.18"), qn, 4, 1, 1, rest)
    assert (p.slots, p.bytes, p.running_cap) == (525, 526 * QNEXT_TP4, 525 // 5)


def test_pipeline_stages_price_their_share_of_the_state_layers_from_0517():
    qn, rest = catalog.lookup(QNEXT), 20 * GiB
    # 48 layers over 2 stages of 24: 18 of the 36 GDN layers on each
    assert state_pool(_cfg("0.5.18"), qn, 4, 2, 1, rest).per_req == QNEXT_TP4 // 2 == 9658368
    assert state_pool(_cfg("0.5.16"), qn, 4, 2, 1, rest).per_req == QNEXT_TP4
    # Nemotron-Nano-9B-v2 over 3 stages of 18 / 19 / 19 layers (get_pp_indices: the last stages take the
    # remainder): its 27 Mamba2 layers split 9 / 9 / 9
    nemo = catalog.lookup(NEMO)
    kinds = nemo.kinds()
    assert [sum(1 for k in kinds[a:b] if k == "mamba") for a, b in ((0, 18), (18, 37), (37, 56))] == [9, 9, 9]
    assert state_pool(_cfg("0.5.18"), nemo, 1, 3, 1, rest).per_req == int(NEMO_REQ * 9 / 27)


def test_nemotron_h_without_the_radix_cache_before_057():
    nemo, rest = catalog.lookup(NEMO), 20 * GiB
    # 0.5.4 - 0.5.6: "NemotronHConfig model detected, disable radix cache": --max-running-requests or 512 slots,
    # not divided by the DP-attention size, cap = slots
    p = state_pool(_cfg("0.5.4", max_running_requests=64, enable_dp_attention=True), nemo, 2, 1, 2, rest)
    assert (p.per_req, p.slots, p.running_cap) == (NEMO_REQ // 2, 64, 64)
    assert state_pool(_cfg("0.5.4"), nemo, 1, 1, 1, rest).slots == 512
    p = state_pool(_cfg("0.5.6"), nemo, 1, 1, 1, rest)
    assert (p.slots, p.bytes, p.running_cap) == (512, 512 * NEMO_REQ, 512)
    assert state_pool(_cfg("0.5.3"), nemo, 1, 1, 1, rest) is None  # no Nemotron-H before 0.5.4
    # 0.5.7: the radix cache and the ratio split
    p = state_pool(_cfg("0.5.7"), nemo, 1, 1, 1, rest)
    assert (p.slots, p.running_cap) == (int(rest * 0.9 / 1.9 // NEMO_REQ), int(rest * 0.9 / 1.9 // NEMO_REQ) // 5)
    assert p.slots == 70


def test_qwen35_gets_its_pool_from_059():
    q38 = catalog.lookup(Q38)
    assert state_pool(_cfg("0.5.8"), q38, 1, 1, 1, 38 * GiB) is None
    assert state_pool(_cfg("0.5.9"), q38, 1, 1, 1, 38 * GiB).slots == 125


SGL = ["python", "-m", "sglang.launch_server", "--model-path"]


def _plan(model, version, extra=(), gpus=1):
    return evaluate(site_from_argv(SGL + [model] + list(extra)),
                    Target(gpu="H100", gpus=gpus, engine_version=version)).plan


def test_plan_carves_the_pool_before_the_kv_pool():
    # 100 slots of 153944064 bytes are 234900 tokens of 16 attention layers x 4 KV heads x 256 x 2 x 2 bytes
    assert Q38_REQ * 100 == 234900 * 65536
    args = ["--mem-fraction-static", "0.85"]
    a = _plan(Q38, "0.5.18", args + ["--max-mamba-cache-size", "124"])
    b = _plan(Q38, "0.5.18", args + ["--max-mamba-cache-size", "224"])
    assert a.kv_bytes_per_token == 65536
    assert a.kv_cache_tokens - b.kv_cache_tokens == 234900
    assert a.memory.kv_cache - a.kv_cache_tokens * 65536 == 125 * Q38_REQ
    assert "Mamba Cache is allocated. max_mamba_cache_size: 124, conv_state size: 0.34GB, ssm_state size: 17.58GB" \
        in a.messages
    assert a.detail.max_running_requests == 124 // 5
    assert "max_running_requests is capped to 24 by the mamba state cache (max_mamba_cache_size=124, 5 state slots " \
        "per request)" in a.messages
    assert not any("not carved out" in x or "speculative decoding" in x for x in a.assumptions)
    # the warning arrived in 0.5.17; 0.5.16 caps as well, silently
    old = _plan(Q38, "0.5.16", args + ["--max-mamba-cache-size", "124"])
    assert old.detail.max_running_requests == 24 and not any("capped" in m for m in old.messages)
    spec = _plan(Q38, "0.5.18", args + ["--speculative-algorithm", "NEXTN"])
    assert any(x.startswith("speculative decoding: the state pool's intermediate") for x in spec.assumptions)


def test_plan_of_qwen3_next_on_052_takes_512_slots():
    p = _plan(QNEXT, "0.5.2", ["--tp", "4"], gpus=4)
    q = _plan(QNEXT, "0.5.2", ["--tp", "4", "--max-running-requests", "256"], gpus=4)
    # 256 fewer slots of 19316736 bytes, at 12 attention layers x (2 KV heads / 4 -> 1) x 256 x 2 x 2 bytes = 12288
    assert q.kv_cache_tokens - p.kv_cache_tokens == 256 * QNEXT_TP4 // 12288 == 402432
    assert (p.detail.max_running_requests, q.detail.max_running_requests) == (512, 256)


def test_short_conv_models_keep_the_not_carved_out_assumption():
    p = _plan("LiquidAI/LFM2-1.2B", "0.5.18")
    assert any("mamba state pool is not carved out" in x for x in p.assumptions)


def test_plan_of_nemotron_h():
    # 4 attention layers x 8 KV heads x 128 x 2 x 2 bytes = 16384 bytes a token; 100 slots are 876150 tokens
    a = _plan(NEMO, "0.5.18", ["--max-mamba-cache-size", "100"])
    b = _plan(NEMO, "0.5.18", ["--max-mamba-cache-size", "200"])
    assert a.kv_bytes_per_token == 16384 and NEMO_REQ * 100 == 876150 * 16384
    assert a.kv_cache_tokens - b.kv_cache_tokens == 876150
    assert a.memory.kv_cache - a.kv_cache_tokens * 16384 == 101 * NEMO_REQ
    assert (a.detail.max_running_requests, b.detail.max_running_requests) == (100 // 5, 200 // 5)
    # 0.5.4: no radix cache, 512 slots of 143548416 bytes (68.45 GiB) leave the KV pool nothing on an H100
    p = _plan(NEMO, "0.5.4")
    assert p.outcome == "oom_at_load"
    assert f"{512 * NEMO_REQ / GiB:.2f}" == "68.45"
    assert any(f.code == "SGL004" and "the mamba state pool's 512 slots take 68.45 GiB" in f.message for f in p.findings)
    q = _plan(NEMO, "0.5.4", ["--max-running-requests", "64"])
    assert q.outcome == "started" and q.detail.max_running_requests == 64
    assert q.kv_cache_tokens - _plan(NEMO, "0.5.4", ["--max-running-requests", "128"]).kv_cache_tokens == \
        64 * NEMO_REQ // 16384 == 560736


def test_ssm_dtype_from_the_flag_or_the_environment():
    q38 = catalog.lookup(Q38)
    half = Q38_CONV + Q38_SSM // 2
    assert state_pool(_cfg("0.5.18", mamba_ssm_dtype="bfloat16"), q38, 1, 1, 1, 38 * GiB).per_req == half
    env = EngineConfig(engine="sglang", model_ref="m", version="0.5.18", settings={},
                       env={"SGLANG_MAMBA_SSM_DTYPE": "bfloat16"})
    assert state_pool(env, q38, 1, 1, 1, 38 * GiB).per_req == half
    assert state_pool(_cfg("0.5.18"), q38, 1, 1, 1, 38 * GiB).per_req == Q38_REQ


KIMI = "moonshotai/Kimi-Linear-48B-A3B-Instruct"
# Kimi-Linear-48B-A3B, 20 KDA layers: conv (3, 3 x 32 x 128 / TP) bf16, temporal (32 / TP, 128, 128) fp32
KIMI_TP2 = 3 * 32 * 128 // 2 * 3 * 2 * 20 + 16 * 128 * 128 * 4 * 20  # 737280 + 20971520


def test_kimi_linear_pool_across_releases():
    kimi, rest = catalog.lookup(KIMI), 20 * GiB
    assert recurrent_per_req(kimi, 2, "float32") == (737280, 20971520)
    slots = int(rest * 0.9 / 1.9 // KIMI_TP2)
    assert slots == 468
    assert state_pool(_cfg("0.5.4"), kimi, 2, 1, 1, rest) is None  # configs/kimi_linear.py arrived in 0.5.5
    # 0.5.5 - 0.5.13 without the radix cache; 0.5.5 - 0.5.6 do not divide a non-GDN model's slots by DP
    dpa = {"max_running_requests": 64, "enable_dp_attention": True}
    assert state_pool(_cfg("0.5.5", **dpa), kimi, 2, 1, 2, rest).slots == 64
    assert state_pool(_cfg("0.5.7", **dpa), kimi, 2, 1, 2, rest).slots == 32
    assert state_pool(_cfg("0.5.7"), kimi, 2, 1, 1, rest).slots == 512
    p = state_pool(_cfg("0.5.10"), kimi, 2, 1, 1, rest)  # 0.5.9+: the ratio split even without the radix cache
    assert (p.slots, p.running_cap) == (slots, slots)
    # the radix cache from 0.5.14, no_buffer (3 slots a request) until the extra-buffer list names it in 0.5.16
    assert state_pool(_cfg("0.5.14"), kimi, 2, 1, 1, rest).running_cap == slots // 3
    p = state_pool(_cfg("0.5.16"), kimi, 2, 1, 1, rest)
    assert (p.slots, p.running_cap) == (slots, slots // 5)
    assert state_pool(_cfg("0.5.18"), kimi, 2, 1, 1, rest).slots == slots - 1
