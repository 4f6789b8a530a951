"""What Ollama's failures mean and the settings that fix them (Engine.oom_cause / oom_fixes; the
log lines are data, the `logs` key of data/engines/ollama.yaml).

Ollama first checks host memory (server/sched.go: "model requires more system memory"), then
starts its runner, which is llama.cpp and fails at the same three allocations: the layers it
placed on the GPU, the KV cache (num_ctx x OLLAMA_NUM_PARALLEL), the compute graph (num_batch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.engines.llamacpp.diagnose import flash_attn_line

if TYPE_CHECKING:
    from servefit.diagnose.fixes import Fixing
    from servefit.diagnose.model import Diagnosis, Event


def summary(diag: Diagnosis, primary: Event) -> str | None:
    from servefit.diagnose.wording import size_text
    from servefit.engines.llamacpp.diagnose import summary as runner

    if primary.pattern == "ollama.sysmem":
        return (f"Ollama refused to load the model: it needs {size_text(diag.figures, 'required')} of system memory "
                f"and {size_text(diag.figures, 'available')} is available.")
    return runner(diag, primary, "Ollama's runner (llama.cpp)")


BATCH = "Lower num_batch (PARAMETER num_batch 256, default 512): the compute graph grows with the batch"


def _kv(fx: Fixing) -> list[str]:
    cur = fx.current("num_ctx")
    n = fx.num(cur)
    to = f" to {int(n) // 2} or less" if n else ""
    lines = [f"Lower the context: OLLAMA_CONTEXT_LENGTH or PARAMETER num_ctx{fx.was(cur)}{to}",
             "Quantize the KV cache: OLLAMA_KV_CACHE_TYPE=q8_0 with OLLAMA_FLASH_ATTENTION=1",
             "Use a GPU with more memory, or spread the model over more GPUs (OLLAMA_SCHED_SPREAD=1)"]
    if fx.diag.stage == "compute":  # the compute graph is sized by the batch and the context
        lines[1:1] = [BATCH]
    return flash_attn_line(fx, "OLLAMA_FLASH_ATTENTION", "flash_attn", how="OLLAMA_FLASH_ATTENTION=1") + lines


def _batch(fx: Fixing) -> list[str]:
    np_ = fx.current("OLLAMA_NUM_PARALLEL")
    slots = f"Set OLLAMA_NUM_PARALLEL=1{fx.was(np_)}: every parallel slot multiplies the KV cache"
    return [BATCH, slots] if fx.diag.stage in ("compute", "serving") else [slots, BATCH]


def _too_large(fx: Fixing) -> list[str]:
    from servefit.diagnose.wording import size_text

    out: list[str] = []
    if fx.diag.signature == "ollama.sysmem":
        need, have = size_text(fx.figures, "required"), size_text(fx.figures, "available")
        out.append(f"Free or add system RAM (or swap): the model needs {need} and {have} is available; Ollama loads "
                   "it through host memory first")
    return out + ["Pull a smaller quantization (e.g. a :q4_K_M tag) or a smaller model",
                  "Offload fewer layers (PARAMETER num_gpu) or use a GPU with more memory"]


FIXES = {"kv_cache_overflow": _kv, "batch_misconfiguration": _batch, "profiling_peak": _batch,
         "fragmentation": lambda fx: fx.growth_or_restarts(), "model_too_large": _too_large}


def fixes(fx: Fixing) -> list[str] | None:
    return fx.by_cause(FIXES)
