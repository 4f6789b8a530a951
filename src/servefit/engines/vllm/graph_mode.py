"""Which CUDA graphs a vLLM command captures: the CUDAGraphMode each release resolves from the
compilation level / optimization level, an explicit cudagraph_mode and the model, and which of their
sizes run FlashInfer's fused all-reduce (graphs.py prices them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.engines.vllm.attn_backend import flashinfer_decode_wrappers
from servefit.engines.vllm.capture import autotune_known
from servefit.engines.vllm.forward import pooling_runner
from servefit.engines.vllm.kvcache import speculative
from servefit.memory.dtypes import dtype_bytes

if TYPE_CHECKING:
    from servefit.core import EngineConfig
    from servefit.engines.vllm.era import Era
    from servefit.engines.vllm.plan import Resolved
    from servefit.hardware.spec import GpuSpec
    from servefit.models.spec import ModelSpec

# CUDAGraphMode (config/compilation.py): what capture_model captures for each mode. PIECEWISE: every
# capture size as piecewise graphs; FULL: every size as one full graph of a mixed batch;
# FULL_DECODE_ONLY: full graphs of uniform decode batches only; FULL_AND_PIECEWISE: both of the last
# (CUDAGraphMode.mixed_mode / decode_mode / separate_routine; v1/worker/gpu_model_runner.py::capture_model).
GRAPH_MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
# CompilationLevel (<= 0.11) / CompilationMode (0.12 on) by name; 3 (PIECEWISE / VLLM_COMPILE) is the
# only one that splits the model into pieces and so the only one with piecewise graphs.
_COMPILE_MODES = {"NO_COMPILATION": 0, "NONE": 0, "DYNAMO_AS_IS": 1, "STOCK_TORCH_COMPILE": 1,
                  "DYNAMO_ONCE": 2, "DYNAMO_TRACE_ONCE": 2, "PIECEWISE": 3, "VLLM_COMPILE": 3}
# config/vllm.py::OPTIMIZATION_LEVEL_00 .. _03 (0.12 on): the cudagraph_mode each -O level defaults to
_OPT_LEVEL_MODE = {0: "NONE", 1: "PIECEWISE", 2: "FULL_AND_PIECEWISE", 3: "FULL_AND_PIECEWISE"}
# FlashInfer's all-reduce + RMSNorm fusion (compilation/passes/fusion/allreduce_rms_fusion.py::
# AllReduceFusionPass), on by default at -O2 / -O3 from 0.17 (config/vllm.py::OPTIMIZATION_LEVEL_02 /
# _03 fuse_allreduce_rms: enable_allreduce_rms_fusion; 0.14 - 0.16 leave it off): tensor parallel, CUDA,
# FlashInfer present, compute capability 9.0 or 10.0 (the 10.x family from 0.20), and in 0.17 - 0.20 no
# data or pipeline parallelism (no longer checked in 0.25.1; the releases between are taken to keep the
# check). It applies to the compile range up to max_token_num = FI_ALLREDUCE_FUSION_MAX_SIZE_MB[cc][tp]
# // (hidden x dtype bytes) (VllmConfig._set_compile_ranges splits the ranges there); tensor parallel
# sizes missing from the table are not fused. Read in the 0.17.0, 0.18.0, 0.20.0, 0.25.1 and 0.33.0 wheels.
FI_AR_FUSION_FROM = (0, 17, 0)
# Full decode graphs of a speculative batch (query length > 1) need every attention group's metadata
# builder to support uniform batches (v1/worker/gpu_model_runner.py::_check_and_update_cudagraph_mode,
# from 0.11.0): otherwise FULL_AND_PIECEWISE becomes PIECEWISE. Mamba-style layers (mamba1 / mamba2 /
# LFM2's short conv: v1/attention/backends/mamba_attn.py::BaseMambaAttentionMetadataBuilder) report
# UNIFORM_SINGLE_TOKEN_DECODE up to 0.16 and UNIFORM_BATCH from 0.17 (read in the 0.11.0 - 0.17.0 wheels);
# GDN layers (gdn_attn.py) report UNIFORM_BATCH throughout.
MAMBA_UNIFORM_BATCH_FROM = (0, 17, 0)
# 0.10.2 - 0.11 give a hybrid or Mamba model left without a cudagraph_mode FULL_AND_PIECEWISE before the
# release's own default is applied (model_executor/models/config.py::MambaModelConfig.verify_and_update_config,
# which VllmConfig.try_verify_and_update_config runs for ModelConfig.is_hybrid through
# HybridAttentionMambaModelConfig and for MambaForCausalLM / Mamba2ForCausalLM / FalconMambaForCausalLM through
# MODELS_CONFIG_MAP), except the architectures it lists as lacking full graphs (FCG_NOT_SUPPORTED_MODELS). In
# 0.10.2 that replaces the PIECEWISE default; in 0.11 the mode is then already set, so the pooling fallback
# (config/__init__.py::VllmConfig.__post_init__ only touches a mode still None) leaves it. Read in the 0.10.2
# and 0.11.0 wheels; 0.10.1.1 has no such rule, and from 0.12 the method no longer sets a mode. Mamba-style
# builders then support single-token decode only (v1/attention/backends/mamba_attn.py, 0.10.2), so speculative
# decoding falls back as in 0.11 (gpu_model_runner.py::initialize_cudagraph_capture, 0.10.2).
HYBRID_FULL_DEFAULT = ((0, 10, 2), (0, 12, 0))
HYBRID_WITHOUT_FULL_GRAPHS = ("Lfm2ForCausalLM", "MiniMaxText01ForCausalLM")
FI_AR_FUSION_MAX_MB: dict[int, dict[int, float]] = {90: {2: 64, 4: 2, 8: 0.5}, 100: {2: 64, 4: 32, 8: 1}, 103: {2: 64, 4: 64, 8: 2}}


def _int(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def _compile_mode(value: object) -> int | None:
    if value is None:
        return None
    n = _int(value)
    return n if n is not None else _COMPILE_MODES.get(str(value).upper())


def cudagraph_mode(model: ModelSpec, r: Resolved, e: Era, settings: dict) -> str:
    """The CUDAGraphMode vLLM captures with, per release. V0 (worker/model_runner.py::capture_model)
    captures full decode graphs unless --enforce-eager, whatever the compilation level. V1:
    - up to 0.10.0 (v1/worker/gpu_model_runner.py::__init__ use_cuda_graph): graphs only at compilation
      level 3 with use_cudagraph on; piecewise, or one full graph per size with full_cuda_graph.
    - 0.10.1 - 0.11 (config/__init__.py::VllmConfig.__post_init__): an explicit cudagraph_mode wins
      (full_cuda_graph is FULL); else PIECEWISE (0.10.x) / FULL_AND_PIECEWISE (0.11) at level 3, NONE
      at any other level (-O<n> is the level there); pooling models PIECEWISE from 0.11; hybrid and
      Mamba models FULL_AND_PIECEWISE from 0.10.2 (HYBRID_FULL_DEFAULT).
    - 0.12 on (config/vllm.py::VllmConfig.__post_init__): -O<n> is the optimization level, whose
      defaults give the mode (_OPT_LEVEL_MODE) unless set; a compilation mode other than VLLM_COMPILE
      drops every mode to NONE in 0.12, from 0.13 only the modes with piecewise graphs; pooling models
      (and decode or prefill context parallel in 0.12) turn a mode with full graphs into PIECEWISE."""
    s = settings
    if not e.v1:
        return "NONE" if s.get("enforce_eager") else "FULL_DECODE_ONLY"
    if r.enforce_eager:
        return "NONE"
    raw = s.get("compilation_config")
    cc = raw if isinstance(raw, dict) else ({"level": raw} if raw is not None else {})
    explicit = str(cc["cudagraph_mode"]).upper() if cc.get("cudagraph_mode") is not None else None
    explicit = explicit if explicit in GRAPH_MODES else None
    level = _compile_mode(cc.get("mode", cc.get("level")))
    opt = _int(s.get("optimization_level")) if s.get("optimization_level") is not None else None
    if r.version < (0, 12, 0):
        level = level if level is not None else (opt if opt is not None else 3)
        if r.version < (0, 10, 1):
            if level != 3 or cc.get("use_cudagraph") is False:
                return "NONE"
            return "FULL" if cc.get("full_cuda_graph") else "PIECEWISE"
        mode = explicit or ("FULL" if cc.get("full_cuda_graph") else None)
        hybrid = mode is None and hybrid_full_default(model, r)
        if hybrid:
            mode = "FULL_AND_PIECEWISE"
        if mode is None:
            if level != 3:
                return "NONE"
            mode = "FULL_AND_PIECEWISE" if r.version >= (0, 11, 0) else "PIECEWISE"
        if mode in ("PIECEWISE", "FULL_AND_PIECEWISE") and level != 3:
            return "NONE"  # vLLM asserts level 3 for piecewise graphs: it does not start otherwise
        pooling = r.version >= (0, 11, 0) and pooling_runner(model, s, e.v1)
        if pooling and explicit is None and not hybrid and mode != "NONE":
            return "PIECEWISE"
        return _spec_decode_fallback(model, r, s, mode)
    opt = opt if opt is not None else 2
    level = level if level is not None else (3 if opt > 0 else 0)
    mode = explicit or _OPT_LEVEL_MODE.get(opt, "FULL_AND_PIECEWISE")
    if level != 3 and mode != "NONE" and (r.version < (0, 13, 0) or "PIECEWISE" in mode):
        return "NONE"
    full = mode in ("FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
    # 0.12 only (config/vllm.py::VllmConfig.__post_init__; neither check in 0.13.0): decode or prefill context parallel
    cp = r.version < (0, 13, 0) and max(_int(s.get("decode_context_parallel_size") or 1) or 1,
                                         _int(s.get("prefill_context_parallel_size") or 1) or 1) > 1
    if full and (pooling_runner(model, s, e.v1) or cp):
        return "PIECEWISE"
    return _spec_decode_fallback(model, r, s, mode)


def inductor_compiled(e: Era, settings: dict) -> bool:
    """Whether a V1 run that captures graphs runs the model through torch.compile (Dynamo traces it once, at
    the profile run's max_num_batched_tokens): compilation level / mode 3 (PIECEWISE / VLLM_COMPILE), the
    default; from 0.13 FULL graphs may be captured without it (an explicit other mode)."""
    if not e.v1:
        return False
    raw = settings.get("compilation_config")
    cc = raw if isinstance(raw, dict) else ({"level": raw} if raw is not None else {})
    level = _compile_mode(cc.get("mode", cc.get("level")))
    return level is None or level == 3


def hybrid_full_default(model: ModelSpec, r: Resolved) -> bool:
    """Whether this release sets FULL_AND_PIECEWISE for this model when no mode is given (HYBRID_FULL_DEFAULT):
    layers with a recurrent (Mamba / short-conv) or linear-attention mixer, as ModelConfig.is_hybrid and the
    pure Mamba architectures have."""
    first, until = HYBRID_FULL_DEFAULT
    return (first <= r.version < until and bool(set(model.kinds()) & {"mamba", "linear"})
            and model.architecture not in HYBRID_WITHOUT_FULL_GRAPHS)


def _spec_decode_fallback(model: ModelSpec, r: Resolved, settings: dict, mode: str) -> str:
    """FULL_AND_PIECEWISE captured as PIECEWISE where speculative decoding meets Mamba-style layers whose
    backend cannot replay a full graph of a multi-token decode (see MAMBA_UNIFORM_BATCH_FROM; read from 0.10.2,
    the first release whose default gives such a model full graphs)."""
    if mode != "FULL_AND_PIECEWISE" or not HYBRID_FULL_DEFAULT[0] <= r.version < MAMBA_UNIFORM_BATCH_FROM:
        return mode
    return "PIECEWISE" if speculative(settings)[1] > 0 and "mamba" in model.kinds() else mode


def fused_allreduce_tokens(model: ModelSpec, r: Resolved, cfg: EngineConfig, gpu: GpuSpec | None) -> int:
    """Largest batch (in tokens) whose all-reduces vLLM runs as FlashInfer's fused all-reduce + RMSNorm
    (see FI_AR_FUSION_MAX_MB); 0 where the fusion is off. An explicit pass_config.fuse_allreduce_rms wins."""
    s = cfg.settings
    cc = gpu.compute_capability if gpu is not None else 0
    if r.tp <= 1 or r.version < FI_AR_FUSION_FROM or r.enforce_eager:
        return 0
    raw = s.get("compilation_config")
    passes = raw.get("pass_config") if isinstance(raw, dict) else None
    forced = passes.get("fuse_allreduce_rms") if isinstance(passes, dict) else None
    if forced is None:
        opt = _int(s.get("optimization_level")) if s.get("optimization_level") is not None else 2
        family = cc in (90, 100) or (cc == 103 and r.version >= (0, 20, 0))
        old_checks = r.version < (0, 25, 0) and (r.dp > 1 or r.pp > 1)
        invariant = str(cfg.env.get("VLLM_BATCH_INVARIANT", "")).strip().lower() in ("1", "true")
        image = cfg.site.image if cfg.site is not None else None
        if (opt or 0) < 2 or not family or old_checks or invariant or not autotune_known(cfg.env, r.version, image):
            return 0
    elif str(forced).lower() in ("false", "0"):
        return 0
    max_mb = FI_AR_FUSION_MAX_MB.get(cc, {}).get(r.tp)
    return int(max_mb * 2**20) // int(model.hidden_size * dtype_bytes(r.dtype)) if max_mb else 0


# CUDAGraphMode.decode_mode() == FULL. The spec-decode size rounding (defaults.capture_sizes) follows the
# resolved mode: in 0.12 for the separate decode routine only (FULL_DECODE_ONLY / FULL_AND_PIECEWISE:
# separate_routine()), in 0.24 for any FULL decode mode; the releases between are taken as 0.12.
FULL_DECODE_MODES = ("FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")


def spec_decode_without_full_graphs(model: ModelSpec, r: Resolved, e: Era, mode: str, cfg: EngineConfig,
                                    gpu: GpuSpec | None) -> bool:
    """Whether speculative decoding takes the FULL decode graphs away (0.12 on: gpu_model_runner.py::
    _check_and_update_cudagraph_mode, in 0.24 config/compilation.py's mode resolution): a FULL decode
    mode with uniform_decode_query_len > 1 needs AttentionCGSupport.UNIFORM_BATCH, and FlashInfer without
    TRT-LLM decode offers UNIFORM_SINGLE_TOKEN_DECODE only (FlashInferMetadataBuilder.get_cudagraph_support).
    vLLM then falls back to PIECEWISE where attention is split out for piecewise graphs
    (FULL_AND_PIECEWISE), else to NONE (a FULL / FULL_DECODE_ONLY mode compiles attention in)."""
    return (e.v1 and r.version >= (0, 12, 0) and mode in FULL_DECODE_MODES
            and flashinfer_decode_wrappers(model, r, e, gpu, cfg.settings, cfg.env))
