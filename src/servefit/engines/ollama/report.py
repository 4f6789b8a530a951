"""Ollama findings and log lines (llm/memory.go::MemoryEstimate.LogValue, format/bytes.go::HumanBytes2)."""

from __future__ import annotations

from typing import Any

from servefit.core import EngineConfig, Finding, MemoryPlan
from servefit.engines.llamacpp.model import LModel
from servefit.engines.ollama.detail import OllamaDetail
from servefit.engines.ollama.detail import of as detail_of
from servefit.hardware.spec import GpuSpec
from servefit.rules.catalog import finding
from servefit.rules.registry import rule

GIB = 2**30


def gib(n: float) -> float:
    return round(n / GIB, 3)


def human_bytes(b: int) -> str:
    """format.HumanBytes2: base 1024, one decimal."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= size:
            return f"{b / size:.1f} {unit}"
    return f"{b} B"


def weights_fields(e: Any, v: tuple[int, ...]) -> tuple[int, int, int]:
    """memory.weights.(total, repeating, nonrepeating) as llm/memory.go logs them: memoryWeights summed
    blk + kv per layer before v0.6.1 (total = it, repeating = it - output); v0.6.1 - v0.6.2 summed blk
    alone and logged total = repeating = it; from v0.6.3 total = it + output."""
    if v < (0, 6, 1):
        w = e.weights_repeating + e.kv
        return w, w - e.weights_output, e.weights_output
    if v < (0, 6, 3):
        return e.weights_repeating, e.weights_repeating, e.weights_output
    return e.weights_repeating + e.weights_output, e.weights_repeating, e.weights_output


def offload_line(gpu: GpuSpec, e: Any, free: list[int], overhead: int, num_gpu: int, v: tuple[int, ...]) -> str:
    """llm/memory.go MemoryEstimate.log / LogValue: msg "offload to <library>" before v0.5.12, then
    msg=offload with library=; memory.gpu_overhead from v0.3.10."""
    lib = {"nvidia": "cuda", "amd": "rocm", "apple": "metal"}.get(gpu.vendor, "cuda")
    head = f"msg=offload library={lib}" if v >= (0, 5, 12) else f'msg="offload to {lib}"'
    split = ",".join(str(c) for c in e.split) if len(e.split) > 1 else ""
    total, repeating, nonrepeating = weights_fields(e, v)
    gov = f"memory.gpu_overhead=\"{human_bytes(overhead)}\" " if v >= (0, 3, 10) else ""
    return (f"{head} layers.requested={num_gpu} layers.model={e.layers_model} "
            f"layers.offload={e.layers} layers.split=\"{split}\" "
            f"memory.available=\"[{' '.join(human_bytes(f) for f in free)}]\" {gov}"
            f"memory.required.full=\"{human_bytes(e.total)}\" memory.required.partial=\"{human_bytes(e.vram)}\" "
            f"memory.required.kv=\"{human_bytes(e.kv)}\" "
            f"memory.required.allocations=\"[{' '.join(human_bytes(a) for a in e.allocations)}]\" "
            f"memory.weights.total=\"{human_bytes(total)}\" "
            f"memory.weights.repeating=\"{human_bytes(repeating)}\" "
            f"memory.weights.nonrepeating=\"{human_bytes(nonrepeating)}\" "
            f"memory.graph.full=\"{human_bytes(e.graph_full)}\" memory.graph.partial=\"{human_bytes(e.graph_partial)}\"")


# server/sched.go::load: from 0.30 a model loads beside the others only when its predicted size
# (plus the batch surcharge) is at most 80% of the memory they leave free, else the scheduler
# evicts first; before, it must load fully onto the GPUs (requireFull, llm.ErrLoadRequiredFull).
BESIDE_FRACTION = {"llamaserver": 0.8}


def several_models(s: dict[str, Any]) -> bool:
    """OLLAMA_MAX_LOADED_MODELS, as the file sets it, lets more than one model stay loaded (0 is
    sched.go's automatic 3 per GPU). Unset: servefit does not assume the server shares its GPU."""
    if "OLLAMA_MAX_LOADED_MODELS" not in s:
        return False
    try:
        n = int(s.get("OLLAMA_MAX_LOADED_MODELS") or 0)
    except (TypeError, ValueError):
        return False
    return n != 1


def model_bytes(p: MemoryPlan) -> int:
    """What this model takes of the GPU that runs out first (weights, KV cache, graph)."""
    return p.memory.weights + p.memory.kv_cache + p.memory.activation_peak


def room_for_another(used: int, budget: int, era: str) -> bool:
    """Whether a second model of `used` bytes loads beside this one (server/sched.go::load). Every
    model gets the same OLLAMA_NUM_PARALLEL, so a second one of this size holds as many slots."""
    return used <= BESIDE_FRACTION.get(era, 1.0) * (budget - used)


@rule("OLLM006", "OLLM007", "OLLM008", "OLLM009", "OLLM010", "OLLM011", "OLLM012")
def advice(cfg: EngineConfig, lm: LModel, gpu: GpuSpec, p: MemoryPlan, ctx: dict[str, Any]) -> list[Finding]:
    s, sp = cfg.settings, cfg.spans
    site = cfg.site.name if cfg.site else ""
    out: list[Finding] = []
    x = detail_of(p)
    n_ctx, np_ = ctx["num_ctx"], x.num_parallel if isinstance(p.detail, OllamaDetail) else ctx["num_parallel"]
    if p.outcome == "oom_at_load":
        out.append(finding("OLLM012", f"num_gpu {s.get('num_gpu')} forces more layers onto the GPU than fit "
                           f"(only {x.layers_offloaded} of {x.layers_model} fit); the runner runs out "
                           "of memory", span=sp.get("num_gpu"), site=site, setting="num_gpu"))
    elif x.layers_offloaded < x.layers_model:
        where = (f"no layer fits on {gpu.name}: Ollama runs the whole model on the CPU" if x.layers_offloaded == 0
                 else f"only {x.layers_offloaded}/{x.layers_model} layers fit on {gpu.name}; the rest run on the CPU")
        out.append(finding("OLLM006", f"{where} (num_ctx {n_ctx} x {np_} slots)",
                           span=sp.get("num_ctx") or sp.get("OLLAMA_NUM_PARALLEL"), site=site, setting="num_ctx"))
    partial = p.outcome == "oom_at_load" or x.layers_offloaded < x.layers_model
    if np_ > 1 and partial:  # every slot gets the full num_ctx (sched.go: NumCtx x numParallel); a cost once it spills
        out.append(finding("OLLM007", f"KV cache for {n_ctx} x {np_} = {n_ctx * np_} tokens "
                           f"({x.kv_cache_gib if x.kv_cache_gib is not None else x.memory_required_kv_gib or 0:.2f} GiB): each of the "
                           f"{np_} slots gets the full num_ctx, and the model no longer fits on {gpu.name}; fewer "
                           "slots keep more of it on the GPU", span=sp.get("OLLAMA_NUM_PARALLEL") or sp.get("num_ctx"),
                           site=site, setting="OLLAMA_NUM_PARALLEL"))
    if ctx["ctx_src"] not in ("PARAMETER num_ctx", "OLLAMA_CONTEXT_LENGTH") and n_ctx < lm.n_ctx_train:
        out.append(finding("OLLM008", f"num_ctx not set: {ctx['ctx_src']} gives {n_ctx} tokens (the model "
                           f"supports {lm.n_ctx_train}); longer prompts are truncated", span=sp.get("model"),
                           site=site, setting="num_ctx"))
    elif ctx["ctx_src"] not in ("PARAMETER num_ctx", "OLLAMA_CONTEXT_LENGTH"):  # nothing is cut here
        out.append(finding("OLLM008", f"num_ctx not set: {ctx['ctx_src']} gives {n_ctx} tokens, the model's whole "
                           "length on this GPU; the default follows the Ollama release and the GPU's memory, so "
                           "set it to serve this length wherever the model runs", span=sp.get("model"),
                           site=site, setting="num_ctx", severity="info"))
    # only a length the user set: Ollama's own default past the model's length is OLLM008's to say
    if ctx["requested_ctx"] > lm.n_ctx_train > 0 and ctx["ctx_src"] in ("PARAMETER num_ctx", "OLLAMA_CONTEXT_LENGTH"):
        capped = n_ctx < ctx["requested_ctx"]
        out.append(finding("OLLM009", f"requested context size too large for model: num_ctx {ctx['requested_ctx']} "
                           f"> {lm.n_ctx_train}; " + (f"Ollama uses {lm.n_ctx_train}" if capped else
                                                      "Ollama before 0.9.3 does not cap it: the model runs past the "
                                                      "length it was trained for"),
                           span=sp.get("num_ctx") or sp.get("OLLAMA_CONTEXT_LENGTH"), site=site, setting="num_ctx"))
    used = model_bytes(p)
    if several_models(s) and not room_for_another(used, p.memory.budget, ctx["era"]):
        maxm = int(s.get("OLLAMA_MAX_LOADED_MODELS") or 0)
        out.append(finding("OLLM010", f"OLLAMA_MAX_LOADED_MODELS={maxm or '0 (3 per GPU)'}: a second model of this size "
                           f"does not fit beside this one ({used / GIB:.1f} of {p.memory.budget / GIB:.1f} GiB, "
                           f"num_ctx {n_ctx} x {np_} slots): Ollama unloads this one to load it",
                           span=sp.get("OLLAMA_MAX_LOADED_MODELS"), site=site, setting="OLLAMA_MAX_LOADED_MODELS"))
    if gpu.unified_memory and used > gpu.memory_bytes * 0.5:
        out.append(finding("OLLM011", f"{gpu.name} shares its {gpu.memory_gib:.0f} GiB with the OS: this model takes "
                           f"{used / GIB:.1f} GiB, {(gpu.memory_bytes - used) / GIB:.1f} GiB stay for everything else",
                           site=site))
    return out
