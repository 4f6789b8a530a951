"""Sliding-window KV caches by llama.cpp build: before #13194 (llama_kv_cache_unified_iswa) every
layer of a Gemma 3 / gpt-oss model held n_ctx cells; from then the SWA layers get their own cache
of PAD(n_swa + n_ubatch, 256) cells, or n_ctx with --swa-full."""

from __future__ import annotations

import pytest

from servefit.pipeline import Target, evaluate, site_from_argv


def kv(build: str, extra: str = "") -> dict:
    argv = f"llama-server -m gemma-3-270m-it-Q8_0.gguf -c 4096 -np 1 -ngl 99 {extra}".split()
    site = site_from_argv(argv, {})
    site.engine = "llamacpp"
    return evaluate(site, Target(gpu="RTX 4090", engine_version=build)).plan.detail.as_dict()  # the plan JSON's engine figures


@pytest.mark.parametrize("build", ["b4800", "b5400"])
def test_before_iswa_every_layer_holds_the_context(build):
    x = kv(build)
    # gemma-3-270m: 18 layers x 1 KV head x 256 x (K, V) x 2 B = 18 KiB per cell
    assert x["kv_buffer_mib"] == 18 * 4096 / 1024
    assert "kv_cache_cells_swa" not in x


def test_iswa_builds_size_the_window():
    x = kv("b9000")
    assert x["kv_cache_cells_swa"] == 1024  # PAD(512 + 512, 256)
    assert x["kv_buffer_mib"] == (3 * 4096 + 15 * 1024) / 1024


def test_swa_full_restores_the_full_size():
    assert kv("b9000", "--swa-full")["kv_buffer_mib"] == 18 * 4096 / 1024


@pytest.mark.parametrize(("build", "kv", "compute"), [
    ("b4435", "llama_kv_cache_init", "llama_new_context_with_model"),
    ("b4753", "llama_kv_cache_init", "llama_init_from_model"),
    ("b4980", "init", "llama_context"),
    ("b5415", "llama_kv_cache_unified", "llama_context"),
    ("b6301", "llama_kv_cache", "llama_context"),
    ("b7500", "llama_kv_cache", "llama_context"),  # as calibration's b7500 logs print it
    ("b7772", "llama_kv_cache", "sched_reserve"),  # as calibration's b7772 logs print it (not from b8865)
])
def test_buffer_lines_carry_the_logging_function_of_the_build(build, kv, compute):
    # the function names llama.cpp's own source has at those tags (versions.py)
    from servefit.engines.llamacpp import versions as V

    b = V.build(build)
    assert (V.kv_log_prefix(b), V.compute_log_prefix(b)) == (kv, compute)


def test_pre_iswa_padding_follows_flash_attention():
    # b4980 / b5415 source: llama_context pads n_ctx to llama_kv_cache_unified::get_padding
    # (256 with flash attention, 32 without), and that one kv_size holds every layer
    def kv4000(build: str, extra: str = "") -> float:
        argv = f"llama-server -m gemma-3-270m-it-Q8_0.gguf -c 4000 -np 1 -ngl 99 {extra}".split()
        site = site_from_argv(argv, {})
        site.engine = "llamacpp"
        return evaluate(site, Target(gpu="RTX 4090", engine_version=build)).plan.detail.as_dict()["kv_buffer_mib"]

    assert kv4000("b4980") == pytest.approx(18 * 4000 / 1024, abs=0.01)  # PAD(4000, 32) = 4000 cells
    assert kv4000("b4980", "-fa") == 18 * 4096 / 1024  # PAD(4000, 256) = 4096 cells
    assert kv4000("b5415", "-fa") == 18 * 4096 / 1024


def test_fit_logs_under_the_function_of_its_build():
    # --fit lived in src/llama.cpp (llama_params_fit_impl) until it moved to common/fit.cpp at b8865, a
    # different build from the compute-buffer log's rename
    from servefit.engines.llamacpp.fit import prefix

    assert prefix(7772) == ("llama_params_fit_impl", "llama_params_fit")
    assert prefix(8865) == ("common_params_fit_impl", "common_fit_params")


# gemma-3-270m: 3 full-attention layers and 15 sliding-window ones (window 512), 1 KiB per layer per cell
@pytest.mark.parametrize(("build", "extra", "swa_cells"), [
    # #13194 until #13833: min(size_base, PAD(n_swa * n_seq_max + n_batch, n_pad)), FA off by default: n_pad 32
    ("b5450", "", 2560),  # PAD(512 + 2048 (-b default), 32)
    ("b5450", "-b 512", 1024),
    ("b5450", "-fa -b 600", 1280),  # PAD(512 + 600, 256)
    # from #13833 n_ubatch; before multi-stream KV the window counts once per sequence
    ("b5600", "-ub 500", 1024),  # PAD(512 + 500, 32)
    # #16812 to #17046: no padding at all
    ("b6900", "-ub 500", 1012),
    # from #17046: PAD(min(size_base, ...), 256)
    ("b7000", "-ub 500", 1024),
])
def test_swa_cache_size_by_build(build, extra, swa_cells):
    x = kv(build, extra)
    assert x["kv_cache_cells_swa"] == swa_cells
    assert x["kv_buffer_mib"] == pytest.approx((3 * 4096 + 15 * swa_cells) / 1024, abs=0.005)  # rounded to 0.01


def test_swa_window_counts_every_sequence_of_one_shared_cache_before_multi_stream():
    # b5600: one cache for all -np 4 sequences: min(8192, PAD(512 x 4 + 512, 32)) = 2560 cells
    argv = "llama-server -m gemma-3-270m-it-Q8_0.gguf -c 8192 -np 4 -ngl 99".split()
    site = site_from_argv(argv, {})
    site.engine = "llamacpp"
    x = evaluate(site, Target(gpu="RTX 4090", engine_version="b5600")).plan.detail.as_dict()
    assert x["kv_cache_cells_swa"] == 2560
    assert x["kv_buffer_mib"] == (3 * 8192 + 15 * 2560) / 1024
