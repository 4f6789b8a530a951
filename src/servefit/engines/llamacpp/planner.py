"""llama-server's memory per device, the way it allocates at start: the model buffers by layer
placement, the KV cache by layer device, one compute buffer per GPU (--fit, which asks these usages
for the unset -c / -ngl, is fit.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from servefit.core import EngineConfig, Finding
from servefit.engines.llamacpp import compute as C
from servefit.engines.llamacpp import kv as K
from servefit.engines.llamacpp import mtp as MT
from servefit.engines.llamacpp import placement as P
from servefit.engines.llamacpp import versions as V
from servefit.engines.llamacpp.config import QUANTIZED_KV, needs_flash_attention
from servefit.engines.llamacpp.model import LModel
from servefit.hardware.cuda_context import context_bytes
from servefit.hardware.spec import GpuSpec
from servefit.rules.registry import rule

MIB = 2**20
# The free memory llama.cpp plans against is read, not computed: ggml/src/ggml-cuda/ggml-cuda.cu
# ggml_backend_cuda_device_get_memory = cudaSetDevice, then cudaMemGetInfo's free (MemAvailable on an integrated
# GPU), read by common/fit.cpp common_get_device_memory_data_impl (src/llama.cpp llama_get_device_memory_data
# before b8865) once the dry run's model and context exist with no buffer allocated, and logged again as
# "using device CUDA0 (...) - N MiB free". On an idle card that is the total less this process's CUDA context,
# which grows with the card's resident threads (hardware/cuda_context.py says by how much and from which logs).
# The driver, what else runs on the card and a display decide the real figure; plans say what was assumed
# (free_assumption()).
CUDA_RESERVE = 512 * MIB  # a card with no thread count here (and ROCm / other backends): not measured


@dataclass
class Extra:
    """An extra model on the main GPU (mmproj, draft): weights, KV, compute."""

    name: str
    weights: int = 0
    kv: int = 0
    compute: int = 0


@dataclass
class Usage:
    """The memory one choice of context, -ngl and --n-cpu-moe takes on each device (weights, KV cache, compute
    buffer, extra models), which --fit and the plan compare with free memory."""

    cp: K.CtxParams
    kv: K.KvLayout
    pl: P.Placement
    comp: C.Compute
    kv_by_dev: dict[int, int]
    compute_by_dev: dict[int, int]
    extra_by_dev: dict[int, int]
    pipeline: bool = False
    rs_by_dev: dict[int, int] = field(default_factory=dict)  # the recurrent-state part of kv_by_dev

    def used(self, dev: int) -> int:
        return self.pl.on(dev) + self.kv_by_dev.get(dev, 0) + self.compute_by_dev.get(dev, 0) + \
            self.extra_by_dev.get(dev, 0)


@dataclass
class Inputs:
    """What a llama.cpp plan works from that does not change while --fit searches, and the usages already
    computed, since the search and the final plan ask for the same ones."""

    lm: LModel
    s: dict[str, Any]
    b: int
    fa: bool
    n_dev: int
    splits: list[float]
    free: list[int]
    extras: list[Extra] = field(default_factory=list)
    cpu_moe_layers: int = 0
    metal_mapped: bool = False  # Apple Metal with the model memory-mapped (placement.py: per-layer embeddings)
    # usage() of each (ctx, ngl, n_cpu_moe): the fit search and the final plan ask for the same ones
    usages: dict[tuple[int, int, int], Usage] = field(default_factory=dict, repr=False, compare=False)
    placements: dict[tuple[int, int], tuple[P.Placement, list[Any]]] = field(default_factory=dict, repr=False,
                                                                            compare=False)


def cuda_context(gpu: GpuSpec) -> int:
    """The CUDA context llama-server holds when it reads free memory (hardware/cuda_context.py), by resident
    threads; CUDA_RESERVE where the card's threads are not known."""
    return context_bytes(gpu) or CUDA_RESERVE


def device_free(gpu: GpuSpec) -> int:
    """Memory llama.cpp sees free at start (ggml_backend_dev_memory): the total less its own CUDA context and
    what other processes hold (--gpu local reads that; 0 otherwise)."""
    if gpu.vendor == "apple":  # Metal reports recommendedMaxWorkingSetSize as the device's memory
        # (ggml-metal.m ggml_backend_metal_device_get_memory), which is what the catalog records
        return gpu.memory_bytes
    if gpu.unified_memory:  # the OS and page cache share the pool (DGX Spark, Jetson)
        return gpu.memory_bytes - max(4 * 2**30, gpu.memory_bytes // 12)
    return max(0, gpu.memory_bytes - cuda_context(gpu) - gpu.in_use_bytes)


def free_assumption(gpu: GpuSpec, fit_on: bool) -> str:
    """What the plan took as free memory, said to the user: llama-server reads the real figure at start."""
    free = device_free(gpu) // MIB
    if gpu.vendor == "apple":
        how = "Metal's working-set limit"
    elif gpu.unified_memory:
        how = f"its {gpu.memory_bytes // MIB} MiB less the share the OS keeps"
    else:
        others = f", {gpu.in_use_bytes // MIB} MiB other processes hold" if gpu.in_use_bytes else \
            ", nothing else on the GPU"
        how = f"its {gpu.memory_bytes // MIB} MiB total less ~{cuda_context(gpu) // MIB} MiB of CUDA context{others}"
    acts = "--fit plans the context and layers against it" if fit_on else "allocations fail beyond it"
    return (f"{free} MiB free per {gpu.name} assumed ({how}); llama-server reads the real free memory when it "
            f"starts (logged as 'using device ... MiB free') and {acts}")


def resolve_fa(s: dict[str, Any], lm: LModel, gpu: GpuSpec, b: int) -> bool:
    """-fa auto: enabled when the device supports it (llama_context: resolve_fused_ops), forced on for a
    quantized V cache ("enabling flash_attn since it is required for quantized V cache")."""
    v = s["flash_attn"]
    if v == "on":
        return True
    if v == "off":
        return False
    if lm.arch == "grok":
        return False
    if not cuda_fa_kernel(s, gpu):
        return False  # the trial graph finds no FA kernel for these cache types: auto -> disabled
    if s["cache_type_v"] in QUANTIZED_KV:
        return True
    return not (gpu.vendor == "nvidia" and 0 < gpu.compute_capability < 60)


CUDA_FA_TYPES = {("f16", "f16"), ("q8_0", "q8_0"), ("q4_0", "q4_0"), ("bf16", "bf16"), ("f32", "f32")}


def cuda_fa_kernel(s: dict[str, Any], gpu: GpuSpec) -> bool:
    """ggml-cuda builds flash-attention kernels for f16 and symmetric q8_0 / q4_0 caches only
    (without GGML_CUDA_FA_ALL_QUANTS): other K/V type pairs have no kernel on CUDA."""
    if gpu.vendor != "nvidia":
        return True
    return (s["cache_type_k"], s["cache_type_v"]) in CUDA_FA_TYPES


def usage(inp: Inputs, ctx: int, ngl: int, n_cpu_moe: int = 0) -> Usage:
    found = inp.usages.get((ctx, ngl, n_cpu_moe))
    if found is None:
        found = inp.usages[(ctx, ngl, n_cpu_moe)] = _usage(inp, ctx, ngl, n_cpu_moe)
    return found


def _usage(inp: Inputs, ctx: int, ngl: int, n_cpu_moe: int) -> Usage:
    s, lm, b = inp.s, inp.lm, inp.b
    cp = K.context(lm, ctx, s["parallel"], s["kv_unified"], s["batch_size"], s["ubatch_size"], inp.fa, b)
    kv = K.layout(lm, cp, s["cache_type_k"], s["cache_type_v"], inp.fa, s["swa_full"], b, MT.n_rs_seq(s, lm))
    pl, on_cpu = _placed(inp, ngl, max(s["n_cpu_moe"], n_cpu_moe))
    kv_dev = P.kv_devices(pl, lm.n_layer, s["kv_offload"], s["split_mode"], s["main_gpu"])
    kv_by: dict[int, int] = {}
    rs_by: dict[int, int] = {}
    for il, nbytes in enumerate(kv.layer_bytes):
        kv_by[kv_dev[il]] = kv_by.get(kv_dev[il], 0) + nbytes
        if kv.layer_rs[il]:
            rs_by[kv_dev[il]] = rs_by.get(kv_dev[il], 0) + kv.layer_rs[il]
    comp = C.compute_buffer(lm, cp, kv, inp.fa, b, int(s.get("draft_max") or 0) if s.get("model_draft") else 0)
    gpus_used = sorted({d for d in pl.layer_dev if d != P.CPU} | {d for d in kv_by if d != P.CPU})
    if not gpus_used and inp.n_dev:
        gpus_used = [s["main_gpu"]] if cp.n_ubatch >= 32 else []  # op offload still computes on the GPU
    comp_by = {d: comp.device for d in gpus_used}
    if on_cpu and gpus_used and cp.n_ubatch >= 32:  # op offload copies CPU weights to the GPU per op
        biggest = max(t.nbytes for t in on_cpu)
        comp_by = {d: v + biggest for d, v in comp_by.items()}
    pipeline = (inp.n_dev > 1 and pl.n_offloaded >= lm.n_layer + 1 and s["split_mode"] == "layer"
                and s["kv_offload"] and not s["override_tensor"])
    if pipeline:  # GGML_SCHED_MAX_COPIES = 4 copies of the graph inputs
        comp_by = {d: v + 3 * comp.host for d, v in comp_by.items()}
    extra_by: dict[int, int] = {}
    main = s["main_gpu"] if inp.n_dev else P.CPU
    for ex in inp.extras:
        extra_by[main] = extra_by.get(main, 0) + ex.weights + ex.kv + ex.compute
    return Usage(cp, kv, pl, comp, kv_by, comp_by, extra_by, pipeline, rs_by)


def _placed(inp: Inputs, ngl: int, n_cpu_moe: int) -> tuple[P.Placement, list[Any]]:
    """Where the weights go, and the matrices left on the CPU: the same for every context size
    the fit search tries."""
    found = inp.placements.get((ngl, n_cpu_moe))
    if found is None:
        s, lm = inp.s, inp.lm
        rules = P.parse_overrides(s["override_tensor"], s["cpu_moe"], n_cpu_moe)
        pl = P.place(lm, ngl, inp.n_dev, s["split_mode"], inp.splits, s["main_gpu"], rules, inp.b,
                     inp.metal_mapped)
        on_cpu = [t for t in lm.tensors if len(t.shape) >= 2 and _layer_dev(pl, t.name, lm.n_layer) == P.CPU]
        found = inp.placements[(ngl, n_cpu_moe)] = (pl, on_cpu)
    return found


def _layer_dev(pl: P.Placement, name: str, n_layer: int) -> int | None:
    il = P.layer_of(name, n_layer)
    return None if il is None else pl.layer_dev[il]


def ngl_value(v: int | str, lm: LModel, fit_on: bool) -> int | None:
    """An -ngl as a layer count (None: auto, for fit to decide)."""
    if v == "all":
        return lm.n_layer + 1
    if v == "auto":
        return None if fit_on else lm.n_layer + 1
    return int(v)


def model_bytes_of(path: str) -> int:
    from servefit.models.gguf import read_gguf

    return read_gguf(path).weight_bytes


def extras(cfg: EngineConfig, lm: LModel, assumptions: list[str]) -> list[Extra]:
    """The projector and the draft model: weights on the main GPU (their KV and compute too)."""
    s = cfg.settings
    out: list[Extra] = []
    mm = s.get("mmproj")
    if mm and s.get("mmproj_offload", True):
        if os.path.isfile(mm):
            out.append(Extra("mmproj", weights=model_bytes_of(mm)))
        else:
            assumptions.append(f"projector {os.path.basename(str(mm))} not readable here: its weights "
                               "(hundreds of MiB to ~1 GiB) are not counted")
    if lm.n_nextn and MT.mtp_head(s):  # the MTP draft context (mtp.py): its KV and compute buffer, no weights of its own
        b = V.build(cfg.version)
        cp = K.context(lm, int(s["ctx_size"] or lm.n_ctx_train), s["parallel"], s["kv_unified"], s["batch_size"],
                       s["ubatch_size"], True, b)
        kv = MT.draft_kv_bytes(lm, cp.n_ctx, str(s.get("cache_type_k_draft", "f16")),
                               str(s.get("cache_type_v_draft", "f16")))
        out.append(Extra("draft", kv=kv, compute=C.mtp_draft(lm, cp, True, C.n_outputs(cp, b))))
    draft = s.get("model_draft")
    if draft:
        try:
            from servefit.engines.llamacpp.model import from_gguf, from_spec
            from servefit.models.gguf import read_gguf
            from servefit.models.gguf_names import parse_ref, resolve_gguf_ref

            if os.path.isfile(draft):
                dm = from_gguf(read_gguf(draft))
            else:
                dm = from_spec(resolve_gguf_ref(draft), parse_ref(draft)[1] or "Q4_K_M")
            dcp = K.context(dm, int(s.get("ctx_size_draft") or s["ctx_size"] or lm.n_ctx_train), s["parallel"],
                            s["kv_unified"], s["batch_size"], s["ubatch_size"], True, V.build(cfg.version))
            dkv = K.layout(dm, dcp, str(s.get("cache_type_k_draft", "f16")), str(s.get("cache_type_v_draft", "f16")),
                           True, False, V.build(cfg.version))
            out.append(Extra("draft", weights=dm.weight_bytes, kv=dkv.total,
                             compute=C.compute_buffer(dm, dcp, dkv, True, V.build(cfg.version)).device))
        except Exception:
            assumptions.append(f"draft model {os.path.basename(str(draft))} could not be sized; not counted")
    return out


@rule("LCPP004", "LCPP005")
def findings_for_model(cfg: EngineConfig, lm: LModel, fa: bool) -> list[Finding]:
    from servefit.rules.catalog import finding

    s, sp, out = cfg.settings, cfg.spans, []
    if not fa and s["cache_type_v"] in QUANTIZED_KV and s["flash_attn"] == "auto":
        out.append(needs_flash_attention("failed to initialize the context: quantized V cache was requested, but this "
                           f"requires Flash Attention (-fa auto found no flash-attention kernel for K {s['cache_type_k']}"
                           f" / V {s['cache_type_v']} on this device; CUDA builds have f16, q8_0/q8_0 and q4_0/q4_0)",
                           span=sp.get("cache_type_v"), site=cfg.site.name if cfg.site else "",
                           setting="cache_type_v"))
    b = V.build(cfg.version)
    # src/llama-context.cpp llama_init_from_model (from #15434, b6325; read at b6646 / b7108): the block-size check
    # runs only `if (params.flash_attn_type == LLAMA_FLASH_ATTN_TYPE_AUTO && ggml_is_quantized(type))`, before
    # auto is resolved: -fa auto fails whatever it would pick, -fa on / off skip it; builds before have no check
    if b >= V.FA_AUTO and s["flash_attn"] == "auto" and (s["cache_type_k"] in QUANTIZED_KV
                                                          or s["cache_type_v"] in QUANTIZED_KV):
        why = K.block_problem(lm, s["cache_type_k"], s["cache_type_v"])
        if why:
            out.append(finding("LCPP004", f"llama_init_from_model: {why}", span=sp.get("cache_type_k"),
                               site=cfg.site.name if cfg.site else "", setting="cache_type_k"))
    # PR #25871 (2026-07-18, extended in review to hparams.is_mla()): llama_init_from_model refuses differing K and V
    # types where V is a view of K; before it -ctv was ignored for those models (no V cache since #19067)
    if lm.mla and s["cache_type_k"] != s["cache_type_v"] and b >= V.MLA_SAME_TYPES:
        out.append(finding("LCPP005", f"model does not support different K ({s['cache_type_k']}) and V "
                           f"({s['cache_type_v']}) cache types (MLA stores K only)",
                           span=sp.get("cache_type_v") or sp.get("cache_type_k"),
                           site=cfg.site.name if cfg.site else "", setting="cache_type_v"))
    return out
