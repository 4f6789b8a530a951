"""The values TGI derives when a setting is unset, replayed from launcher/src/main.rs and the
shard's server/text_generation_server/models/* (paths relative to huggingface/text-generation-inference)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.engines.tgi.era import LEGACY_BATCH_TOTAL, Era
from servefit.engines.tgi.launcher_config import LauncherConfig

if TYPE_CHECKING:
    from servefit.hardware.spec import GpuSpec
    from servefit.models.spec import ModelSpec

# launcher/src/main.rs::ComputeType::f16_flop: peak f16 FLOP/s per card, keyed by the
# nvidia-smi gpu_name lower-cased with spaces as dashes (Gpu::from). Names not listed
# ("Tesla T4", "NVIDIA GeForce RTX 4090", "NVIDIA H100 PCIe", ...) are Gpu::Unknown: no
# compute-optimal prefill and no vram_maximum cap.
F16_FLOPS = {
    "nvidia-4090": 82e12, "nvidia-t4": 65e12, "nvidia-l4": 121e12, "nvidia-l40": 181e12,
    "nvidia-l40s": 363e12, "nvidia-a10g": 125e12, "nvidia-a40": 149e12,
    "nvidia-h100-80gb-hbm3": 900e12, "nvidia-h100-nvl": 900e12, "nvidia-h100": 900e12,
    "nvidia-a100-sxm4-80gb": 312e12, "nvidia-a100-sxm4-40gb": 312e12, "nvidia-a100-80gb-pcie": 312e12,
    "nvidia-a100": 312e12, "nvidia-h200": 989e12,
}
# the names Gpu::from learnt after 3.0.0 (3.0.0 - 3.0.1 know the other nine): Gpu::Unknown before
CARD_SINCE = {"nvidia-a40": (3, 0, 2), "nvidia-h100-nvl": (3, 0, 2), "nvidia-h100": (3, 0, 2),
              "nvidia-a100-sxm4-40gb": (3, 0, 2), "nvidia-a100-80gb-pcie": (3, 0, 2), "nvidia-h200": (3, 1, 0)}
# models whose TGI implementation is a flash-attention one (server/.../models/__init__.py::get_model);
# gpt2 and gptj gained flash versions in 2.0.4 / 2.1; from 3.0 other architectures fall back to the
# transformers flash backend (TransformersFlashCausalLM), which is flash too.
FLASH_TYPES = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3",
               "gemma3_text", "cohere", "dbrx", "starcoder2", "gpt_bigcode", "santacoder", "gpt_neox", "phi", "phi3",
               "phimoe", "falcon", "RefinedWeb", "RefinedWebModel", "deepseek_v2", "deepseek_v3", "granite",
               "baichuan", "llama4", "qwen2_vl", "qwen2_5_vl", "idefics2", "idefics3", "llava_next", "paligemma",
               "mllama", "bloom", "mpt"}
NO_CHUNKING = {"gemma3", "qwen2_vl", "qwen2_5_vl", "idefics", "mllama"}  # support_chunking=False in get_model
BLOCK = {"flashinfer": 1, "flashdecoding": 256, "flashdecoding-ipex": 64, "paged": 16}  # models/globals.py


def card(gpu: GpuSpec) -> str:
    return gpu.name.replace(" ", "-").lower()


def card_flops(gpu: GpuSpec, e: Era) -> float | None:
    """ComputeType::f16_flop for one card at this release (None: Gpu::Unknown)."""
    name = card(gpu)
    return F16_FLOPS.get(name) if e.v >= CARD_SINCE.get(name, (0, 0, 0)) else None


def is_flash(model: ModelSpec, e: Era) -> bool:
    if model.model_type in FLASH_TYPES:
        return True
    if model.model_type in ("gpt2", "gptj"):
        return e.v >= (2, 0, 4)
    return e.v >= (3, 0, 0)


# 1.1.0 - 2.0.x models/flash_mistral.py::BaseFlashMistral (FlashMistral, FlashMixtral, FlashQwen2,
# FlashStarcoder2 in models/__init__.py::get_model, each from the release that added it) calls
# set_sliding_window(config.sliding_window, ceil(sliding_window / BLOCK_SIZE)); 2.1.0 drops it
WINDOWED_BATCH_SINCE = {"mistral": (1, 1, 0), "mixtral": (1, 3, 0), "qwen2": (1, 4, 3), "starcoder2": (1, 4, 3)}


def warmup_window_blocks(model: ModelSpec, e: Era, block: int) -> int | None:
    """The most KV blocks one warm-up request reserves, where the release caps them by the model's
    sliding window (FlashMistralBatch.from_pb: `needed_blocks = min(needed_blocks, SLIDING_WINDOW_BLOCKS)`);
    None: uncapped."""
    since = WINDOWED_BATCH_SINCE.get(model.model_type)
    if since is None or not model.sliding_window or not since <= e.v < (2, 1, 0):
        return None
    return -(-model.sliding_window // block)


def num_shard(settings: dict, env: dict[str, str], count: int) -> tuple[int, str | None]:
    """launcher/src/main.rs::find_num_shards: (shards, launcher error or None)."""
    sharded, n = settings.get("sharded"), settings.get("num_shard")
    visible = None
    for var in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
        if var in env:
            val = env[var].strip()
            visible = count or 1 if val in ("all", "void") else len(val.split(","))  # num_cuda_devices
            break
    if sharded is True and n is None:
        devices = visible if visible is not None else count
        if not devices or devices <= 1:
            return 1, f"not enough cuda devices: `sharded` is true but only found {devices or 1} CUDA devices"
        return devices, None
    if sharded is True and n is not None and n <= 1:
        return n, "Invalid argument: `sharded` is true but `num_shard` <= 1"
    if n is None:
        n = 1 if sharded is False else (visible if visible is not None else 1)
    if n < 1:
        return n, "Invalid argument: `num_shard` cannot be < 1"
    return n, None


def resolve_attention(lc: LauncherConfig | None, gpu: GpuSpec, e: Era, env: dict[str, str],
                      lora: bool) -> tuple[str, bool]:
    """launcher/src/main.rs::resolve_attention: (ATTENTION, prefix caching), from the launcher's
    view of config.json (launcher_config.read; None: unparsable, the whole check is skipped)."""
    if not e.attention_backends:
        return "paged", False
    attention = env.get("ATTENTION")
    pc = env.get("PREFIX_CACHING")
    prefix: bool | None = None if pc is None else pc.lower() in ("1", "true")
    if lc is not None:
        if lc.vision and prefix is None:
            prefix = False
        fallback = "paged" if (gpu.compute_capability and gpu.compute_capability < 80) else "flashdecoding"
        if lc.head_dim in (64, 128, 256):
            if lora and prefix is None:
                prefix = False
            if lc.model_type in ("falcon", "deepseek_v2") and attention is None:
                attention = fallback
                if fallback == "paged" and prefix is None:
                    prefix = False
        else:
            if attention is None:
                attention = fallback
            if prefix is None:
                prefix = False
    if attention == "paged" and prefix is None:
        prefix = False
    return attention or "flashinfer", True if prefix is None else prefix


def flash_decoding(model: ModelSpec, e: Era, env: dict[str, str]) -> bool:
    """2.1.1 - 2.2.x, before the ATTENTION backends: models/globals.py sets BLOCK_SIZE = 256 when
    FLASH_DECODING is "1" / "true" / "True", and the 2.2 launcher forces it for gemma2 (softcap:
    launcher/src/main.rs::main, "Forcing flash decoding because of softcap usage")."""
    if not (2, 1, 1) <= e.v < (2, 3, 0):
        return False
    return env.get("FLASH_DECODING") in ("1", "true", "True") or (model.model_type == "gemma2" and e.v >= (2, 2, 0))


def request_logprobs(settings: dict, env: dict[str, str]) -> bool:
    """From 3.0 the warm-up prefill computes every prompt token's log-probabilities only with
    REQUEST_LOGPROBS (models/globals.py: "1" / "true", any case), which --enable-prefill-logprobs
    sets for the shards (launcher shard_manager) and which the launcher's own environment passes on."""
    return bool(settings.get("enable_prefill_logprobs")) or env.get("REQUEST_LOGPROBS", "0").lower() in ("1", "true")


def _flop(c: LauncherConfig) -> int | None:
    """Config::flop: per-token FLOPs the launcher assumes (None for VLMs or missing fields)."""
    h, hd, heads, kv, inter, n = c.hidden_size, c.head_dim, c.num_heads, c.num_kv_heads, c.intermediate_size, c.num_layers
    if c.vision or not (h and hd and heads and kv and inter and n):
        return None
    inter *= c.num_experts_per_token + c.num_shared_experts
    attn = 2 * heads * hd * h * 3 + 2 * kv * hd * h * 2
    return (attn + 2 * 3 * h * inter) * n


def _model_vram(c: LauncherConfig) -> int | None:
    """Config::model_vram (its attention term omits the hidden size, as upstream does)."""
    hd, heads, kv, h, inter, n, vocab = (c.head_dim, c.num_heads, c.num_kv_heads, c.hidden_size, c.intermediate_size,
                                         c.num_layers, c.vocab_size)
    if c.quantized or not (hd and heads and kv and h and inter and n and vocab):
        return None
    layer = 3 * inter * c.num_experts * h + (heads + 2 * kv) * hd + heads * hd * h
    return (layer * n + 2 * h * vocab) * 2


def _token_vram(c: LauncherConfig) -> int | None:
    """Config::token_vram = kv_vram_per_tok + mlp_vram_per_tok."""
    if c.quantized or not (c.num_kv_heads and c.head_dim and c.num_layers and c.intermediate_size):
        return None
    kv = c.num_kv_heads * 2 * c.head_dim * 2 * c.num_layers
    mlp = (c.intermediate_size + c.intermediate_size // 2) * c.num_experts * 2 * 3
    return kv + mlp


# launcher/src/main.rs::main `default_optimal`: the prefill default when compute_optimal gives
# none, raised for VLMs so their images are not rejected; Qwen2-VL / Qwen2.5-VL from 3.1.1, Gemma 3
# from 3.2.0 (3.0.x and 3.1.0 use 4096 for every model).
VLM_PREFILL_FALLBACK = {"qwen2_vl": ((3, 1, 1), 10_000), "qwen2_5_vl": ((3, 1, 1), 10_000), "gemma3": ((3, 2, 0), 8000)}


def vlm_prefill_fallback(e: Era, model_type: str) -> int:
    since, value = VLM_PREFILL_FALLBACK.get(model_type, ((0, 0, 0), 4096))
    return value if e.v >= since else 4096


def default_prefill(e: Era, lc: LauncherConfig | None, gpu: GpuSpec, shards: int, fraction: float,
                    wiggle_env: float | None, max_input: int | None, max_batch_size: int | None) -> tuple[int, list[str]]:
    """The launcher's `Default max_batch_prefill_tokens to N` and its log lines."""
    logs: list[str] = []
    if e.defaults in ("v1",):
        return 4096, logs
    if e.defaults == "mpe4096":
        inp = max_input if max_input is not None else capped_positions(lc) - 1
        value = (max_batch_size * inp) if max_batch_size else inp + 50
        logs.append(f"Default `max_batch_prefill_tokens` to {value}")
        return value, logs
    if e.defaults == "shard":
        value = capped_positions(lc)
        logs.append(f"Default `max_batch_prefill_tokens` to {value}")
        return value, logs
    flops = card_flops(gpu, e)
    optimal = None
    flop = _flop(lc) if lc is not None else None
    if flops and flop:
        opt = int(flops * shards / flop)
        optimal = opt if opt > 100 else None
    fallback = vlm_prefill_fallback(e, lc.model_type) if lc is not None else 4096
    default = optimal or fallback
    mpe = lc.max_position_embeddings if lc is not None else None
    value = min(default, mpe) if mpe else default
    mv, tv = (_model_vram(lc), _token_vram(lc)) if lc is not None else (None, None)
    if flops and mv is not None and tv:
        smi = gpu.smi_memory_bytes or gpu.memory_bytes
        avail = int(smi * shards * fraction * (wiggle_env if wiggle_env is not None else 0.95))
        if avail > mv:
            vmax = (avail - mv) // tv
            if vmax < value:
                logs.append(f"Reducing the max batch prefill from {default} to {vmax} because there is not enough "
                            "VRAM to support it.")
            value = min(value, vmax)
        else:
            logs.append("Not enough VRAM to run the model: Available: ... - Model ....")
    logs.append(f"Default `max_batch_prefill_tokens` to {value}")
    return int(value), logs


def capped_positions(lc: LauncherConfig | None) -> int:
    """2.x launchers: max_position_embeddings capped at 4096 (`max_default`), 4096 when the launcher
    has no config or the config names none."""
    mpe = lc.max_position_embeddings if lc is not None else None
    return min(mpe, 4096) if mpe else 4096


def default_lengths(e: Era, lc: LauncherConfig | None) -> tuple[int | None, int | None]:
    """Launcher defaults of (max_input_tokens, max_total_tokens); None = decided at warmup."""
    if e.defaults == "v1":
        return 1024, 2048
    if e.defaults == "mpe4096":
        cap = capped_positions(lc)
        return cap - 1, cap
    return None, None


def batch_total_setting(settings: dict, e: Era) -> int | None:
    """max_batch_total_tokens as the launcher holds it: the user's value, or before 0.9.4 the Args
    default 16000 (launcher/src/main.rs `max_batch_total_tokens: u32`); None from 0.9.4, where
    warm-up infers it."""
    bt = settings.get("max_batch_total_tokens")
    if bt is None and not e.infers_batch_total:
        return LEGACY_BATCH_TOTAL
    return bt


def cuda_graph_sizes(settings: dict, e: Era, quantize: str | None) -> list[int]:
    """The decode batch sizes the shard captures: none before 1.4.0; in 1.4.x
    models/flash_causal_lm.py::FlashCausalLM.warmup captures [1, 2, 4] + [8, 16, ..., 64] when
    --enable-cuda-graphs sets ENABLE_CUDA_GRAPHS (models/globals.py, default false); from 2.0.0
    launcher/src/main.rs::main passes --cuda-graphs (zeros dropped from 2.1.0) or defaults it to
    [1, 2, 4, 8, 16, 32], none for bitsandbytes (and exl2 from 2.3.0) when unset. In 2.0.x a
    --cuda-graphs list is only read when --quantize is set: `(Some(cuda_graphs), Some(_q))`."""
    if e.v < (1, 4, 0):
        return []
    if e.v < (2, 0, 0):
        return [1, 2, 4] + [8 * i for i in range(1, 9)] if settings.get("enable_cuda_graphs") else []
    graphs = settings.get("cuda_graphs")
    if graphs is not None and (e.v >= (2, 1, 0) or quantize is not None):
        return [int(x) for x in graphs if int(x) > 0]
    if quantize in ("bitsandbytes", "bitsandbytes-nf4", "bitsandbytes-fp4") or (quantize == "exl2" and e.v >= (2, 3, 0)):
        return []
    return [1, 2, 4, 8, 16, 32]
