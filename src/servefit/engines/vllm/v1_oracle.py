"""The V1 engine's default in 0.8 - 0.10: where a command asks for something V1 does not support yet, vLLM
quietly runs the V0 engine instead (engine/arg_utils.py::EngineArgs._is_v1_supported_oracle, then
create_engine_config: envs.set_vllm_use_v1(False) when VLLM_USE_V1 is not set). The V0 engine profiles,
counts non-torch memory, captures graphs and picks its batch defaults its own way, so the plan follows the
engine that runs. Each trigger below names the wheels read; a range boundary between two read releases is
placed at the later one read without it. With VLLM_USE_V1 set explicitly there is no fallback (the era's
v1 already says which engine; _raise_or_fallback raises instead)."""

from __future__ import annotations

from servefit.core import EngineConfig
from servefit.engines.vllm.era import Era, vtuple
from servefit.engines.vllm.forward import pooling_runner
from servefit.engines.vllm.kvcache import speculative
from servefit.hardware.spec import GpuSpec
from servefit.memory.kv import latent_cache
from servefit.models.spec import ModelSpec

ORACLE_FROM, ORACLE_UNTIL = (0, 8, 0), (0, 11, 0)  # V0 removed in 0.11.0
# "Compute Capability < 8.0" (needs FlashAttention): in the 0.8.0, 0.8.2, 0.8.5, 0.9.0, 0.9.2, 0.10.0 and
# 0.10.1.1 oracles, gone from 0.10.2's
CC_UNTIL = (0, 10, 2)
# V1_UNSUPPORTED_QUANT: ["bitsandbytes", "gguf"] in 0.8.0 and 0.8.2, ["gguf"] in 0.8.5, absent in 0.9.0
QUANT_UNTIL = {"bitsandbytes": (0, 8, 5), "gguf": (0, 9, 0)}
# `model_config.task not in ["generate"]` (pooling models) and `dtype not in V1_SUPPORTED_DTYPES` (fp16 /
# bf16 only): in 0.8.0 - 0.9.0, absent in 0.9.2
POOLING_UNTIL = DTYPE_UNTIL = (0, 9, 2)
# LoRA and pipeline parallelism: `_warn_or_fallback("LORA")` / ("PP") in 0.8.0 and 0.8.2, absent in 0.8.5
LORA_PP_UNTIL = (0, 8, 5)
# Mamba-style layers: `model_config.has_inner_state and _warn_or_fallback("Mamba")` in 0.9.2 - 0.10.1.1
# (before that the classes are SupportsV0Only, not is_v1_compatible), absent in 0.10.2
MAMBA_UNTIL = (0, 10, 2)
# `not model_config.is_v1_compatible` (model_executor/models/registry.py::is_v1_compatible: the class is not
# SupportsV0Only): the encoder-decoder classes. Mllama and Bart are SupportsV0Only in both the 0.8.2 and the
# 0.10.2 wheels; MBart (absent from 0.8.2) and Florence2 (in 0.8.2 only its language model class is marked,
# the top class is not; V1 has no encoder-decoder runner there either) are marked in 0.10.2
V0_ONLY_ARCHS = frozenset({"MllamaForConditionalGeneration", "BartForConditionalGeneration",
                           "MBartForConditionalGeneration", "Florence2ForConditionalGeneration"})
# --kv-cache-dtype other than auto: unconditional in 0.8.0, conditional (_fp8_kv_supported) from 0.8.2
KV_ANY_UNTIL = (0, 8, 2)
# Speculative decoding: every method in 0.8.0 - 0.8.5 (ngram and EAGLE through _warn_or_fallback, the rest
# through _raise_or_fallback); 0.9.0 - 0.10.0 keep V1 for ngram, medusa, eagle, eagle3 and deepseek_mtp only;
# the check is gone from 0.10.1.1
SPEC_ALL_UNTIL, SPEC_SOME_UNTIL = (0, 9, 0), (0, 10, 1)
SPEC_V1_METHODS = frozenset({"ngram", "[ngram]", "medusa", "eagle", "eagle3", "mtp"})
# Scheduler and engine flags V1 lacks, by the oracle's feature_name, as (setting, its default, until):
# --preemption-mode, --disable-async-output-proc, --scheduler-delay-factor and concurrent partial prefills in
# every oracle read; --num-scheduler-steps until 0.10.0 (gone in 0.10.1.1); --scheduling-policy until 0.9.0
# (gone in 0.9.2); --cpu-offload-gb in 0.8.0 and 0.8.2 (gone in 0.8.5); --enable-prompt-adapter until 0.9.2
# (gone in 0.10.0); --enable-prompt-embeds from 0.9.0 (first read there)
FLAGS = (("preemption_mode", None, ORACLE_UNTIL), ("disable_async_output_proc", False, ORACLE_UNTIL),
         ("scheduler_delay_factor", 0.0, ORACLE_UNTIL), ("max_num_partial_prefills", 1, ORACLE_UNTIL),
         ("max_long_partial_prefills", 1, ORACLE_UNTIL), ("num_scheduler_steps", 1, (0, 10, 1)),
         ("scheduling_policy", "fcfs", (0, 9, 2)), ("cpu_offload_gb", 0.0, (0, 8, 5)),
         ("enable_prompt_adapter", False, (0, 10, 0)))
PROMPT_EMBEDS_FROM = (0, 9, 0)


def _fp8_kv_supported(model: ModelSpec, gpu: GpuSpec, version: tuple[int, int, int], env: dict[str, str]) -> bool:
    """Whether V1 takes this --kv-cache-dtype: from 0.8.2 where FlashAttention 3 runs it, a Hopper card with
    no VLLM_ATTENTION_BACKEND or FLASH_ATTN_VLLM_V1 (attention/utils/fa_utils.py::flash_attn_supports_fp8:
    FA version 3 and capability major 9), MLA or not; 0.10.0 and 0.10.1 ask the platform, which adds
    capability 10.0 (platforms/cuda.py::CudaPlatformBase.is_kv_cache_dtype_supported); 0.10.2's also takes
    FlashInfer, the Triton backend from capability 8.9 (supports_fp8), and for MLA models FlashMLA / CUTLASS
    MLA, their default, and nothing else."""
    backend = env.get("VLLM_ATTENTION_BACKEND") or None
    cc = gpu.compute_capability
    fa = backend in (None, "FLASH_ATTN_VLLM_V1")
    if version >= (0, 10, 2):
        if latent_cache(model):
            return backend in (None, "FLASHMLA", "CUTLASS_MLA")
        if cc == 100 or backend == "FLASHINFER":
            return True
        if backend == "TRITON_ATTN_VLLM_V1":
            return cc >= 89
    elif version >= (0, 10, 0) and cc == 100:
        return True
    return fa and cc // 10 == 9


def v0_fallback(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, e: Era) -> str | None:
    """What makes this release run the V0 engine for this command although V1 is its default, in the
    user's words; None where V1 runs (or V0 was chosen with VLLM_USE_V1=0)."""
    v, s, env = vtuple(e.version), cfg.settings, cfg.env or {}
    if not e.v1 or not ORACLE_FROM <= v < ORACLE_UNTIL or env.get("VLLM_USE_V1") is not None:
        return None
    nvidia = gpu.vendor == "nvidia"
    if nvidia and v < CC_UNTIL and gpu.compute_capability < 80:
        return f"compute capability {gpu.compute_capability / 10:.1f} (V1 needs 8.0 or newer in this release)"
    method = str(s.get("quantization") or (model.quantization or {}).get("quant_method") or "").lower()
    if v < QUANT_UNTIL.get(method, (0, 0, 0)):
        return f"--quantization {method}"
    kv = str(s.get("kv_cache_dtype") or "auto")
    if kv != "auto" and (v < KV_ANY_UNTIL or nvidia and not _fp8_kv_supported(model, gpu, v, env)):
        return f"--kv-cache-dtype {kv} on this GPU"
    if v < POOLING_UNTIL and pooling_runner(model, s, True):
        return "a pooling (embedding / classification) model"
    if v < DTYPE_UNTIL and str(s.get("dtype") or "auto").lower() in ("float32", "float", "fp32"):
        return "--dtype float32"
    if why := _flag(s, v):
        return why
    method = speculative(s)[0] or ("ngram" if str(s.get("speculative_model") or "") in ("ngram", "[ngram]")
                                   else "draft model" if s.get("speculative_model") else "")
    if method and (v < SPEC_ALL_UNTIL or v < SPEC_SOME_UNTIL and method not in SPEC_V1_METHODS):
        return f"speculative decoding ({method})"
    if v < LORA_PP_UNTIL and (s.get("enable_lora") or int(s.get("pipeline_parallel_size") or 1) > 1):
        return "--enable-lora" if s.get("enable_lora") else "pipeline parallelism"
    if v < MAMBA_UNTIL and any(k in ("mamba", "linear") for k in model.kinds()):
        return "Mamba-style layers"
    if model.architecture in V0_ONLY_ARCHS:
        return f"{model.architecture} (V0 only in this release)"
    return None


def _flag(s: dict, v: tuple[int, int, int]) -> str | None:
    """The first flag V1 lacks in this release that the command sets off its default (FLAGS)."""
    for name, default, until in FLAGS:
        val = s.get(name)
        if v < until and val is not None and val not in ("", default) and str(val).lower() != str(default).lower():
            return f"--{name.replace('_', '-')}"
    if v >= PROMPT_EMBEDS_FROM and s.get("enable_prompt_embeds"):
        return "--enable-prompt-embeds"
    return None


def note(version: str, why: str) -> str:
    return (f"vLLM {version} runs this command on its V0 engine, not V1: V1 lacks {why} in this release and, "
            "with VLLM_USE_V1 unset, vLLM falls back to V0; planned the way V0 profiles and counts memory")
