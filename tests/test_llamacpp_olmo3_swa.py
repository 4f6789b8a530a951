"""OLMo 3 runs with interleaved sliding-window attention in llama.cpp: convert_hf_to_gguf.py writes Olmo3ForCausalLM
as arch olmo2 with its sliding_window, and src/llama-model.cpp load_hparams (LLM_ARCH_OLMO2) makes a model with
n_swa > 0 iSWA with set_swa_pattern(4): layers 0-2 of every 4 slide, the 4th is full. OLMo 2 has no window."""

from __future__ import annotations

from servefit.pipeline import Target, evaluate, site_from_argv


def kv(model: str, extra: str = "", build: str = "b9000") -> dict:
    argv = f"llama-server -m {model} -c 8192 -np 1 -ngl 99 {extra}".split()
    site = site_from_argv(argv, {})
    site.engine = "llamacpp"
    return evaluate(site, Target(gpu="RTX 4090", engine_version=build)).plan.detail.as_dict()


# Olmo-3-7B: 32 layers, 32 KV heads x 128, f16 K and V: 2 x 4096 x 2 B = 16 KiB per cell per layer
PER_CELL_LAYER_KIB = 2 * 32 * 128 * 2 / 1024


def test_olmo3_sliding_layers_get_the_window_cache():
    x = kv("Olmo-3-7B-Instruct-Q4_K_M.gguf")
    # llama_kv_cache_iswa: size_swa = PAD(min(8192, 4096 x 1 + 512), 256) = 4608 cells for the 24 sliding layers,
    # the 8 full layers hold n_ctx = 8192
    assert x["kv_cache_cells_swa"] == 4608
    assert x["kv_buffer_mib"] == (8 * 8192 + 24 * 4608) * PER_CELL_LAYER_KIB / 1024


def test_olmo3_swa_full_holds_the_context_in_every_layer():
    assert kv("Olmo-3-7B-Instruct-Q4_K_M.gguf", "--swa-full")["kv_buffer_mib"] == 32 * 8192 * PER_CELL_LAYER_KIB / 1024


def test_olmo2_stays_full_attention():
    x = kv("OLMo-2-1124-7B-Instruct-Q4_K_M.gguf")
    assert "kv_cache_cells_swa" not in x
    assert x["kv_buffer_mib"] == 32 * 8192 * PER_CELL_LAYER_KIB / 1024
