"""The free memory llama.cpp's --fit plans against: cudaMemGetInfo's free once llama-server's CUDA context
exists (ggml-cuda.cu ggml_backend_cuda_device_get_memory, read by common/fit.cpp
common_get_device_memory_data_impl), which servefit takes as the card's total less a context that grows
with the card's resident threads, less what other processes hold, and says so in the plan."""

from __future__ import annotations

import dataclasses

from test_llamacpp_engine import gpu, run

from servefit.engines.llamacpp import planner as PL
from servefit.hardware.catalog import lookup

MIB = 2**20


def test_t4_context_is_the_line_through_its_own_log():
    t4 = lookup("Tesla T4")
    # 28 MiB + 40 SMs x 1024 threads x 1980 B = 29360128 + 81100800 B
    assert PL.cuda_context(t4) == 110460928  # 105.34 MiB: the log's 14912 MiB total, 14807 MiB free
    assert PL.device_free(t4) == 14930 * MIB - 110460928  # 14824.66 MiB


def test_h100_context_matches_its_logged_free_memory():
    h100 = lookup("NVIDIA H100 80GB HBM3")
    # 28 MiB + 132 SMs x 2048 threads x 1980 B = 29360128 + 535265280 B (538.47 MiB)
    assert PL.device_free(h100) == 81090 * MIB - 564625408
    assert PL.device_free(h100) // MIB == 80551  # llama-server logs "80552 MiB free" on it


def test_memory_other_processes_hold_is_not_free():
    t4 = dataclasses.replace(lookup("Tesla T4"), in_use_bytes=2000 * MIB)  # what --gpu local reads
    assert PL.device_free(t4) == 14930 * MIB - 110460928 - 2000 * MIB


def test_a_card_without_a_thread_count_keeps_the_flat_figure():
    assert PL.device_free(gpu(12000)) == (12000 - 512) * MIB


def test_plan_says_what_free_memory_it_assumed_and_that_fit_reads_the_real_one():
    t4 = lookup("Tesla T4")
    _, p = run("llama-server -m x-Q4_K_M.gguf", g=t4, version="b7772")
    assert p.messages[0].endswith("MiB of device memory vs. 14824 MiB of free device memory")
    assert ("14824 MiB free per Tesla T4 assumed (its 14930 MiB total less ~105 MiB of CUDA context, nothing else "
            "on the GPU); llama-server reads the real free memory when it starts (logged as 'using device ... MiB "
            "free') and --fit plans the context and layers against it") in p.assumptions
    _, off = run("llama-server -m x-Q4_K_M.gguf -fit off", g=t4, version="b7772")
    assert any(a.endswith("and allocations fail beyond it") for a in off.assumptions)
    busy = dataclasses.replace(t4, in_use_bytes=1000 * MIB)
    _, p = run("llama-server -m x-Q4_K_M.gguf", g=busy, version="b7772")
    assert any(a.startswith("13824 MiB free per Tesla T4 assumed (its 14930 MiB total less ~105 MiB of CUDA "
                            "context, 1000 MiB other processes hold)") for a in p.assumptions)


def test_rtx_3090_free_memory_as_a_breakdown_print_shows_it():
    # ollama/ollama issue #17482 (not used for the fit): "CUDA0 (RTX 3090) | 24124 = 23860 + ..."
    from servefit.hardware.catalog import with_memory

    g = with_memory(lookup("RTX 3090"), 24124 * MIB)
    # 28 MiB + 82 SMs x 1536 threads x 1980 B = 29360128 + 249384960 B
    assert PL.device_free(g) == 24124 * MIB - 278745088
    assert PL.device_free(g) // MIB == 23858
