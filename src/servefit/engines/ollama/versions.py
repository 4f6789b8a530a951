"""Ollama versions and the releases where memory behaviour changed (docs B1-B5)."""

from __future__ import annotations

import re

CURRENT = "0.32.15"  # newest stable release modelled (tag v0.32.15; v0.33.0 was at rc2)

NUM_PARALLEL_1 = (0, 10, 0)  # OLLAMA_NUM_PARALLEL default 1 (automatic before)
NUM_PARALLEL_AUTO = (0, 2, 0)  # server/sched.go defaultParallel: tried first when OLLAMA_NUM_PARALLEL is unset


def default_parallel(v: tuple[int, ...]) -> int:
    """server/sched.go `var defaultParallel`: 4 from v0.2.0, 2 from v0.6.7, 1 from v0.10.0."""
    return 1 if v >= NUM_PARALLEL_1 else 2 if v >= (0, 6, 7) else 4
CTX_CAP = (0, 9, 3)  # llm/server.go NewLlamaServer caps num_ctx at the model's context_length
CTX_4096 = (0, 6, 7)  # default num_ctx 4096 (2048 before)
GPTOSS_8K = (0, 11, 0)  # server/routes.go::scheduleRunner: gpt-oss num_ctx >= 8192, whatever set it (until 0.15.4)
GPTOSS_8K_LOW_VRAM = (0, 11, 4)  # ... only when the GPUs hold >= 20 GiB in all (!s.lowVRAM)
QWEN3VL_8K = (0, 12, 7)  # qwen3vl / qwen3vlmoe join the list
RUNNER_UBATCH = (0, 13, 3)  # llama/llama.go NewContextParams: n_batch = num_batch x np, n_ubatch = num_batch
LAYOUT = (0, 11, 5)  # "new memory management": layout/backoff for Ollama-engine models
# PR #11090 (New Memory Management) made the layout path opt-in for Ollama-engine models: envconfig.NewMemoryEstimates
# = Bool("OLLAMA_NEW_ESTIMATES"), default off; PR #12252 ("llm: Enable new memory estimates by default", merged
# 2025-09-11; v0.11.11's release notes: "New memory estimates enabled by default in Ollama's new engine") made it the
# default. Before it an Ollama-engine model without the variable still logs the classic llm/memory.go offload line.
NEW_ESTIMATES_DEFAULT = (0, 11, 11)
FA_AUTO_LLAMA_RUNNER = (0, 13, 4)  # llama-runner models: flash attention "auto" unless the user set it
CLASSIC_REMOVED = (0, 12, 11)  # llm/memory.go removed: every model on the layout path
VRAM_TIERS = (0, 15, 5)  # default num_ctx 4k/32k/256k by total VRAM
LLAMA_SERVER = (0, 30, 0)  # upstream llama-server for every GGUF model
# OLLAMA_LLM_LIBRARY: from 0.5.8 it only picks one of lib/ollama's GPU libraries (llm/server.go,
# NewLlamaServer: `if libs[requested] != ""`), so `cpu` is ignored; from 0.12.6 it filters GPU
# discovery (discover/runner.go, GPUDevices), so `cpu` leaves no GPU (sources/off_gpu.py)
LLM_LIBRARY_GPU_ONLY = (0, 5, 8)
LLM_LIBRARY_FILTERS = (0, 12, 6)


def vtuple(v: str | None) -> tuple[int, ...]:
    """`0.12.10`, `v0.5.7`, `0.6.8-rocm`, `ollama/ollama:0.11.4` -> (0, 12, 10); None -> the newest."""
    if not v:
        return vtuple(CURRENT)
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", v)
    if not m:
        return vtuple(CURRENT)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


def era(v: tuple[int, ...], arch: str, ollama_engine: bool, new_estimates: bool = False) -> str:
    """classic (llm/memory.go EstimateGPULayers) | layout (llm/server.go buildLayout) | llamaserver.
    `new_estimates`: OLLAMA_NEW_ESTIMATES set (the layout path's opt-in before v0.11.11)."""
    if v >= LLAMA_SERVER:
        return "llamaserver"
    if v < LAYOUT:
        return "classic"
    if v < CLASSIC_REMOVED and not ollama_engine:
        return "classic"
    if v < NEW_ESTIMATES_DEFAULT and not new_estimates:
        return "classic"
    return "layout"

# fs/ggml/ggml.go::GGML.FlashAttention, the architectures that "want" flash attention, as each tag lists them
# (llm/server.go NewLlamaServer: v0.11.8 - v0.12.3 `fa = envconfig.FlashAttention(); if f.FlashAttention()
# { fa = true }`, so OLLAMA_FLASH_ATTENTION=0 cannot turn it off; from v0.12.4
# `envconfig.FlashAttention(f.FlashAttention())`: the list is only the default)
FA_WANTED: list[tuple[tuple[int, int, int], tuple[str, ...]]] = [
    ((0, 11, 8), ("gptoss", "gpt-oss")),
    ((0, 12, 4), ("qwen3", "qwen3moe")),
    ((0, 12, 6), ("gemma3",)),
    ((0, 12, 8), ("qwen3vl", "qwen3vlmoe")),
    ((0, 13, 2), ("mistral3",)),
    ((0, 13, 4), ("olmo3",)),
    ((0, 13, 5), ("bert",)),
    ((0, 14, 3), ("glm4moelite", "lfm2")),
    ((0, 15, 5), ("glmocr", "qwen3next")),
    ((0, 17, 1), ("lfm2moe", "nemotron_h", "nemotron_h_moe", "qwen35", "qwen35moe")),
    ((0, 20, 4), ("gemma4",)),
    ((0, 22, 0), ("nemotron_h_omni",)),
]
FA_ENV_DEFAULT = (0, 12, 4)  # OLLAMA_FLASH_ATTENTION=0 turns a wanted FA off from here on
GPTOSS_NO_FA = ((0, 11, 2), (0, 11, 4))  # SupportsFlashAttention false for gptoss in v0.11.2 - v0.11.4


def fa_wanted(v: tuple[int, ...], arch: str) -> bool:
    """GGML.FlashAttention() at release v."""
    return any(v >= since and arch in archs for since, archs in FA_WANTED)
