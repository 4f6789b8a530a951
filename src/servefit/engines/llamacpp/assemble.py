"""The llama.cpp MemoryPlan: effective settings -> fit -> per-device memory -> outcome, findings and
the log lines llama-server will print (src/llama-model.cpp load_tensors, src/llama-kv-cache.cpp,
src/llama-context.cpp sched_reserve; format strings per docs A5)."""

from __future__ import annotations

from typing import Any

from servefit.core import DeviceMemory, EngineConfig, MemoryPlan
from servefit.engines.llamacpp import fit as F
from servefit.engines.llamacpp import model as M
from servefit.engines.llamacpp import mtp as MT
from servefit.engines.llamacpp import placement as P
from servefit.engines.llamacpp import planner as PL
from servefit.engines.llamacpp import versions as V
from servefit.engines.llamacpp.config import QUANTIZED_KV
from servefit.engines.llamacpp.detail import LlamaCppDetail
from servefit.hardware.spec import GpuSpec
from servefit.models.spec import ModelSpec
from servefit.rules.catalog import finding
from servefit.rules.registry import rule

MIB = 2**20
REJECT = {"LCPP001", "LCPP002", "LCPP003", "LCPP004", "LCPP005"}


def dev_name(gpu: GpuSpec, d: int) -> str:
    if d == P.CPU:
        return "CPU"
    return {"nvidia": "CUDA", "amd": "ROCm", "apple": "MTL"}.get(gpu.vendor, "GPU") + str(d)


def mib(n: int) -> float:
    return round(n / MIB, 2)


def plan(cfg: EngineConfig, spec: ModelSpec, gpu: GpuSpec, count: int) -> MemoryPlan:
    s, b = cfg.settings, V.build(cfg.version)
    site = cfg.site.name if cfg.site else ""
    assumptions: list[str] = []
    lm = M.load(s, spec, assumptions)
    if MT.mtp_head(s) and lm.arch in MT.RS_ROLLBACK_ARCHS:  # --spec-type draft-mtp loads the MTP block (mtp.py)
        lm = MT.with_nextn(lm)
    n_dev = 1 if gpu.vendor == "apple" else max(1, count or 1)
    fa = PL.resolve_fa(s, lm, gpu, b)
    free = [PL.device_free(gpu)] * n_dev
    splits = list(s["tensor_split"] or [1.0] * n_dev)[:n_dev]
    splits += [0.0] * (n_dev - len(splits))
    inp = PL.Inputs(lm=lm, s=s, b=b, fa=fa, n_dev=n_dev, splits=splits, free=free,
                    metal_mapped=gpu.vendor == "apple" and bool(s["mmap"]))
    inp.extras = PL.extras(cfg, lm, assumptions)
    findings = PL.findings_for_model(cfg, lm, fa)
    fit_on = bool(s["fit"])
    ngl_user = PL.ngl_value(s["n_gpu_layers"], lm, fit_on)
    ctx_user = int(s["ctx_size"])
    fr = F.FitResult(ctx=ctx_user or int(s.get("ctx_default") or 0) or lm.n_ctx_train, ngl=ngl_user if ngl_user is not None else lm.n_layer + 1)
    if fit_on:
        fr = F.run_fit(inp, ctx_user, ngl_user)
        if fr.splits:
            inp = F.with_splits(inp, fr.splits)
        if fr.overrides:
            inp = F.with_overrides(inp, fr.overrides)
    u = PL.usage(inp, fr.ctx, fr.ngl, 0 if fr.overrides else fr.n_cpu_moe)
    # ---- outcome
    rejected = [f for f in cfg.findings + findings if f.code in REJECT and f.severity == "error"]
    over = [d for d in range(n_dev) if u.used(d) > free[d]]
    outcome = "rejected_config" if rejected else ("oom_at_load" if over else "started")
    # ---- per device
    devices = []
    for d in range(n_dev):
        used = u.used(d)
        devices.append(DeviceMemory(
            total=gpu.memory_bytes, budget=free[d], weights=u.pl.on(d) + sum(e.weights for e in inp.extras
                                                                             if d == s["main_gpu"]),
            activation_peak=u.compute_by_dev.get(d, 0), non_torch=gpu.memory_bytes - free[d],
            kv_cache=u.kv_by_dev.get(d, 0) + sum(e.kv for e in inp.extras if d == s["main_gpu"]),
            free_headroom=max(0, free[d] - used), label=f"{dev_name(gpu, d)} ({gpu.name})"))
    worst = max(range(n_dev), key=lambda d: u.used(d) / max(1, free[d]))
    cp, kv = u.cp, u.kv
    n_total_layers = lm.n_layer + 1
    # the KV buffer line leaves out the recurrent state, logged on its own (llama_memory_recurrent: RS buffer)
    gpu_kv = sum(v - u.rs_by_dev.get(d, 0) for d, v in u.kv_by_dev.items() if d != P.CPU)
    detail = LlamaCppDetail(
        kv_buffer_mib=mib(kv.total - kv.rs_bytes), kv_buffer_gpu_mib=mib(gpu_kv),
        model_buffer_mib=mib(sum(v for d, v in u.pl.weights.items() if d != P.CPU)),
        model_buffer_host_mib=mib(u.pl.on(P.CPU)),
        compute_buffer_mib=mib(max(u.compute_by_dev.values(), default=0)),
        compute_buffer_host_mib=mib(u.comp.host),
        kv_cache_cells=kv.cells_base, n_ctx=cp.n_ctx, n_ctx_per_seq=cp.n_ctx_seq,
        n_parallel=cp.n_seq, kv_unified=cp.unified, flash_attn=fa,
        n_gpu_layers_offloaded=u.pl.n_offloaded, n_layers_total=n_total_layers,
        n_ubatch=cp.n_ubatch, model_source=lm.source, gguf_ftype=lm.ftype,
    )
    if kv.cells_swa:
        detail.kv_cache_cells_swa = kv.cells_swa
        detail.kv_buffer_swa_mib = mib(kv.swa_bytes)
    if kv.rs_bytes:
        detail.rs_buffer_mib = mib(kv.rs_bytes)
    if n_dev > 1:
        detail.devices_mib = {dev_name(gpu, d): {"model": mib(u.pl.on(d)), "kv": mib(u.kv_by_dev.get(d, 0)),
                                                 "compute": mib(u.compute_by_dev.get(d, 0))} for d in range(n_dev)}
    if fit_on:
        detail.fit = {"ctx": fr.ctx, "n_gpu_layers": fr.ngl, "n_cpu_moe": fr.n_cpu_moe,
                      "changed_ctx": fr.changed_ctx, "changed_layers": fr.changed_layers}
    msgs = messages(gpu, u, lm, b, fa, s, over, outcome, rejected)
    if fit_on and outcome != "rejected_config":
        msgs[:0] = fr.log
    if outcome != "rejected_config":
        findings += advice(cfg, lm, u, fr, fit_on, ctx_user, ngl_user, gpu, free, devices, outcome, over, site)
    _assume(assumptions, cfg, s, fa, lm, b, gpu)
    return MemoryPlan(
        engine="llamacpp", engine_version=f"b{b}", outcome=outcome, memory=devices[worst],
        kv_bytes_per_token=kv.bytes_per_token, kv_cache_tokens=cp.n_ctx, max_model_len=cp.n_ctx_seq,
        max_concurrency=round(cp.n_ctx / max(1, cp.n_ctx_seq), 2), devices=devices if n_dev > 1 else [],
        parallel={"tensor": 1, "pipeline": n_dev if u.pipeline else 1, "world": n_dev},
        assumptions=assumptions, findings=findings, messages=msgs, detail=detail)


def messages(gpu: GpuSpec, u: PL.Usage, lm: M.LModel, b: int, fa: bool, s: dict[str, Any], over: list[int],
             outcome: str, rejected: list[Any]) -> list[str]:
    out: list[str] = []
    if rejected:
        out.extend(f.message for f in rejected)
        return out
    if s["cache_type_v"] in QUANTIZED_KV and s["flash_attn"] == "auto":
        out.append("llama_context: enabling flash_attn since it is required for quantized V cache")
    out.append(f"load_tensors: offloaded {u.pl.n_offloaded}/{lm.n_layer + 1} layers to GPU")
    for d, nbytes in sorted(u.pl.weights.items(), key=lambda kv: (kv[0] == P.CPU, kv[0])):
        name = dev_name(gpu, d) if d != P.CPU else ("CPU_Mapped" if s["mmap"] else "CPU")
        out.append(f"load_tensors: {name:>12} model buffer size = {nbytes / MIB:8.2f} MiB")
    if u.kv.cells_swa:
        out.append(f"llama_kv_cache_iswa: creating non-SWA KV cache, size = {u.kv.cells_base} cells")
        out.append(f"llama_kv_cache_iswa: creating     SWA KV cache, size = {u.kv.cells_swa} cells")
    for d, nbytes in sorted(u.kv_by_dev.items()):
        if nbytes - u.rs_by_dev.get(d, 0):
            out.append(f"{V.kv_log_prefix(b)}: {dev_name(gpu, d):>10} KV buffer size = "
                       f"{(nbytes - u.rs_by_dev.get(d, 0)) / MIB:8.2f} MiB")
    for d, nbytes in sorted(u.rs_by_dev.items()):  # src/llama-memory-recurrent.cpp (the constructor's log)
        if nbytes:
            out.append(f"llama_memory_recurrent: {dev_name(gpu, d):>10} RS buffer size = {nbytes / MIB:8.2f} MiB")
    if u.cp.n_ctx_seq < lm.n_ctx_train:
        out.append(f"llama_context: n_ctx_seq ({u.cp.n_ctx_seq}) < n_ctx_train ({lm.n_ctx_train}) -- the full "
                   "capacity of the model will not be utilized")
    for d, nbytes in sorted(u.compute_by_dev.items()):
        out.append(f"{V.compute_log_prefix(b)}: {dev_name(gpu, d):>10} compute buffer size = {nbytes / MIB:8.2f} MiB")
    for d in over:
        out.append(f"ggml_backend_cuda_buffer_type_alloc_buffer: allocating on device {d}: cudaMalloc failed: "
                   f"out of memory (needs {u.used(d) / MIB:.0f} MiB of {PL.device_free(gpu) / MIB:.0f} MiB free)")
    return out


def _rope_stretch(s: dict[str, Any]) -> tuple[str, float]:
    """The context factor the file's RoPE scaling gives (common/arg.cpp: `--rope-scale N` sets rope_freq_scale
    = 1/N, "expands context by a factor of N"; `--rope-freq-scale N` "by a factor of 1/N"); 1 where none."""
    try:
        if s.get("rope_scale"):
            return f"--rope-scale {float(s['rope_scale']):g}", float(s["rope_scale"])
        if s.get("rope_freq_scale") and float(s["rope_freq_scale"]) > 0:
            return f"--rope-freq-scale {float(s['rope_freq_scale']):g}", 1 / float(s["rope_freq_scale"])
    except (TypeError, ValueError):
        pass
    return "", 1.0


@rule("LCPP006", "LCPP008", "LCPP009", "LCPP010", "LCPP011", "LCPP012", "LCPP013", "LCPP014", "LCPP016", "LCPP017", "LCPP018")
def advice(cfg: EngineConfig, lm: M.LModel, u: PL.Usage, fr: F.FitResult, fit_on: bool, ctx_user: int,
           ngl_user: int | None, gpu: GpuSpec, free: list[int], devices: list[DeviceMemory], outcome: str,
           over: list[int], site: str) -> list[Any]:
    s, sp = cfg.settings, cfg.spans
    out: list[Any] = []
    cp = u.cp
    if outcome == "oom_at_load":
        d = over[0]
        extra = u.extra_by_dev.get(d, 0)  # the projector / draft model's weights, KV and compute on this device
        more = f" + projector / draft model {extra / 2**30:.2f}" if extra else ""
        out.append(finding("LCPP006", f"{dev_name(gpu, d)} needs {u.used(d) / 2**30:.2f} GiB (model "
                           f"{u.pl.on(d) / 2**30:.2f} + KV {u.kv_by_dev.get(d, 0) / 2**30:.2f} + compute "
                           f"{u.compute_by_dev.get(d, 0) / 2**30:.2f}{more}) but has {free[d] / 2**30:.2f} GiB free",
                           span=sp.get("ctx_size") or sp.get("n_gpu_layers"), site=site, setting="ctx_size"))
    if not cp.unified and cp.n_seq > 1 and (ctx_user or cp.n_ctx_seq < lm.n_ctx_train):
        # an unset -c under --fit from fit.FIT_STREAMS gives every slot the training length
        out.append(split_context(cp, ctx_user, s, sp, V.build(cfg.version), site))
    if not ctx_user and s.get("ctx_default"):
        out.append(finding("LCPP008", f"no -c: llama-server b{V.build(cfg.version)} defaults to -c {s['ctx_default']} "
                           f"(the model was trained for {lm.n_ctx_train}; -c 0 takes that; KV cache "
                           f"{u.kv.total / 2**30:.2f} GiB)", span=sp.get("model"), site=site, setting="ctx_size"))
    elif not ctx_user:
        what = (f"fit lowers it to {fr.ctx}" if fr.changed_ctx else f"KV cache {u.kv.total / 2**30:.2f} GiB")
        out.append(finding("LCPP008", f"no -c: the context defaults to the training length {lm.n_ctx_train} "
                           f"({what})", span=sp.get("model"), site=site, setting="ctx_size"))
    if fr.changed_ctx and ctx_user == 0:
        out.append(finding("LCPP010", f"--fit: context size reduced from {fr.ctx_from} to {fr.ctx} to keep "
                           f"{s['fit_target'][0]} MiB free", span=sp.get("model"), site=site, setting="ctx_size"))
    n_all = lm.n_layer + 1
    if u.pl.n_offloaded < n_all or fr.n_cpu_moe:
        how = "--fit" if fr.changed_layers else "-ngl"
        on_cpu: list[str] = []
        if u.pl.n_offloaded < n_all:
            on_cpu.append(f"{n_all - u.pl.n_offloaded} layer{'s' if n_all - u.pl.n_offloaded != 1 else ''}")
        if fr.n_cpu_moe:
            on_cpu.append(f"the experts of {fr.n_cpu_moe} layer{'s' if fr.n_cpu_moe != 1 else ''}")
        out.append(finding("LCPP009", f"offloaded {u.pl.n_offloaded}/{n_all} layers to GPU ({how}); "
                           f"{' and '.join(on_cpu)} run{'s' if on_cpu == ['1 layer'] else ''} on the CPU",
                           # with --fit, the context --fit-ctx keeps is what moves layers or experts off the GPU
                           span=sp.get("n_gpu_layers") or sp.get("ctx_size") or sp.get("fit_ctx"), site=site,
                           setting="n_gpu_layers"))
    if cp.n_ctx_seq > lm.n_ctx_train > 0:
        said = f"n_ctx_seq ({cp.n_ctx_seq}) > n_ctx_train ({lm.n_ctx_train}) -- possible training context overflow"
        flag, factor = _rope_stretch(s)
        if factor > 1 and lm.n_ctx_train * factor >= cp.n_ctx_seq:  # the file stretches RoPE to that length itself
            out.append(finding("LCPP011", f"{said} (llama.cpp logs it; {flag} stretches RoPE over "
                               f"{int(lm.n_ctx_train * factor):,} tokens, as this file asks)", span=sp.get("ctx_size"),
                               site=site, setting="ctx_size", severity="info"))
        else:
            out.append(finding("LCPP011", said, span=sp.get("ctx_size"), site=site, setting="ctx_size"))
    if fit_on and fr.failed and outcome != "started":
        out.append(finding("LCPP012", f"--fit cannot adjust anything: {fr.failed}", span=sp.get("n_gpu_layers"),
                           site=site, setting="n_gpu_layers"))
    b = V.build(cfg.version)
    # builds before --fit (b7407) have no plan to leave them out of, nor a --fit-target to raise
    outside = [k for k, name in (("mmproj", "mmproj"), ("model_draft", "draft"))
               if s.get(k) and b >= V.FIT and not (fit_on and b >= (F.MMPROJ_FIT if name == "mmproj" else F.DRAFT_FIT))]
    if outside:  # llama-server adds them to --fit-target itself from those builds (fit.py)
        out.append(finding("LCPP013", "the projector / draft model is loaded outside --fit's plan; keep "
                           "--fit-target above its size", span=sp.get(outside[0]), site=site, setting="mmproj"))
    used = sum(dm.weights + dm.kv_cache + dm.activation_peak for dm in devices)
    if gpu.unified_memory and outcome == "started" and used > gpu.memory_bytes * 0.5:
        out.append(finding("LCPP014", f"{gpu.name} shares its {gpu.memory_gib:.0f} GiB with the OS: this server "
                           f"takes {used / 2**30:.1f} GiB of it, leaving {(gpu.memory_bytes - used) / 2**30:.1f} GiB "
                           "for the OS and every other program", site=site))
    if not s["kv_offload"]:
        out.append(finding("LCPP016", f"-nkvo: {u.kv.total / 2**30:.2f} GiB of KV cache stay in host memory",
                           span=sp.get("no_kv_offload"), site=site, setting="kv_offload"))
    if s["swa_full"]:
        msg = ("--swa-full has no effect: the model has no sliding-window layers" if not any(lm.swa)
               else f"--swa-full sizes sliding-window layers for {cp.n_ctx_seq} cells")
        out.append(finding("LCPP017", msg, span=sp.get("swa_full"), site=site, setting="swa_full"))
    if outcome == "started" and not gpu.unified_memory:
        # the margin --fit keeps per device: --fit-target (one value for all, or one per device;
        # common/common.h fit_params_target, 1024 MiB by default)
        margin = [int(s["fit_target"][min(d, len(s["fit_target"]) - 1)]) for d in range(len(devices))]
        tight = [d for d in range(len(devices)) if devices[d].free_headroom < margin[d] * MIB]
        if tight:
            d = tight[0]
            of = f" (--fit-target {margin[d]} MiB)" if margin[d] != 1024 else ""
            out.append(finding("LCPP018", f"{dev_name(gpu, d)} keeps only {devices[d].free_headroom / MIB:.0f} MiB "
                               f"free{of}", span=sp.get("ctx_size") or sp.get("model"), site=site, setting="ctx_size"))
    return out


@rule("LCPP007")
def split_context(cp: Any, ctx_user: int, s: dict[str, Any], sp: dict[str, Any], b: int, site: str) -> Any:
    """LCPP007: without a unified cache llama.cpp gives each of the -np slots n_ctx / np cells
    (src/llama-context.cpp: n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256); before b5913 the server's
    n_ctx_slot = n_ctx / n_parallel). `-c C x N -np N` is how a server of N requests of C tokens is
    written (and how Ollama drives llama-server), so the split alone is only said (info). It is a
    warning where the file shows it expects more per request: no -c (the model's context, or what
    --fit leaves, is what the user left it at, and each slot gets 1/np of it), or -n asking a
    request to generate more tokens than its slot holds."""
    kvu = " or add -kvu (one cache the slots share)" if b >= V.KV_UNIFIED_OPTION else ""
    per = f"each request can use at most {cp.n_ctx_seq} tokens (n_ctx_seq)"
    span = sp.get("parallel") or sp.get("ctx_size")
    try:
        predict = int(str(s.get("n_predict") or 0))
    except ValueError:  # the option parser has said so already
        predict = 0
    if not ctx_user:
        return finding("LCPP007", f"no -c: the context ({cp.n_ctx} tokens) is shared by {cp.n_seq} slots: {per}; "
                       f"set -c to the context each request needs x {cp.n_seq}{kvu}", span=span, site=site,
                       setting="parallel")
    if predict > cp.n_ctx_seq:
        return finding("LCPP007", f"-n {predict} lets a request generate {predict} tokens, but -c {cp.n_ctx} is "
                       f"shared by {cp.n_seq} slots: {per}; raise -c to at least {predict} x {cp.n_seq}{kvu}",
                       span=sp.get("n_predict") or span, site=site, setting="parallel")
    return finding("LCPP007", f"-c {cp.n_ctx} is shared by {cp.n_seq} slots: {per}", span=span, site=site,
                   setting="parallel", severity="info")


def _assume(a: list[str], cfg: EngineConfig, s: dict[str, Any], fa: bool, lm: M.LModel, b: int,
            gpu: GpuSpec) -> None:
    if "parallel" not in cfg.explicit:
        a.append(f"-np not set: {s['parallel']} slot(s){' with unified KV' if s['kv_unified'] else ''} "
                 f"(llama-server b{b} default)")
    if s["flash_attn"] == "auto":
        a.append(f"-fa auto resolved to {'on' if fa else 'off'} on {gpu.name}")
    a.append("compute buffer estimated from the graph's largest working set (llama.cpp measures it; ±25%)")
    a.append(PL.free_assumption(gpu, bool(s["fit"])))
    if b < V.FIT and "n_gpu_layers" not in cfg.explicit and s["n_gpu_layers"] == 0:
        a.append("no -ngl before b6325: the model runs on the CPU (0 layers offloaded)")
