"""What TGI's out-of-memory failures mean and the flags that fix them, per stage (Engine.oom_summary
/ oom_fixes; the log lines are data, the `logs` key of data/engines/tgi.yaml).

A shard loads its weights (a torch OOM under get_model), then warms up
(flash_causal_lm.py::warmup): the router sends one prefill batch of --max-batch-prefill-tokens
tokens, and an OOM there is "Not enough memory to handle N prefill tokens". The KV cache is then
sized from what is left, keeping (1 - CUDA_MEMORY_FRACTION x TGI_WIGGLE_ROOM) of the card free
(0.90 by default); serving OOMs come from a Prefill or Decode call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from servefit.diagnose.fixes import Fixing
    from servefit.diagnose.model import Diagnosis, Event

# A warm-up prefill this small needs well under 100 MiB of activations even for a 70B model (tokens x
# (3 x hidden + 2 x intermediate) x 2 bytes per layer step, flash_causal_lm.py::warmup's one forward pass):
# when it does not fit, the weights (or another process) left the shard no room, and a smaller
# --max-batch-prefill-tokens cannot help.
TINY_WARMUP_TOKENS = 512


def cause(primary: Event, figs: dict[str, Any]) -> tuple[str, str, str] | None:
    n = figs.get("prefill_tokens")
    if primary.pattern == "tgi.prefill" and isinstance(n, int) and 0 < n <= TINY_WARMUP_TOKENS:
        return "model_too_large", "startup", "medium"
    return None


def summary(diag: Diagnosis, primary: Event) -> str | None:
    figs = diag.figures
    if primary.pattern == "tgi.prefill" and diag.root_cause == "model_too_large":
        return (f"TGI could not run even a {figs.get('prefill_tokens', 0):,}-token warm-up prefill: the weights (or "
                "another process on the GPU) leave the shard almost no memory, so a smaller prefill budget will not help.")
    if primary.pattern == "tgi.prefill":
        return (f"TGI could not run its warm-up batch of {figs.get('prefill_tokens', 0):,} prefill tokens "
                "(--max-batch-prefill-tokens): the batch does not fit next to the weights.")
    if primary.pattern == "tgi.warmup_total":
        return (f"TGI's warm-up could not hold {figs.get('warmup_total_tokens', 0):,} tokens of KV cache "
                "(--max-batch-total-tokens) next to the weights.")
    if primary.pattern == "tgi.max_total":
        return (f"TGI refused --max-total-tokens {figs.get('max_total_tokens', 0):,}: it is more than the KV "
                "cache it found room for at warm-up.")
    return None


def _prefill_tokens(fx: Fixing) -> str:
    n = fx.figures.get("prefill_tokens") or fx.num(fx.current("max_batch_prefill_tokens"))
    return f" from {int(n)} to {int(n) // 2}" if n else ""


def _input_flag(fx: Fixing) -> str:
    """The input-length limit: --max-input-length until 2.0 renamed it --max-input-tokens (launcher/src/main.rs)."""
    return fx.flag("--max-input-tokens", "--max-input-length")


SHARDS = "Add GPUs: a larger --num-shard splits the weights and the KV cache over more shards"


def _kv(fx: Fixing) -> list[str]:
    if fx.diag.signature == "tgi.warmup_total":
        # only TGI < 0.9.4 says this: its warm-up allocates ceil(max_batch_total_tokens / 16) + 10 KV blocks
        # (flash_causal_lm.py::FlashCausalLM.warmup), 16000 tokens when the flag is unset; 0.9.4 infers it
        total = fx.figures.get("warmup_total_tokens")
        half = f" to {int(total) // 2}" if isinstance(total, int) else ""
        return [f"Lower --max-batch-total-tokens (now {total}){half}: before 0.9.4 TGI reserves KV cache for that "
                "many tokens at warm-up (16000 when unset); from 0.9.4 it sizes the cache from the memory left",
                f"Or lower --max-batch-prefill-tokens{_prefill_tokens(fx)}", SHARDS]
    cap = fx.figures.get("max_batch_total_tokens")
    limit = f" to at most {cap:,} (the KV pool TGI found room for)" if isinstance(cap, int) else ""
    fp8 = ["Store the KV cache in FP8: --kv-cache-dtype fp8_e4m3fn (TGI >= 2.4.0)"] if fx.has("--kv-cache-dtype") else []
    return [f"Lower --max-total-tokens{limit}, and {_input_flag(fx)} below it", *fp8, SHARDS]


def _warmup(fx: Fixing) -> list[str]:
    n = fx.num(fx.figures.get("prefill_tokens") or fx.current("max_batch_prefill_tokens"))
    below = f" to at most {int(n) // 2}" if n else ""
    return [f"Lower --max-batch-prefill-tokens{_prefill_tokens(fx)}: the warm-up runs one prefill of that many "
            f"tokens (keep it >= {_input_flag(fx)} unless prefill chunking is on)",
            f"And lower {_input_flag(fx)}{below} with it: TGI before 3.0 refuses a prefill limit below the input "
            "limit (launcher before 2.4.0, router after warm-up in 2.4), and the warm-up batch is made of requests "
            "that long", "Add GPUs: a larger --num-shard leaves each shard less of the weights"]


def _batch(fx: Fixing) -> list[str]:
    stage = fx.diag.stage
    fewer = "--max-concurrent-requests / --max-batch-size" if fx.has("--max-batch-size") else "--max-concurrent-requests"
    if stage == "decode":
        return [f"Lower {fewer}: a decode step of the running batch ran out of "
                "memory", "Leave more memory outside the KV cache: TGI_WIGGLE_ROOM=0.85 (default 0.90) or "
                "--cuda-memory-fraction 0.9", f"Or lower --max-batch-prefill-tokens{_prefill_tokens(fx)}"]
    return [f"Lower --max-batch-prefill-tokens{_prefill_tokens(fx)} (keep it >= {_input_flag(fx)} unless prefill "
            "chunking is on)", f"Lower {fewer} to what the GPU can hold"]


def _fragmentation(fx: Fixing) -> list[str]:
    if fx.host:
        return fx.host_growth()
    return [fx.alloc_conf(), "Leave headroom: lower --cuda-memory-fraction (e.g. 0.9)", fx.restarts()]


def _too_large(fx: Fixing) -> list[str]:
    if fx.host:
        return ["Raise the host / container memory limit: the shards load the checkpoint through host RAM",
                "Serve a pre-quantized checkpoint (AWQ/GPTQ): about half the RAM to load"]
    return ["Quantize: --quantize awq | gptq | fp8, or serve a pre-quantized checkpoint",
            "Shard over more GPUs: a larger --num-shard", "Use a GPU with more memory"]


FIXES = {"kv_cache_overflow": _kv, "profiling_peak": _warmup, "batch_misconfiguration": _batch,
         "fragmentation": _fragmentation, "model_too_large": _too_large}


def fixes(fx: Fixing) -> list[str] | None:
    return fx.by_cause(FIXES)
