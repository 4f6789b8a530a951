"""vLLM's memory plan on one GPU, replayed: budget, weights, activation peak, non-torch memory,
CUDA graphs, KV blocks, and the outcome vLLM reaches at start.

Budget and KV availability follow vllm/v1/worker/gpu_worker.py::Worker.determine_available_memory
and vllm/v1/worker/utils.py::request_memory (v0.11: Worker.init_device + memory_profiling in
vllm/utils/__init__.py). vLLM measures weights, activations, non-torch memory and CUDA graphs at
start; servefit predicts them (weights from the checkpoint's tensors, the rest from terms
calibrated on public start-up logs, see benchmarks/accuracy/) and reproduces the KV arithmetic
exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from servefit.core import DeviceMemory, EngineConfig, MemoryPlan
from servefit.engines.vllm import capture, checks, dflash, kv_dsv4, kvcache, runner_v2, segments, unified
from servefit.engines.vllm.architectures import architecture_check
from servefit.engines.vllm.async_sched import in_flight_tokens
from servefit.engines.vllm.attn_backend import flashinfer_note
from servefit.engines.vllm.defaults import batch_defaults, nvml_reports_memory
from servefit.engines.vllm.detail import VllmDetail
from servefit.engines.vllm.era import Era, before_modelled_note, era, main_build_note, tokens_fix_note, vtuple
from servefit.engines.vllm.forward import held_after_profile, pooling_runner
from servefit.engines.vllm.graphs import graph_estimate, graph_memory, graphs_budgeted, model_runner_v2
from servefit.engines.vllm.kvcache import (
    DS_MLA_ROW,
    attention_free,
    fp8_ds_mla,
    hybrid_state,
    layer_kinds,
    layout,
    speculative,
)
from servefit.engines.vllm.mamba_cache import all_mode_note
from servefit.engines.vllm.mm_profiling import encoder_data_parallel
from servefit.engines.vllm.non_torch import CONSUMED_FROM, non_torch_bytes
from servefit.engines.vllm.non_torch import notes as non_torch_notes
from servefit.engines.vllm.outcome import outcome
from servefit.engines.vllm.overrides import as_loaded
from servefit.engines.vllm.profile import (
    activation_peak,
    compile_cache_note,
    encoder_profile,
    flashinfer_sampler,
    logged_activation,
    sampler_note,
    triton_topk_buffer,
)
from servefit.engines.vllm.v1_oracle import note as v0_note
from servefit.engines.vllm.v1_oracle import v0_fallback
from servefit.engines.vllm.weights import (
    lora_stage_bytes,
    mxfp4_backend,
    mxfp4_note,
    pp_layers,
    stage_weights,
)
from servefit.hardware.spec import GpuSpec
from servefit.memory.dtypes import dtype_bytes
from servefit.memory.kv import full_kv_bytes_per_token, latent_cache, layer_bytes_per_token
from servefit.memory.params import param_groups
from servefit.memory.weights import Scheme, kept_params, online_shorthand, scheme_for
from servefit.models.arch_deepseek_v4 import is_deepseek_v4
from servefit.models.spec import ModelSpec

GiB = 2**30
# An EAGLE / EAGLE-3 head or an MTP module is loaded into the target's runner with one decoder layer of
# its own (eagle.py / llama_eagle.py: start_layer_id = the target's layer count; deepseek_mtp.py,
# qwen3_5_mtp.py: the layers after the target's), whose Attention registers in the same forward context,
# so v1/worker/gpu_model_runner.py::get_kv_cache_spec gives it a KV-cache spec beside the target's
# layers and kv_cache_utils.py pages it in the same pool: one more full-attention layer per block
# (read in the 0.11.0, 0.22.0 and 0.33.0 wheels). A DFlash drafter is planned in engines/vllm/dflash.py; other separate draft models are not.
DRAFTER_LAYER_METHODS = ("eagle", "eagle3", "mtp")
# Prefill context parallelism (-pcp, from 0.12) shards a request's full-attention KV over its ranks as
# DCP does: kv_cache_interface.py::FullAttentionSpec.max_memory_usage_bytes takes cdiv(max_model_len,
# dcp x pcp) and, before 0.20.1, _report_kv_cache_config multiplies the logged tokens by pcp x dcp
# (read in the 0.12.0, 0.14.0, 0.17.0, 0.18.0, 0.20.0 - 0.22.0, 0.24.0 and 0.25.0 wheels). From 0.26.0
# the spec divides by dcp alone (0.26.0, 0.27.0, 0.30.0, 0.33.0: PCP-only ranks replicate the cache).
PCP_SHARDS_KV = ((0, 12, 0), (0, 26, 0))


def glm_dsa_fp8_default(model: ModelSpec, cc: int, version: tuple[int, int, int]) -> bool:
    """GLM-5's sparse-MLA model on a compute 10.x GPU takes an fp8 KV cache where none is set, from 0.32
    (models/config.py::GlmMoeDsaForCausalLM.verify_and_update_config: "auto" -> fp8_e4m3; the class has no
    such default in the 0.29.0 - 0.31.0 wheels, read in 0.32.0 and 0.33.0)."""
    return model.architecture == "GlmMoeDsaForCausalLM" and cc // 10 == 10 and version >= (0, 32, 0)


def pcp_kv_shards(settings: dict, version: tuple[int, int, int]) -> int:
    """The prefill-context-parallel ranks a request's KV is split over (PCP_SHARDS_KV), else 1."""
    try:
        pcp = int(str(settings.get("prefill_context_parallel_size") or 1))
    except ValueError:
        return 1
    lo, hi = PCP_SHARDS_KV
    return max(pcp, 1) if lo <= version < hi else 1


@dataclass
class Resolved:
    """Settings after vLLM's own defaulting, for this GPU and version."""

    dtype: str
    tp: int
    pp: int
    util: float
    max_model_len: int | str
    derived_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    chunked_prefill: bool
    block_size: int
    kv_dtype: str
    scheme: Scheme | None
    enforce_eager: bool
    version: tuple[int, int, int] = (0, 33, 0)
    dp: int = 1
    expert_parallel: bool = False
    mxfp4: str = "marlin"  # weights.py mxfp4_backend
    marlin_cc: bool = True  # the GPU runs gptq_marlin (forward.py marlin_moe_unchunked)
    encoder_dp: bool = False  # the vision tower runs data-parallel (mm_profiling.py encoder_data_parallel)


def resolve(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, e: Era) -> Resolved:
    s = cfg.settings
    dtype = checks.resolve_dtype(cfg, model, gpu)
    derived = checks.derived_max_len(model, e, bool(s.get("disable_sliding_window")))
    max_len = s.get("max_model_len") or derived
    if max_len == "auto" and not e.auto_max_model_len:
        max_len = derived
    d_tokens, d_seqs = batch_defaults(e, gpu.name, gpu.memory_bytes, nvml_reports_memory(gpu))
    chunked = s.get("enable_chunked_prefill")
    if chunked is None:
        # V1: on for generative models. V0: on only for max_model_len > 32K (with 512 / 2048 tokens)
        chunked = e.v1 or (isinstance(max_len, int) and max_len > 32768 and v0_auto_chunked(s, model, e))
        if not e.v1 and chunked:
            d_tokens = 512 if vtuple(e.version) < (0, 7, 0) else 2048
    seqs = s.get("max_num_seqs") or d_seqs
    tokens = s.get("max_num_batched_tokens")
    if tokens is None:
        tokens = d_tokens
        if not chunked and isinstance(max_len, int):
            tokens = max(max_len, tokens)
        if isinstance(max_len, int):
            tokens = min(seqs * max_len, tokens)
    if s.get("max_num_seqs") is None:
        seqs = min(seqs, tokens)
    # DeepSeek-V4: the sparse MLA backend's only kernel block size (models/deepseek_v4/sparse_mla.py)
    block = s.get("block_size") or (256 if is_deepseek_v4(model) else 64 if latent_cache(model) else 16)
    kv_dtype = s.get("kv_cache_dtype") or "auto"
    if kv_dtype == "auto" and glm_dsa_fp8_default(model, gpu.compute_capability, vtuple(e.version)):
        kv_dtype = "fp8_e4m3"
    if kv_dtype == "auto":
        kv_dtype = dtype
    quant_override = s.get("quantization")
    # a quantized checkpoint's own config sets the storage (vLLM rejects a --quantization of another
    # family, VLLM014; within a family, e.g. modelopt for an NVFP4 checkpoint, the checkpoint's wins)
    scheme = scheme_for(model.quantization, None if model.quantization else quant_override or None)
    if not model.quantization and online_shorthand(quant_override):  # 0.22+ online shorthands (fp8_per_tensor, ...)
        scheme = online_shorthand(quant_override)
    eager = bool(s.get("enforce_eager")) or str(s.get("optimization_level", "")) == "0"
    util = s.get("gpu_memory_utilization")
    pp = int(s.get("pipeline_parallel_size") or 1)
    layers = max(1, model.num_hidden_layers)
    if pp > layers:  # every stage holds at least one layer; more stages would only be empty
        note = f"pipeline parallel size {pp} is more than the model's {layers} layers; planned as {layers} stages"
        if note not in cfg.assumptions:
            cfg.assumptions.append(note)
        pp = layers
    return Resolved(dtype=dtype, tp=int(s.get("tensor_parallel_size") or 1), pp=pp,
                    util=e.default_util if util is None else float(util), max_model_len=max_len, derived_len=derived,
                    max_num_seqs=int(seqs), max_num_batched_tokens=int(tokens), chunked_prefill=bool(chunked),
                    block_size=int(block), kv_dtype=kv_dtype, scheme=scheme, enforce_eager=eager,
                    version=vtuple(e.version), dp=int(s.get("data_parallel_size") or 1),
                    expert_parallel=bool(s.get("enable_expert_parallel")),
                    mxfp4=mxfp4_backend(vtuple(e.version), gpu.compute_capability, cfg.env, cfg.site.image if cfg.site else None),
                    marlin_cc=gpu.compute_capability >= checks.marlin_min_capability(vtuple(e.version)),
                    encoder_dp=encoder_data_parallel(model, s, vtuple(e.version), int(s.get("tensor_parallel_size") or 1)))


def v0_auto_chunked(s: dict, model: ModelSpec, e: Era) -> bool:
    """Whether V0 turns chunked prefill on by itself for a context over 32K
    (engine/arg_utils.py::EngineArgs.create_engine_config, from 0.5.3): not with a sliding
    window, speculative decoding or LoRA; not with prefix caching before 0.6.1; not for
    Mamba-style layers from 0.6.1; not for multimodal models from 0.6.2."""
    v = vtuple(e.version)
    if v < (0, 5, 3):
        return False
    sliding = any(k == "sliding" for k in model.kinds()) and not s.get("disable_sliding_window")
    if sliding or s.get("speculative_config") or s.get("enable_lora"):
        return False
    if v < (0, 6, 1) and s.get("enable_prefix_caching"):
        return False
    if v >= (0, 6, 1) and any(k in ("mamba", "linear") for k in model.kinds()):
        return False
    return not (v >= (0, 6, 2) and model.vision_params > 0)


def plan(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int) -> MemoryPlan:
    model = as_loaded(cfg, model)  # --rope-scaling / --hf-overrides, as this release applies them
    e = era(cfg.version, cfg.env)
    if fallback := v0_fallback(cfg, model, gpu, e):  # 0.8 - 0.10 run V0 for what V1 lacks (v1_oracle.py)
        e = replace(e, v1=False)
    r = resolve(cfg, model, gpu, e)
    out = MemoryPlan(engine="vllm", engine_version=e.version, outcome="started", memory=DeviceMemory(),
                     parallel={"tensor": r.tp, "pipeline": r.pp, "data": int(cfg.settings.get("data_parallel_size") or 1)})
    out.findings.extend(checks.config_checks(cfg, model, gpu, count, r, e))
    out.findings.extend(architecture_check(cfg, model, out.assumptions))
    if fallback:
        out.assumptions.append(v0_note(e.version, fallback))
    total = gpu.memory_bytes
    budget = math.ceil(total * r.util) if e.ceil_budget else int(total * r.util)
    try:
        kv_db = dtype_bytes(r.kv_dtype)
    except KeyError:  # VLLM015 names the invalid value; plan as `auto` meanwhile
        kv_db = dtype_bytes(r.dtype)
    raw_kv = str(cfg.settings.get("kv_cache_dtype") or ("fp8_e4m3" if r.kv_dtype == "fp8_e4m3" else "auto"))
    if fp8_ds_mla(model, raw_kv, gpu.compute_capability, r.version, cfg.settings, cfg.env):  # the latent row's bytes, as one figure per latent element
        kv_db = DS_MLA_ROW / (model.kv_lora_rank + model.qk_rope_head_dim)
    dcp = int(cfg.settings.get("decode_context_parallel_size") or 1) * pcp_kv_shards(cfg.settings, r.version)
    hybrid = not cfg.settings.get("disable_hybrid_kv_cache_manager") and e.v1 and e.hybrid_kv_manager
    state_blocks, r.block_size, state_page, state_block = hybrid_state(
        cfg.settings, model, r.dtype, r.tp, r.version, r.block_size, kv_db, cfg.env) if hybrid else (None, r.block_size, 0, 0)
    kinds = layer_kinds(model, hybrid, bool(cfg.settings.get("disable_sliding_window")), state_blocks, bool(state_block))
    # up to 0.9.0 V1 checks one request against the sliding-window specs, then sizes every layer as
    # full attention (kv_cache_utils.py::get_kv_cache_config: check_enough_kv_cache_memory before
    # unify_hybrid_kv_cache_specs)
    check_kinds = layer_kinds(model, True, bool(cfg.settings.get("disable_sliding_window"))) \
        if e.v1 and not e.hybrid_kv_manager else kinds
    v4 = is_deepseek_v4(model)
    if e.v1 and not v4 and speculative(cfg.settings)[0] in DRAFTER_LAYER_METHODS:
        kinds.append(("full", 0))  # the drafter's attention layer joins the target's pool (DRAFTER_LAYER_METHODS)
    drafter, drafter_note = dflash.drafter(cfg.settings, r.version) if e.v1 and not v4 else (None, "")
    if drafter:  # the DFlash drafter's layers: a KV-cache type of their own in the same pool (engines/vllm/dflash.py)
        kinds.extend(dflash.layer_kinds(drafter, r.version))
        drafter_note = dflash.refusal(drafter, r.version, model_runner_v2(model, r, cfg.env, cfg.settings))
        if dflash.kv_bytes_per_token(drafter, r.tp, kv_db, dtype_bytes(r.dtype), r.version) != \
                layer_bytes_per_token(model, kv_db, r.tp):
            drafter_note = drafter_note or "the DFlash drafter's KV page differs from the target's; sized at the target's page"
    out.kv_bytes_per_token = kv_dsv4.bytes_per_token(model, r.block_size) if v4 else \
        full_kv_bytes_per_token(model, kv_db, r.tp)
    in_flight = in_flight_tokens(cfg.settings, r.version, r.max_num_batched_tokens, r.pp,  # async_sched.py
                                 pooling_runner(model, cfg.settings, e.v1), model_runner_v2(model, r, cfg.env, cfg.settings))
    max_len = r.max_model_len if isinstance(r.max_model_len, int) else r.derived_len
    # the MTP module's weights load with the model (weights.py MTP_MODULE; DeepSeek-V4's layout is not modelled)
    mtp_weights = e.v1 and speculative(cfg.settings)[0] == "mtp" and not is_deepseek_v4(model)
    weights = [w + lora for w, lora in zip(stage_weights(model, r, mtp_weights),
                                           lora_stage_bytes(model, r, cfg.settings), strict=True)]
    if drafter:  # the drafter loads with the model, on the last stage (engines/vllm/dflash.py)
        weights[-1] += dflash.weight_bytes(drafter, r.tp, dtype_bytes(r.dtype))
    if model.vision:  # Qwen3-VL's deepstack buffers are built with the model (encoder.py deepstack_buffer_bytes)
        from servefit.engines.vllm.encoder import deepstack_buffer_bytes

        buf = deepstack_buffer_bytes(model, cfg.settings, r.max_num_batched_tokens, dtype_bytes(r.dtype))
        weights = [w + buf for w in weights]
    offload = int(min(float(cfg.settings.get("cpu_offload_gb") or 0), 1 << 30) * GiB)  # past every weight: all
    stages = pp_layers(len(kinds), r.pp) if kinds else [0] * r.pp
    devices: list[DeviceMemory] = []
    blocks_per_stage: list[int] = []
    lay = None
    worker_act = worker_avail = None
    for st in range(r.pp):
        w = max(0, weights[st] - offload)
        last = st == r.pp - 1
        # an attention-free model (encoder-only pooling) is not profiled: no KV cache to size
        v2 = model_runner_v2(model, r, cfg.env, cfg.settings)
        fi, kept = runner_v2.warmup_sampler(model, r, gpu, cfg.env, v2, last) or \
            (bool(flashinfer_sampler(r, cfg.env, cfg.site.packages if cfg.site else [])), 0)
        act = 0 if attention_free(model) else activation_peak(model, r, last, e.v1, cfg.settings, v2, fi,
                                                              drafter.target_layers if drafter else 0, kept)
        marlin = r.marlin_cc and str(cfg.settings.get("quantization") or "") != "gptq"  # GPTQ runs gptq_marlin
        tails = (segments.weight_tail_bytes(model, dtype_bytes(r.dtype), r.tp, marlin, segments.workspace_sms(gpu, r.version))
                 if r.pp == 1 and (r.scheme is None or r.scheme.name == "gptq") else 0)
        non_torch = non_torch_bytes(r.tp * r.pp, r.tp, gpu, r.version, e.v1, cfg.env, tails,
                                    repacked=r.scheme is not None)  # segments.py
        # Model Runner V2's request, input and sampler tensors: consumed memory from 0.26.1 (runner_v2.py)
        non_torch += runner_v2.persistent_bytes(model, r, cfg.settings, v2, last,
                                                pooling_runner(model, cfg.settings, e.v1), max_len)
        non_torch += unified.page_cache(gpu, e, w, cfg.settings)
        n_graphs, cg = graph_memory(model, r, e, pp_layers(model.num_hidden_layers, r.pp)[st], cfg, gpu, last)
        cg_budget = graph_estimate(model, r, e, cfg, cg, gpu) if graphs_budgeted(model, r, e, cfg) else 0
        kv_override = cfg.settings.get("kv_cache_memory_bytes")
        avail = int(kv_override) if kv_override else budget - w - act - non_torch - cg_budget
        start = sum(stages[:st])
        lay = layout(model, kinds[start:start + stages[st]], kv_db, r.tp, r.block_size, e, state_page, state_block)
        check_lay = lay if check_kinds is kinds else layout(model, check_kinds[start:start + stages[st]], kv_db, r.tp,
                                                              r.block_size, e)
        if v4:  # per-layer compressed, indexer, window and state caches, packed (engines/vllm/kv_dsv4.py)
            mtp = 1 if speculative(cfg.settings)[0] == "mtp" and last else 0
            lay = check_lay = kv_dsv4.layout(kv_dsv4.stage(model, start, stages[st]), mtp, r.block_size)
        blocks = max(0, avail // lay.bytes_per_block) if lay.bytes_per_block else 0
        blocks = int(cfg.settings.get("num_gpu_blocks_override") or blocks)  # kvcache.override_check
        blocks_per_stage.append(blocks)
        kv = blocks * lay.bytes_per_block
        used = w + act + non_torch + kv + cg
        devices.append(DeviceMemory(total=total, budget=budget, weights=w, activation_peak=act, non_torch=non_torch,
                                    cuda_graphs=cg, kv_cache=kv, free_headroom=total - used,
                                    label=f"PP stage {st}" if r.pp > 1 else ""))
        if st == 0:
            # what the run keeps (MoE workspace, Triton top-k buffer): from 0.26.1 logged as consumed memory
            held = held_after_profile(model, r) + triton_topk_buffer(model, r, gpu, cfg.env, v2, last) if act else 0
            # "consumed memory (weights + non-torch)" as 0.26.1+ logs it: total_consumed takes in what the run keeps
            first_consumed = w + non_torch + held if r.version >= CONSUMED_FROM else 0
            first_graphs, first_avail, first_logged_act = n_graphs, avail, logged_activation(
                act - held, cg_budget, r.version)
            released = capture.capture_release(model, r, e, gpu, cfg, v2) if cg else capture.Released()
            first_logged_cg = capture.logged_graph_bytes(cg, released)
            if not e.v1 and r.tp > 1 and last and act and not kv_override:  # the non-driver workers (detail.py)
                worker_act = activation_peak(model, r, False, False, cfg.settings)
                worker_avail = avail + act - worker_act
    assert lay is not None
    worst = min(range(r.pp), key=lambda i: blocks_per_stage[i])
    out.memory = devices[worst]
    out.devices = devices if r.pp > 1 else []
    num_blocks = min(blocks_per_stage)
    avail = kvcache.override_check(cfg.settings, e.v1, r.version, lay.bytes_per_block, first_avail)
    out.detail = VllmDetail(available_kv_cache_bytes=first_avail, logged_activation_bytes=first_logged_act,
                            logged_consumed_bytes=first_consumed,
                            cuda_graph_sizes=first_graphs, logged_cuda_graph_bytes=first_logged_cg,
                            block_size=r.block_size, num_gpu_blocks=num_blocks, kv_groups=len(lay.groups),
                            max_num_seqs=r.max_num_seqs, max_num_batched_tokens=r.max_num_batched_tokens,
                            gpu_memory_utilization=r.util, dtype=r.dtype, kv_cache_dtype=r.kv_dtype,
                            worker_activation_bytes=worker_act, worker_available_kv_cache_bytes=worker_avail)
    _assume(out, cfg, model, r, e, state_blocks is not None)
    if drafter_note:
        out.assumptions.append(drafter_note)
    if note := mxfp4_note(model, r, gpu.compute_capability):
        out.assumptions.append(note)
    captured = any(d.cuda_graphs for d in devices)
    out.assumptions.extend(unified.notes(gpu, e, budget, graphs_budgeted(model, r, e, cfg) and captured, captured))
    out.assumptions.extend(non_torch_notes(gpu, r.version, e.v1, r.tp, cfg.env))
    if note := capture.capture_note(released, e.version):
        out.assumptions.append(note)
    if note := flashinfer_note(model, r, e, gpu, cfg):
        out.assumptions.append(note)
    outcome(out, cfg, model, gpu, r, e, (lay, check_lay), num_blocks, avail, max_len, in_flight, dcp, budget)
    return out


def _assume(out: MemoryPlan, cfg: EngineConfig, model: ModelSpec, r: Resolved, e: Era, state_planned: bool) -> None:
    s = cfg.settings
    a = out.assumptions
    for note in (main_build_note(cfg.version), before_modelled_note(cfg.version),
                 tokens_fix_note(cfg.version) if (out.detail.resolved("kv_groups") or 0) > 1 else None):
        if note:
            a.append(note)
    # only what the command leaves unset is a default (`--max-num-seqs 10` is the user's own)
    unset = [f"{k}={v}" for k, v in (("max_num_seqs", r.max_num_seqs), ("max_num_batched_tokens", r.max_num_batched_tokens))
             if s.get(k) is None]
    if unset:
        a.append(f"scheduler default{'s' if len(unset) > 1 else ''} for this GPU: {', '.join(unset)}")
    if s.get("gpu_memory_utilization") is None:
        a.append(f"gpu_memory_utilization={r.util} (vLLM {e.version} default)")
    if is_deepseek_v4(model):
        a.append(f"DeepSeek-V4 KV cache as vLLM 0.33.0 builds it: per layer an fp8_ds_mla sliding-window cache, the "
                 f"compressed and indexer caches and fp32 compressor states, packed in blocks of {r.block_size} "
                 f"tokens ({out.kv_bytes_per_token:,} bytes per token of context, plus the windows and states per "
                 f"request); earlier releases may pack them differently")
    a.append("activation peak, non-torch memory and CUDA-graph memory are predicted from terms calibrated on "
             "public start-up logs; vLLM measures them at start")
    if note := sampler_note(model, r, e, cfg):
        a.append(note)
    if not graphs_budgeted(model, r, e, cfg) and not r.enforce_eager:
        a.append("CUDA graphs are captured after the KV cache is sized (" + (
            "Model Runner V2 budgets no estimate for them before 0.29)" if e.cudagraph_subtracted
            else "not subtracted before 0.20)"))
    if note := compile_cache_note(r, e, s):
        a.append(note)
    if r.scheme is not None:
        note = f"weights stored as {r.scheme.name} ({r.scheme.bytes_per_param:.3f} bytes per quantized parameter)"
        if r.scheme.experts_bytes:
            note += f", routed experts FP4 ({r.scheme.experts_bytes:.3f} bytes per parameter)"
        g = param_groups(model)
        kept = sum(kept_params(model, g, r.scheme) or [])
        if kept and g.linear:
            note += (f"; {kept / g.linear:.0%} of the linear-layer parameters stay {r.dtype}, as the checkpoint's "
                     f"skip list says (modules_to_not_convert / ignore)")
        a.append(note)
    if model.vision and (enc := encoder_profile(model, r, s, e.v1)):
        a.append(f"vision encoder profiling estimated, not calibrated: {enc.items} dummy {enc.modality} item(s) of "
                 f"{enc.tokens_per_item:,} tokens" + (f"; the LM profiling forward runs {enc.lm_tokens:,} tokens"
                                                      if enc.lm_tokens else ""))
    if (model.mamba or {}).get("kind") == "kda":
        # Kimi-Linear / Kimi-K3: vllm/models/kimi_k3/nvidia/kda.py (fp32 chunked-prefill buffers; get_kv_cache_spec
        # num_prefill_checkpoint_blocks) and attn_res.py (one hidden-state row per residual block and token)
        a.append("Kimi Delta Attention layers: the chunked-prefill working buffers, the prefill checkpoint state "
                 "block and Kimi-K3's attention-residual buffers are not in the activation estimate, which can "
                 "overstate the KV cache by a few GiB (a Kimi-Linear start-up log showed about 3 GiB)")
    if state_planned and (note := all_mode_note(s, model, r.version)):
        a.append(note)
    if (any(k in ("mamba", "linear") for k in model.kinds()) or model.mamba) and not state_planned:
        # Falcon-H1 (a mixer in every layer), releases before the hybrid KV-cache manager
        a.append("recurrent-state (Mamba / linear attention) layers are not counted in the KV cache")
