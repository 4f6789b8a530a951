"""The accuracy benchmark keeps a held-out half (issue 16): every case carries a split, new cases
follow the rule fixed before they were evaluated, nothing drops out unnamed, and the held-out
targets servefit meets are asserted (the unmet ones are reported in the README with the reason)."""

from __future__ import annotations

import importlib.util
import io
import statistics
from contextlib import redirect_stdout
from pathlib import Path

import pytest

RUN = Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy" / "run.py"
spec = importlib.util.spec_from_file_location("accuracy_run_heldout", RUN)
assert spec is not None and spec.loader is not None
acc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(acc)

ALL = acc.all_cases()
NEW = [c for c in ALL if c.get("added") == "issue-16"]


@pytest.fixture(scope="module")
def rows():
    return [acc.compare(c) for c in acc.load_cases(located=True)]


def test_every_case_has_a_split_and_new_cases_follow_the_rule():
    assert {c.get("split") for c in ALL} <= set(acc.SPLITS)
    assert not [c["id"] for c in ALL if c.get("split") not in acc.SPLITS]
    # cases collected before the split existed were calibrated on: none may claim to be held out
    assert not [c["id"] for c in ALL if not c.get("added") and c["split"] != "calibration"]
    wrong = [c["id"] for c in NEW if c["split"] != acc.split_by_rule(c["id"], c.get("seen_before"))]
    assert not wrong, wrong
    assert len(NEW) >= 50
    # at least half of the cases nobody had seen are held out
    unseen = [c for c in NEW if not c.get("seen_before")]
    assert sum(c["split"] == "heldout" for c in unseen) * 2 >= len(unseen)


def test_split_rule_is_the_documented_hash():
    # sha256("club3090-652-...") starts with a digit -> held out; the rule is stable across runs
    assert acc.split_by_rule("club3090-652-rtx5090-qwen36-35b-a3b-nvfp4-fp8kv") == "heldout"
    assert acc.split_by_rule("lcpp-unsloth5225-gemma3-270m-ctx4096-np2") == "calibration"
    assert acc.split_by_rule("club3090-652-rtx5090-qwen36-35b-a3b-nvfp4-fp8kv", "quoted in a case's notes") == "calibration"


def test_every_counted_case_has_an_openable_source():
    counted = acc.load_cases(located=True)
    bad = [c["id"] for c in counted if not str(c.get("source", "")).startswith("https://")]
    assert not bad, bad
    # the unlocated ones are kept, named and not counted
    unlocated = [c for c in ALL if c.get("unlocated")]
    assert unlocated and all(str(c["unlocated"]).strip() for c in unlocated)
    assert all(c in acc.excluded_cases() for c in unlocated)


def test_nothing_is_dropped_silently(rows):
    excluded = acc.excluded_cases()
    assert len(rows) + len(excluded) == len(ALL)
    for sp in acc.SPLITS:
        for engine, s in acc.summarize(rows, sp).items():
            failed = [r["id"] for r in rows if r["engine"] == engine and r["split"] == sp and "failure" in r]
            assert s["failures"] == len(failed) == len(s["not_evaluable"])
            assert all(s["not_evaluable"][cid] for cid in failed)  # each with its reason


def test_runner_prints_both_halves_and_the_exclusions():
    out = io.StringIO()
    with redirect_stdout(out):
        acc.main([])
    text = out.getvalue()
    assert "== calibration ==" in text and "== heldout ==" in text
    assert text.index("== calibration ==") < text.index("== heldout ==")
    assert "vllm-16570-4xa100-40gb-qwen25-vl-72b-v0-tp4" in text  # excluded, named with its reason
    # Kimi-Linear is catalogued since (data/models/kimi.yaml): its case is evaluated, a known miss
    assert "not evaluable: vllm-28228-2x3090-kimi-linear-48b-awq-tp2" not in text
    assert "vllm: 86 cases (0 not evaluable)" in text


def test_values_are_compared_as_logged():
    assert acc.expected_value("memory_graph_full_gib", "560.0 MiB") == pytest.approx(560 / 1024)
    assert acc.expected_value("kv_buffer_mib", "1.5 GiB") == pytest.approx(1536)
    assert acc.expected_value("kv_tokens", 534064) == 534064.0
    row = acc.compare({**next(c for c in ALL if c["id"] == "ollm-llama31-8b-ctx8192-classic")})
    assert abs(row["errors"]["memory_graph_full_gib"]) < 0.01


def test_a_figure_the_plan_lacks_is_named(rows):
    case = dict(next(c for c in ALL if c["id"] == "club3090-652-rtx5090-qwen36-35b-a3b-nvfp4-fp8kv"))
    case["expected"] = {**case["expected"], "no_such_figure": 1.0}
    assert acc.compare(case)["unpredicted"] == ["no_such_figure"]


# CUDA-graph pools servefit misses on issue 16's fourth batch (measured, not fitted), pinned at the
# measured error (+-2 points) and left out of the sub-term figures asserted below (run.py still prints
# them): held out, Qwen3.6-27B on 2 x 80 GB with v0.27.1 (1.01 GiB logged, 1.32 predicted) and
# gpt-oss-120b TP 2 on v0.15.1 (0.33 logged, 0.94 predicted); calibration, Qwen3-VL-30B-A3B TP 2 on
# v0.12.0 with 256 sequences, whose log says the capture "took 0.15 GiB" where 1.05 is predicted (its
# twin runs of the same week log negative figures). A fix takes the case off this list.
# Held out too: vLLM 0.19.0's "Maximum concurrency" for Qwen3.5-27B (hybrid Gated DeltaNet) on
# 4 x RTX 3090 is 8.4% / 7.3% below the logged one (its token count is 2.7% / 3.2% low); with them the
# held-out concurrency median is 3.1% on 25 logs (1.5% on the other 23), so they are pinned here and in
# tests/test_accuracy_runner.py (KNOWN_MISSES) instead of being averaged away.
SUBTERM_KNOWN_MISSES = {("lambo-4x3090-qwen35-27b-eager-tp4-32k-0190", "max_concurrency"): -0.0835,
                        ("lambo-4x3090-qwen35-27b-eager-tp4-50k-u092-0190", "max_concurrency"): -0.0733,
                        ("souspilot-2x80gb-qwen36-27b-tp2-64k-0271", "cuda_graph_gib"): 0.3072,
                        ("activaterag-2xgpu-gpt-oss-120b-tp2-u085-0151", "cuda_graph_gib"): 1.8568,
                        ("videocut-2xh100-qwen3-vl-30b-a3b-tp2-64k-s256-0120", "cuda_graph_gib"): 6.0215,
                        # TGI pools missed on the third batch (calibration, measured, not fitted; the
                        # reasons are in tests/test_accuracy_runner.py TGI_KNOWN_MISSES)
                        ("tgi-1856-rtx3090-llama3-8b-instruct-v14", "max_batch_total_tokens"): -0.2298,
                        ("tgi-2744-2xa100-llama31-70b-input-9999", "max_batch_total_tokens"): 0.1111}


def _errors(rows, engine, split, key):
    return [abs(r["errors"][key]) for r in rows
            if r["engine"] == engine and r["split"] == split and key in r["errors"]
            and (r["id"], key) not in SUBTERM_KNOWN_MISSES]


def test_subterm_known_misses_are_pinned(rows):
    got = {(r["id"], k): r["errors"][k] for r in rows for k in r["errors"] if (r["id"], k) in SUBTERM_KNOWN_MISSES}
    assert set(got) == set(SUBTERM_KNOWN_MISSES)
    off = {k: round(v, 4) for k, v in got.items() if abs(v - SUBTERM_KNOWN_MISSES[k]) > 0.02}
    assert not off, off


def test_llamacpp_kv_buffers_exact_on_both_halves(rows):
    """KV buffers within 1 MiB, SWA models with and without parallel slots included (held out: the
    gemma-3 SWA pool at 1-8 slots, build 10107's padded per-slot contexts)."""
    for split, n in (("heldout", 5), ("calibration", 3)):
        got = [(r["id"], r["pairs"]["kv_buffer_mib"]) for r in rows
               if r["engine"] == "llamacpp" and r["split"] == split and "kv_buffer_mib" in r.get("pairs", {})]
        assert len(got) >= n, (split, got)
        off = [(cid, w, g) for cid, (w, g) in got if abs(float(g) - acc.expected_value("kv_buffer_mib", w)) > 1.0
               and cid not in LCPP_KV_KNOWN_MISSES]
        assert not off, off
    pinned = {r["id"]: r["pairs"]["kv_buffer_mib"][1] for r in rows if r["id"] in LCPP_KV_KNOWN_MISSES}
    assert pinned.keys() == LCPP_KV_KNOWN_MISSES.keys()
    assert all(abs(float(pinned[k]) - v) <= 1.0 for k, v in LCPP_KV_KNOWN_MISSES.items()), pinned


# llama.cpp KV buffers servefit misses (issue 16 fourth batch, held out, measured, not fitted), pinned
# at the predicted MiB: gpt-oss-20b F16 on a Tesla T4 with b7772 and every memory setting default,
# where --fit cut the context to 56064 (1338 MiB of KV logged); servefit's fit went down to 4096 (120
# MiB) while it sized the F16 file's experts as F16, and since they are MXFP4 (read from the calibration
# F16 / Q5_K_M logs) it keeps 888 MiB. A fix takes the case off this list.
# (pin moved 888 -> 978 by issue 16's --fit-as-the-engine-runs-it and iSWA compute changes, not refitted)
LCPP_KV_KNOWN_MISSES = {"lcpp-nbchat11-t4-gpt-oss-20b-f16-fit-auto-b7772": 978.0}  # logged 1338 (120 before the MXFP4 experts)


def test_vllm_outcomes(rows):
    """Outcomes: at most one in twenty missed on the calibration half (a re-run of a command at the
    edge that was refused where its twin started; gpt-oss-120b with v0.11's Triton MXFP4 layout on
    Hopper), one in ten on the small held-out half."""
    for split, worst in (("calibration", 0.95), ("heldout", 0.9)):
        scored = [r for r in rows if r["engine"] == "vllm" and r["split"] == split and r["outcome_ok"] is not None]
        assert len(scored) >= 6, split
        right = sum(bool(r["outcome_ok"]) for r in scored)
        assert right >= worst * len(scored), [r["id"] for r in scored if not r["outcome_ok"]]


def test_vllm_heldout_token_targets(rows):
    """The available KV memory and the weights held out (the token and concurrency medians, issue 16's
    target, are below)."""
    # pinned at the figures measured after issue 16's seventh batch (ten DGX Spark logs, unified memory):
    # KV memory median 3.3% and p90 31.8% on 39 (2.3% / 7.5% on 29 before); the target is below.
    # 3.6% / 36.5% once GB10 was planned on vLLM's small batch tier (NVML gives it no memory), read from
    # the wheels and the one DGX Spark calibration log (tokens 3.2% / 13.9%, from 3.2% / 19.5%)
    kv = _errors(rows, "vllm", "heldout", "kv_cache_gib")
    assert len(kv) >= 39 and statistics.median(kv) <= 0.038 and acc.pct(kv, 0.9) <= 0.375
    weights = _errors(rows, "vllm", "heldout", "weights_gib")
    assert len(weights) >= 20 and statistics.median(weights) <= 0.01


@pytest.mark.xfail(strict=True, reason="median 3.3% and p90 31.8% on 39 since issue 16's seventh batch (2.3% / 7.5% "
                                       "on 29 before): Laguna-S-2.1, Qwen3.8-27B and Nemotron 3 Super checkpoints on "
                                       "DGX Spark load 5-34% more weights than predicted")
def test_vllm_heldout_kv_memory_target(rows):
    """Issue 16's held-out target for the available KV memory: median <= 3%, p90 <= 10%."""
    kv = _errors(rows, "vllm", "heldout", "kv_cache_gib")
    assert statistics.median(kv) <= 0.03 and acc.pct(kv, 0.9) <= 0.10


@pytest.mark.xfail(strict=True, reason="median 3.2% on 40 (tokens) and 3.4% on 36 (concurrency) after issue 16's "
                                       "seventh batch; 3.2% on 30 and 3.3% on 26 before it; 2.3% / 2.4% on "
                                       "the same logs before Model Runner V2's profile was read from vLLM's code "
                                       "(a greedy dummy sampler before 0.33, the graph estimate above the pool): "
                                       "what V2 charges is still low on some logs (0.44 GiB of torch peak on the "
                                       "0.31 A100 calibration log where the forward gives 0.13)")
def test_vllm_heldout_token_median_target(rows):
    """Issue 16's held-out target for "GPU KV cache size" tokens and the concurrency beside it:
    median <= 3%. Strict: when it is met again the test reports it."""
    tokens = _errors(rows, "vllm", "heldout", "kv_tokens")
    conc = _errors(rows, "vllm", "heldout", "max_concurrency")
    assert len(tokens) >= 20 and len(conc) >= 20
    assert statistics.median(tokens) <= 0.03 and statistics.median(conc) <= 0.03


@pytest.mark.xfail(strict=True, reason="p90 19.5% (tokens) and 31.9% (concurrency) with issue 16's seventh batch (DGX "
                                       "Spark: Laguna-S-2.1 NVFP4 +635%, Qwen3.8-27B NVFP4 -45%, Nemotron 3 Super +33%); "
                                       "10.2% / 11.0% before it, 11.6% both before the sixth batch (13.4% before 'autoawq' was read as "
                                       "AWQ): gpt-oss-20b on a GB10 at utilization 0.25 keeps 12.94 GiB of KV memory "
                                       "where 9.13 is predicted (unified memory), gemma-4-26B-A4B on DGX Spark is "
                                       "-13.4% / -11.6% (the batch raised to 2496 tokens for video input is not "
                                       "modelled) and gemma-3-12b AWQ on 0.8.4 is +10.2% (weights 8.8% low)")
def test_vllm_heldout_token_p90_target(rows):
    """Issue 16's held-out p90 target for tokens and concurrency (<= 10%)."""
    for key in ("kv_tokens", "max_concurrency"):
        assert acc.pct(_errors(rows, "vllm", "heldout", key), 0.9) <= 0.10, key


# The held-out sub-term medians as measured after issue 16's third batch (the held-out cases were
# never fitted to): a change that makes one worse by more than 2 points fails here, and the targets
# below say which are still missed.
# Issue 16's fifth batch added held-out logs (a WSL run logs 0.02 GiB of non-torch memory; two
# activation peaks): the medians below are those measured after it, on the larger sets.
# Issue 16's sixth batch (the logged peak activation read per release, Model Runner V2's profile):
# activation 12.2% on 7 (18.9% on the same 7 before; one more held-out log, vLLM 0.27.1).
# Issue 16's seventh batch (ten held-out DGX Spark logs, unified memory, with their graph pools): CUDA
# graphs 25.2% on 35 (14.6% on the 24 before; not fitted); 34 since a case recorded twice was removed.
# The GB10 small batch tier (vLLM's code, not fitted): CUDA graphs 29.6% in run.py (36 logs; 34 here);
# DGX Spark's graph pools are read from MemFree there (engines/vllm/unified.py).
HELDOUT_SUBTERMS = {"activation_peak_gib": (7, 0.122), "non_torch_gib": (4, 3.179), "cuda_graph_gib": (34, 0.296)}


def test_vllm_heldout_subterms_do_not_regress(rows):
    for key, (n, median) in HELDOUT_SUBTERMS.items():
        errs = _errors(rows, "vllm", "heldout", key)
        assert len(errs) >= n, key
        assert statistics.median(errs) <= median + 0.02, (key, statistics.median(errs))


@pytest.mark.parametrize("key", ["cuda_graph_gib", "non_torch_gib", "activation_peak_gib"])
@pytest.mark.xfail(strict=True, reason="issue 16 target not met held out (README, 'Measured figures'): "
                                       "CUDA graphs 25.2% on 35 logs (14.6% on 24 before the seventh batch), "
                                       "non-torch 318% on 4, activation "
                                       "12.2% on 7 (18.9% on the same 7 before the sixth batch)")
def test_vllm_heldout_subterm_targets(rows, key):
    """Issue 16's held-out target for each remaining profile sub-term: median <= 10%. Strict: when
    one is met the test reports it (XPASS fails) so the mark comes off."""
    errs = _errors(rows, "vllm", "heldout", key)
    assert errs and statistics.median(errs) <= 0.10


def test_vllm_calibration_targets_met(rows):
    # the KV memory p90 is 10.8%: a Qwen3-30B-A3B AWQ run on an RTX 3090 keeps 16% more than predicted
    kv = _errors(rows, "vllm", "calibration", "kv_cache_gib")
    assert len(kv) >= 55 and statistics.median(kv) <= 0.03 and acc.pct(kv, 0.9) <= 0.11
    # the token p90 is 16.2%: v0.10 runs with FlashInfer's sampler installed profile a smaller
    # sampler peak than the native one servefit assumes (dennislee22 logs). gemma-4-26B-A4B on
    # 0.20.2 is +1.8% since the token count follows the release (0.20.1 logs concurrency x length)
    tokens = _errors(rows, "vllm", "calibration", "kv_tokens")
    assert len(tokens) >= 40 and statistics.median(tokens) <= 0.03 and acc.pct(tokens, 0.9) <= 0.17
    weights = _errors(rows, "vllm", "calibration", "weights_gib")
    assert len(weights) >= 50 and statistics.median(weights) <= 0.01
    # the sub-terms where logs print them (llm-d's v0.11 breakdowns on H100 among them)
    act = _errors(rows, "vllm", "calibration", "activation_peak_gib")
    assert len(act) >= 10 and statistics.median(act) <= 0.10
    nt = _errors(rows, "vllm", "calibration", "non_torch_gib")
    assert len(nt) >= 10 and statistics.median(nt) <= 0.10
    # the graph p90 is 25.9% (15.6% before issue 16's seventh batch): the two Model Runner V2 logs (0.30 /
    # 0.31) sit at -16% / +13% around the one factor fitted to them, and Nemotron 3 Nano 4B on a DGX Spark
    # (0.19.2 dev, unified memory) logs a 0.03 GiB capture of 102 graphs where 0.73 is predicted
    graphs = _errors(rows, "vllm", "calibration", "cuda_graph_gib")
    assert len(graphs) >= 15 and statistics.median(graphs) <= 0.10 and acc.pct(graphs, 0.9) <= 0.26


def test_sglang_and_tgi_calibration_pools(rows):
    sg = _errors(rows, "sglang", "calibration", "max_total_num_tokens")
    assert len(sg) >= 4 and statistics.median(sg) <= 0.05
    tgi = _errors(rows, "tgi", "calibration", "max_batch_total_tokens")
    assert tgi and statistics.median(tgi) <= 0.05


# Issue 16's SGLang cases (the executed notebooks of SGLang's docs, H100): max_total_num_tokens as
# logged, each pinned at the error measured when it was first run (+-0.5 points).
SGLANG_NEW = {"sglang-docs-h100-llama32-1b-jan2025": -0.0012, "sglang-docs-h100-skywork-reward-8b-jan2025": -0.0189,
              "sglang-docs-h100-llama32-1b-nov2024": 0.0089, "sglang-docs-h100-gte-qwen2-7b-embed-nov2024": 0.0036,
              "sglang-docs-h100-gte-qwen2-7b-embed-jan2025": 0.0006, "sglang-docs-h100-skywork-reward-8b-nov2024": -0.0158,
              "sglang-docs-h100-llama31-8b-oct2024": 0.0020,
              # second batch (logs2): the docs' Llama-3.2-11B-Vision server and an RTX 4060 Ti repository
              "sglang-docs-h100-llama32-11b-vision-nov2024": 0.0817, "sglang-docs-h100-llama32-11b-vision-jan2025": 0.0778,
              "sglang-arunpatala-4060ti-qwen3-1.7b-mf075-ctx1024": 0.0036,
              "sglang-arunpatala-4060ti-qwen3-1.7b-mf075-fp8kv": 0.0062,
              # fourth batch (logs3, calibration by the hash rule): Gemma-3-4B on an H200, SGLang 0.4.4
              "sglang-pr4826-h200-gemma3-4b-it": 0.0469}
# Held-out SGLang pools servefit misses by more than 3%, pinned above and named here (not fitted): the
# Mllama (Llama-3.2-11B-Vision) servers of the docs build are +7.8% / +8.2% (the pool SGLang sizes
# for the cross-attention model is smaller than servefit's).
# The DeepSeek-V4 server added with SGLang's V4 pools is left out of the 3% bound unread: its
# calibration twin misses by +18.8% on the load overhead (tests/test_accuracy_runner.py SGLANG_KNOWN_MISSES).
SGLANG_HELDOUT_KNOWN_MISSES = {"sglang-docs-h100-llama32-11b-vision-nov2024", "sglang-docs-h100-llama32-11b-vision-jan2025",
                               "sglang-bbuf-skills-h20x8-dsv4-flash-base-mfs088"}


def test_sglang_new_cases_per_case(rows):
    got = {r["id"]: r["errors"]["max_total_num_tokens"] for r in rows if r["id"] in SGLANG_NEW}
    assert set(got) == set(SGLANG_NEW)
    off = {k: round(v, 4) for k, v in got.items() if abs(v - SGLANG_NEW[k]) > 0.005}
    assert not off, off


def test_sglang_heldout_pool_target(rows):
    """Issue 16's held-out target for SGLang's pool: median <= 5% (met: 7 cases from two sources)."""
    sg = _errors(rows, "sglang", "heldout", "max_total_num_tokens")
    assert len(sg) >= 7 and statistics.median(sg) <= 0.05
    rest = [abs(r["errors"]["max_total_num_tokens"]) for r in rows if r["engine"] == "sglang" and r["split"] == "heldout"
            and "max_total_num_tokens" in r["errors"] and r["id"] not in SGLANG_HELDOUT_KNOWN_MISSES]
    assert len(rest) == len(sg) - len(SGLANG_HELDOUT_KNOWN_MISSES) and max(rest) <= 0.03



# Issue 16's third TGI batch (tgi3): every pool as logged, pinned at the error measured when it was
# first run (+-0.5 points), held-out ones included (measured once, not fitted).
TGI_NEW = {"tgi-1856-rtx3090-llama3-8b-instruct-v14": -0.2298,  # calibration
           "tgi-2744-2xa100-llama31-70b-input-9999": 0.1111,  # calibration
           "tgi-1856-rtx3090-llama3-8b-instruct-awq-v14": 0.0046}  # held out


def test_tgi_new_cases_per_case(rows):
    got = {r["id"]: r["errors"]["max_batch_total_tokens"] for r in rows if r["id"] in TGI_NEW}
    assert set(got) == set(TGI_NEW)
    off = {k: round(v, 4) for k, v in got.items() if abs(v - TGI_NEW[k]) > 0.005}
    assert not off, off


def test_tgi_heldout_pool_target(rows):
    """Issue 16's held-out target for TGI's pool: median <= 5% (met on the two held-out pools with an
    openable source: Qwen2.5-VL-3B on an RTX A6000 with 3.2.3, -3.5%, and an AWQ Llama-3-8B on an
    RTX 3090 with 1.4.5, +0.5%); its outcomes are pinned in tests/test_accuracy_runner.py
    (TGI_KNOWN_OUTCOME_MISSES)."""
    tgi = _errors(rows, "tgi", "heldout", "max_batch_total_tokens")
    assert len(tgi) >= 2 and statistics.median(tgi) <= 0.05
    blocks = {r["id"]: r["errors"]["kv_cache_blocks"] for r in rows if "kv_cache_blocks" in r["errors"]}
    assert abs(blocks["tgi-3181-a6000-qwen25-vl-3b-zero-config"] - (-0.0349)) <= 0.005, blocks
