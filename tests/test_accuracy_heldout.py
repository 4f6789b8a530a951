"""The accuracy benchmark keeps a held-out half (issue 16): every case carries a split, new cases
follow the rule fixed before they were evaluated, nothing drops out unnamed, and issue 16's targets
are asserted on the held-out half where servefit meets them (strict xfail where it does not: the
README reports the figures). The held-out half is checked only through those targets, never case by
case and never by a regression guard, so that changing the model shows no one a held-out case's
figures; per-case pins cover the calibration half."""

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
    excluded = acc.excluded_cases()
    n_vllm = sum(1 for c in ALL if c["engine"] == "vllm" and c["split"] == "calibration" and c not in excluded)
    assert n_vllm >= 86
    assert f"vllm: {n_vllm} cases (0 not evaluable)" in text


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


# Calibration figures servefit misses, pinned at the measured error (+-2 points) and left out of the
# figures asserted below (run.py still prints them). A fix takes the case off this list.
# Qwen3-VL-30B-A3B TP 2 on v0.12.0 with 256 sequences logs a capture that "took 0.15 GiB" (its twin
# runs of the same week log negative figures).
SUBTERM_KNOWN_MISSES = {("videocut-2xh100-qwen3-vl-30b-a3b-tp2-64k-s256-0120", "cuda_graph_gib"): 5.0644,
                        # a data problem, not a miss: Nemotron 3 Nano 4B on a DGX Spark (GB10, unified memory;
                        # 0.19.2 dev) logs "CUDA graph pool memory: 0.03 GiB (actual), 2.44 GiB (estimated)".
                        # The same log has vLLM's own profile of the same 86 graphs at 2.44 GiB: the free-memory
                        # drop the GB10 reports (MemFree, with page cache the kernel reclaims for the graphs) is
                        # not the graphs' memory, and rests on the OS's state (engines/vllm/unified.py)
                        ("sparkbench-gb10-nemotron3-nano-4b-bf16-fp8kv-48k", "cuda_graph_gib"): 32.5687,
                        # llm-d's v0.11.0 runs on H100 (the vllm/vllm-openai image, so FlashInfer's autotune
                        # forward of 8192 tokens runs before the capture): the figures were in the data but not
                        # compared until session 30 (measured, not fitted). Four dense runs log -0.88 to -0.33
                        # GiB, each 0.5 - 1.7 GiB below the graphs less the segments that forward reserves (the
                        # two TP 2 runs the furthest), Qwen3-0.6B logs 0.10 GiB where 0.56 are predicted, and
                        # gpt-oss-20b logs 0.39 GiB where 0.62 are predicted. Session 31: gpt-oss captures up to
                        # 992 tokens in 0.11.0 (GptOssForCausalLMConfig, graphs.py GPT_OSS_CAPTURE: 81 + 81
                        # graphs, not 67 + 67); gpt-oss-120b's 1.03 GiB is then met (-0.1%), the 20b's is not
                        ("llmd-h100-gpt-oss-20b-16k", "cuda_graph_gib"): 0.5964,
                        ("llmd-2xh100-llama33-70b-fp8-tp2-16k", "cuda_graph_gib"): -3.8889,
                        ("llmd-h100-llama31-8b-16k", "cuda_graph_gib"): -1.0180,
                        ("llmd-h100-qwen3-0p6b-16k", "cuda_graph_gib"): 4.5613,
                        ("llmd-h100-qwen3-32b-16k", "cuda_graph_gib"): -1.3470,
                        ("llmd-2xh100-qwen3-32b-tp2-16k", "cuda_graph_gib"): -5.1749,
                        # Qwen3-0.6B on a DGX Spark (GB10, unified memory; NVIDIA's 0.24 dev build) with Model Runner
                        # V2 logs 0.60 GiB (session 30's gather, measured, not fitted): 0.17 predicted with V2's x0.38
                        # until session 31, which reads V2's profile_cudagraph_memory as a stub up to 0.28 (no earlier
                        # capture: graphs.py V2_PROFILES_GRAPHS_FROM), so 0.44 with the V1 terms; the GB10's
                        # free-memory drop runs above the V1 pool (Qwen2.5-0.5B there: -22% to -29%)
                        ("tennsoku-gb10-qwen3-06b-2k-u015-smoke-024", "cuda_graph_gib"): -0.2594,
                        # TGI pools missed on the third batch (the reasons are in
                        # tests/test_accuracy_runner.py TGI_KNOWN_MISSES)
                        ("tgi-1856-rtx3090-llama3-8b-instruct-v14", "max_batch_total_tokens"): -0.2298,
                        ("tgi-2744-2xa100-llama31-70b-input-9999", "max_batch_total_tokens"): 0.0925}


def _errors(rows, engine, split, key):
    return [abs(r["errors"][key]) for r in rows
            if r["engine"] == engine and r["split"] == split and key in r["errors"]
            and (r["id"], key) not in SUBTERM_KNOWN_MISSES]


def test_subterm_known_misses_are_pinned(rows):
    got = {(r["id"], k): r["errors"][k] for r in rows for k in r["errors"] if (r["id"], k) in SUBTERM_KNOWN_MISSES}
    assert set(got) == set(SUBTERM_KNOWN_MISSES)
    off = {k: round(v, 4) for k, v in got.items() if abs(v - SUBTERM_KNOWN_MISSES[k]) > 0.02}
    assert not off, off


def _kv_buffers_within_1_mib(rows, split):
    got = [r["pairs"]["kv_buffer_mib"] for r in rows
           if r["engine"] in ("llamacpp", "ollama") and r["split"] == split and "kv_buffer_mib" in r.get("pairs", {})]
    return len(got), sum(abs(float(g) - acc.expected_value("kv_buffer_mib", w)) <= 1.0 for w, g in got)


def test_llamacpp_kv_buffers_exact_on_the_calibration_half(rows):
    """KV buffers within 1 MiB, SWA models with and without parallel slots and --fit runs included."""
    n, exact = _kv_buffers_within_1_mib(rows, "calibration")
    assert n >= 10 and exact == n


def test_vllm_calibration_outcomes(rows):
    """Outcomes: at most one in twenty missed on the calibration half (a re-run of a command at the
    edge that was refused where its twin started)."""
    scored = [r for r in rows if r["engine"] == "vllm" and r["split"] == "calibration" and r["outcome_ok"] is not None]
    assert len(scored) >= 60
    right = sum(bool(r["outcome_ok"]) for r in scored)
    assert right >= 0.95 * len(scored), [r["id"] for r in scored if not r["outcome_ok"]]


def test_vllm_calibration_targets_met(rows):
    # the KV memory p90 is 10.8%: a Qwen3-30B-A3B AWQ run on an RTX 3090 keeps 16% more than predicted
    kv = _errors(rows, "vllm", "calibration", "kv_cache_gib")
    assert len(kv) >= 55 and statistics.median(kv) <= 0.03 and acc.pct(kv, 0.9) <= 0.11
    # the token p90 is 8.5% (session 28): the dennislee22 v0.10.1.1 runs, whose install step names
    # flashinfer-python, are planned with FlashInfer's sampler (`installed:` on the case). gemma-4-26B-A4B on
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
    # the graph p90 is 22.3% on 30 logs: Qwen2.5-0.5B on a GB10 (0.24 NVIDIA build) logs 0.34 - 0.49 GiB
    # where 0.25 - 0.38 are predicted (-18% to -29%), and llava-1.5-7b with --quantization awq forced on
    # 0.10.2 (RTX 4080 under WSL) logs 0.48 GiB where the AWQ kernel's dequantized weight alone puts 0.20
    # GiB in the pool (+48%); the two Model Runner V2 logs (0.30 / 0.31) sit at -16% / +13% around the one
    # factor fitted to them. 26.6% with session 27's calibration additions: Qwen2.5-7B on V0 0.6.4 under WSL
    # logs 0.18 GiB (0.13 predicted with V0's own graph pool, -28%; 0.10 and -47% without it), Qwen3-235B-A22B-FP8
    # TP8+EP on 0.10.0 logs 2.60 GiB (-11%), and Phi-4 GPTQ on V0 0.6.5 (H100) logs 0.27 GiB (-17%).
    # 28.7% with the issue-16 vlogs gather's calibration logs (measured, not fitted): gpt-oss-120b on
    # 0.11.2 (H100, 83 piecewise + 35 full graphs) logs 0.29 GiB where 0.84 were predicted (+190%; 0.13
    # and -55% since session 30, the 0.11.1 wheel requiring FlashInfer, so its autotune runs; 0.46 and
    # +58% since session 31 priced its 83 piecewise graphs, gpt-oss's own 1024 ceiling, not 51),
    # Nanbeige4.1-3B with max_num_seqs 1 on 0.11.2 logs 0.06 GiB for its two sizes (0.02 predicted,
    # -69%), and Qwen2.5-0.5B / Gemma 4 E2B on Model Runner V2 (0.29 / 0.30) +61% / -25%
    graphs = _errors(rows, "vllm", "calibration", "cuda_graph_gib")
    assert len(graphs) >= 15 and statistics.median(graphs) <= 0.10 and acc.pct(graphs, 0.9) <= 0.29


def test_sglang_and_tgi_calibration_pools(rows):
    sg = _errors(rows, "sglang", "calibration", "max_total_num_tokens")
    assert len(sg) >= 4 and statistics.median(sg) <= 0.05
    tgi = _errors(rows, "tgi", "calibration", "max_batch_total_tokens")
    assert tgi and statistics.median(tgi) <= 0.05


# --- issue 16's targets on the held-out half ------------------------------------------------------
# Each target is asserted; the ones servefit does not meet on the held-out half carry a strict xfail
# (an XPASS fails, so the mark comes off when one is met). UNMET says which, with the figures measured
# by `python3 benchmarks/accuracy/run.py --split heldout` (README, "Measured figures").
_M = "issue 16 target not met on the held-out half, 2026-11-29, session 31: "
UNMET: dict[str, str] = {
    "vllm_tokens_median": _M + "3.3% on 86 (2.9% on 80 at the session's start; the six held-out cases added, five "
                               "GB10 unified-memory runs from one repository, moved it: helpers' runs after the model "
                               "changes and before those cases read 2.9% on 80)",
    "vllm_tokens_p90": _M + "15.9% on 86 (15.9% on 80 at the session's start)",
    "vllm_non_torch_gib": _M + "41.1% on 17 (unchanged)",
    "vllm_cuda_graph_gib": _M + "25.3% on 77 (28.5% on 72 at the session's start)",
    "tgi_pool": _M + "7.9% on 9 (7.6% on 6 at the session's start; three held-out cases added, no model change)",
    "llamacpp_kv": _M + "61 of 64 llama.cpp / Ollama KV buffers within 1 MiB (56 of 58 at the session's start)",
}


def _target(name: str):
    return pytest.mark.xfail(name in UNMET, strict=True, reason=UNMET.get(name, ""))


@_target("vllm_tokens_median")
def test_vllm_heldout_token_median_target(rows):
    """"GPU KV cache size" tokens and the concurrency beside it: median <= 3%."""
    tokens = _errors(rows, "vllm", "heldout", "kv_tokens")
    conc = _errors(rows, "vllm", "heldout", "max_concurrency")
    assert len(tokens) >= 20 and len(conc) >= 20
    assert statistics.median(tokens) <= 0.03 and statistics.median(conc) <= 0.03


@_target("vllm_tokens_p90")
def test_vllm_heldout_token_p90_target(rows):
    """"GPU KV cache size" tokens: p90 <= 10%."""
    assert acc.pct(_errors(rows, "vllm", "heldout", "kv_tokens"), 0.9) <= 0.10


@pytest.mark.parametrize("key", [pytest.param(k, marks=_target(f"vllm_{k}"))
                                 for k in ("activation_peak_gib", "non_torch_gib", "cuda_graph_gib")])
def test_vllm_heldout_subterm_targets(rows, key):
    """The activation peak, non-torch and CUDA-graph terms: median <= 10% each."""
    errs = _errors(rows, "vllm", "heldout", key)
    assert len(errs) >= 4 and statistics.median(errs) <= 0.10


@_target("sglang_pool")
def test_sglang_heldout_pool_target(rows):
    """SGLang's token pool (max_total_num_tokens): median <= 5%."""
    sg = _errors(rows, "sglang", "heldout", "max_total_num_tokens")
    assert len(sg) >= 7 and statistics.median(sg) <= 0.05


@_target("tgi_pool")
def test_tgi_heldout_pool_target(rows):
    """TGI's token pool (max_batch_total_tokens): median <= 5%."""
    tgi = _errors(rows, "tgi", "heldout", "max_batch_total_tokens")
    assert len(tgi) >= 2 and statistics.median(tgi) <= 0.05


@_target("llamacpp_kv")
def test_llamacpp_and_ollama_heldout_kv_buffers_exact(rows):
    """llama.cpp / Ollama KV buffers exact (within 1 MiB) on every held-out log."""
    n, exact = _kv_buffers_within_1_mib(rows, "heldout")
    assert n >= 10 and exact == n
