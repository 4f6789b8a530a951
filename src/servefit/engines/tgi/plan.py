"""TGI's start-up replayed: the launcher's defaults and argument validation
(launcher/src/main.rs::main, find_num_shards), the shard's checks (server/.../cli.py::serve,
models/__init__.py::get_model, layers/attention/kv_cache.py::KVCache), the warmup that sizes the
KV cache (models/flash_causal_lm.py::warmup) and the router's checks on the result
(backends/v3/src/lib.rs::connect_backend, backends/v3/src/main.rs; router/src/main.rs before 2.3)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from servefit.core import DeviceMemory, EngineConfig, Finding, MemoryPlan, UsageError
from servefit.engines.tgi import defaults as d
from servefit.engines.tgi import launcher_config
from servefit.engines.tgi import memory as mem
from servefit.engines.tgi.detail import TgiDetail
from servefit.engines.tgi.detail import of as detail_of
from servefit.engines.tgi.era import Era, era
from servefit.hardware.spec import GpuSpec
from servefit.memory.dtypes import dtype_bytes
from servefit.models.spec import ModelSpec
from servefit.rules.catalog import finding
from servefit.rules.registry import rule

GiB = 2**30
AUTO_QUANT = {"gptq": "gptq", "awq": "awq", "exl2": "exl2", "fp8": "fp8", "fbgemm_fp8": "fp8",
              "compressed-tensors": "compressed-tensors"}  # models/__init__.py::get_model


@dataclass
class Resolved:
    """A TGI server's settings once the launcher's defaults for the release fill what the command line leaves
    unset, with the lines the launcher would log about them."""

    e: Era
    shards: int
    shard_error: str | None
    quantize: str | None
    dtype: str
    kv_dtype: str
    attention: str
    prefix_caching: bool
    block: int
    flash: bool
    chunking: bool
    max_input: int | None  # None: decided by the shard at warmup
    max_total: int | None
    prefill: int
    fraction: float
    wiggle: float
    speculate: int
    launcher_logs: list[str] = field(default_factory=list)


def resolve(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int) -> Resolved:
    s, env = cfg.settings, cfg.env
    e = era(cfg.version)
    shard_env = dict(env)
    given = cfg.site is not None and (cfg.site.image or cfg.site.gpu is not None and cfg.site.gpu.scheduler_visible)
    if given and not {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"} & set(env):
        # the CUDA base image's ENV, or the variable Slurm exports: every GPU given to the container / job
        shard_env["NVIDIA_VISIBLE_DEVICES"] = "all"
    shards, err = d.num_shard(s, shard_env, count)
    q = s.get("quantize")
    if q is None and model.quantization:
        q = AUTO_QUANT.get(str(model.quantization.get("quant_method", "")).lower())
    dtype = s.get("dtype") or "float16"  # FlashCausalLM default_dtype (awq/gptq/exl2/marlin force float16)
    kv = s.get("kv_cache_dtype") or dtype
    lc = launcher_config.read(model, e)
    attention, prefix = d.resolve_attention(lc, gpu, e, env, bool(s.get("lora_adapters")))
    if d.flash_decoding(model, e, env):
        attention = "flashdecoding"
    block = d.BLOCK.get(attention, 16) if (e.attention_backends or attention == "flashdecoding") else 16
    flash = d.is_flash(model, e)
    speculate = int(s.get("speculate") or 0)
    # models/model.py::Model.__init__: support_chunking and PREFILL_CHUNKING (models/globals.py: default "0" in
    # 2.4.x, "1" from 3.0.0), off with speculation and off the flashinfer / flashdecoding backends
    chunk_env = env.get("PREFILL_CHUNKING", "1" if e.chunking_default else "0")
    chunking = (e.chunking and flash and chunk_env.lower() in ("1", "true") and not speculate
                and attention in ("flashinfer", "flashdecoding") and model.model_type not in d.NO_CHUNKING)
    max_input = s.get("max_input_tokens", s.get("max_input_length"))
    max_total = s.get("max_total_tokens")
    din, dtot = d.default_lengths(e, lc)
    logs: list[str] = []
    if max_input is None and din is not None:
        max_input = din
        logs.append(f"Default `max_input_tokens` to {din}")
    if max_total is None and dtot is not None:
        max_total = dtot
        logs.append(f"Default `max_total_tokens` to {dtot}")
    fraction = float(s.get("cuda_memory_fraction", 1.0))
    wiggle_env = env.get("TGI_WIGGLE_ROOM") if e.v >= (2, 3, 0) else None
    try:
        wiggle = float(wiggle_env) if wiggle_env is not None else e.wiggle
    except ValueError:
        wiggle = e.wiggle
    prefill = s.get("max_batch_prefill_tokens")
    if prefill is None:
        prefill, plogs = d.default_prefill(e, lc, gpu, max(shards, 1), fraction,
                                           wiggle if wiggle_env is not None else None, max_input,
                                           s.get("max_batch_size"))
        logs += plogs
    return Resolved(e=e, shards=max(shards, 1), shard_error=err, quantize=q, dtype=dtype, kv_dtype=kv,
                    attention=attention, prefix_caching=prefix, block=block, flash=flash, chunking=chunking,
                    max_input=max_input, max_total=max_total, prefill=int(prefill), fraction=fraction, wiggle=wiggle,
                    speculate=speculate, launcher_logs=logs)


def _err(code: str, msg: str, cfg: EngineConfig, setting: str | None, **kw) -> Finding:
    return finding(code, msg, span=cfg.spans.get(setting) if setting else None, setting=setting,
                   site=cfg.site.name if cfg.site else "", **kw)


@rule("TGI012")
def _shard_invalid(msg: str, cfg: EngineConfig, setting: str | None) -> Finding:
    """The launcher or the model code refuses this sharding."""
    return _err("TGI012", msg, cfg, setting)


@rule("TGI003")
def _input_not_below_total(msg: str, cfg: EngineConfig, setting: str | None) -> Finding:
    """max_input_tokens is not below max_total_tokens (launcher, or router after warmup)."""
    return _err("TGI003", msg, cfg, setting)


@rule("TGI005")
def _prefill_below_input(msg: str, cfg: EngineConfig, setting: str | None) -> Finding:
    """max_batch_prefill_tokens is below the input limit."""
    return _err("TGI005", msg, cfg, setting)


@rule("TGI006")
def _prefill_above_batch_total(msg: str, cfg: EngineConfig, setting: str | None) -> Finding:
    """max_batch_prefill_tokens is above max_batch_total_tokens."""
    return _err("TGI006", msg, cfg, setting)


@rule("TGI007")
def _total_above_batch_total(msg: str, cfg: EngineConfig, setting: str | None) -> Finding:
    """max_total_tokens is above max_batch_total_tokens."""
    return _err("TGI007", msg, cfg, setting)


@rule("TGI004", "TGI019")
def launcher_checks(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int, r: Resolved) -> list[Finding]:
    """Argument validation before anything loads, in the launcher's own words (by era)."""
    s, e, out = cfg.settings, r.e, []
    old = e.v < (2, 0, 0)
    if s.get("max_input_tokens") is not None and s.get("max_input_length") is not None:
        out.append(_err("TGI004", f"Invalid argument: Both `max_input_tokens` ({s['max_input_tokens']}) and "
                        f"`max_input_length` ({s['max_input_length']}) are set. Please define only `max_input_tokens` "
                        "as `max_input_length is deprecated for naming consistency.", cfg, "max_input_length"))
    if r.shard_error:
        out.append(_shard_invalid(r.shard_error, cfg, "num_shard" if "num_shard" in cfg.spans else "sharded"))
    if r.quantize == "exl2" and r.shards > 1:
        out.append(_shard_invalid("Invalid argument: Sharding is currently not supported with `exl2` quantization",
                        cfg, "num_shard"))
    a, t = r.max_input, r.max_total
    in_name = "max_input_length" if (old or (s.get("max_input_tokens") is None and "max_input_length" in s)) \
        else "max_input_tokens"
    span_of = "max_input_tokens" if "max_input_tokens" in cfg.spans else "max_input_length"
    if a is not None and t is not None and a >= t:
        if e.v >= (2, 4, 1):
            msg = f"`max_input_tokens`({a}) must be < `max_total_tokens`({t})"
        elif old:
            msg = "`max_input_length` must be < `max_total_tokens`"
        else:
            msg = "`max_input_tokens must be < `max_total_tokens`"
        if "(" not in msg:  # older launchers do not print the values
            msg += f" (max_input_tokens={a}, max_total_tokens={t})"
        out.append(_input_not_below_total(f"Invalid argument: {msg}", cfg, span_of if span_of in cfg.spans else "max_total_tokens"))
    if e.launcher_prefill_checks and a is not None and a > r.prefill:
        out.append(_prefill_below_input(f"Invalid argument: `max_batch_prefill_tokens` must be >= `{in_name}`. "
                        f"Given: {r.prefill} and {a}", cfg, "max_batch_prefill_tokens"))
    bt = d.batch_total_setting(s, e)
    if bt is not None:
        if e.launcher_prefill_checks and r.prefill > bt:
            out.append(_prefill_above_batch_total(f"Invalid argument: `max_batch_prefill_tokens` must be <= "
                            f"`max_batch_total_tokens`. Given: {r.prefill} and {bt}", cfg, "max_batch_total_tokens"))
        if t is not None and t > bt:
            out.append(_total_above_batch_total(f"Invalid argument: `max_total_tokens` must be <= `max_batch_total_tokens`. "
                            f"Given: {t} and {bt}", cfg, "max_batch_total_tokens"))
    for name in ("validation_workers", "max_batch_size"):
        if s.get(name) == 0:
            out.append(_err("TGI019", f"`{name}` must be > 0", cfg, name))
    if s.get("ngrok") and not s.get("ngrok_authtoken"):
        out.append(_err("TGI019", "Invalid argument: `ngrok-authtoken` must be set when using ngrok tunneling",
                        cfg, "ngrok"))
    return out


@rule("TGI011", "TGI013", "TGI015", "TGI016", "TGI018")
def shard_checks(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int, r: Resolved) -> list[Finding]:
    """What the Python shards raise while loading (server/.../cli.py, models/__init__.py,
    custom_modeling/flash_*_modeling.py, layers/attention/kv_cache.py)."""
    s, out = cfg.settings, []
    if s.get("dtype") and r.quantize not in (None, "bitsandbytes", "bitsandbytes-nf4", "bitsandbytes-fp4"):
        out.append(_err("TGI011", "RuntimeError: Only 1 can be set between `dtype` and `quantize`, as they both "
                        "decide how goes the final model.", cfg, "dtype"))
    if count and r.shards > count:
        out.append(_err("TGI015", f"num_shard={r.shards} but only {count} GPU(s) are available to the container: "
                        "the extra shards fail to start (CUDA error: invalid device ordinal)", cfg, "num_shard"))
    if r.shards > 1 and not model.is_mla:
        if model.num_attention_heads % r.shards:
            out.append(_shard_invalid(f"ValueError: `num_heads` must be divisible by `num_shards` (got `num_heads`: "
                            f"{model.num_attention_heads} and `num_shards`: {r.shards}", cfg, "num_shard"))
        elif model.num_key_value_heads % r.shards:
            out.append(_shard_invalid(f"ValueError: `num_key_value_heads` must be divisible by `num_shards` (got "
                            f"`num_key_value_heads`: {model.num_key_value_heads} and `num_shards`: {r.shards}",
                            cfg, "num_shard"))
    kv = s.get("kv_cache_dtype")
    if kv:
        amd = gpu.vendor == "amd"
        if not ((r.attention == "flashinfer" and not amd) or r.attention == "paged"):
            out.append(_err("TGI013", "ValueError: FP8 KV cache is currently only supported for flashinfer on CUDA "
                            "and paged attention on CUDA, ROCm and INTEL IPEX and flashdecoding in Intel IPEX "
                            f"(attention here: {r.attention})", cfg, "kv_cache_dtype"))
        elif amd and kv == "fp8_e5m2":
            out.append(_err("TGI013", "ValueError: float8_e5m2 FP8 KV cache is not supported on AMD ROCm",
                            cfg, "kv_cache_dtype"))
    windowed = model.sliding_window and "full" not in model.kinds()
    cc = gpu.compute_capability
    if windowed and r.max_input is not None and r.max_input > model.sliding_window and cc and cc < 80:
        out.append(_err("TGI016", f"ValueError: The backend cuda does not support sliding window attention that is "
                        f"used by the model type {model.model_type}. To use this model nonetheless with the cuda "
                        "backend, please launch TGI with the argument `--max-input-tokens` smaller than "
                        f"sliding_window={model.sliding_window} (got here max_input_tokens={r.max_input}).",
                        cfg, "max_input_tokens"))
    if r.quantize == "bitsandbytes" and s.get("quantize"):
        out.append(_err("TGI018", "Bitsandbytes is deprecated, use `eetq` instead, which provides better latencies "
                        "overall and is drop-in in most cases.", cfg, "quantize"))
    return out


@rule("TGI008", "TGI014")
def plan(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int) -> MemoryPlan:
    if model.kinds() and all(k == "none" for k in model.kinds()):
        # server/text_generation_server/models/__init__.py::get_model has no encoder-only model type
        raise UsageError(f"text-generation-inference cannot serve {model.name}: it is an encoder-only embedding "
                         f"model (serve it with text-embeddings-inference or vLLM)")
    if model.kinds() and all(k == "mamba" for k in model.kinds()):
        # models/__init__.py::get_model serves MAMBA with the non-flash Mamba class (its own recurrent
        # state per batch, no paged KV cache or warmup): not modelled here
        raise UsageError(f"servefit does not model text-generation-inference's Mamba server ({model.name}, an "
                         f"attention-free state-space model); plan it under vLLM")
    r = resolve(cfg, model, gpu, count)
    e, s = r.e, cfg.settings
    out = MemoryPlan(engine="tgi", engine_version=e.version, outcome="started", memory=DeviceMemory(),
                     parallel={"tensor": r.shards, "pipeline": 1})
    out.messages.extend(r.launcher_logs)
    out.findings.extend(launcher_checks(cfg, model, gpu, count, r))
    if not any(f.severity == "error" for f in out.findings):
        out.findings.extend(shard_checks(cfg, model, gpu, count, r))
    db = dtype_bytes(r.dtype)
    kv_db = mem.kv_dtype_bytes(s.get("kv_cache_dtype"), r.dtype)
    bpt = mem.bytes_per_token(model, kv_db, r.shards)
    block_bytes = bpt * r.block
    total = gpu.memory_bytes
    weights = mem.weights_per_shard(model, db, mem.scheme(r.quantize, model), r.shards)
    ctx = mem.process_overhead(r.attention, r.flash, r.shards)
    batch = mem.warmup_batch(e, r.prefill, r.max_input, r.max_total, r.block, r.speculate, s.get("max_batch_size"))
    legacy_bt = d.batch_total_setting(s, e) if not e.infers_batch_total else None
    if legacy_bt is not None and r.flash:
        # < 0.9.4 models/flash_causal_lm.py::FlashCausalLM.warmup(batch, max_total_tokens): the KV cache is
        # CacheManager(math.ceil(max_total_tokens / BLOCK_SIZE) + 10 blocks), allocated before the prefill
        batch.blocks = math.ceil(legacy_bt / r.block) + 10
    warm_kv = batch.blocks * block_bytes
    logprobs = d.request_logprobs(s, cfg.env)
    held = mem.gemma3_mask_bytes(model, e, batch.longest, batch.requests, db, r.shards, r.attention) + \
        mem.exllama_scratch(model, e, r.quantize, gpu.compute_capability or 0, r.shards, r.prefill)
    act = mem.activation_peak(model, e, batch.tokens, batch.requests, db, r.shards, logprobs) + held
    live = mem.prefill_live_peak(model, e, batch.tokens, batch.requests, db, r.shards, logprobs) + held
    limit = min(int(total * r.fraction), total - ctx)  # torch.cuda.set_per_process_memory_fraction
    # the allocator keeps freed blocks cached only while it can: past the limit it frees them and retries,
    # so what stays reserved after the prefill is at most what the limit leaves (and at least the live peak)
    act = min(act, max(live, limit - weights - warm_kv))
    sizes = d.cuda_graph_sizes(s, e, r.quantize if e.v >= (2, 3, 0) else s.get("quantize"))
    cg = len(sizes) * mem.GRAPH_BYTES
    res = mem.kv_blocks(e, total, ctx + weights + warm_kv + act, r.fraction, r.wiggle, block_bytes, batch.blocks)
    tokens = res.num_blocks * r.block if r.flash else 0
    budget = int(total * r.fraction * (r.wiggle if e.wiggle_of_total else 1.0))
    kv_bytes = res.kv_bytes if r.flash else 0
    # shown: the live peak a prefill of max_batch_prefill_tokens needs; the rest of what warm-up saw cached is
    # free again once the KV cache is allocated (models/flash_causal_lm.py::warmup empties the cache first)
    out.memory = DeviceMemory(total=total, budget=budget, weights=weights, activation_peak=live, non_torch=ctx,
                              cuda_graphs=cg, kv_cache=kv_bytes,
                              free_headroom=total - weights - live - ctx - cg - kv_bytes)
    out.kv_bytes_per_token = bpt
    out.detail = TgiDetail(max_batch_prefill_tokens=r.prefill, attention=r.attention, block_size=r.block,
                           num_shard=r.shards, cuda_memory_fraction=r.fraction, wiggle_room=r.wiggle,
                           support_chunking=r.chunking, flash_attention=r.flash, warmup_prefill_tokens=batch.tokens,
                           dtype=r.dtype, kv_cache_dtype=r.kv_dtype, quantize=r.quantize, warmup_activation_bytes=act)
    _assume(out, cfg, model, r)
    if any(f.severity == "error" for f in out.findings + cfg.findings):  # clap / launcher refuse
        out.outcome = "rejected_config"
        out.messages += [f"Error: ArgumentValidation({f.message!r})" for f in out.findings if f.code == "TGI003"]
        return _finish(out, r, None, None, None)
    if weights > limit:
        out.outcome = "oom_at_load"
        # the shard's own failure, after the launcher's lines (what tune and estimate show as the engine's last word)
        out.messages.append(f"torch.cuda.OutOfMemoryError: CUDA out of memory while loading the weights "
                            f"({weights / GiB:.2f} GiB per shard, {limit / GiB:.2f} GiB allowed)")
        out.findings.append(_err("TGI014", f"weights need {weights / GiB:.2f} GiB per shard, the {gpu.name} allows "
                                 f"{limit / GiB:.2f} GiB: torch.cuda.OutOfMemoryError while loading the shard",
                                 cfg, "model_id"))
        return _finish(out, r, None, None, None)
    if weights + warm_kv + live > limit:  # the OOM counts live tensors; what stays cached counts for the KV cache
        out.outcome = "oom_at_load"
        msg = (f"Not enough memory to handle {batch.tokens} prefill tokens. You need to decrease "
               "`--max-batch-prefill-tokens`")
        if legacy_bt is not None and r.flash:  # < 0.9.4 flash_causal_lm.py::FlashCausalLM.warmup's wording
            msg = (f"Not enough memory to handle {legacy_bt} total tokens with {batch.tokens} prefill tokens. You "
                   "need to decrease `--max-batch-total-tokens` or `--max-batch-prefill-tokens`")
        out.messages.append(f"RuntimeError: {msg}")
        out.findings.append(_err("TGI008", f"{msg} (weights {weights / GiB:.2f} GiB + warmup KV {warm_kv / GiB:.2f} "
                                 f"GiB + activations {live / GiB:.2f} GiB at their peak exceed {limit / GiB:.2f} GiB per shard)",
                                 cfg, "max_batch_prefill_tokens"))
        return _finish(out, r, None, None, None)
    if legacy_bt is not None:
        return _legacy_result(out, cfg, r, batch)
    return _warmup_result(out, cfg, model, r, tokens, res.num_blocks, batch)


def _legacy_result(out: MemoryPlan, cfg: EngineConfig, r: Resolved, batch: mem.WarmupBatch) -> MemoryPlan:
    """< 0.9.4 router/src/main.rs: warm-up with max_batch_total_tokens, then "Connected" (no inferred total)."""
    bt = d.batch_total_setting(cfg.settings, r.e) or 0
    kv = batch.blocks * r.block * (out.kv_bytes_per_token or 0) if r.flash else 0
    out.memory.free_headroom += out.memory.kv_cache - kv
    out.memory.kv_cache = kv
    x = detail_of(out)
    x.max_input_tokens, x.max_total_tokens, x.max_batch_total_tokens, x.kv_cache_blocks = \
        r.max_input, r.max_total, bt, batch.blocks
    out.messages.append("Connected")
    return _finish(out, r, r.max_total, r.max_input, bt)


@rule("TGI009", "TGI010", "TGI017", "TGI020")
def _warmup_result(out: MemoryPlan, cfg: EngineConfig, model: ModelSpec, r: Resolved, tokens: int, blocks: int,
                   batch: mem.WarmupBatch) -> MemoryPlan:
    s, e = cfg.settings, r.e
    user_bt = s.get("max_batch_total_tokens")
    max_total, max_input = r.max_total, r.max_input
    if r.flash:
        out.messages.append(f"KV-cache blocks: {blocks}, size: {r.block}")
        if max_total is None:  # flash_causal_lm.py::warmup defaults
            if r.chunking and e.v < (3, 0, 0):
                # 2.4.x: max_total_tokens = num_blocks x BLOCK_SIZE, max_input_tokens =
                # min(num_blocks x BLOCK_SIZE - 1, tokenizer.model_max_length)
                max_total = tokens
                if max_input is None:
                    max_input = min([tokens - 1] + [x for x in (model.model_max_length,) if x])
            elif r.chunking:
                caps = [tokens] + [x for x in (model.model_max_length,) if x]
                if e.mpe_clamp and model.max_position_embeddings:
                    caps.append(model.max_position_embeddings)
                max_total = min(caps)
            else:
                max_total = batch.tokens
        batch_total = tokens
        if user_bt is not None:
            out.findings.append(_err("TGI010", f"`--max-batch-total-tokens` is deprecated for Flash Attention "
                                     f"models. Inferred max batch total tokens: {tokens} (the {user_bt} you set "
                                     "is ignored)", cfg, "max_batch_total_tokens"))
    else:
        if max_total is None:
            max_total = min(4096, model.max_position_embeddings or 4096)
        batch_total = user_bt if user_bt is not None else max(16000, max_total, r.prefill)
        out.messages.append("Model does not support automatic max batch total tokens")
    if max_input is None:
        max_input = max_total - 1
    x = detail_of(out)
    out.detail = x
    x.max_input_tokens, x.max_total_tokens, x.max_batch_total_tokens, x.kv_cache_blocks = \
        max_input, max_total, batch_total, blocks
    if r.flash and max_total > batch_total:
        out.outcome = "oom_at_load"
        msg = (f"Not enough memory to handle `max_total_tokens={max_total}`" if e.router_v3 else
               f"`max_total_tokens` must be <= `max_batch_total_tokens`. Given: {max_total} and {batch_total}")
        out.messages.append(f"Error: {msg}")
        out.findings.append(_err("TGI009", f"{msg}: one request of max_total_tokens ({max_total}) needs more KV cache "
                                 f"than warmup found room for ({batch_total} tokens)", cfg, "max_total_tokens"))
        return _finish(out, r, max_total, max_input, batch_total)
    out.messages.append(f"Setting max batch total tokens to {batch_total}")
    shard_defaults = e.defaults in ("shard", "compute")  # >= 2.4.1 backends/v3/src/main.rs logs what the shard chose
    if s.get("max_input_tokens", s.get("max_input_length")) is None and shard_defaults:
        out.messages.append(f"Maximum input tokens defaulted to {max_input}")
    if s.get("max_total_tokens") is None and shard_defaults:
        out.messages.append(f"Maximum total tokens defaulted to {max_total}")
    # checks on what warm-up found: from 2.4.0 backends/v3/src/main.rs "Validate remaining args now that the
    # backend is known"; before, router/src/main.rs (backends/v3 in 2.3) checks the limits before warm-up (the
    # launcher's checks) and afterwards only max_total_tokens against the inferred total (TGI009 above)
    router = []
    post = not e.launcher_prefill_checks
    if max_input >= max_total:
        router.append((_input_not_below_total, "`max_input_tokens` must be < `max_total_tokens`", "max_input_tokens"))
    if post and max_input > r.prefill and not r.chunking:
        router.append((_prefill_below_input, f"`max_batch_prefill_tokens` must be >= `max_input_tokens`. Given: {r.prefill} "
                       f"and {max_input}", "max_batch_prefill_tokens"))
    if post and r.prefill > batch_total:
        router.append((_prefill_above_batch_total, f"`max_batch_prefill_tokens` must be <= `max_batch_total_tokens`. Given: "
                       f"{r.prefill} and {batch_total}", "max_batch_prefill_tokens"))
    if post and max_total > batch_total:
        router.append((_total_above_batch_total, f"`max_total_tokens` must be <= `max_batch_total_tokens`. Given: {max_total} and "
                       f"{batch_total}", "max_batch_total_tokens"))
    for make, msg, setting in router:
        out.findings.append(make(f"Argument validation error: {msg}", cfg, setting))
        out.messages.append(f"Error: ArgumentValidation({msg!r})")
    if router:
        out.outcome = "rejected_config"
    elif r.flash and batch_total < 2 * max_total:
        out.findings.append(_err("TGI017", f"the KV cache holds {batch_total} tokens: room for "
                                 f"{batch_total / max_total:.2f} requests of max_total_tokens={max_total} at once; "
                                 "longer or concurrent requests queue", cfg, "max_total_tokens"))
    mpe = model.max_position_embeddings
    if s.get("max_total_tokens") and mpe and max_total > mpe and not s.get("rope_scaling"):
        out.findings.append(_err("TGI020", f"max_total_tokens={max_total} is longer than the model's "
                                 f"max_position_embeddings ({mpe}); TGI accepts it but positions past {mpe} were "
                                 "never trained", cfg, "max_total_tokens"))
    return _finish(out, r, max_total, max_input, batch_total)


def _finish(out: MemoryPlan, r: Resolved, max_total: int | None, max_input: int | None,
            batch_total: int | None) -> MemoryPlan:
    out.max_model_len = max_total or r.max_total or 0
    if batch_total is not None and r.flash:
        out.kv_cache_tokens = batch_total
    if out.max_model_len and out.kv_cache_tokens:
        out.max_concurrency = out.kv_cache_tokens / out.max_model_len
    return out


def _assume(out: MemoryPlan, cfg: EngineConfig, model: ModelSpec, r: Resolved) -> None:
    a = out.assumptions
    a.append(f"attention backend {r.attention} (KV block size {r.block}); prefill chunking "
             f"{'on' if r.chunking else 'off'}")
    if cfg.settings.get("num_shard") is None:
        a.append(f"num_shard={r.shards} (launcher find_num_shards: the GPUs CUDA_VISIBLE_DEVICES / "
                 "NVIDIA_VISIBLE_DEVICES name; a TGI image sets NVIDIA_VISIBLE_DEVICES=all; a Slurm job names the GPUs "
                 "it was given; a bare command 1)")
    a.append("CUDA context, workspaces and the warmup prefill's activations are estimated from terms calibrated on "
             "public start-up logs; TGI measures free memory at warmup")
    if not r.flash:
        a.append(f"{model.model_type} has no flash-attention implementation in TGI {r.e.version}: the KV cache is not "
                 "pre-allocated and max_batch_total_tokens is the router's default")
    if r.e.v < (3, 0, 0):
        a.append("before TGI 3.0 the warmup prefill computes log-probabilities of every prompt token")
    if r.quantize and not cfg.settings.get("quantize"):
        a.append(f"quantize={r.quantize} taken from the checkpoint's quantization_config")
    if math.isclose(r.wiggle, r.e.wiggle):
        a.append(f"TGI_WIGGLE_ROOM={r.wiggle} (TGI {r.e.version} default)")
