"""vLLM's CPU build: its KV cache is a fixed amount of host memory, VLLM_CPU_KVCACHE_SPACE GiB, and the
start check that refuses a max-model-len it cannot hold is the GPU build's. servefit does not plan host
memory (SF120), but where that amount is known it checks what vLLM would refuse:

- the space: VLLM_CPU_KVCACHE_SPACE when set; up to 0.12 its default is 4 GiB
  (platforms/cpu.py::CpuPlatform.get_device_total_memory, "... is not set, using 4 by default"); from 0.13
  it is half the memory of a NUMA node (DEFAULT_CPU_MEM_UTILIZATION 0.5), which servefit cannot know, and
  from 0.20 the worker checks the set figure against the node's memory (v1/worker/cpu_worker.py::
  CPUWorker.determine_available_memory), which it cannot either;
- the check: v1/core/kv_cache_utils.py::check_enough_kv_cache_memory (the CPU worker is V1's from 0.10)
  needs cdiv(max_model_len, block_size) blocks of every layer; worker/cpu_worker.py::
  CPUWorker._validate_num_cache_blocks before (its blocks x block_size tokens against max_model_len);
- the block size: 128 from 0.11 unless --block-size is given (check_and_update_config); 16 before (0.10:
  128 only with IPEX, which servefit cannot see, so 16);
- the KV element: the model's dtype, two bytes (bfloat16 / float16 on the CPU); an fp8 KV cache is
  fp8_e5m2 up to 0.11 and falls back to auto from 0.12 ("CPU backend doesn't support KV cache quantization").

Checked for models whose every layer keeps full attention; for others the finding is not given.
"""

from __future__ import annotations

from servefit.core import EngineConfig, Finding
from servefit.engines.vllm.checks import derived_max_len
from servefit.engines.vllm.era import era, vtuple
from servefit.engines.vllm.kvcache import cdiv
from servefit.engines.vllm.overrides import as_loaded
from servefit.memory.kv import latent_cache, layer_bytes_per_token
from servefit.models.spec import ModelSpec
from servefit.rules.catalog import finding
from servefit.rules.registry import rule

GiB = 2**30
DEFAULT_4GIB_UNTIL = (0, 13, 0)  # from 0.13 the default is half of a NUMA node's memory
BLOCK_128_FROM = (0, 11, 0)
FP8_FALLBACK_FROM = (0, 12, 0)


def kv_space(cfg: EngineConfig) -> tuple[int, str] | None:
    """(bytes, where they come from) of the KV cache a CPU build sizes; None where servefit cannot know."""
    raw = str(cfg.env.get("VLLM_CPU_KVCACHE_SPACE", "") or "").strip().strip("\"'")
    if raw:
        return (int(raw) * GiB, f"that VLLM_CPU_KVCACHE_SPACE={raw} gives") if raw.isdigit() and int(raw) > 0 else None
    if vtuple(cfg.version or "") < DEFAULT_4GIB_UNTIL:
        return 4 * GiB, f"of vLLM {cfg.version}'s default (VLLM_CPU_KVCACHE_SPACE unset)"
    return None


@rule("VLLM026")
def check(cfg: EngineConfig, model: ModelSpec) -> list[Finding]:
    """The KV check a CPU build makes at start, where its KV space is known."""
    space = kv_space(cfg)
    if space is None or not model.num_hidden_layers or latent_cache(model) or \
            any(k != "full" for k in model.kinds()) or model.layout.get("global_head_dim"):
        return []
    s, v = cfg.settings, vtuple(cfg.version or "")
    e = era(cfg.version, cfg.env)
    loaded = as_loaded(cfg, model)
    given = str(s.get("max_model_len") or "")
    max_len = int(given) if given.isdigit() else derived_max_len(loaded, e, False)
    tp = max(int(s.get("tensor_parallel_size") or 1), 1)
    fp8 = str(s.get("kv_cache_dtype") or "auto").startswith("fp8") and v < FP8_FALLBACK_FROM
    per_token = int(layer_bytes_per_token(model, 1 if fp8 else 2, tp)) * model.num_hidden_layers
    block = int(s.get("block_size") or (128 if v >= BLOCK_128_FROM else 16))
    need = cdiv(max_len, block) * block * per_token
    room, where = space
    if need <= room:
        return []
    fits = room // per_token // block * block
    return [finding("VLLM026", f"max-model-len {max_len:,} needs {need / GiB:.2f} GiB of KV cache on the CPU, more than "
                               f"the {room / GiB:.2f} GiB {where}: vLLM refuses to start; the largest that fits is "
                               f"{fits:,} (or set VLLM_CPU_KVCACHE_SPACE to {cdiv(need, GiB)} or more)",
                    span=cfg.spans.get("max_model_len"), setting="max_model_len", site=cfg.site.name if cfg.site else "")]
