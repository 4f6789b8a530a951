"""Helm values: vLLM production-stack, otwld ollama-helm, and other charts by shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.sources import scan_file

FIX = Path(__file__).parent / "fixtures" / "sources" / "helm"


def scan(name: str):
    return scan_file(str(FIX / name))


def argv(site) -> list[str]:
    return [t.text for t in site.argv]


def at(tok) -> tuple[int, int, str]:
    s = tok.span
    with open(s.file, encoding="utf-8", newline="") as fh:
        return s.line, s.col, fh.read()[s.start:s.end]


def test_production_stack_model_spec():
    r = scan("prodstack-values.yaml")
    [site] = r.sites  # the router and cache server images are not servers; the commented model is not one
    assert site.name == "helm/modelSpec/mistral" and site.engine == "vllm"
    assert argv(site) == ["vllm", "serve", "mistralai/Mistral-7B-Instruct-v0.3", "--host", "0.0.0.0", "--port", "8000",
                          "--enable-chunked-prefill", "--enable-prefix-caching", "--max-model-len", "16384",
                          "--dtype", "bfloat16", "--tensor-parallel-size", "2", "--gpu_memory_utilization", "0.85",
                          "--max-num-batched-tokens", "4096", "--kv-cache-dtype=fp8"]
    assert "--enforce-eager" not in argv(site)
    assert at(site.argv[10]) == (19, 22, "16384") and at(site.argv[9]) == (19, 9, "maxModelLen")
    assert at(site.argv[-1]) == (27, 14, "--kv-cache-dtype=fp8")
    assert (site.gpu.name, site.gpu.count) == ("NVIDIA-L4", 2)
    assert site.workload.shm is True and site.image == "lmcache/vllm-openai:2025-05-27-v1"
    assert site.env["VLLM_USE_V1"].text == "1"


def test_production_stack_settings_through_the_vllm_plugin():
    pytest.importorskip("servefit.engines.vllm")
    from servefit import engines

    cfg = engines.get("vllm").parse(scan("prodstack-values.yaml").sites[0])
    s = cfg.settings
    assert s["max_model_len"] == 16384 and s["tensor_parallel_size"] == 2
    assert s["gpu_memory_utilization"] == 0.85 and s["max_num_batched_tokens"] == 4096
    assert s["kv_cache_dtype"] == "fp8" and s["dtype"] == "bfloat16"


def test_ollama_chart():
    from servefit import engines

    [site] = scan("ollama-values.yaml").sites
    assert site.engine == "ollama" and argv(site) == ["/bin/ollama", "serve"]
    assert [t.text for t in site.inputs.pulled] == ["llama3.1:8b", "qwen2.5:14b"]
    assert at(site.inputs.pulled[0]) == (9, 9, "llama3.1:8b")
    assert {k: t.text for k, t in site.env.items()} == {"OLLAMA_NUM_PARALLEL": "4", "OLLAMA_MAX_LOADED_MODELS": "2"}
    assert (site.gpu.name, site.gpu.count) == ("nvidia-tesla-t4", 2)
    assert site.engine_version == "0.11.10"
    cfg = engines.get("ollama").parse(site, site.engine_version)  # the first pulled model is the one planned
    assert cfg.model_ref == "meta-llama/Llama-3.1-8B-Instruct" and cfg.spans["model"] == site.inputs.pulled[0].span


def test_other_charts_by_shape():
    tgi, llama = scan("generic-values.yaml").sites
    assert tgi.name == "helm/tgi" and tgi.engine == "tgi"
    assert argv(tgi) == ["text-generation-launcher", "--max-input-tokens=4096", "--max-batch-prefill-tokens", "8192"]
    assert at(tgi.argv[3]) == (11, 34, "8192")  # one list item holding a flag and its value
    assert tgi.env["MODEL_ID"].text == "Qwen/Qwen2.5-7B-Instruct"
    assert (tgi.gpu.name, tgi.gpu.count) == ("g6.xlarge", 1) and tgi.engine_version == "3.2.0"
    assert llama.name == "helm/llamacpp" and llama.image == "ghcr.io/ggml-org/llama.cpp:server-cuda"
    assert argv(llama) == ["/app/llama-server", "--hf-repo", "bartowski/Qwen2.5-7B-Instruct-GGUF", "--ctx-size", "32768"]
    assert at(llama.argv[4]) == (26, 8, "32768")
