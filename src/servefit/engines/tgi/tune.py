"""TGI as tune sees it: max_total_tokens (the prompt limit, --max-input-tokens or the legacy
--max-input-length, kept below it), KV dtype, cuda_memory_fraction (up to TGI's own default, 1.0),
num_shard, and max_concurrent_requests where the file sets it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from servefit.core import EngineConfig
from servefit.engines.tgi.era import vtuple
from servefit.tune.adapters import GenericAdapter
from servefit.tune.objective import W_INT4, W_INT8

if TYPE_CHECKING:
    pass


def input_name(names: Any) -> str:
    """The prompt limit as the file writes it: --max-input-tokens, or --max-input-length (the only
    name before TGI 2.0.0, launcher/src/main.rs Args)."""
    return "max_input_length" if "max_input_length" in names and "max_input_tokens" not in names else "max_input_tokens"


class TgiAdapter(GenericAdapter):
    engine = "tgi"
    context_name = "max_total_tokens"
    cap_name = "max_concurrent_requests"
    # the router's admission limit (launcher/src/main.rs Args, default 128): a dimension where the file
    # sets it, as it caps the users whatever the KV cache holds; it costs no GPU memory
    seqs_name = "max_concurrent_requests"
    fraction_name = "cuda_memory_fraction"
    started_last = (" (TGI sizes its KV cache from the memory free on the device at warm-up, so the server that "
                    "starts last has what the others leave; compose's depends_on sets the order)")
    split_note = ("; TGI sizes its KV cache from the memory free on the device at warm-up (flash_causal_lm.py::"
                  "warmup: free - (1 - cuda_memory_fraction x TGI_WIGGLE_ROOM) x total): started after the others "
                  "its KV cache holds {tokens:,} tokens")
    fraction_ceiling = 1.0  # TGI's default (launcher/src/main.rs Args, cuda_memory_fraction 1.0): a lower one may be raised
    tp_name = "num_shard"
    quant_name = "quantize"

    def online_fp8(self, ev: Any) -> bool:
        """`--quantize fp8` from 2.0.0 (launcher/src/main.rs Quantization::Fp8). Up to 2.1 its Fp8Linear
        runs torch._scaled_mm, which needs FP8 tensor cores (compute capability 8.9+); from 2.2.0
        layers/fp8.py::get_fp8_linear takes Marlin's W8A16 kernel on capability 8.x. Not with --dtype
        (the launcher refuses both) nor on other vendors (not checked)."""
        v, gpu = vtuple(ev.config.version), ev.gpu
        if ev.config.settings.get("dtype") or gpu.vendor != "nvidia" or v < (2, 0, 0):
            return False
        return gpu.compute_capability >= (80 if v >= (2, 2, 0) else 89)
    # --quantize bitsandbytes is LLM.int8 (8-bit), -nf4 / -fp4 are 4-bit (server/text_generation_server/layers/bnb.py)
    online_levels = {"bitsandbytes": W_INT8, "bitsandbytes-nf4": W_INT4, "bitsandbytes-fp4": W_INT4}

    def cell_settings(self, ev: Any, context: int, users: int) -> tuple[dict[str, Any], dict[str, str]]:
        """--max-total-tokens C, --max-input-tokens kept below it (and the prefill batch not
        below that): TGI counts tokens, so the users are its pool's tokens / C."""
        s = ev.config.settings
        out: dict[str, Any] = {"max_total_tokens": context}
        name = input_name(s)  # the legacy --max-input-length where the file writes it: not both (the launcher refuses)
        inp = s.get(name)
        if inp is None or int(inp) >= context:
            inp = out[name] = context - 1  # TGI: max_input_tokens < max_total_tokens
        prefill = s.get("max_batch_prefill_tokens")
        if prefill is not None and int(prefill) < int(inp):
            out["max_batch_prefill_tokens"] = int(inp)
        return out, {}

    def finish(self, settings: dict[str, Any], explicit: set[str], applied: dict[str, Any]) -> None:
        name = input_name(settings)
        total, inp = settings.get("max_total_tokens"), settings.get(name)
        if total and inp and int(inp) >= int(total):
            settings[name] = int(total) - 1  # TGI: max_input_tokens < max_total_tokens

    def writes(self, changed: dict[str, Any], point: dict[str, Any], current: dict[str, Any],
               cfg: EngineConfig) -> dict[str, Any]:
        out = dict(changed)
        name = input_name(cfg.settings)
        inp = cfg.settings.get(name)
        if "max_total_tokens" in changed and inp and name in cfg.explicit \
                and int(inp) >= int(changed["max_total_tokens"]):
            out[name] = int(changed["max_total_tokens"]) - 1
        return out
