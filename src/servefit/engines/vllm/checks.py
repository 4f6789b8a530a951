"""The start-up checks vLLM makes before and after loading, in vLLM's own words, and the
advice rules that fire on a config vLLM would accept."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.core import EngineConfig, Finding, MemoryPlan
from servefit.engines.vllm.era import Era, vtuple
from servefit.engines.vllm.graphs import graphs_budgeted
from servefit.engines.vllm.non_torch import cuda_context_bytes
from servefit.hardware.spec import GpuSpec
from servefit.memory.kv import latent_cache
from servefit.models.spec import ModelSpec
from servefit.rules.catalog import finding
from servefit.rules.registry import option, rule

if TYPE_CHECKING:
    from servefit.engines.vllm.plan import Resolved

# get_min_capability() per method (vllm/model_executor/layers/quantization/*.py), for
# (v0.11, v0.21, v0.33); None = the method does not exist in that release.
MIN_CAPABILITY: dict[str, tuple[int | None, int | None, int | None]] = {
    "awq": (75, 75, 75), "awq_marlin": (80, 75, 75), "gptq": (60, 60, 60), "gptq_marlin": (80, 75, 60),
    "fp8": (80, 75, 75), "fbgemm_fp8": (80, 80, 80), "modelopt": (89, 89, 80), "modelopt_fp4": (80, 75, 75),
    "bitsandbytes": (70, 70, None), "gguf": (60, 60, None), "compressed-tensors": (70, 70, 70),
    "quark": (70, 70, 70), "moe_wna16": (70, 70, 70), "experts_int8": (80, 80, 80), "mxfp4": (80, 80, 80),
    "torchao": (75, 75, 75), "auto-round": (60, None, None), "inc": (None, 60, 60), "hqq": (80, None, None),
    "rtn": (80, None, None), "fp_quant": (None, 100, 100), "gptq_marlin_24": (80, None, None),
    "gptq_bitblas": (80, None, None), "bitblas": (70, None, None),
    # ExLlamaV2 / V3 checkpoints: no such method in any release (config/model.py::_verify_quantization
    # raises "Unknown quantization method"); TGI serves exl2
    "exl2": (None, None, None), "exl3": (None, None, None),
}
def marlin_min_capability(version: tuple[int, ...]) -> int:
    """The compute capability gptq_marlin needs in a release (MIN_CAPABILITY's 0.11 / 0.21 columns): below it
    a GPTQ checkpoint runs gptq.py, whose MoE layers use moe_wna16."""
    return int(MIN_CAPABILITY["gptq_marlin"][0 if version < (0, 21, 0) else 1] or 80)


KV_DTYPES_011 = {"auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"}
KV_DTYPES_033 = KV_DTYPES_011 | {"float16", "fp8_ds_mla", "nvfp4_ds_mla", "turboquant_k8v4", "turboquant_4bit_nc",
                                 "turboquant_k3v4_nc", "turboquant_3bit_nc", "octave_k3v4", "octave_k3v3",
                                 "octave_k3v3_compact", "ultraquant_4bit", "int4_per_token_head",
                                 "int8_per_token_head", "fp8_per_token_head", "nvfp4", "nvfp4_4over6"}
# rope types whose factor is NOT multiplied into the derived length (config/model.py::_get_and_verify_max_len)
ROPE_NO_SCALE_033 = {"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"}
ROPE_NO_SCALE_011 = {"su", "longrope", "llama3"}
DTYPE_ALIASES = {"half": "float16", "float16": "float16", "bfloat16": "bfloat16", "float": "float32",
                 "float32": "float32"}


def resolve_dtype(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec) -> str:
    """config/model.py::_resolve_auto_dtype: the checkpoint's dtype, float32 checkpoints run in
    bf16 (fp16 without bf16), and bf16 falls back to fp16 below compute capability 8.0."""
    asked = str(cfg.settings.get("dtype") or "auto")
    if asked != "auto":
        return DTYPE_ALIASES.get(asked, asked)
    ck = (model.torch_dtype or "bfloat16").lower()
    if ck in ("float32", "float"):
        ck = "bfloat16"
    if ck == "bfloat16" and not _bf16_ok(gpu):
        return "float16"
    return DTYPE_ALIASES.get(ck, ck)


def _bf16_ok(gpu: GpuSpec) -> bool:
    if gpu.vendor == "nvidia":
        return gpu.compute_capability >= 80
    return gpu.bf16


def derived_max_len(model: ModelSpec, e: Era, disable_sliding_window: bool) -> int:
    derived = model.max_position_embeddings or 2048
    if disable_sliding_window and model.sliding_window and model.sliding_window < derived:
        derived = model.sliding_window
    rs = model.rope_scaling or {}
    rtype = rs.get("rope_type", rs.get("type"))
    factor = float(rs.get("factor") or 1.0)
    if rs and "gemma3" not in model.model_type:
        skip = ROPE_NO_SCALE_011 if e.yarn_uses_original else ROPE_NO_SCALE_033
        if rtype == "yarn" and e.yarn_uses_original and model.original_max_position_embeddings:
            derived = int(model.original_max_position_embeddings * factor)
        elif rtype not in skip:
            derived = int(derived * factor)
    if model.model_max_length:
        derived = model.model_max_length
    return derived


@rule("VLLM006", "VLLM007", "VLLM008", "VLLM009", "VLLM011", "VLLM012", "VLLM013", "VLLM015", "VLLM021")
def config_checks(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int, r: Resolved, e: Era) -> list[Finding]:
    """Rejections vLLM raises while building its config (before the weights load)."""
    s, sp = cfg.settings, cfg.spans
    out: list[Finding] = []
    v = vtuple(e.version)
    util = s.get("gpu_memory_utilization")
    if util is not None and not 0 < float(util) <= 1:
        out.append(finding("VLLM013", f"GPU memory utilization must be in (0, 1]. Got {util}.",
                           span=sp.get("gpu_memory_utilization"), setting="gpu_memory_utilization"))
    ml = s.get("max_model_len")
    allow_long = cfg.env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0").lower() in ("1", "true")
    # a config naming no maximum length (BLOOM): vLLM takes max_model_len as given, and assumes 2048 only without it
    # (config/model.py::_get_and_verify_max_len, "If max_model_len is specified, we use it", 0.4 - 0.33)
    if isinstance(ml, int) and ml > r.derived_len and not allow_long and model.max_length_in_config:
        out.append(finding(
            "VLLM006", f"User-specified max_model_len ({ml}) is greater than the derived max_model_len "
                       f"({r.derived_len} for {model.name}). Set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 to override.",
            span=sp.get("max_model_len"), setting="max_model_len"))
    if not any(k in ("full", "sliding", "chunked", "none") for k in model.kinds()):
        pass  # attention-free SSM (Mamba): the config has no heads (getattr default 0 divides by anything)
    elif model.num_attention_heads % r.tp:
        out.append(finding(
            "VLLM007", f"Total number of attention heads ({model.num_attention_heads}) must be divisible by tensor "
                       f"parallel size ({r.tp}).", span=sp.get("tensor_parallel_size"), setting="tensor_parallel_size"))
    elif not latent_cache(model) and model.num_key_value_heads and (
            (model.num_key_value_heads >= r.tp and model.num_key_value_heads % r.tp)
            or (model.num_key_value_heads < r.tp and r.tp % model.num_key_value_heads)):
        out.append(finding("VLLM007", f"{model.num_key_value_heads} KV heads cannot be split over tensor parallel "
                                      f"size {r.tp} (the model code asserts it while loading)",
                           span=sp.get("tensor_parallel_size"), setting="tensor_parallel_size"))
    # config/parallel.py::ParallelConfig: world_size = pp x tp x prefill_context_parallel_size from 0.12
    # (read in the 0.12.0 - 0.33.0 wheels)
    pcp = str(s.get("prefill_context_parallel_size") or "1").strip()
    world = r.tp * r.pp * (int(pcp) if pcp.isdigit() and int(pcp) > 1 and r.version >= (0, 12, 0) else 1)
    # config/parallel.py::ParallelConfig.__post_init__ raises this only when no backend is given on one node:
    # `--distributed-executor-backend ray` places the ranks over the Ray cluster's nodes, `--nnodes N` over N hosts
    nodes = str(s.get("nnodes") or "1").strip()
    hosts = int(nodes) if nodes.isdigit() and int(nodes) > 1 else 1
    ray = s.get("distributed_executor_backend") == "ray"
    if count and -(-world // hosts) > count and not ray:
        out.append(finding(
            "VLLM008", f"World size ({world}) is larger than the number of available GPUs ({count}) in this node.",
            span=sp.get("tensor_parallel_size") or sp.get("pipeline_parallel_size"), setting="tensor_parallel_size"))
    if str(s.get("dtype")) == "bfloat16" and not _bf16_ok(gpu):
        out.append(finding(
            "VLLM009", f"Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your {gpu.name} "
                       f"GPU has compute capability {gpu.compute_capability / 10:.1f}. Use --dtype=half.",
            span=sp.get("dtype"), setting="dtype"))
    elif (s.get("dtype") in (None, "auto")) and (model.torch_dtype or "").lower() == "bfloat16" and r.dtype == "float16":
        out.append(finding("VLLM021", f"{model.name} is bfloat16; the {gpu.name} (compute capability "
                                      f"{gpu.compute_capability / 10:.1f}) runs it in float16", setting="dtype"))
    out.extend(_quant_checks(cfg, model, gpu, r, v))
    kvd = str(s.get("kv_cache_dtype") or "auto")
    valid = KV_DTYPES_033 if v >= (0, 21, 0) else KV_DTYPES_011
    if kvd not in valid:
        out.append(finding("VLLM015", f"Invalid kv_cache_dtype: {kvd!r}. Valid values are: {', '.join(sorted(valid))}",
                           span=sp.get("kv_cache_dtype"), setting="kv_cache_dtype"))
    b, n = r.max_num_batched_tokens, r.max_num_seqs
    if b < n:
        out.append(finding("VLLM011", f"max_num_batched_tokens ({b}) must be greater than or equal to max_num_seqs ({n}).",
                           span=sp.get("max_num_batched_tokens") or sp.get("max_num_seqs"), setting="max_num_batched_tokens"))
    if not r.chunked_prefill and isinstance(r.max_model_len, int) and b < r.max_model_len \
            and s.get("max_num_batched_tokens") is not None:
        out.append(finding(
            "VLLM012", f"max_num_batched_tokens ({b}) is smaller than max_model_len ({r.max_model_len}). Please increase "
                       "max_num_batched_tokens or decrease max_model_len.",
            span=sp.get("max_num_batched_tokens"), setting="max_num_batched_tokens"))
    return out


@rule("VLLM010", "VLLM014")
def _quant_checks(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, r: Resolved, v: tuple[int, int, int]) -> list[Finding]:
    s, sp = cfg.settings, cfg.spans
    out: list[Finding] = []
    asked = s.get("quantization")
    ck = (model.quantization or {}).get("quant_method")
    if asked and ck and _family(asked) != _family(ck):
        out.append(finding(
            "VLLM014", f"Quantization method specified in the model config ({ck}) does not match the quantization "
                       f"method specified in the `quantization` argument ({asked}).",
            span=sp.get("quantization"), setting="quantization"))
    method = asked or ck
    if not method or gpu.vendor != "nvidia":
        return out
    method = str(method).lower()
    era_idx = 0 if v < (0, 21, 0) else (1 if v < (0, 33, 0) else 2)
    caps = MIN_CAPABILITY.get(method)
    if caps is None:
        return out
    need = caps[era_idx]
    if need is None:
        out.append(finding("VLLM014", f"Unknown quantization method: {method} (not in vLLM {'.'.join(map(str, v))})",
                           span=sp.get("quantization"), setting="quantization"))
    elif gpu.compute_capability < need:
        out.append(finding(
            "VLLM010", f"The quantization method {method} is not supported for the current GPU. Minimum capability: "
                       f"{need}. Current capability: {gpu.compute_capability}.",
            span=sp.get("quantization") or sp.get("model"), setting="quantization"))
    return out


def _family(m: str) -> str:
    m = m.lower()
    # "modelopt": a ModelOpt checkpoint's quant_method is "modelopt" for FP8 and NVFP4 alike; vLLM picks
    # modelopt_fp4 from its quant_algo (quantization/modelopt.py::override_quantization_method)
    for fam in ("awq", "gptq", "fp8", "bitsandbytes", "compressed-tensors", "mxfp4", "gguf", "modelopt"):
        if m.startswith(fam):
            return fam
    return m


def advice(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, r: Resolved, e: Era, plan: MemoryPlan) -> list[Finding]:
    """Warnings and capacity advice for a config vLLM accepts (KV overflow, batch sizing, fragmentation)."""
    checks = (fragmentation_headroom, cuda_graphs_outside_budget, max_model_len_unset, low_concurrency)
    return [f for check in checks if (f := check(cfg, model, gpu, r, e, plan)) is not None]


@rule("VLLM017")
def fragmentation_headroom(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, r: Resolved, e: Era,
                           plan: MemoryPlan) -> Finding | None:
    limit = float(option("VLLM017", "max"))
    if r.util < limit:
        return None
    return finding("VLLM017", f"gpu_memory_utilization {r.util} leaves "
                              f"{(1 - r.util) * gpu.memory_bytes / 2**30:.2f} GiB for fragmentation and "
                              "everything outside vLLM's budget",
                   span=cfg.spans.get("gpu_memory_utilization"), setting="gpu_memory_utilization")


@rule("VLLM016")
def cuda_graphs_outside_budget(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, r: Resolved, e: Era,
                               plan: MemoryPlan) -> Finding | None:
    m = plan.memory
    context = cuda_context_bytes(gpu)  # the CUDA context lives outside the budget too
    if graphs_budgeted(model, r, e, cfg) or not m.cuda_graphs or m.free_headroom - context >= 0:
        return None
    return finding("VLLM016", f"CUDA graphs (~{m.cuda_graphs / 2**30:.2f} GiB) are captured after the KV cache "
                              f"takes the budget; only {(m.total - m.budget) / 2**30:.2f} GiB is outside it",
                   span=cfg.spans.get("gpu_memory_utilization"), setting="gpu_memory_utilization")


# the model's own length from which VLLM018 asks for --max-model-len (tune writes it from there too)
LONG_DEFAULT = 32768


@rule("VLLM018")
def max_model_len_unset(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, r: Resolved, e: Era,
                        plan: MemoryPlan) -> Finding | None:
    if cfg.settings.get("max_model_len") is not None or r.derived_len < LONG_DEFAULT or plan.outcome != "started":
        return None
    return finding("VLLM018", f"max-model-len is not set: vLLM uses {model.name}'s {r.derived_len:,} tokens",
                   span=cfg.spans.get("model"), setting="max_model_len")


@rule("VLLM019")
def low_concurrency(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, r: Resolved, e: Era,
                    plan: MemoryPlan) -> Finding | None:
    if plan.outcome != "started" or plan.max_concurrency >= float(option("VLLM019", "min")):
        return None
    return finding("VLLM019", f"only {plan.max_concurrency:.2f} requests of {plan.max_model_len:,} tokens fit "
                              f"the KV cache ({plan.kv_cache_tokens:,} tokens) at once",
                   span=cfg.spans.get("max_model_len"), setting="max_model_len")
