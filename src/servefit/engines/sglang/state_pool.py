"""SGLang's per-request state pool beside the KV pool (the "mamba" pool): the recurrent state of hybrid
Gated-DeltaNet models (Qwen3-Next, Qwen3.5 / Qwen3.8), of Mamba2 hybrids (Nemotron-H, Falcon-H1,
Granite-4.0-H), of Kimi-Linear's KDA layers, ZAYA1's CCA state (models/arch_zaya.py) and Inkling's
short-convolution state (models/arch_inkling.py).

Which models get the pool (configs/hybrid_arch.py mambaish_config; 0.5.2 - 0.5.6
model_executor/model_runner.py is_hybrid_gdn / mamba2_config / hybrid_gdn_config): Qwen3-Next from
0.5.2, Falcon-H1 from 0.5.3, Nemotron-H from 0.5.4, Kimi-Linear from 0.5.5, Qwen3.5 (Qwen3_5Config /
Qwen3_5MoeConfig) and Granite-4.0-H from 0.5.9 (LFM2's short convolution and Kimi-K3 are not modelled).
The KV pool counts only the attention layers (model_runner.py::profile_max_num_token:
len(config.full_attention_layer_ids), every release).

The slots (max_mamba_cache_size) and the memory taken from rest_memory before the KV pool is profiled
(0.5.2 - 0.5.6 model_runner.py::profile_max_num_token / handle_max_mamba_cache; 0.5.7 - 0.5.15
model_runner_kv_cache_mixin.py::handle_max_mamba_cache; 0.5.16+
mem_cache/kv_cache_configurator.py::KVCacheConfigurator._handle_max_mamba_cache):
- 0.5.2 - 0.5.3: --max-mamba-cache-size, else --max-running-requests, else 512; // the DP-attention size;
  the radix cache is switched off ("Hybrid GDN model detected, disable radix cache");
- 0.5.4 - 0.5.6: Mamba2 models still run without the radix cache ("model detected, disable radix
  cache") and take the 0.5.2 rule, as Kimi-Linear does until 0.5.13 ("Disabling Radix Cache for
  KimiLinearForCausalLM as it is not yet supported"); with the radix cache (Qwen3-Next) the ratio split
  budget = rest x mamba_full_memory_ratio / (1 + ratio), slots = budget // per_req, whatever
  --max-mamba-cache-size says; a GDN model's slots // the DP-attention size;
- 0.5.7 - 0.5.8: --max-mamba-cache-size or a disabled radix cache take the 0.5.2 rule, else the ratio
  split (Mamba2 models keep the radix cache from 0.5.7);
- 0.5.9 - 0.5.16: --max-mamba-cache-size // DP; else --max-running-requests // DP when the radix cache
  is disabled; else the ratio split (without a --max-running-requests the 512 fallback is gone);
- 0.5.17+: the ratio split keeps the pool's padding slot, slots = (budget - per_req) // per_req, the
  pool takes (slots + 1) x per_req, and per_req is scaled to the largest pipeline stage's share of the
  state layers (distributed/utils.py get_pp_indices: the last `remainder` stages hold one more layer).
  Before 0.5.17 the pool takes slots x per_req from rest_memory (MambaPool still allocates slots + 1).
mamba_full_memory_ratio: 0.9 (server_args.py, 0.5.4+); Inkling's 0.1 (arg_groups/overrides.py).
Speculative decoding's intermediate state is not modelled.

max_running_requests is then capped at slots // ratio (0.5.4 - 0.5.6 model_runner.py::init_memory_pool,
0.5.10+ _calculate_mamba_ratio): 1 without the radix cache; else MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO
3, plus the extra-buffer strategy's ping-pong slots:
- 0.5.7: + 2 always (MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP; + 1 with extra_buffer and speculative
  decoding);
- 0.5.8 - 0.5.9: + 2 with --mamba-scheduler-strategy extra_buffer (+ 1 with speculative decoding);
- 0.5.10+: with extra_buffer + 2 under the overlap schedule, + 1 without it (and + 1 for
  extra_buffer_lazy, 0.5.13+).
The strategy (server_args.py): 0.5.7 - 0.5.13 "auto" means no_buffer; 0.5.14+ "auto" means extra_buffer
when the overlap schedule is on (or page_size > 1), the linear-attention backend is triton (the default)
and the architecture is in the extra-buffer list (0.5.18 arg_groups/overrides.py
_MAMBA_EXTRA_BUFFER_ARCHS: Qwen3-Next, Qwen3.5, Falcon-H1, Granite-4.0-H, Nemotron-H, Kimi-Linear from
0.5.16, ...); no_buffer otherwise. Inkling always runs extra_buffer (arg_groups/overrides.py); ZAYA1 is not
an extra-buffer architecture. SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK (0.5.17+, off by default) is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from servefit.core import EngineConfig
from servefit.engines.sglang.defaults import vtuple
from servefit.memory.dtypes import dtype_bytes
from servefit.models.arch_inkling import conv_state_bytes, is_inkling
from servefit.models.arch_zaya import cca_state_bytes, is_zaya
from servefit.models.spec import ModelSpec

RATIO_FALLBACK = 0.9  # server_args.py mamba_full_memory_ratio default (0.5.4+)
INKLING_RATIO = 0.1  # arg_groups/model_overrides/inkling.py
RUNNING_PER_SLOT = 3  # kv_cache_configurator.py MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO
FIXED_SLOTS = 512  # 0.5.2 - 0.5.8: max_mamba_cache_size without --max-running-requests
# first release with each architecture's state pool (configs/hybrid_arch.py mambaish_config and its
# 0.5.2 - 0.5.8 model_runner.py forerunners)
FIRST = {"Qwen3NextForCausalLM": (0, 5, 2), "FalconH1ForCausalLM": (0, 5, 3), "NemotronHForCausalLM": (0, 5, 4),
         "KimiLinearForCausalLM": (0, 5, 5), "Qwen3_5ForConditionalGeneration": (0, 5, 9),
         "Qwen3_5MoeForConditionalGeneration": (0, 5, 9), "GraniteMoeHybridForCausalLM": (0, 5, 9)}
# server_args.py _support_mamba_cache_extra_buffer (0.5.14; 0.5.16+ arg_groups/overrides.py
# supports_mamba_cache_extra_buffer): the first release listing each architecture
EXTRA_BUFFER_ARCHS = {"Qwen3_5ForConditionalGeneration": (0, 5, 14), "Qwen3_5MoeForConditionalGeneration": (0, 5, 14),
                      "Qwen3NextForCausalLM": (0, 5, 14), "FalconH1ForCausalLM": (0, 5, 14),
                      "GraniteMoeHybridForCausalLM": (0, 5, 14), "NemotronHForCausalLM": (0, 5, 14),
                      "KimiLinearForCausalLM": (0, 5, 16)}


@dataclass(frozen=True)
class StatePool:
    """The state pool SGLang allocates: one request's bytes, its slots, its size and the running cap."""

    per_req: int  # bytes of one request's state on this rank
    slots: int  # max_mamba_cache_size
    bytes: int  # what the pool takes out of rest_memory
    running_cap: int  # slots // ratio
    per_running: int = 1  # the ratio: state slots one running request holds
    conv_bytes: int = 0  # MambaPool's conv_state tensor ((slots + 1) requests)
    ssm_bytes: int = 0  # MambaPool's temporal (ssm) state tensor


def _num(v: object, cast: type) -> float | int | None:
    try:
        return cast(v) if v is not None else None  # type: ignore[no-any-return]
    except (TypeError, ValueError):
        return None


def state_layers(model: ModelSpec) -> list[int]:
    """The layers that hold a recurrent state (config.linear_layer_ids / mamba_layer_ids); Falcon-H1 runs
    its Mamba2 mixer beside attention in every layer (configs/falcon_h1.py linear_layer_ids)."""
    if model.architecture == "FalconH1ForCausalLM":
        return list(range(model.num_hidden_layers))
    return [i for i, k in enumerate(model.kinds()) if k in ("linear", "mamba")]


def recurrent_per_req(model: ModelSpec, attn_tp: int, ssm_dtype: str) -> tuple[int, int]:
    """(conv bytes, ssm bytes) of one request's state on one rank: configs/mamba_utils.py
    Mamba2StateShape.create (0.5.4+; 0.5.2 configs/qwen3_next.py hybrid_gdn_params) priced by
    BaseLinearStateParams.mamba_cache_per_req: conv (conv_dim / TP, kernel - 1) in bfloat16
    (SGLANG_MAMBA_CONV_DTYPE), temporal (heads / TP, head_dim, state_size) in the ssm dtype, times the
    state layers. Gated DeltaNet (Qwen3NextConfig.mamba2_cache_params): conv_dim = 2 x key heads x key
    dim + value heads x value dim, heads = value heads, head_dim = value dim, state_size = key dim.
    Mamba2 (NemotronHConfig / FalconH1Config): conv_dim = heads x head_dim + 2 x groups x state. When TP
    does not divide the groups (a GDN model's key heads), extra_groups_for_head_shards adds tp - groups:
    1 group becomes TP groups, and 16 key heads on TP 3 become 3, as SGLang computes it."""
    m, tp = model.mamba or {}, max(attn_tp, 1)
    kernel = int(m.get("conv_kernel") or 4)
    if m.get("kind") == "gated_deltanet":
        kh, vh, kd, vd = (int(m[k]) for k in ("num_key_heads", "num_value_heads", "key_head_dim", "value_head_dim"))
        kh += 0 if kh % tp == 0 else tp - kh  # n_groups = key heads, extended as for Mamba2
        conv_dim, heads, head_dim, state = 2 * kh * kd + vh * vd, vh, vd, kd
    elif m.get("kind") == "kda":  # KimiLinearStateShape.create: q, k, v convs of heads x head_dim each
        heads = int(m["num_value_heads"])
        head_dim = state = int(m["value_head_dim"])
        conv_dim = 3 * heads * head_dim
    elif m.get("kind") == "mamba2":
        heads, head_dim, state = int(m["num_heads"]), int(m["head_dim"]), int(m["state_size"])
        groups = int(m.get("n_groups") or 1)
        groups += 0 if groups % tp == 0 else tp - groups
        conv_dim = heads * head_dim + 2 * groups * state
    else:
        return 0, 0
    n = len(state_layers(model))
    conv = conv_dim // tp * (kernel - 1) * 2 * n
    ssm = heads // tp * head_dim * state * int(dtype_bytes(ssm_dtype)) * n
    return conv, ssm


def is_recurrent_hybrid(model: ModelSpec, v: tuple[int, ...]) -> bool:
    """A Gated-DeltaNet or Mamba2 hybrid whose state pool this SGLang release allocates."""
    first = FIRST.get(model.architecture)
    return first is not None and v >= first and (model.mamba or {}).get("kind") in ("gated_deltanet", "mamba2", "kda") \
        and bool(state_layers(model))


def _stage_share(model: ModelSpec, layers: list[int], pp: int) -> float:
    """The largest pipeline stage's share of the state layers (get_pp_indices: base n // pp layers, the
    last n % pp stages one more)."""
    n = model.num_hidden_layers
    if pp <= 1 or not layers:
        return 1.0
    base, rem = divmod(n, pp)
    most, start = 0, 0
    for rank in range(pp):
        end = start + base + (1 if rank >= pp - rem else 0)
        most = max(most, sum(1 for i in layers if start <= i < end))
        start = end
    return most / len(layers)


def _extra_buffer(cfg: EngineConfig, model: ModelSpec, v: tuple[int, ...], inkling: bool) -> str:
    """The mamba radix-cache strategy: "no_buffer", "extra_buffer" or "extra_buffer_lazy"."""
    s = cfg.settings
    if inkling:
        return "extra_buffer"
    chosen = str(s.get("mamba_radix_cache_strategy") or s.get("mamba_scheduler_strategy") or "auto")
    if chosen != "auto":
        return chosen
    if v < (0, 5, 14) or is_zaya(model):
        return "no_buffer"
    paged = int(_num(s.get("page_size"), int) or 1) > 1
    triton = str(s.get("linear_attn_backend") or "triton") == "triton"
    wants = not s.get("disable_overlap_schedule") or paged
    listed = v >= EXTRA_BUFFER_ARCHS.get(model.architecture, (9, 9, 9))
    return "extra_buffer" if wants and triton and listed else "no_buffer"


def running_ratio(cfg: EngineConfig, model: ModelSpec, v: tuple[int, ...], radix: bool, inkling: bool) -> int:
    """Slots one running request needs (_calculate_mamba_ratio and its forerunners, see above)."""
    if not radix:
        return 1
    s = cfg.settings
    spec = bool(s.get("speculative_algorithm"))
    strategy = _extra_buffer(cfg, model, v, inkling)
    extra = strategy in ("extra_buffer", "extra_buffer_lazy")
    if v < (0, 5, 7):
        return RUNNING_PER_SLOT
    if v < (0, 5, 8):
        return RUNNING_PER_SLOT + (1 if extra and spec else 2)
    if v < (0, 5, 10):
        return RUNNING_PER_SLOT + ((1 if spec else 2) if extra else 0)
    if not extra:
        return RUNNING_PER_SLOT
    overlap = not s.get("disable_overlap_schedule") and (inkling or strategy != "no_buffer")
    lazy = strategy == "extra_buffer_lazy" and v >= (0, 5, 13)
    return RUNNING_PER_SLOT + (1 if lazy or not overlap else 2)


def _ssm_dtype(cfg: EngineConfig) -> str:
    """--mamba-ssm-dtype, else SGLANG_MAMBA_SSM_DTYPE, else float32 (server_args.py default "float32" in
    0.5.2 - 0.5.8; configs/mamba_utils.py mamba2_state_dtype from 0.5.9: env, config, float32)."""
    return str(cfg.settings.get("mamba_ssm_dtype") or cfg.env.get("SGLANG_MAMBA_SSM_DTYPE") or "float32")


def state_pool(cfg: EngineConfig, model: ModelSpec, tp: int, pp: int, dp: int, rest: float,
               attn_tp: int | None = None) -> StatePool | None:
    """The state pool SGLang carves out of `rest` (bytes) for this model, None when it has none."""
    v = vtuple(cfg.version)
    inkling, zaya = is_inkling(model), is_zaya(model)
    recurrent = is_recurrent_hybrid(model, v)
    if not (inkling or zaya or recurrent):
        return None
    s = cfg.settings
    dp = dp if s.get("enable_dp_attention") else 1
    conv = ssm = 0
    if recurrent:
        conv, ssm = recurrent_per_req(model, attn_tp or tp, _ssm_dtype(cfg))
        whole = conv + ssm
        share = _stage_share(model, state_layers(model), pp) if v >= (0, 5, 17) else 1.0
    else:
        whole = conv_state_bytes(model, attn_tp or tp) if inkling else cca_state_bytes(model, tp)
        n = model.num_hidden_layers
        share = -(-n // max(pp, 1)) / max(n, 1)  # the largest stage's share of the state layers
    per_req = int(whole * share)
    given = _num(s.get("max_mamba_cache_size"), int)
    running = _num(s.get("max_running_requests"), int)
    mamba2 = (model.mamba or {}).get("kind") in ("mamba2", "kda")  # not a GDN model (hybrid_gdn_config)
    kimi = model.architecture == "KimiLinearForCausalLM"
    # no radix cache: the flag, or forced (0.5.2 - 0.5.3 every hybrid, 0.5.4 - 0.5.6 the Mamba2 ones, Kimi-Linear
    # until 0.5.13: "Disabling Radix Cache for KimiLinearForCausalLM as it is not yet supported")
    forced = v < (0, 5, 4) or (mamba2 and v < (0, 5, 7)) or (kimi and v < (0, 5, 14))
    radix = not s.get("disable_radix_cache") and not (recurrent and forced)
    fixed = int(given) if given is not None else int(running) if running is not None else FIXED_SLOTS
    padded = v >= (0, 5, 17)
    # 0.5.4 - 0.5.6 divide by the DP-attention size only a GDN model's slots (hybrid_gdn_config)
    gdn_dp = dp if not (mamba2 and (0, 5, 4) <= v < (0, 5, 7)) else 1
    if not radix and v < (0, 5, 9):
        slots = fixed // gdn_dp
    elif given is not None and v >= (0, 5, 7):
        slots = int(given) // dp
    elif not radix and running is not None:
        slots = int(running) // dp
    else:
        ratio = _num(s.get("mamba_full_memory_ratio"), float)
        ratio = (INKLING_RATIO if inkling else RATIO_FALLBACK) if ratio is None else float(ratio)
        budget = rest * ratio / (1 + ratio)
        if not per_req:
            slots = 0
        elif padded:
            slots = int((budget - per_req) // per_req)
        else:
            slots = int(budget // per_req)
            slots = slots // dp if recurrent and v < (0, 5, 7) and not mamba2 else slots
    taken = (slots + 1 if padded else slots) * per_req if slots > 0 else 0
    ratio_ = running_ratio(cfg, model, v, radix, inkling)
    return StatePool(per_req=per_req, slots=slots, bytes=taken, running_cap=max(slots, 0) // ratio_, per_running=ratio_,
                     conv_bytes=int(conv * share) * (slots + 1) if slots > 0 else 0,
                     ssm_bytes=int(ssm * share) * (slots + 1) if slots > 0 else 0)
