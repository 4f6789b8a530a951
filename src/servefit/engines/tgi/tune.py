"""TGI as tune sees it: max_total_tokens (max_input_tokens kept below it), KV dtype,
cuda_memory_fraction, num_shard, max_concurrent_requests."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from servefit.core import EngineConfig
from servefit.tune.adapters import GenericAdapter
from servefit.tune.objective import W_INT4, W_INT8

if TYPE_CHECKING:
    pass


class TgiAdapter(GenericAdapter):
    engine = "tgi"
    context_name = "max_total_tokens"
    cap_name = "max_concurrent_requests"
    fraction_name = "cuda_memory_fraction"
    tp_name = "num_shard"
    # --quantize bitsandbytes is LLM.int8 (8-bit), -nf4 / -fp4 are 4-bit (server/text_generation_server/layers/bnb.py)
    online_levels = {"bitsandbytes": W_INT8, "bitsandbytes-nf4": W_INT4, "bitsandbytes-fp4": W_INT4}

    def cell_settings(self, ev: Any, context: int, users: int) -> tuple[dict[str, Any], dict[str, str]]:
        """--max-total-tokens C, --max-input-tokens kept below it (and the prefill batch not
        below that): TGI counts tokens, so the users are its pool's tokens / C."""
        s = ev.config.settings
        out: dict[str, Any] = {"max_total_tokens": context}
        inp = s.get("max_input_tokens")
        if inp is None or int(inp) >= context:
            inp = out["max_input_tokens"] = context - 1  # TGI: max_input_tokens < max_total_tokens
        prefill = s.get("max_batch_prefill_tokens")
        if prefill is not None and int(prefill) < int(inp):
            out["max_batch_prefill_tokens"] = int(inp)
        return out, {}

    def finish(self, settings: dict[str, Any], explicit: set[str], applied: dict[str, Any]) -> None:
        total, inp = settings.get("max_total_tokens"), settings.get("max_input_tokens")
        if total and inp and int(inp) >= int(total):
            settings["max_input_tokens"] = int(total) - 1  # TGI: max_input_tokens < max_total_tokens

    def writes(self, changed: dict[str, Any], point: dict[str, Any], current: dict[str, Any],
               cfg: EngineConfig) -> dict[str, Any]:
        out = dict(changed)
        inp = cfg.settings.get("max_input_tokens")
        if "max_total_tokens" in changed and inp and "max_input_tokens" in cfg.explicit \
                and int(inp) >= int(changed["max_total_tokens"]):
            out["max_input_tokens"] = int(changed["max_total_tokens"]) - 1
        return out
