"""Ollama raises gpt-oss's context to 8192 whatever set num_ctx (server/routes.go::scheduleRunner, after
modelOptions): every GPU from v0.11.0, only with >= 20 GiB of VRAM from v0.11.4 (!s.lowVRAM), qwen3vl too from
v0.12.7, gone in v0.15.5. ollama/ollama#11711: PARAMETER num_ctx 4096 on a 16 GB RTX 4060 Ti loads with 8192."""

from __future__ import annotations

from servefit.core import LaunchSite, ModelInputs, Token
from servefit.engines.ollama import ENGINE
from servefit.engines.ollama.plan import context_floor
from servefit.hardware.spec import GpuSpec
from servefit.models.catalog import lookup

MIB, GIB = 2**20, 2**30
RTX4060TI = GpuSpec(key="rtx-4060-ti-16gb", name="NVIDIA GeForce RTX 4060 Ti", vendor="nvidia",
                    memory_bytes=16380 * MIB, compute_capability=89)


def test_floor_by_release_and_vram():
    assert context_floor(4096, (0, 11, 2), "gptoss", 16 * GIB) == 8192  # no low-VRAM gate yet
    assert context_floor(4096, (0, 11, 0), "gptoss", 16 * GIB) == 8192
    assert context_floor(4096, (0, 10, 1), "gptoss", 48 * GIB) == 4096  # before gpt-oss support
    assert context_floor(4096, (0, 11, 4), "gptoss", 16 * GIB) == 4096  # lowVRAM: under 20 GiB
    assert context_floor(4096, (0, 11, 4), "gptoss", 20 * GIB) == 8192
    assert context_floor(16384, (0, 11, 4), "gptoss", 24 * GIB) == 16384  # a floor, not a value
    assert context_floor(4096, (0, 12, 6), "qwen3vl", 24 * GIB) == 4096
    assert context_floor(4096, (0, 12, 7), "qwen3vl", 24 * GIB) == 8192
    assert context_floor(4096, (0, 15, 4), "gptoss", 24 * GIB) == 8192
    assert context_floor(4096, (0, 15, 5), "gptoss", 24 * GIB) == 4096  # VRAM-based defaults replace it
    assert context_floor(4096, (0, 11, 2), "llama", 24 * GIB) == 4096


def _plan(version: str, params: dict[str, str]):
    site = LaunchSite(file="compose.yaml", line=1, argv=[Token(w) for w in "ollama run gpt-oss:20b".split()],
                      env={"OLLAMA_FLASH_ATTENTION": Token("true"), "OLLAMA_KV_CACHE_TYPE": Token("q4_0")},
                      name="ollama", inputs=ModelInputs(request_options=params))
    cfg = ENGINE.parse(site, version)
    spec = lookup("openai/gpt-oss-20b")
    assert spec is not None
    return ENGINE.plan(cfg, spec, RTX4060TI, 1)


def test_modelfile_num_ctx_below_8192_is_raised_on_0_11_2():
    p = _plan("0.11.2", {"num_ctx": "4096"})
    assert p.detail.as_dict()["num_ctx"] == 8192
    # GGML.GraphSize gpt-oss branch (fs/ggml/ggml.go v0.11.2), f16 (flash attention unsupported for the model there):
    # 24 layers of 8 KV heads x (64 + 64) x 2 bytes; even layers numParallel x 4096 + batch (512) cells, odd layers
    # the context (8192): 12 x 4608 x 2048 + 12 x 8192 x 2048 bytes = 300 MiB, the log's memory.required.kv
    assert p.detail.as_dict()["memory_required_kv_gib"] == round((12 * 4608 * 2048 + 12 * 8192 * 2048) / GIB, 3)
    assert 12 * 4608 * 2048 + 12 * 8192 * 2048 == 300 * MIB


def test_low_vram_keeps_the_modelfile_context_from_0_11_4():
    p = _plan("0.11.4", {"num_ctx": "4096"})
    assert p.detail.as_dict()["num_ctx"] == 4096
