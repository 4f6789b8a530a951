"""The vLLM settings tune may turn, with only the values this GPU, model and version allow."""

from __future__ import annotations

from servefit.core import EngineConfig
from servefit.engines.base import Knob
from servefit.engines.vllm.checks import derived_max_len
from servefit.engines.vllm.era import era
from servefit.engines.vllm.overrides import as_loaded
from servefit.hardware.spec import GpuSpec
from servefit.models.spec import ModelSpec

CONTEXTS = (2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576)


def knobs(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int) -> list[Knob]:
    e = era(cfg.version, cfg.env)
    limit = derived_max_len(as_loaded(cfg, model), e, False)
    lens = tuple(c for c in CONTEXTS if c <= limit) + ((limit,) if limit not in CONTEXTS else ())
    kv = ("auto", "fp8") if (gpu.compute_capability >= 80 or gpu.vendor != "nvidia") else ("auto",)
    pp = max(int(cfg.settings.get("pipeline_parallel_size") or 1), 1)  # each stage takes tp GPUs
    tps = tuple(t for t in (1, 2, 4, 8) if t * pp <= max(count, pp) and model.num_attention_heads % t == 0)
    return [
        Knob("max_model_len", lens),
        Knob("kv_cache_dtype", kv),
        Knob("max_num_seqs", (8, 16, 32, 64, 128, 256, 512, 1024)),
        Knob("gpu_memory_utilization", (0.85, 0.88, 0.9, 0.92, 0.94)),
        Knob("enforce_eager", (False, True)),
        Knob("tensor_parallel_size", tps or (1,)),
    ]
