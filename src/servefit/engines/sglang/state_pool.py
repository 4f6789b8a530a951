"""SGLang's per-request state pool beside the KV pool: ZAYA1's CCA state (models/arch_zaya.py) and
Inkling's short-convolution state (models/arch_inkling.py).

SGLang 0.5.23 mem_cache/kv_cache_configurator.py KVCacheConfigurator._handle_max_mamba_cache, run on
the memory left after the weights (rest_memory) before the KV pool is profiled from what remains:
- per request: configs/zaya.py ZayaConfig.mamba2_cache_params (global TP) or configs/inkling.py
  InklingModelConfig.mamba2_cache_params (attention TP) priced by configs/mamba_utils.py
  mamba_cache_per_req, scaled to the largest pipeline stage's share of the layers;
- slots (max_mamba_cache_size): --max-mamba-cache-size // DP-attention size when given; else
  --max-running-requests // DP when --disable-radix-cache; else the ratio split:
  budget = rest x mamba_full_memory_ratio / (1 + ratio) (the ratio's fallback 0.9,
  arg_groups/fields/schedule.py; Inkling's 0.1, arg_groups/model_overrides/inkling.py),
  slots = int((budget - per_req) // per_req);
- slots <= 0: "Not enough GPU memory for hybrid (mamba/linear-attention) state cache";
- the pool takes (slots + 1) x per_req (its padding slot) out of rest_memory;
- max_running_requests is then capped at slots // ratio (_calculate_mamba_ratio: 1 without the
  radix cache, else MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO 3; ZAYA1 is not an extra-buffer
  architecture, arg_groups/overrides.py, so its no_buffer strategy adds nothing; Inkling's
  extra_buffer strategy adds mem_cache/allocation_sizing.py get_mamba_tracking_slots: 2 with the overlap
  schedule, 1 without).
Speculative decoding's intermediate state is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from servefit.core import EngineConfig
from servefit.models.arch_inkling import conv_state_bytes, is_inkling
from servefit.models.arch_zaya import cca_state_bytes, is_zaya
from servefit.models.spec import ModelSpec

RATIO_FALLBACK = 0.9  # arg_groups/fields/schedule.py mamba_full_memory_ratio fallback
INKLING_RATIO = 0.1  # arg_groups/model_overrides/inkling.py
RUNNING_PER_SLOT = 3  # kv_cache_configurator.py MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO


@dataclass(frozen=True)
class StatePool:
    """The state pool SGLang allocates: one request's bytes, its slots, its size and the running cap."""

    per_req: int  # bytes of one request's state on this rank
    slots: int  # max_mamba_cache_size
    bytes: int  # (slots + 1) x per_req
    running_cap: int  # slots // ratio


def _num(v: object, cast: type) -> float | int | None:
    try:
        return cast(v) if v is not None else None  # type: ignore[no-any-return]
    except (TypeError, ValueError):
        return None


def state_pool(cfg: EngineConfig, model: ModelSpec, tp: int, pp: int, dp: int, rest: float,
               attn_tp: int | None = None) -> StatePool | None:
    """The state pool SGLang carves out of `rest` (bytes) for this model, None when it has none."""
    inkling = is_inkling(model)
    if not (inkling or is_zaya(model)):
        return None
    s = cfg.settings
    n = model.num_hidden_layers
    stage = -(-n // max(pp, 1)) / max(n, 1)  # the largest stage's share of the state layers
    whole = conv_state_bytes(model, attn_tp or tp) if inkling else cca_state_bytes(model, tp)
    per_req = int(whole * stage)
    dp = dp if s.get("enable_dp_attention") else 1
    given = _num(s.get("max_mamba_cache_size"), int)
    running = _num(s.get("max_running_requests"), int)
    if given is not None:
        slots = int(given) // dp
    elif s.get("disable_radix_cache") and running is not None:
        slots = max(1, int(running) // dp)
    else:
        ratio = _num(s.get("mamba_full_memory_ratio"), float)
        ratio = (INKLING_RATIO if inkling else RATIO_FALLBACK) if ratio is None else float(ratio)
        budget = rest * ratio / (1 + ratio)
        slots = int((budget - per_req) // per_req) if per_req else 0
    per_running = 1 if s.get("disable_radix_cache") else RUNNING_PER_SLOT
    if inkling and not s.get("disable_radix_cache"):  # the extra_buffer strategy's tracking slots
        per_running += 1 if s.get("disable_overlap_schedule") else 2
    return StatePool(per_req=per_req, slots=slots, bytes=(slots + 1) * per_req if slots > 0 else 0,
                     running_cap=max(slots, 0) // per_running)
