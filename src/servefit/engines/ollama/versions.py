"""Ollama versions and the releases where memory behaviour changed (docs B1-B5)."""

from __future__ import annotations

import re

CURRENT = "0.32.15"  # newest stable release modelled (tag v0.32.15; v0.33.0 was at rc2)

NUM_PARALLEL_1 = (0, 10, 0)  # OLLAMA_NUM_PARALLEL default 1 (auto 4/1 before)
CTX_4096 = (0, 6, 7)  # default num_ctx 4096 (2048 before)
GPTOSS_8K = (0, 11, 1)  # gpt-oss num_ctx >= 8192 unless VRAM < 20 GiB (until 0.15.4)
LAYOUT = (0, 11, 5)  # "new memory management": layout/backoff for Ollama-engine models
FA_DEFAULT_FAMILIES = (0, 12, 0)  # flash attention on by default for supported families
CLASSIC_REMOVED = (0, 12, 11)  # llm/memory.go removed: every model on the layout path
VRAM_TIERS = (0, 15, 5)  # default num_ctx 4k/32k/256k by total VRAM
LLAMA_SERVER = (0, 30, 0)  # upstream llama-server for every GGUF model


def vtuple(v: str | None) -> tuple[int, ...]:
    """`0.12.10`, `v0.5.7`, `0.6.8-rocm`, `ollama/ollama:0.11.4` -> (0, 12, 10); None -> the newest."""
    if not v:
        return vtuple(CURRENT)
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", v)
    if not m:
        return vtuple(CURRENT)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


def era(v: tuple[int, ...], arch: str, ollama_engine: bool) -> str:
    """classic (llm/memory.go EstimateGPULayers) | layout (llm/server.go buildLayout) | llamaserver."""
    if v >= LLAMA_SERVER:
        return "llamaserver"
    if v < LAYOUT:
        return "classic"
    if v < CLASSIC_REMOVED and not ollama_engine:
        return "classic"
    return "layout"
