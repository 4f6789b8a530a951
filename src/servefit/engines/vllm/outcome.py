"""The outcome vLLM reaches at start, from the plan's numbers: started, out of memory at load,
no memory for KV blocks, or a max-model-len it refuses; with the lines vLLM logs, the finding that
says so (verdicts.py) and the capacity advice (checks.advice). Kept apart from plan.py, which
predicts the numbers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.core import EngineConfig, MemoryPlan
from servefit.engines.vllm import checks, unified, verdicts
from servefit.engines.vllm.era import Era, vtuple
from servefit.engines.vllm.graphs import graphs_budgeted
from servefit.engines.vllm.kvcache import attention_free, capacity
from servefit.engines.vllm.non_torch import cuda_context_bytes, device_wide
from servefit.hardware.spec import GpuSpec
from servefit.models.spec import ModelSpec

if TYPE_CHECKING:
    from servefit.engines.vllm.plan import Resolved

GiB = 2**30


def outcome(out: MemoryPlan, cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, r: Resolved, e: Era, lays,
             num_blocks: int, avail: int, max_len: int, in_flight: int, dcp: int, budget: int) -> None:
    """The outcome of the start-up and vLLM's log lines; then the findings that say so (verdicts.py)
    and the capacity advice (checks.advice). `lays`: the KV layout and the one the memory check uses."""
    v = verdict(out, cfg, model, gpu, r, e, lays, num_blocks, avail, max_len, in_flight, dcp, budget)
    out.findings.extend(verdicts.findings(cfg, gpu, out, v, graphs_budgeted(model, r, e, cfg)))
    advice = checks.advice(cfg, model, gpu, r, e, out)
    if out.outcome in ("oom_at_load", "no_kv_memory"):
        # CUDA graphs are captured after the KV cache is allocated (gpu_model_runner.capture_model
        # runs from initialize_kv_cache): beside a weights OOM or an empty KV budget the warning
        # contradicts the error; a refused max-model-len keeps it (the graphs fail next)
        advice = [f for f in advice if f.code != "VLLM016"]
    if attention_free(model) or not any(g.layers for g in lays[0].groups):
        # requests are not bounded by KV blocks: the concurrency advice does not apply
        advice = [f for f in advice if f.code != "VLLM019"]
    out.findings.extend(advice)


def verdict(out: MemoryPlan, cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, r: Resolved, e: Era, lays,
             num_blocks: int, avail: int, max_len: int, in_flight: int, dcp: int, budget: int) -> verdicts.Verdict:
    """Numbers and outcome only: sets out.outcome, out.messages and the KV capacity."""
    lay, check_lay = lays
    v = verdicts.Verdict(util=r.util, budget=budget, avail=avail, max_num_batched_tokens=r.max_num_batched_tokens)
    if any(f.severity == "error" for f in out.findings + cfg.findings):  # argparse refuses (VLLM001/002)
        out.outcome = "rejected_config"
    mem = out.memory
    # in use: --gpu local (NVML; on unified memory the OS's MemAvailable, as vLLM reads it: unified.py)
    context = cuda_context_bytes(gpu)  # this card's own CUDA context, outside every budget
    v.free_at_start = gpu.memory_bytes - context - gpu.in_use_bytes
    if out.outcome == "started" and budget > v.free_at_start and e.v1:
        out.outcome, v.code = "rejected_config", "VLLM020"
        out.messages.append(f"Free memory on device ({v.free_at_start / GiB:.2f}/{gpu.memory_bytes / GiB:.2f} GiB) on "
                            f"startup is less than desired GPU memory utilization ({r.util}, {budget / GiB:.2f} GiB)")
    if out.outcome == "started" and mem.weights + context > gpu.memory_bytes:
        out.outcome, v.code, v.reason = "oom_at_load", "VLLM005", "load"
    cached = unified.page_cache(gpu, e, mem.weights, cfg.settings)  # reclaimable: the budget counts it, no OOM
    # the releases whose non-torch figure charges the whole device have the context in it already
    beside = 0 if device_wide(vtuple(e.version), e.v1) else context
    if out.outcome == "started" and mem.weights + mem.activation_peak + mem.non_torch - cached + beside \
            > gpu.memory_bytes:
        out.outcome, v.code, v.reason = "oom_at_load", "VLLM005", "profile"
    # --kv-cache-memory-bytes skips the budget (v1/worker/gpu_worker.py::determine_available_memory returns it
    # as given, 0.10.2 on); gpu_model_runner.py::_allocate_kv_cache_tensors then asks torch for that many bytes
    # beside the weights and non-torch memory (the profile's activations are cached blocks torch frees first)
    if out.outcome == "started" and cfg.settings.get("kv_cache_memory_bytes") and \
            mem.weights + mem.non_torch - cached + mem.kv_cache + context + gpu.in_use_bytes > gpu.memory_bytes:
        out.outcome, v.code, v.reason = "oom_at_load", "VLLM005", "kv"
        out.messages.append("CUDA out of memory allocating the KV cache (the size --kv-cache-memory-bytes sets)")
    if attention_free(model) or not any(g.layers for g in lay.groups):
        out.max_model_len = max_len
        if out.outcome == "started":
            out.messages.append("attention-free model (encoder-only pooling): no KV cache is allocated"
                                if attention_free(model) else "no attention layers: the recurrent state is not "
                                "sized by this release's KV-cache manager (planned from 0.9.1 on)")
        return v
    check = avail - (lay.bytes_per_block if e.null_block_in_check else 0)
    v.check = check
    auto = r.max_model_len == "auto"
    if auto and out.outcome == "started":
        fit = check_lay.largest_fitting_len(check, r.derived_len, in_flight, dcp) if check > 0 else 0
        if fit <= 0:
            out.outcome = "no_kv_memory"
            out.messages.append("Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token")
        else:
            max_len = fit
            out.messages.append(f"Auto-fit max_model_len: reduced from {r.derived_len} to {fit}")
    out.max_model_len = v.max_len = max_len
    if out.outcome == "started" and check <= 0:
        out.outcome, v.code = "no_kv_memory", "VLLM004"
        out.messages.append("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
                            "initializing the engine.")
    if out.outcome == "started":
        needed = check_lay.needed_bytes(max(1, -(-max_len // dcp)), in_flight)
        if needed > check:
            out.outcome, v.code = "refused_max_model_len", "VLLM003"
            fit = check_lay.largest_fitting_len(check, max_len, in_flight, dcp)
            out.fitting_max_model_len = v.fit = fit
            v.needed = needed
            msg = (f"To serve at least one request with the model's max seq len ({max_len}), ({needed / GiB:.2f} GiB "
                   f"KV cache is needed, which is larger than the available KV cache memory ({check / GiB:.2f} GiB)."
                   + (f" Based on the available memory, the estimated maximum model length is {fit}." if fit > 0 else ""))
            if not e.v1:  # V0 words it per block: worker/worker.py::raise_if_cache_size_invalid (0.4.3-0.10)
                msg = (f"The model's max seq len ({max_len}) is larger than the maximum number of tokens that can be "
                       f"stored in KV cache ({r.block_size * num_blocks}). Try increasing `gpu_memory_utilization` or "
                       "decreasing `max_model_len` when initializing the engine.")
            out.messages.append(msg)
    tokens, conc = capacity(lay, num_blocks, max_len, in_flight, e, dcp)
    out.kv_cache_tokens, out.max_concurrency = tokens, conc
    if out.outcome == "started" and not e.v1:
        out.messages.extend(_v0_cache_lines(cfg, e, num_blocks, r.block_size, max_len, out.kv_bytes_per_token))
    elif out.outcome == "started":
        out.messages.append(f"GPU KV cache size: {tokens:,} tokens")
        out.messages.append(f"Maximum concurrency for {max_len:,} tokens per request: {conc:.2f}x")
    # the pool is allocated and logged; then graph capture checks it (mamba_blocks_short)
    if out.outcome == "started" and mamba_blocks_short(model, cfg, gpu, r, e, lay, num_blocks):
        out.outcome, v.code, v.fit, v.max_num_seqs = "rejected_config", "VLLM025", num_blocks, r.max_num_seqs
        out.messages.append(f"max_num_seqs ({r.max_num_seqs}) exceeds available Mamba cache blocks ({num_blocks}). "
                            "Each decode sequence requires one Mamba cache block, so CUDA graph capture cannot "
                            f"proceed. Please lower max_num_seqs to at most {num_blocks} or increase "
                            "gpu_memory_utilization.")
    return v


MAMBA_BLOCKS_CHECK_FROM = (0, 20, 0)  # mamba_blocks_short


def mamba_blocks_short(model: ModelSpec, cfg: EngineConfig, gpu: GpuSpec, r: Resolved, e: Era, lay,
                       num_blocks: int) -> bool:
    """Whether vLLM stops before capturing graphs because each decode sequence of a full graph needs one
    Mamba cache block and the pool has fewer blocks than --max-num-seqs: from 0.20.0
    config/compilation.py::CompilationConfig.resolve_cudagraph_mode_and_sizes raises where the resolved
    mode has full graphs, the KV-cache config has a MambaSpec group and max_num_reqs > num_blocks
    (read in the 0.20.0 - 0.22.0 and 0.24.0 - 0.33.0 wheels, 0.23 not read; both model runners call it
    once the KV cache is allocated). 0.18 - 0.19 cap the capture sizes to the blocks instead
    (CompilationConfig.adjust_cudagraph_sizes_for_mamba_cache, no error)."""
    from servefit.engines.vllm.graphs import graph_sizes

    if not e.v1 or r.version < MAMBA_BLOCKS_CHECK_FROM or r.max_num_seqs <= num_blocks:
        return False
    if not any(g.kind in ("mamba", "mamba_all") for g in lay.groups):
        return False
    return bool(graph_sizes(model, r, e, cfg, gpu)[1])  # full graphs captured (has_full_cudagraphs)


def _v0_cache_lines(cfg: EngineConfig, e: Era, num_blocks: int, block_size: int, max_len: int,
                    kv_bytes_per_token: int) -> list[str]:
    """What the V0 engine logs once the cache is sized (executor/gpu_executor.py::initialize_cache,
    executor_base.py from 0.7): "# GPU blocks: N, # CPU blocks: M" ("# cuda blocks" from 0.7, the
    platform's device_name), then, from 0.6.3, the concurrency as num_gpu_blocks x block_size /
    max_model_len. CPU blocks = swap_space (4 GiB default) // one block's bytes (worker.py)."""
    v = vtuple(e.version)
    swap = float(cfg.settings.get("swap_space") or 4)
    block_bytes = kv_bytes_per_token * block_size
    cpu = int(swap * GiB // block_bytes) if block_bytes else 0
    device = "cuda" if v >= (0, 7, 0) else "GPU"
    out = [f"# {device} blocks: {num_blocks}, # CPU blocks: {cpu}"]
    if v >= (0, 6, 3):
        out.append(f"Maximum concurrency for {max_len} tokens per request: {num_blocks * block_size / max_len:.2f}x")
    return out
