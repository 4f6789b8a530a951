"""SGLang's KV pool replayed (python/sglang/srt/...):

- model_executor/model_runner.py::ModelRunner.profile_max_num_token (0.4 - 0.5.x; newest:
  model_executor/pool_configurator.py): rest = available after loading weights
  - pre_model_load_memory x (1 - mem_fraction_static); max_total_num_tokens =
  int(rest x 2^30 // cell_size), cell_size = this rank's KV bytes per token; pre_model_load_memory is the
  free memory SGLang reads (utils/common.py::get_available_gpu_memory; MemAvailable on a unified-memory
  GPU: device_memory.py);
- ModelRunner.init_memory_pool: min with --max-total-tokens (warning when larger), rounded
  down to page_size, "Not enough memory. Please try to increase --mem-fraction-static" when <= 0;
  hybrid sliding-window models split the pool (set_num_token_hybrid / HybridSWAPoolConfigurator);
- managers/tp_worker.py: max_running_requests = min(max_total_num_tokens // 2 or the flag,
  req_to_token_pool.size); max_req_len = min(context_len - 1, max_total_num_tokens - 1),
  max_req_input_len = max_req_len - 5.
"""

from __future__ import annotations

from dataclasses import dataclass

from servefit.core import DeviceMemory, EngineConfig, MemoryPlan, UsageError
from servefit.engines.sglang import defaults as d
from servefit.engines.sglang import device_memory, dsv4, dsv4_weights
from servefit.engines.sglang.checks import capacity, checks, finding_at, reserve_finding
from servefit.engines.sglang.detail import SglangDetail
from servefit.engines.sglang.detail import of as detail_of
from servefit.engines.sglang.forward import activation_bytes
from servefit.engines.sglang.plan_dsv4 import dsv4_pool, dsv4_pools, release
from servefit.engines.sglang.state_pool import StatePool, state_pool
from servefit.hardware.spec import GpuSpec
from servefit.memory.dtypes import dtype_bytes
from servefit.memory.weights import scheme_for, weight_bytes
from servefit.models.arch_deepseek_v4 import is_deepseek_v4
from servefit.models.arch_inkling import is_inkling
from servefit.models.arch_inkling import kv_shape as inkling_kv_shape
from servefit.models.arch_mimo_v2 import is_mimo_v2, kv_shape
from servefit.models.spec import ModelSpec
from servefit.rules.registry import rule

GiB = 2**30
MiB = 2**20
# Calibrated on the "Load weight begin. avail mem=" lines of the public logs in
# benchmarks/accuracy/cases/sglang.yaml: memory gone before the weights load (CUDA context,
# cuBLAS; plus NCCL / custom all-reduce buffers when TP > 1), and what loading takes beyond the
# checkpoint's tensors ("mem usage" minus parameter bytes: rotary caches, workspaces).
CONTEXT = int(0.40 * GiB)
DIST_EXTRA = int(0.13 * GiB)
LOAD_EXTRA = int(0.20 * GiB)
KV_DTYPE_BYTES = {"fp8_e5m2": 1, "fp8_e4m3": 1, "mxfp8": 1, "bf16": 2, "bfloat16": 2,
                  "fp4_e2m1": 0.5 + 1 / 16, "nvfp4": 0.5 + 1 / 16, "fp4_mx_block16": 0.5 + 1 / 16}


@dataclass
class Resolved:
    """An SGLang server's settings once the release's defaults fill what the command line leaves unset:
    parallelism, memory fraction, context, KV bytes per token, page size."""

    e: d.Era
    tp: int
    pp: int
    dp: int
    attn_tp: int
    gpu_mem: float | None  # MiB, as nvidia-smi reports
    chunk: int
    graph_bs: int
    fraction: float
    reserved_mib: float
    context_len: int
    derived_len: int
    kv_bytes: float
    page: int


def derived_context_len(model: ModelSpec) -> int:
    """srt/utils/hf_transformers_utils.py::get_context_length: max_position_embeddings x the
    rope factor, unless the scaling carries original_max_position_embeddings or is llama3."""
    rs = model.rope_scaling or {}
    factor = float(rs.get("factor", 1) or 1)
    if "original_max_position_embeddings" in rs or rs.get("rope_type", rs.get("type")) == "llama3":
        factor = 1
    return int(factor * (model.max_position_embeddings or 2048))


def resolve(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec) -> Resolved:
    s = cfg.settings
    e = d.era(cfg.version)
    tp, pp, dp = int(s.get("tp_size") or 1), int(s.get("pp_size") or 1), int(s.get("dp_size") or 1)
    dpa = bool(s.get("enable_dp_attention"))
    gpu_mem = device_memory.capacity_mib(gpu)  # get_device_memory_capacity (device_memory.py)
    chunk, bs = d.chunk_and_graph_bs(e, gpu_mem, tp)
    if s.get("chunked_prefill_size") is not None:
        chunk = int(s["chunked_prefill_size"])
    # server_args.py: --cuda-graph-max-bs is a deprecated alias of --cuda-graph-max-bs-decode (0.5.16+),
    # both stored in cuda_graph_max_bs_decode
    set_bs = next((s[k] for k in ("cuda_graph_max_bs_decode", "cuda_graph_max_bs") if s.get(k) is not None), None)
    if set_bs is not None and str(set_bs).strip().isdigit():
        bs = int(str(set_bs).strip())
    f, reserved = d.mem_fraction_static(e, gpu_mem, tp, pp, chunk, int(s.get("max_prefill_tokens") or 16384), bs,
                                        not s.get("disable_cuda_graph"), dp if dpa else 1,
                                        s.get("speculative_algorithm"), model.is_mla)
    if s.get("mem_fraction_static") is not None:
        f = float(s["mem_fraction_static"])
    derived = derived_context_len(model)
    ctx = s.get("context_length")
    kv = s.get("kv_cache_dtype") or "auto"
    kv_bytes = KV_DTYPE_BYTES.get(kv, dtype_bytes(_dtype(s, model)))
    page = int(s.get("page_size") or (64 if s.get("attention_backend") == "flashmla" else 1))
    return Resolved(e=e, tp=tp, pp=pp, dp=dp, attn_tp=max(1, tp // dp) if dpa else tp, gpu_mem=gpu_mem, chunk=chunk,
                    graph_bs=bs, fraction=f, reserved_mib=reserved, context_len=int(ctx) if ctx else derived,
                    derived_len=derived, kv_bytes=kv_bytes, page=max(page, 1))


def _dtype(s: dict, model: ModelSpec) -> str:
    dt = s.get("dtype") or "auto"
    if dt in ("auto", None):
        return "float16" if model.torch_dtype in ("float32", "float") else model.torch_dtype or "bfloat16"
    return {"half": "float16", "float": "float32"}.get(dt, dt)


# Which models get the split (full + sliding-window) KV pool:
# - 0.4.10 - 0.5.5: ModelRunner.__init__ marks every model whose class has
#   get_attention_sliding_window_size (models/gemma2.py, gemma3_*.py, gpt_oss.py, ...) except Llama4;
# - 0.5.6+: configs/model_config.py::is_hybrid_swa_model, an architecture allowlist (Gemma-2/3 left out).
SWA_METHOD_TYPES = {"gemma2", "gemma3", "gemma3_text", "gemma3n", "gemma3n_text", "gpt_oss"}
HYBRID_SWA_ARCHS = {"Llama4ForConditionalGeneration", "GptOssForCausalLM", "MiMoV2FlashForCausalLM",
                    "Step3p5ForCausalLM", "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration",
                    "GraniteSWAForCausalLM", "GraniteMoeSWAForCausalLM", "LagunaForCausalLM",
                    "InklingForConditionalGeneration"}


def hybrid_swa(model: ModelSpec, e: d.Era) -> bool:
    if e.v < (0, 4, 10):
        return False
    if e.v < (0, 5, 6):
        return model.model_type in SWA_METHOD_TYPES
    return model.architecture in HYBRID_SWA_ARCHS


def offloaded_bytes(model: ModelSpec, r: Resolved, weights: int, offload_gib: float, dtype: str) -> int:
    """Weight bytes --cpu-offload-gb moves to host memory on one rank. utils/offloader.py::OffloaderV1
    .maybe_offload_to_cpu, applied by utils/common.py::make_layers to the decoder layers only, moves their
    parameters one by one while fewer than cpu_offload_gb x 2^30 bytes have moved: the embedding, the
    lm_head and the final norm stay on the GPU whatever the flag says."""
    if offload_gib <= 0:
        return 0
    from servefit.memory.params import param_groups

    g = param_groups(model)
    kept = int((g.embed + g.lm_head) * dtype_bytes(dtype) / r.tp)  # vocab-parallel over TP, on the first/last stage
    return int(min(offload_gib * GiB, max(0, weights - kept)))


def layers_on_rank(model: ModelSpec, pp: int) -> list[str]:
    kinds = model.kinds()
    if all(k == "none" for k in kinds):
        # an encoder-only embedding model still gets a token KV pool sized over every layer
        # (model_runner.py::profile_max_num_token counts num_hidden_layers, not attention types)
        kinds = ["full"] * len(kinds)
    per = -(-len(kinds) // max(pp, 1))
    return kinds[:per]  # the first stage holds at least as many layers as any other


def cell_size(model: ModelSpec, r: Resolved, kinds: list[str]) -> tuple[float, float, int, int]:
    """(bytes per token of one full layer, of one sliding layer, #full layers, #sliding layers) on this
    rank (model_executor/pool_configurator.py: MHA num_kv_heads/attn_tp x (head_dim + v_head_dim) x bytes,
    the SWA layers swa_num_kv_heads x (swa_head_dim + swa_v_head_dim): MiMo-V2-Flash's and Inkling's differ;
    MLA (kv_lora_rank + qk_rope_head_dim) x bytes, not split by TP)."""
    local = ("sliding", "chunked") if model.architecture.startswith("Llama4") else ("sliding",)
    full = sum(1 for k in kinds if k in ("full", "chunked") and k not in local)
    swa = sum(1 for k in kinds if k in local)
    if model.is_mla:
        per_layer = (model.kv_lora_rank + model.qk_rope_head_dim) * r.kv_bytes
    elif is_mimo_v2(model) or is_inkling(model):  # per-kind KV heads (Inkling: models/arch_inkling.py)
        shape = inkling_kv_shape if is_inkling(model) else kv_shape
        (kf, k, v), (ks, _, _) = shape(model, "full"), shape(model, "sliding")
        return (max(1, kf // r.attn_tp) * (k + v) * r.kv_bytes, max(1, ks // r.attn_tp) * (k + v) * r.kv_bytes,
                full, swa)
    else:
        per_layer = max(1, model.num_key_value_heads // r.attn_tp) * model.head_dim * 2 * r.kv_bytes
    return per_layer, per_layer, full, swa


@rule("SGL004", "SGL005", "SGL007")
def plan(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int) -> MemoryPlan:
    s = cfg.settings
    if model.kinds() and all(k == "mamba" for k in model.kinds()):
        # sglang/srt/models has no attention-free state-space model (Mamba, Falcon-Mamba, Mamba2); the
        # mamba pool beside a token pool (Nemotron-H, Qwen3-Next) assumes attention layers
        raise UsageError(f"SGLang has no native model for {model.name}, an attention-free state-space model "
                         f"({model.architecture}); servefit cannot plan it (vLLM serves it)")
    v4 = is_deepseek_v4(model)
    if v4 and d.vtuple(cfg.version) < dsv4.FIRST:
        raise UsageError(f"SGLang {cfg.version} has no DeepSeek-V4 model (sglang/srt/models/deepseek_v4.py arrived in "
                         f"0.5.12), so it cannot serve {model.name}; use SGLang 0.5.12 or later")
    r = resolve(cfg, model, gpu)
    if v4:  # arg_groups/model_overrides/deepseek_v4.py: page_size 256 whatever the flag says
        r.page = dsv4.PAGE
    out = MemoryPlan(engine="sglang", engine_version=r.e.version, outcome="started", memory=DeviceMemory(),
                     parallel={"tensor": r.tp, "pipeline": r.pp, "data": r.dp})
    out.findings.extend(checks(cfg, model, gpu, count, r))
    total = gpu.memory_bytes
    # ModelRunner.init_torch_distributed: get_available_gpu_memory, the free memory (device_memory.py)
    pre = total - CONTEXT - (DIST_EXTRA if r.tp * r.pp > 1 else 0) - device_memory.held_by_others(gpu)
    sch = scheme_for(model.quantization, s.get("quantization"))
    weights = int(weight_bytes(model, dtype_bytes(_dtype(s, model)), sch) / (r.tp * r.pp))
    if v4 and sch is not None:  # parts SGLang keeps whole on every rank (dsv4_weights.py)
        weights += dsv4_weights.extra_bytes(model, r.tp, sch.bytes_per_param)
    weights = weights - offloaded_bytes(model, r, weights, float(s.get("cpu_offload_gb") or 0), _dtype(s, model))
    weights += LOAD_EXTRA
    rest = (pre - weights) - pre * (1 - r.fraction)
    state = state_pool(cfg, model, r.tp, r.pp, r.dp, rest, r.attn_tp) if rest > 0 else None  # CCA / sconv states
    rest -= state.bytes if state is not None else 0
    kinds = layers_on_rank(model, r.pp)
    per_full, per_swa, n_full, n_swa = cell_size(model, r, kinds)
    hybrid = n_swa > 0 and n_full > 0 and hybrid_swa(model, r.e) and not s.get("disable_hybrid_swa_memory")
    ratio = float(s.get("swa_full_tokens_ratio") or 0.8)
    if is_inkling(model) and "swa_full_tokens_ratio" not in cfg.explicit:
        ratio = 0.1  # arg_groups/model_overrides/inkling.py _inkling_overrides
    if hybrid:  # full_layer_tokens x (full cell + ratio x swa cell) = rest (_recompute_cell_size)
        cell = per_full * n_full + ratio * per_swa * n_swa
    else:
        cell = per_full * n_full + per_swa * n_swa
    tokens = int(rest // cell) if cell and rest > 0 else (0 if rest <= 0 else 0)
    pools = dsv4_pools(cfg, model, r, int(rest)) if v4 else None
    if pools is not None:  # DSV4PoolConfigurator: the full pool of compressed attention
        tokens, cell = pools.full, pools.bytes_per_full_token
    profiled = tokens
    cap = s.get("max_total_tokens")
    if cap is not None and tokens > 0:
        if cap > tokens:
            out.findings.append(finding_at("SGL007", f"max_total_tokens={cap} is larger than the profiled value {tokens}. "
                                   "Use the profiled value instead.", cfg, "max_total_tokens"))
        tokens = min(tokens, int(cap))
    tokens = tokens // r.page * r.page
    kv_bytes = int(tokens * cell) + (state.bytes if state is not None else 0)
    if pools is not None:
        pools = dsv4_pools(cfg, model, r, int(rest), cap=tokens)
        kv_bytes += pools.c128_state_fixed
    budget = int(pre * r.fraction)
    step = r.chunk if r.chunk > 0 else max(int(s.get("max_prefill_tokens") or 16384), r.context_len)
    act = activation_bytes(model, r.tp, step, r.graph_bs, dtype_bytes(_dtype(s, model)))
    cg = int(r.graph_bs * 2 * MiB) if not s.get("disable_cuda_graph") else 0
    out.memory = DeviceMemory(total=total, budget=budget, weights=weights, activation_peak=act,
                              non_torch=total - pre, cuda_graphs=cg, kv_cache=max(kv_bytes, 0),
                              free_headroom=total - weights - max(kv_bytes, 0) - (total - pre) - act - cg)
    out.kv_bytes_per_token = int(per_full * n_full + per_swa * n_swa)
    out.max_model_len = r.context_len
    out.detail = x = SglangDetail(mem_fraction_static=r.fraction, context_len=r.context_len, chunked_prefill_size=r.chunk,
                                  cuda_graph_max_bs=r.graph_bs, page_size=r.page, profiled_max_total_num_tokens=profiled,
                                  pre_model_load_gib=round(pre / GiB, 2))
    if r.reserved_mib and s.get("mem_fraction_static") is None:
        x.reserved_mem_mib = round(r.reserved_mib, 1)
    out.messages.append(f"Load weight begin. avail mem={pre / GiB:.2f} GB")
    out.messages.append(f"Load weight end. avail mem={(pre - weights) / GiB:.2f} GB, mem usage={weights / GiB:.2f} GB.")
    _assume(out, cfg, model, gpu, r, sch is not None, state is not None)
    if any(f.severity == "error" for f in out.findings + cfg.findings):  # argparse / launch checks refuse
        out.outcome = "rejected_config"
        return out
    if weights > pre:
        out.outcome = "oom_at_load"
        out.findings.append(finding_at("SGL005", f"weights need {weights / GiB:.2f} GiB per GPU, {pre / GiB:.2f} GiB is free "
                               f"on the {gpu.name}: torch.OutOfMemoryError while loading", cfg, "model_path"))
        return out
    if pools is not None and rest > 0 and release(r).swa_floor and dsv4.swa_too_small(model, pools.swa):
        out.outcome = "oom_at_load"
        msg = (f"ValueError: SWA pool ({pools.swa} tokens) cannot hold even one request: the prefill admission floor "
               f"is sliding_window_size ({model.sliding_window}) + page_size ({r.page}). Increase "
               "--swa-full-tokens-ratio or the total KV budget.")
        out.messages.append(msg)
        out.findings.append(finding_at("SGL004", msg, cfg, "mem_fraction_static"))
        return out
    if state is not None and state.slots <= 0:
        out.outcome = "oom_at_load"
        msg = (f"Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed max_mamba_cache_size="
               f"{state.slots} (mamba_cache_per_req={state.per_req / MiB:.2f} MB)")
        out.findings.append(finding_at("SGL004", msg, cfg, "mem_fraction_static"))
        return out
    if tokens <= 0:
        out.outcome = "oom_at_load"
        msg = ("Not enough memory. Please try to increase --mem-fraction-static. "
               f"Current value: mem_fraction_static={r.fraction}")
        out.messages.append(f"RuntimeError: {msg}")
        if state is not None and state.bytes > 0 and rest + state.bytes > 0:  # the state pool took it all
            why = (f"the mamba state pool's {state.slots} slots take {state.bytes / GiB:.2f} GiB of the "
                   f"{(rest + state.bytes) / GiB:.2f} GiB left after the weights; lower --max-running-requests or "
                   "set --max-mamba-cache-size")
            out.findings.append(finding_at("SGL004", f"{msg} ({why})", cfg, "max_running_requests"))
            return out
        out.findings.append(finding_at("SGL004", f"{msg} (weights {weights / GiB:.2f} GiB use more than "
                               f"{r.fraction} x {pre / GiB:.2f} GiB)", cfg, "mem_fraction_static"))
        return out
    if pools is not None:
        out = dsv4_pool(out, cfg, r, pools, int(rest))
    else:
        if state is not None:  # mem_cache/memory_pool.py MambaPool's start-up line
            conv = state.conv_bytes if state.conv_bytes or state.ssm_bytes else state.bytes
            out.messages.append(f"Mamba Cache is allocated. max_mamba_cache_size: {state.slots}, conv_state size: "
                                f"{conv / GiB:.2f}GB, ssm_state size: {state.ssm_bytes / GiB:.2f}GB")
            out.assumptions.append(f"the KV cache figure includes SGLang's per-request state pool ({state.bytes / GiB:.2f} "
                                   f"GiB, {state.slots} slots), carved out of the memory left after the weights first")
            if s.get("speculative_algorithm"):
                out.assumptions.append("speculative decoding: the state pool's intermediate (per draft token) states "
                                       "are not modelled; SGLang takes them from the same budget, so fewer KV tokens")
        out = _pool(out, cfg, model, r, tokens, cell, (per_full, per_swa), n_full, n_swa, hybrid, ratio, state)
    if out.outcome == "started" and not any(f.code == "SGL011" for f in out.findings):
        f = reserve_finding(cfg, model, r, out)
        if f is not None:
            out.findings.append(f)
    if s.get("enable_lora") or s.get("lora_paths"):  # --lora-paths turns LoRA on (server_args.py)
        out.assumptions.append("LoRA adapters (--lora-paths, --enable-lora): the GPU buffers SGLang reserves for them "
                               "(LoRAMemoryPool, max_loras_per_batch adapters of max_lora_rank) are not in this plan")
    return out


def _pool(out: MemoryPlan, cfg: EngineConfig, model: ModelSpec, r: Resolved, tokens: int, cell: float,
          per_layer: tuple[float, float], n_full: int, n_swa: int, hybrid: bool, ratio: float,
          state: StatePool | None = None) -> MemoryPlan:
    s = cfg.settings
    per_full, per_swa = per_layer
    swa_tokens = int(tokens * ratio) // r.page * r.page if hybrid else 0
    if hybrid:
        out.messages.append(f"Use Sliding window memory pool. full_layer_tokens={tokens}, swa_layer_tokens={swa_tokens}")
    if model.is_mla:
        out.messages.append(f"KV Cache is allocated. #tokens: {tokens}, KV size: "
                            f"{(tokens + r.page) * per_full * (n_full + n_swa) / GiB:.2f} GB")
    else:
        both = (tokens + r.page) * n_full * per_full + ((swa_tokens if hybrid else tokens) + r.page) * n_swa * per_swa
        _, k, v = kv_shape(model, "full") if is_mimo_v2(model) else (0, 1, 1)  # K and V buffers' widths
        out.messages.append(f"KV Cache is allocated. #tokens: {tokens}, K size: {both * k / (k + v) / GiB:.2f} GB, "
                            f"V size: {both * v / (k + v) / GiB:.2f} GB")
    req_pool = min(max(int(tokens / r.context_len * 512), 2048), 4096)
    if s.get("max_running_requests") is not None:
        req_pool = int(s["max_running_requests"])
    if r.e.req_pool_plus_one:
        req_pool += 1
    dp_div = r.dp if s.get("enable_dp_attention") else 1
    running = min(tokens // 2 if s.get("max_running_requests") is None else int(s["max_running_requests"]) // dp_div,
                  req_pool)
    if state is not None and state.running_cap < running:  # capped by the state pool's slots
        running = state.running_cap
        if r.e.v >= (0, 5, 17):  # kv_cache_configurator.py resolve_max_num_reqs's warning
            out.messages.append(f"max_running_requests is capped to {running} by the mamba state cache "
                                f"(max_mamba_cache_size={state.slots}, {state.per_running} state slots per request)")
    max_req_len = min(r.context_len - 1, tokens - 1)
    out.kv_cache_tokens = tokens
    out.max_concurrency = tokens / r.context_len if r.context_len else 0.0
    x = detail_of(out)
    out.detail = x
    x.max_total_num_tokens, x.max_running_requests, x.max_req_len = tokens, running, max_req_len
    x.max_req_input_len, x.swa_max_total_num_tokens = max_req_len - 5, swa_tokens or None
    out.messages.append(f"max_total_num_tokens={tokens}, chunked_prefill_size={r.chunk}, max_prefill_tokens="
                        f"{int(s.get('max_prefill_tokens') or 16384)}, max_running_requests={running}, "
                        f"context_len={r.context_len}")
    return capacity(out, cfg, r, tokens)


def _assume(out: MemoryPlan, cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, r: Resolved, quantized: bool,
            state_pool_planned: bool = False) -> None:
    s, a = cfg.settings, out.assumptions
    if s.get("mem_fraction_static") is None:
        a.append(f"mem_fraction_static={r.fraction} (SGLang {r.e.version} default for "
                 f"{(r.gpu_mem or 0) / 1024:.1f} GiB GPUs, TP {r.tp})")
    if s.get("chunked_prefill_size") is None:
        a.append(f"chunked_prefill_size={r.chunk} (SGLang {r.e.version} default for this GPU)")
    a.append("memory free before the weights load and the weights' load overhead are estimated from terms "
             "calibrated on public start-up logs; SGLang measures them")
    a.extend(device_memory.notes(gpu))
    if any(k in ("mamba", "linear") for k in model.kinds()) and not state_pool_planned:
        a.append("recurrent-state (Mamba / linear attention) layers: only attention layers are counted and the "
                 "mamba state pool is not carved out")
    if quantized:
        a.append("weights stored quantized as the checkpoint / --quantization says")
