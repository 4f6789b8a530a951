"""TGI's start-up replayed: the launcher's defaults and argument validation (resolved.py, checks.py),
the warmup that sizes the KV cache (models/flash_causal_lm.py::warmup, memory.py) and the router's
checks on the result (router.py)."""

from __future__ import annotations

import math

from servefit.core import DeviceMemory, EngineConfig, MemoryPlan, UsageError
from servefit.engines.tgi import defaults as d
from servefit.engines.tgi import memory as mem
from servefit.engines.tgi import quant_scratch as qs
from servefit.engines.tgi.checks import err, launcher_checks, shard_checks
from servefit.engines.tgi.detail import TgiDetail
from servefit.engines.tgi.resolved import Resolved, resolve
from servefit.engines.tgi.router import finish, legacy_result, warmup_result
from servefit.hardware.spec import GpuSpec
from servefit.memory.dtypes import dtype_bytes
from servefit.models.spec import ModelSpec
from servefit.rules.registry import rule

GiB = 2**30


@rule("TGI008", "TGI014")
def plan(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int) -> MemoryPlan:
    if model.kinds() and all(k == "none" for k in model.kinds()):
        # server/text_generation_server/models/__init__.py::get_model has no encoder-only model type
        raise UsageError(f"text-generation-inference cannot serve {model.name}: it is an encoder-only embedding "
                         f"model (serve it with text-embeddings-inference or vLLM)")
    if model.kinds() and all(k == "mamba" for k in model.kinds()):
        # models/__init__.py::get_model serves MAMBA with the non-flash Mamba class (its own recurrent
        # state per batch, no paged KV cache or warmup): not modelled here
        raise UsageError(f"servefit does not model text-generation-inference's Mamba server ({model.name}, an "
                         f"attention-free state-space model); plan it under vLLM")
    r = resolve(cfg, model, gpu, count)
    e, s = r.e, cfg.settings
    out = MemoryPlan(engine="tgi", engine_version=e.version, outcome="started", memory=DeviceMemory(),
                     parallel={"tensor": r.shards, "pipeline": 1})
    out.messages.extend(r.launcher_logs)
    out.findings.extend(launcher_checks(cfg, model, gpu, count, r))
    if not any(f.severity == "error" for f in out.findings):
        out.findings.extend(shard_checks(cfg, model, gpu, count, r))
    db = dtype_bytes(r.dtype)
    kv_db = mem.kv_dtype_bytes(s.get("kv_cache_dtype"), r.dtype)
    bpt = mem.bytes_per_token(model, kv_db, r.shards)
    block_bytes = bpt * r.block
    total = gpu.memory_bytes
    weights = mem.weights_per_shard(model, db, mem.scheme(r.quantize, model), r.shards)
    ctx = mem.process_overhead(r.attention, r.flash, r.shards)
    batch = mem.warmup_batch(e, r.prefill, r.max_input, r.max_total, r.block, r.speculate, s.get("max_batch_size"),
                             d.warmup_window_blocks(model, e, r.block))
    legacy_bt = d.batch_total_setting(s, e) if not e.infers_batch_total else None
    if legacy_bt is not None and r.flash:
        # < 0.9.4 models/flash_causal_lm.py::FlashCausalLM.warmup(batch, max_total_tokens): the KV cache is
        # CacheManager(math.ceil(max_total_tokens / BLOCK_SIZE) + 10 blocks), allocated before the prefill
        batch.blocks = math.ceil(legacy_bt / r.block) + 10
    # the warm-up KV tensors as the caching allocator reserves them (a tensor's unsplittable segment tail included)
    warm_kv = mem.kv_tensors_reserved(model, kv_db, r.shards, batch.blocks, r.block)
    logprobs = d.request_logprobs(s, cfg.env)
    cc = gpu.compute_capability or 0
    held = mem.gemma3_mask_bytes(model, e, batch.longest, batch.requests, db, r.shards, r.attention) + \
        qs.exllama_scratch(model, e, r.quantize, cc, r.shards, r.prefill)
    # a quantized GEMM's own buffers beside its output (Marlin's a_tmp / c_tmp, llm-awq's split-K partial sums)
    scratch = qs.marlin_scratch(model, e, r.quantize, cc, r.shards, batch.tokens) + \
        qs.awq_split_k_scratch(model, e, r.quantize, cc, r.shards, batch.tokens)
    act = mem.activation_peak(model, e, batch.tokens, batch.requests, db, r.shards, logprobs, scratch) + held
    live = mem.prefill_live_peak(model, e, batch.tokens, batch.requests, db, r.shards, logprobs, scratch) + held
    # torch.cuda.set_per_process_memory_fraction caps what the allocator reserves; the device caps it too, less
    # the process's own non-torch memory and what other processes hold
    limit = min(int(total * r.fraction), total - ctx - gpu.in_use_bytes)
    # PyTorch's caching allocator keeps freed blocks only while new segments fit: when a cudaMalloc fails it
    # releases every cached segment with no live block and retries (c10/cuda/CUDACachingAllocator.cpp::
    # DeviceCachingAllocator::malloc -> release_cached_blocks), so when what the prefill would leave cached
    # does not fit beside the weights and the warm-up KV, what stays reserved is the live peak
    if weights + warm_kv + act > limit:
        act = live
    sizes = d.cuda_graph_sizes(s, e, r.quantize if e.v >= (2, 3, 0) else s.get("quantize"))
    cg = len(sizes) * mem.GRAPH_BYTES
    # 2.1.0 - 2.4.0 models/flash_causal_lm.py::FlashCausalLM.warmup adds back `batch.num_blocks if batch is not
    # None else 0` of the batch generate_token returned, None when every warm-up request finished in the prefill
    added_back = 0 if (e.blocks_of_returned_batch and batch.finished) else batch.blocks
    # TGI reads the device's free memory (torch.cuda.mem_get_info): what other processes hold is not free
    used = ctx + weights + warm_kv + act + gpu.in_use_bytes
    res = mem.kv_blocks(e, total, used, r.fraction, r.wiggle, block_bytes, added_back)
    tokens = res.num_blocks * r.block if r.flash else 0
    budget = int(total * r.fraction * (r.wiggle if e.wiggle_of_total else 1.0))
    kv_bytes = res.kv_bytes if r.flash else 0
    # shown: the live peak a prefill of max_batch_prefill_tokens needs; the rest of what warm-up saw cached is
    # free again once the KV cache is allocated (models/flash_causal_lm.py::warmup empties the cache first)
    out.memory = DeviceMemory(total=total, budget=budget, weights=weights, activation_peak=live, non_torch=ctx,
                              cuda_graphs=cg, kv_cache=kv_bytes,
                              free_headroom=total - weights - live - ctx - cg - kv_bytes)
    out.kv_bytes_per_token = bpt
    out.detail = TgiDetail(max_batch_prefill_tokens=r.prefill, attention=r.attention, block_size=r.block,
                           num_shard=r.shards, cuda_memory_fraction=r.fraction, wiggle_room=r.wiggle,
                           support_chunking=r.chunking, flash_attention=r.flash, warmup_prefill_tokens=batch.tokens,
                           dtype=r.dtype, kv_cache_dtype=r.kv_dtype, quantize=r.quantize, warmup_activation_bytes=act)
    _assume(out, cfg, model, r)
    if any(f.severity == "error" for f in out.findings + cfg.findings):  # clap / launcher refuse
        out.outcome = "rejected_config"
        out.messages += [f"Error: ArgumentValidation({f.message!r})" for f in out.findings if f.code == "TGI003"]
        return finish(out, r, None, None, None)
    if weights > limit:
        out.outcome = "oom_at_load"
        # the shard's own failure, after the launcher's lines (what tune and estimate show as the engine's last word)
        out.messages.append(f"torch.cuda.OutOfMemoryError: CUDA out of memory while loading the weights "
                            f"({weights / GiB:.2f} GiB per shard, {limit / GiB:.2f} GiB allowed)")
        out.findings.append(err("TGI014", f"weights need {weights / GiB:.2f} GiB per shard, the {gpu.name} allows "
                                 f"{limit / GiB:.2f} GiB: torch.cuda.OutOfMemoryError while loading the shard",
                                 cfg, "model_id"))
        return finish(out, r, None, None, None)
    if weights + warm_kv + live > limit:  # the OOM counts live tensors; what stays cached counts for the KV cache
        out.outcome = "oom_at_load"
        msg = (f"Not enough memory to handle {batch.tokens} prefill tokens. You need to decrease "
               "`--max-batch-prefill-tokens`")
        if legacy_bt is not None and r.flash:  # < 0.9.4 flash_causal_lm.py::FlashCausalLM.warmup's wording
            msg = (f"Not enough memory to handle {legacy_bt} total tokens with {batch.tokens} prefill tokens. You "
                   "need to decrease `--max-batch-total-tokens` or `--max-batch-prefill-tokens`")
        out.messages.append(f"RuntimeError: {msg}")
        out.findings.append(err("TGI008", f"{msg} (weights {weights / GiB:.2f} GiB + warmup KV {warm_kv / GiB:.2f} "
                                 f"GiB + activations {live / GiB:.2f} GiB at their peak exceed {limit / GiB:.2f} GiB per shard)",
                                 cfg, "max_batch_prefill_tokens"))
        return finish(out, r, None, None, None)
    if legacy_bt is not None:
        return legacy_result(out, cfg, r, batch)
    return warmup_result(out, cfg, model, r, tokens, res.num_blocks, batch)

def _assume(out: MemoryPlan, cfg: EngineConfig, model: ModelSpec, r: Resolved) -> None:
    a = out.assumptions
    a.append(f"attention backend {r.attention} (KV block size {r.block}); prefill chunking "
             f"{'on' if r.chunking else 'off'}")
    if cfg.settings.get("num_shard") is None:
        a.append(f"num_shard={r.shards} (launcher find_num_shards: the GPUs CUDA_VISIBLE_DEVICES / "
                 "NVIDIA_VISIBLE_DEVICES name; a TGI image sets NVIDIA_VISIBLE_DEVICES=all; a Slurm job names the GPUs "
                 "it was given; a bare command 1)")
    a.append("CUDA context, workspaces and the warmup prefill's activations are estimated from terms calibrated on "
             "public start-up logs; TGI measures free memory at warmup")
    if not r.flash:
        a.append(f"{model.model_type} has no flash-attention implementation in TGI {r.e.version}: the KV cache is not "
                 "pre-allocated and max_batch_total_tokens is the router's default")
    if r.e.v < (3, 0, 0):
        a.append("before TGI 3.0 the warmup prefill computes log-probabilities of every prompt token")
    if r.quantize and not cfg.settings.get("quantize"):
        a.append(f"quantize={r.quantize} taken from the checkpoint's quantization_config")
    if math.isclose(r.wiggle, r.e.wiggle):
        a.append(f"TGI_WIGGLE_ROOM={r.wiggle} (TGI {r.e.version} default)")
