"""Seed 001, corrected: sweeps to the OOM boundary and the three exercises, by the engine's model.

The seed books 1.20 GB of KV for one Llama-3-8B user at 2K context and 76.72 GB at 128K: about
4.5x what grouped-query attention stores (2 x 32 layers x 8 KV heads x 128 x 2 bytes = 128 KiB
per token, so 0.27 GB at 2K and 17.18 GB = 16 GiB at 128K)."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from servefit import sweep
from servefit.pipeline import Target, evaluate, site_from_argv
from servefit.report.html import explain_page
from servefit.report.sweep import table

GB = 1e9


def ev(cmd: str, gpu: str, gpus: int = 1):
    return evaluate(site_from_argv(cmd.split()), Target(gpu=gpu, gpus=gpus))


@pytest.fixture(scope="module")
def llama_h100():
    return ev("vllm serve meta-llama/Meta-Llama-3.1-8B-Instruct", "H100")


def test_corrected_kv_per_user_and_context(llama_h100):
    rows = sweep.context_sweep(llama_h100, batch=1)
    by_ctx = {r.context: r for r in rows}
    assert by_ctx[2048].kv_bytes == 2048 * 131_072 == 268_435_456  # 0.27 GB, not the seed's 1.20 GB
    assert by_ctx[131072].kv_bytes == 16 * 2**30  # 17.18 GB, not 76.72 GB
    assert round(by_ctx[131072].kv_bytes / GB, 2) == 17.18


def test_context_sweep_at_8_users_marks_the_boundary(llama_h100):
    rows = sweep.context_sweep(llama_h100, batch=8)
    oks = [r.ok for r in rows]
    first_oom = oks.index(False)
    assert all(oks[:first_oom]) and not any(oks[first_oom:])  # one boundary, monotone
    assert rows[first_oom].context == 65536  # 8 users x 64K needs 64 GiB of KV; ~52 GiB is left
    text = table(rows, "context")
    assert text.count("◀ OOM boundary") == 1
    assert "65,536" in [ln for ln in text.splitlines() if "OOM boundary" in ln][0]


def test_batch_sweep_at_2k(llama_h100):
    rows = sweep.batch_sweep(llama_h100, context=2048)
    assert [r.batch for r in rows] == [1, 4, 8, 16, 32, 64, 128, 256]
    assert [r.kv_bytes for r in rows[:3]] == [268_435_456, 4 * 268_435_456, 8 * 268_435_456]
    # the KV pool of an H100 holds ~200 requests of 2K: 128 fit, 256 do not
    assert rows[-2].ok and not rows[-1].ok


def test_exercise_1_llama3_70b_fp16_at_4k_on_one_h100():
    """70B in fp16 is ~131 GiB of weights: no batch size fits one 80 GB H100 (OOM at load);
    two GPUs with tensor parallelism do."""
    one = ev("vllm serve meta-llama/Meta-Llama-3-70B-Instruct --max-model-len 4096 --dtype float16", "H100")
    assert one.plan.outcome == "oom_at_load"
    assert one.plan.memory.weights > 80 * 2**30
    two = ev("vllm serve meta-llama/Meta-Llama-3-70B-Instruct --max-model-len 4096 --dtype float16 -tp 2", "H100", 2)
    assert two.plan.outcome == "started"
    users = int(two.plan.max_concurrency)
    rows = sweep.batch_sweep(two, context=4096, batches=(users, users + 1))
    assert rows[0].ok and not rows[1].ok


def test_exercise_2_users_at_128k_on_h200_fp16_vs_8bit_kv():
    e = ev("vllm serve meta-llama/Meta-Llama-3.1-8B-Instruct --max-model-len 131072", "H200")
    users = sweep.max_users(e, {"fp16": {}, "fp8": {"kv_cache_dtype": "fp8"}})
    fp16 = dict(users["fp16"])[131072]
    fp8 = dict(users["fp8"])[131072]
    # 139.8 GiB x 0.92 - ~20 GiB of weights and scratch leaves ~108 GiB: 6 users of 16 GiB;
    # an 8-bit KV cache halves the per-user cost
    # (139.81 x 0.92 = 128.6 GiB) - 15.0 weights - 4.8 sampler peak - 0.3 other = 108.5 GiB of KV:
    # 6.8 users of 16 GiB in fp16, 13.6 users of 8 GiB in fp8
    assert fp16 == int(e.plan.max_concurrency) == 6
    assert fp8 == 13


def test_exercise_3_block_size_16_vs_256_at_32k(llama_h100):
    rows = sweep.paging(llama_h100, context=32768, batch=16)
    small, big = rows
    assert (small.block_size, small.blocks_per_request) == (16, 2048)
    assert (big.block_size, big.blocks_per_request) == (256, 128)
    # both hold the same number of full-length requests; the larger page wastes 17x more
    assert int(small.users) == int(big.users)
    assert big.waste_bytes == 16 * 255 // 2 * 131_072 + (16 * 255 % 2) * 65_536
    assert big.waste_bytes > 16 * small.waste_bytes


def test_cli_prints_the_corrected_tables():
    out = subprocess.run([sys.executable, "-m", "servefit", "explain", "--", "vllm", "serve",
                          "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--sweep", "context,batch"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Context sweep at 8 users" in out.stdout and "Batch sweep at 2,048 tokens per user" in out.stdout
    assert out.stdout.count("◀ OOM boundary") == 2
    assert "max users at each context" in out.stdout


def test_html_report_is_self_contained_xml(llama_h100):
    page = explain_page([llama_h100])
    assert page.startswith("<!DOCTYPE html>")
    root = ET.fromstring(page.split("\n", 1)[1])  # the page is well-formed XHTML-compatible markup
    svgs = [el for el in root.iter() if el.tag.endswith("svg")]
    assert len(svgs) == 2  # the memory stack and the heat map
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page and "<script" not in page
