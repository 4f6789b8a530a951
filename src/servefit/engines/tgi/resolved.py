"""A TGI server's settings once the launcher's defaults for the release fill what the command line
leaves unset (launcher/src/main.rs::main, find_num_shards, resolve_attention; models/__init__.py::get_model
for the checkpoint's quantization), with the lines the launcher logs about them."""

from __future__ import annotations

from dataclasses import dataclass, field

from servefit.core import EngineConfig
from servefit.engines.tgi import defaults as d
from servefit.engines.tgi import launcher_config
from servefit.engines.tgi.era import Era, era
from servefit.hardware.spec import GpuSpec
from servefit.models.spec import ModelSpec

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

