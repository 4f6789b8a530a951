"""The argument checks TGI runs before memory is touched: the launcher's validation
(launcher/src/main.rs::main) and what the Python shards raise while loading (server/.../cli.py::serve,
models/__init__.py::get_model, layers/attention/kv_cache.py::KVCache), in the engine's own words."""

from __future__ import annotations

from servefit.core import EngineConfig, Finding
from servefit.engines.tgi import defaults as d
from servefit.engines.tgi.kv_shards import kv_heads_error
from servefit.engines.tgi.resolved import Resolved
from servefit.hardware.spec import GpuSpec
from servefit.models.spec import ModelSpec
from servefit.rules.catalog import finding
from servefit.rules.registry import rule


def err(code: str, msg: str, cfg: EngineConfig, setting: str | None, **kw) -> Finding:
    return finding(code, msg, span=cfg.spans.get(setting) if setting else None, setting=setting,
                   site=cfg.site.name if cfg.site else "", **kw)


@rule("TGI012")
def shard_invalid(msg: str, cfg: EngineConfig, setting: str | None) -> Finding:
    """The launcher or the model code refuses this sharding."""
    return err("TGI012", msg, cfg, setting)


@rule("TGI003")
def input_not_below_total(msg: str, cfg: EngineConfig, setting: str | None) -> Finding:
    """max_input_tokens is not below max_total_tokens (launcher, or router after warmup)."""
    return err("TGI003", msg, cfg, setting)


@rule("TGI005")
def prefill_below_input(msg: str, cfg: EngineConfig, setting: str | None) -> Finding:
    """max_batch_prefill_tokens is below the input limit."""
    return err("TGI005", msg, cfg, setting)


@rule("TGI006")
def prefill_above_batch_total(msg: str, cfg: EngineConfig, setting: str | None) -> Finding:
    """max_batch_prefill_tokens is above max_batch_total_tokens."""
    return err("TGI006", msg, cfg, setting)


@rule("TGI007")
def total_above_batch_total(msg: str, cfg: EngineConfig, setting: str | None) -> Finding:
    """max_total_tokens is above max_batch_total_tokens."""
    return err("TGI007", msg, cfg, setting)


@rule("TGI004", "TGI019")
def launcher_checks(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int, r: Resolved) -> list[Finding]:
    """Argument validation before anything loads, in the launcher's own words (by era)."""
    s, e, out = cfg.settings, r.e, []
    old = e.v < (2, 0, 0)
    if s.get("max_input_tokens") is not None and s.get("max_input_length") is not None:
        out.append(err("TGI004", f"Invalid argument: Both `max_input_tokens` ({s['max_input_tokens']}) and "
                        f"`max_input_length` ({s['max_input_length']}) are set. Please define only `max_input_tokens` "
                        "as `max_input_length is deprecated for naming consistency.", cfg, "max_input_length"))
    if r.shard_error:
        out.append(shard_invalid(r.shard_error, cfg, "num_shard" if "num_shard" in cfg.spans else "sharded"))
    if r.quantize == "exl2" and r.shards > 1:
        out.append(shard_invalid("Invalid argument: Sharding is currently not supported with `exl2` quantization",
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
        out.append(input_not_below_total(f"Invalid argument: {msg}", cfg, span_of if span_of in cfg.spans else "max_total_tokens"))
    if e.launcher_prefill_checks and a is not None and a > r.prefill:
        out.append(prefill_below_input(f"Invalid argument: `max_batch_prefill_tokens` must be >= `{in_name}`. "
                        f"Given: {r.prefill} and {a}", cfg, "max_batch_prefill_tokens"))
    bt = d.batch_total_setting(s, e)
    if bt is not None:
        if e.launcher_prefill_checks and r.prefill > bt:
            out.append(prefill_above_batch_total(f"Invalid argument: `max_batch_prefill_tokens` must be <= "
                            f"`max_batch_total_tokens`. Given: {r.prefill} and {bt}", cfg, "max_batch_total_tokens"))
        if t is not None and t > bt:
            out.append(total_above_batch_total(f"Invalid argument: `max_total_tokens` must be <= `max_batch_total_tokens`. "
                            f"Given: {t} and {bt}", cfg, "max_batch_total_tokens"))
    for name in ("validation_workers", "max_batch_size"):
        if s.get(name) == 0:
            out.append(err("TGI019", f"`{name}` must be > 0", cfg, name))
    if s.get("ngrok") and not s.get("ngrok_authtoken"):
        out.append(err("TGI019", "Invalid argument: `ngrok-authtoken` must be set when using ngrok tunneling",
                        cfg, "ngrok"))
    return out


@rule("TGI011", "TGI013", "TGI015", "TGI016", "TGI018")
def shard_checks(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int, r: Resolved) -> list[Finding]:
    """What the Python shards raise while loading (server/.../cli.py, models/__init__.py,
    custom_modeling/flash_*_modeling.py, layers/attention/kv_cache.py)."""
    s, out = cfg.settings, []
    if s.get("dtype") and r.quantize not in (None, "bitsandbytes", "bitsandbytes-nf4", "bitsandbytes-fp4"):
        out.append(err("TGI011", "RuntimeError: Only 1 can be set between `dtype` and `quantize`, as they both "
                        "decide how goes the final model.", cfg, "dtype"))
    if count and r.shards > count:
        out.append(err("TGI015", f"num_shard={r.shards} but only {count} GPU(s) are available to the container: "
                        "the extra shards fail to start (CUDA error: invalid device ordinal)", cfg, "num_shard"))
    if r.shards > 1 and not model.is_mla:
        if model.num_attention_heads % r.shards:
            out.append(shard_invalid(f"ValueError: `num_heads` must be divisible by `num_shards` (got `num_heads`: "
                            f"{model.num_attention_heads} and `num_shards`: {r.shards}", cfg, "num_shard"))
        elif model.num_key_value_heads % r.shards:
            quantized = r.quantize is not None or bool(model.quantization)
            out.append(shard_invalid(kv_heads_error(model, r.shards, r.e.v, quantized), cfg, "num_shard"))
    kv = s.get("kv_cache_dtype")
    if kv:
        amd = gpu.vendor == "amd"
        if not ((r.attention == "flashinfer" and not amd) or r.attention == "paged"):
            out.append(err("TGI013", "ValueError: FP8 KV cache is currently only supported for flashinfer on CUDA "
                            "and paged attention on CUDA, ROCm and INTEL IPEX and flashdecoding in Intel IPEX "
                            f"(attention here: {r.attention})", cfg, "kv_cache_dtype"))
        elif amd and kv == "fp8_e5m2":
            out.append(err("TGI013", "ValueError: float8_e5m2 FP8 KV cache is not supported on AMD ROCm",
                            cfg, "kv_cache_dtype"))
    windowed = model.sliding_window and "full" not in model.kinds()
    cc = gpu.compute_capability
    if windowed and r.max_input is not None and r.max_input > model.sliding_window and cc and cc < 80:
        out.append(err("TGI016", f"ValueError: The backend cuda does not support sliding window attention that is "
                        f"used by the model type {model.model_type}. To use this model nonetheless with the cuda "
                        "backend, please launch TGI with the argument `--max-input-tokens` smaller than "
                        f"sliding_window={model.sliding_window} (got here max_input_tokens={r.max_input}).",
                        cfg, "max_input_tokens"))
    if r.quantize == "bitsandbytes" and s.get("quantize"):
        out.append(err("TGI018", "Bitsandbytes is deprecated, use `eetq` instead, which provides better latencies "
                        "overall and is drop-in in most cases.", cfg, "quantize"))
    return out

