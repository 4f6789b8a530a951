"""Which attention backend vLLM's V1 engine runs, as far as the CUDA-graph terms need it: whether the
FULL decode graphs go through FlashInfer's own decode wrappers (graphs.py prices them).

From 0.12 platforms/cuda.py::CudaPlatform.get_attn_backend_cls takes the first valid backend of
_get_backend_priorities (read in the 0.12.0, 0.19.0, 0.20.0 and 0.24.0 wheels): FLASHINFER first on
compute capability 10.x, FLASH_ATTN first elsewhere with FLASHINFER next. FLASH_ATTN refuses an fp8 KV
cache unless FlashAttention 3 runs on Hopper (v1/attention/backends/flash_attn.py::
FlashAttentionBackend.supports_kv_cache_dtype, fa_utils.py::flash_attn_supports_fp8), so an fp8 KV cache
on an Ampere / Ada / GB10 card runs FlashInfer (compute capability 7.5 - 12.1, head sizes 64 / 128 / 256:
flashinfer.py::FlashInferBackend.supports_compute_capability, get_supported_head_sizes). Before 0.12 the
selection differs (0.10.2: FlashInfer only on 10.0, FlashAttention on 8.0+ whatever the KV dtype) and is
taken to be FlashAttention unless chosen. --attention-backend (0.13 on), attention_config.backend or
VLLM_ATTENTION_BACKEND choose explicitly. Models with an MLA latent cache run the MLA backends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.memory.kv import latent_cache

if TYPE_CHECKING:
    from servefit.core import EngineConfig
    from servefit.engines.vllm.era import Era
    from servefit.engines.vllm.plan import Resolved
    from servefit.hardware.spec import GpuSpec
    from servefit.models.spec import ModelSpec

PRIORITY_LIST_FROM = (0, 12, 0)
# Attention sinks (model_executor/models/gpt_oss.py passes sinks to Attention): FlashInfer takes them only
# with TRT-LLM attention, an SM100-family device (flashinfer.py::FlashInferBackend.supports_sink, 0.19.0)
SINK_ARCHS = ("GptOssForCausalLM",)
FLASHINFER_HEAD_SIZES = (64, 128, 256)
FLASHINFER_CC = (75, 121)


def chosen_backend(settings: dict, env: dict[str, str] | None) -> str | None:
    """The backend named on the command line, in attention_config or in VLLM_ATTENTION_BACKEND."""
    ac = settings.get("attention_config")
    named = settings.get("attention_backend") or (ac.get("backend") if isinstance(ac, dict) else None) \
        or (env or {}).get("VLLM_ATTENTION_BACKEND")
    return str(named).strip().upper() if named else None


def flashinfer_attention(model: ModelSpec, r: Resolved, e: Era, gpu: GpuSpec | None, settings: dict,
                         env: dict[str, str] | None = None) -> bool:
    """Whether the model's attention layers run vLLM's FLASHINFER backend (see the module docstring)."""
    if not e.v1 or latent_cache(model):
        return False
    named = chosen_backend(settings, env)
    if named is not None:
        return named == "FLASHINFER"
    if gpu is None or r.version < PRIORITY_LIST_FROM:
        return False
    cc = gpu.compute_capability
    if cc // 10 == 10:
        return True
    fits = FLASHINFER_CC[0] <= cc <= FLASHINFER_CC[1] and model.head_dim in FLASHINFER_HEAD_SIZES \
        and model.architecture not in SINK_ARCHS
    return fits and cc >= 80 and cc // 10 != 9 and str(r.kv_dtype).startswith("fp8")


def flashinfer_decode_wrappers(model: ModelSpec, r: Resolved, e: Era, gpu: GpuSpec | None, settings: dict,
                               env: dict[str, str] | None = None) -> bool:
    """Whether FULL decode graphs each build FlashInfer's own decode wrapper: FlashInfer attention off
    the 10.x family, where decode runs TRT-LLM's kernels instead (v1/attention/backends/flashinfer.py::
    FlashInferMetadataBuilder.build: decode_use_trtllm from can_use_trtllm_attention, which needs
    utils/flashinfer.py::supports_trtllm_attention, an SM100-family device)."""
    return flashinfer_attention(model, r, e, gpu, settings, env) and (gpu is None or gpu.compute_capability // 10 != 10)


def flashinfer_note(model: ModelSpec, r: Resolved, e: Era, gpu: GpuSpec | None, cfg: EngineConfig) -> str | None:
    """Say where the plan has vLLM run FlashInfer attention with its per-graph decode wrappers, and
    what that costs or changes in the CUDA graphs (graphs.py prices it)."""
    from servefit.engines.vllm.graph_mode import cudagraph_mode
    from servefit.engines.vllm.graphs import FLASHINFER_DECODE_WORKSPACE, graph_sizes
    from servefit.engines.vllm.kvcache import speculative

    if not flashinfer_decode_wrappers(model, r, e, gpu, cfg.settings, cfg.env):
        return None
    why = "chosen" if chosen_backend(cfg.settings, cfg.env) else "FlashAttention takes an fp8 KV cache only on Hopper"
    full = len(set(graph_sizes(model, r, e, cfg, gpu)[1]))
    if full:
        return (f"attention: vLLM {e.version} runs FlashInfer here ({why}); each of its {full} full decode graphs "
                f"keeps a decode wrapper with an {FLASHINFER_DECODE_WORKSPACE // 2**20} MiB workspace "
                f"({full * FLASHINFER_DECODE_WORKSPACE / 2**20:.0f} MiB in the CUDA-graph memory)")
    if speculative(cfg.settings)[1] and cudagraph_mode(model, r, e, cfg.settings) != "NONE":
        return (f"attention: vLLM {e.version} runs FlashInfer here ({why}); its decode graphs take one token per "
                "request, so with speculative decoding vLLM captures no full decode graphs (piecewise graphs only)")
    return None
