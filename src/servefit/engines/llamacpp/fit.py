"""llama.cpp's --fit, step by step as the engine runs it, so that the context, offload and KV cache
servefit reports are the ones llama-server picks.

Source: src/llama.cpp::llama_params_fit_impl (b7407, #16653), moved to common/fit.cpp::
common_params_fit_impl (b8865). Every measurement there is a dry run's per-device model + context +
compute (llama_get_memory_breakdown); here it is the plan's own Usage of that choice.
1. No change when every device keeps --fit-target MiB free.
2. Context, only when -c is unset and the training length exceeds --fit-ctx, and only when the total
   is short: one more dry run at --fit-ctx, then a straight line between the two runs to the total
   that leaves the targets free (several devices: minus (nd+1) x model-per-layer / 2, or / 6 for
   MoE), rounded down to 256 (x the streams, see 3), never below --fit-ctx. No second check: on one
   device that context is final. When even --fit-ctx is over, the context stays at --fit-ctx and
   the layers are tried.
   Before PR #18372 (FIT_LINE) there was no second dry run: the context was cut in proportion to the
   KV buffers (a sliding-window cache that stops growing made that cut too small: the Gemma 3 bug), and on
   several devices a cut that covers the deficit was final too. An explicit -c 0 keeps the training length
   from PR #19070 (FIT_FULL_CTX: "user has requested full context size"); before, it counted as unset.
3. Since PR #27496 (FIT_STREAMS) an unset context without a unified cache is the training length
   x -np streams (before: the training length shared by the streams), and --fit-ctx counts per stream.
4. Layers, only when -ngl, -ts and -ot are unset: the most layers that keep the target free (a
   false-position search that, memory growing with layers, ends at the same count), several GPUs
   filled from the last one back. MoE on one GPU: every layer with the experts of all blocks but the
   first on the CPU, then whole blocks front to back, then part of the next one (written as -ot
   rules, common/fit.cpp get_overflow_pattern). MoE on several GPUs is simplified here: the experts
   of the first N blocks on the CPU (as -ncmoe N), N the fewest that fit.
The projector and a draft model are not in the dry runs. llama-server adds them to the target of the
device that holds them instead: the projector from PR #21489 (MMPROJ_FIT, tools/server/server-context.cpp
load_model: "[mtmd] estimated memory usage of mmproj", weights + its compute buffer, of which servefit
knows the weights), a draft model from PR #23485 (DRAFT_FIT: its model + context + compute at the
context it would get). Before, they come out of the margin (LCPP013 says so).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from servefit.engines.llamacpp import versions as V
from servefit.engines.llamacpp.config import UINT32_MAX
from servefit.engines.llamacpp.planner import Inputs, Usage, usage

MIB = 2**20
# fit: also take into account n_streams (ggml-org/llama.cpp PR #27496, merged 2026-08-21; Ollama
# v0.33.0 of that day pins b10488, so the first build with it is after that: approximate).
FIT_STREAMS = 10500
MMPROJ_FIT = 8690  # PR #21489, merged 2026-04-05 (b8763 is a week later): approximate
DRAFT_FIT = 9305  # PR #23485: b9305 is the first release reserving for the draft (issue #23872)


@dataclass
class FitResult:
    """What --fit settles on: the context and layer count (and experts moved to the CPU), which of them it
    lowered, why it gave up when nothing it may change fits, and the lines it logs."""

    ctx: int
    ngl: int
    n_cpu_moe: int = 0
    changed_ctx: bool = False
    changed_layers: bool = False
    failed: str = ""
    ctx_from: int = 0  # the context fit started from (n_ctx_max)
    splits: list[float] | None = None  # layers per device it wrote to tensor_split (several GPUs)
    overrides: list[str] = field(default_factory=list)  # the -ot rules it wrote (MoE: experts to the CPU)
    log: list[str] = field(default_factory=list)


def prefix(b: int) -> tuple[str, str]:
    """The function names fit logs under: (impl, entry)."""
    if b < V.FIT_IN_COMMON:
        return "llama_params_fit_impl", "llama_params_fit"
    return "common_params_fit_impl", "common_fit_params"


def n_streams(inp: Inputs) -> int:
    """common/fit.cpp: n_streams = kv_unified ? 1 : max(1, n_seq_max), from FIT_STREAMS; 1 before."""
    if inp.b < FIT_STREAMS or inp.s["kv_unified"]:
        return 1
    return max(1, int(inp.s["parallel"]))


def fit_used(inp: Inputs, u: Usage, d: int) -> int:
    """A device's model + context + compute as the dry run measures it: without the projector or draft."""
    return u.used(d) - u.extra_by_dev.get(d, 0)


def in_target(inp: Inputs, name: str) -> bool:
    """Whether llama-server adds this extra model (mmproj / draft) to --fit-target at this build."""
    return inp.b >= (MMPROJ_FIT if name == "mmproj" else DRAFT_FIT)


def margins(inp: Inputs) -> list[int]:
    """--fit-target per device (one value for all), plus what llama-server reserves for the extra models."""
    m = inp.s["fit_target"]
    out = [m[min(d, len(m) - 1)] * MIB for d in range(inp.n_dev)]
    main = min(int(inp.s["main_gpu"]), inp.n_dev - 1)
    for ex in inp.extras:
        if in_target(inp, ex.name):
            out[main] += ex.weights + ex.kv + ex.compute
    return out


def fits(inp: Inputs, u: Usage, margin: list[int]) -> bool:
    return all(inp.free[d] - fit_used(inp, u, d) >= margin[d] for d in range(inp.n_dev))


def auto_ctx(inp: Inputs) -> int:
    """The context an unset -c means with --fit on (common/fit.cpp: n_ctx_max = n_ctx_train x n_streams)."""
    return inp.lm.n_ctx_train * n_streams(inp)


def run_fit(inp: Inputs, ctx_user: int, ngl_user: int | None) -> FitResult:
    s, lm, nd = inp.s, inp.lm, inp.n_dev
    impl, entry = prefix(inp.b)
    margin = margins(inp)
    full = lm.n_layer + 1
    ngl = ngl_user if ngl_user is not None else full
    nst = n_streams(inp)
    ctx_max = ctx_user or auto_ctx(inp)
    res = FitResult(ctx=ctx_max, ngl=ngl, ctx_from=ctx_max)
    for ex in inp.extras:
        if ex.name == "mmproj" and in_target(inp, ex.name):
            res.log.append(f"srv    load_model: [mtmd] estimated memory usage of mmproj is {ex.weights / MIB:.2f} MiB")
    if s["split_mode"] == "tensor":  # checked before any dry run
        res.failed = "llama_params_fit is not implemented for SPLIT_MODE_TENSOR, abort"
        res.log.append(f"{entry}: failed to fit params to free device memory: {res.failed}")
        return res
    u_full = usage(inp, ctx_max, ngl)
    used = [fit_used(inp, u_full, d) for d in range(nd)]
    sum_free, sum_used = sum(inp.free), sum(used)
    res.log.append(f"{impl}: projected to use {sum_used // MIB} MiB of device memory vs. {sum_free // MIB} MiB "
                   "of free device memory")
    if nd == 1 and inp.free[0] - used[0] >= margin[0]:
        res.log.append(f"{impl}: will leave {(inp.free[0] - used[0]) // MIB} >= {margin[0] // MIB} MiB of free "
                       "device memory, no changes needed")
        return res
    if nd > 1 and fits(inp, u_full, margin):
        res.log.append(f"{impl}: targets for free memory can be met on all devices, no changes needed")
        return res
    # step 2: the context
    surplus = sum_free - sum_used - sum(margin)
    if surplus < 0:
        res.log.append(_deficit_line(inp, impl, margin, -surplus))
        # n_ctx_min_total saturates at UINT32_MAX, the mark of an explicit -c 0 (config.py)
        ctx_min = min(int(s["fit_ctx"]) * nst, UINT32_MAX)
        if ctx_user:
            res.log.append(f"{impl}: context size set by user to {ctx_user} -> no change")
        elif int(s["fit_ctx"]) == UINT32_MAX:
            res.log.append(f"{impl}: user has requested full context size of {ctx_max} -> no change")
        elif ctx_max <= ctx_min:
            res.log.append(f"{impl}: default model context size is {ctx_max} which is <= the min. context size "
                           f"of {ctx_min} -> no change")
        elif inp.b < V.FIT_LINE:
            if _shrink_ctx_proportional(inp, res, ctx_min, -surplus, impl):
                res.log.append(f"{impl}: entire model can be fit across devices by reducing context")
                return res  # that build returns here on several devices too
        elif _shrink_ctx(inp, res, ctx_min, nst, used, margin, impl):
            if nd == 1:
                res.log.append(f"{impl}: entire model can be fit by reducing context")
                return res
            res.log.append(f"{impl}: entire model should be fit across devices by reducing context")
    # step 3: the layers
    why = _layers_locked(inp, ngl_user)
    if why:
        res.failed = why
        res.log.append(f"{entry}: failed to fit params to free device memory: {why}")
        return res
    _fit_layers(inp, res, margin)
    return res


def _deficit_line(inp: Inputs, impl: str, margin: list[int], deficit: int) -> str:
    """What fit logs when the targets are not met: one margin_s before PR #18679 (FIT_TARGETS), targets after."""
    if inp.b < V.FIT_TARGETS:
        where = ", need to reduce device memory by" if inp.n_dev == 1 else " on all devices, need to use"
        tail = " MiB" if inp.n_dev == 1 else " MiB less in total"
        return f"{impl}: cannot fulfill margin of {margin[0] // MIB} MiB{where} {deficit // MIB}{tail}"
    if inp.n_dev == 1:
        return f"{impl}: cannot meet free memory target of {margin[0] // MIB} MiB, need to reduce device memory " \
               f"by {deficit // MIB} MiB"
    return f"{impl}: cannot meet free memory targets on all devices, need to use {deficit // MIB} MiB less in total"


def _shrink_ctx_proportional(inp: Inputs, res: FitResult, ctx_min: int, deficit: int, impl: str) -> bool:
    """Step 2 before PR #18372 (src/llama.cpp llama_params_fit_impl, FIT_LINE): no second dry run; the context
    memory (the KV buffers on the devices) taken as proportional to the context, bytes_per_ctx = that / n_ctx_train,
    and the context lowered by ceil(deficit / bytes_per_ctx), at most down to --fit-ctx. Not rounded: llama_context
    pads the result up to 256. True when that covers the deficit (surplus > 0)."""
    u_full = usage(inp, res.ctx, res.ngl)
    per_ctx = sum(u_full.kv_by_dev.get(d, 0) for d in range(inp.n_dev)) // res.ctx
    if per_ctx <= 0:  # nothing on the devices grows with the context
        return False
    cut = min((deficit + per_ctx - 1) // per_ctx, res.ctx - ctx_min)
    res.log.append(f"{impl}: context size reduced from {res.ctx} to {res.ctx - cut} -> need "
                   f"{cut * per_ctx // MIB} MiB less memory in total")
    res.ctx, res.changed_ctx = res.ctx - cut, True
    return cut * per_ctx - deficit > 0


def _shrink_ctx(inp: Inputs, res: FitResult, ctx_min: int, nst: int, used: list[int], margin: list[int],
                impl: str) -> bool:
    """Step 2: the straight line between the dry runs at n_ctx_max and --fit-ctx. True when it lands on a
    context above the floor's deficit (llama.cpp then trusts it)."""
    nd, lm = inp.n_dev, inp.lm
    ctx_max, ngl = res.ctx, res.ngl
    target = sum(inp.free) - sum(margin)
    u_full = usage(inp, ctx_max, ngl)
    if nd > 1:  # whole layers (dense) or whole tensors (MoE, ~1/3 layer) waste half a unit per device
        model = sum(u_full.pl.on(d) for d in range(nd))
        per_layer = model // min(ngl, lm.n_layer)
        target -= (nd + 1) * per_layer // (6 if lm.n_expert else 2)
    u_min = usage(inp, ctx_min, ngl)
    used_min = sum(fit_used(inp, u_min, d) for d in range(nd))
    sum_used = sum(used)
    res.changed_ctx = True
    if target > used_min and sum_used > used_min:
        ctx = ctx_min + (ctx_max - ctx_min) * (target - used_min) // (sum_used - used_min)
        align = 256 * nst
        res.ctx = max(ctx - ctx % align, ctx_min)
        per_ctx = (sum_used - used_min) // (ctx_max - ctx_min)
        res.log.append(f"{impl}: context size reduced from {ctx_max} to {res.ctx} -> need "
                       f"{(ctx_max - res.ctx) * per_ctx // MIB} MiB less memory in total")
        return True
    res.ctx = ctx_min
    res.log.append(f"{impl}: context size reduced from {ctx_max} to {ctx_min} -> need "
                   f"{(sum_used - used_min) // MIB} MiB less memory in total")
    return False


def _layers_locked(inp: Inputs, ngl_user: int | None) -> str:
    """Why step 3 may not move layers (the exception text llama.cpp logs), or ''."""
    s = inp.s
    if ngl_user is not None:  # the value as common/arg.cpp stores it: `all` is -2, 999 stays 999
        raw = s.get("n_gpu_layers_arg", s["n_gpu_layers"])
        return f"n_gpu_layers already set by user to {-2 if raw == 'all' else raw}, abort"
    if inp.n_dev > 1 and s["tensor_split"]:
        return "model_params::tensor_split already set by user, abort"
    if inp.n_dev > 1 and s["split_mode"] == "row":
        return "changing weight allocation for LLAMA_SPLIT_MODE_ROW not implemented, abort"
    if s["override_tensor"]:
        return "model_params::tensor_buft_overrides already set by user, abort"
    return ""


def with_splits(inp: Inputs, splits: list[float]) -> Inputs:
    """The same inputs with -ts set to layer counts per device (what fit writes to tensor_split)."""
    return replace(inp, splits=list(splits), usages={}, placements={})


def _fill_back_to_front(inp: Inputs, res: FitResult, margin: list[int]) -> None:
    """Step 3 for a dense model on several GPUs: the last device (it holds the output layer) takes the most
    layers that keep its target free, then the one before it, and so on; the counts become tensor_split."""
    nd, ctx, full = inp.n_dev, res.ctx, inp.lm.n_layer + 1
    counts = [0] * nd

    def mem(cs: list[int], d: int) -> int:
        return fit_used(inp, usage(with_splits(inp, [float(c) for c in cs]), ctx, sum(cs)), d)

    for d in range(nd - 1, -1, -1):
        lo, hi = 0, full - sum(counts[d + 1:])
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if mem(counts[:d] + [mid] + counts[d + 1:], d) <= inp.free[d] - margin[d]:
                lo = mid
            else:
                hi = mid - 1
        counts[d] = lo
    res.ngl, res.splits = sum(counts), [float(c) for c in counts]


# common/fit.cpp get_overflow_pattern: what of a partial layer goes to the CPU (LAYER_FRACTION_*)
FRACTION = {"moe": r"\.ffn_(up|down|gate_up|gate)_(ch|)exps", "attn": r"\.ffn_(gate|up|gate_up|down).*",
            "up": r"\.ffn_(gate|gate_up|down).*", "gate": r"\.ffn_down.*"}


def _rules(blocks: range, first: str = "moe") -> list[str]:
    """-ot rules for partial layers: the first of `blocks` by `first`, the others their experts only."""
    out = []
    if len(blocks):
        out.append(rf"blk\.{blocks[0]}{FRACTION[first]}=CPU")
    if len(blocks) > 1:
        out.append(rf"blk\.({'|'.join(str(il) for il in blocks[1:])}){FRACTION['moe']}=CPU")
    return out


def with_overrides(inp: Inputs, rules: list[str]) -> Inputs:
    return replace(inp, s={**inp.s, "override_tensor": list(rules)}, usages={}, placements={})


def _fit_moe_one_gpu(inp: Inputs, res: FitResult, margin: list[int]) -> None:
    """Steps 3-4 for a MoE model on one GPU. Every layer offloaded with the experts of all blocks but the
    first on the CPU ("dense-only"); if the dense weights fit, blocks become full front to back (the most
    that fit), then the next block tries to keep its up (then gate) experts too, else only its attention
    (LAYER_FRACTION_UP / GATE / ATTN); if they do not fit, the most dense-only layers that fit."""
    ctx, n = res.ctx, inp.lm.n_layer
    target = inp.free[0] - margin[0]

    def mem(ngl: int, rules: list[str]) -> int:
        return fit_used(inp, usage(with_overrides(inp, rules), ctx, ngl), 0)

    all_cpu = mem(n + 1, [rf"blk\.\d+{FRACTION['moe']}=CPU"])
    if all_cpu >= target:  # no surplus: step 3 stands: the most dense-only layers (the first of them full)
        lo, hi = 0, n + 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if mem(mid, _rules(range(n + 2 - mid, n))) <= target:
                lo = mid
            else:
                hi = mid - 1
        res.ngl, res.overrides = lo, _rules(range(n + 2 - lo, n))
        res.n_cpu_moe = len(range(n + 2 - lo, n))
        return
    lo, hi = 1, n  # full blocks [0, n_full), the rest dense-only
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if mem(n + 1, _rules(range(mid, n))) <= target:
            lo = mid
        else:
            hi = mid - 1
    rules = _rules(range(lo, n))
    if lo < n:  # "try to fit at least part of one more layer" (strictly under the target)
        if mem(n + 1, _rules(range(lo, n), "up")) < target:
            rules = _rules(range(lo, n), "up")
            if mem(n + 1, _rules(range(lo, n), "gate")) < target:
                rules = _rules(range(lo, n), "gate")
        elif mem(n + 1, _rules(range(lo, n), "attn")) < target:
            rules = _rules(range(lo, n), "attn")
    res.ngl, res.overrides, res.n_cpu_moe = n + 1, rules, n - lo


def _fit_layers(inp: Inputs, res: FitResult, margin: list[int]) -> None:
    """Step 3 (dense: the most layers that keep the target free) and step 4 (MoE: experts of the fewest
    layers on the CPU), at the context step 2 left."""
    lm, ctx, full = inp.lm, res.ctx, inp.lm.n_layer + 1
    res.changed_layers = True
    if not lm.n_expert and inp.n_dev > 1 and inp.s["split_mode"] == "layer":
        _fill_back_to_front(inp, res, margin)
        return
    if lm.n_expert and inp.n_dev == 1:
        _fit_moe_one_gpu(inp, res, margin)
        return
    if lm.n_expert:
        lo, hi = 0, lm.n_layer
        if fits(inp, usage(inp, ctx, full, hi), margin):
            while lo < hi:
                mid = (lo + hi) // 2
                if fits(inp, usage(inp, ctx, full, mid), margin):
                    hi = mid
                else:
                    lo = mid + 1
            res.n_cpu_moe, res.ngl = lo, full
            return
        res.n_cpu_moe = lm.n_layer
    lo, hi = 0, full
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(inp, usage(inp, ctx, mid, res.n_cpu_moe), margin):
            lo = mid
        else:
            hi = mid - 1
    res.ngl = lo
    if lo == 0 and not fits(inp, usage(inp, ctx, 0, res.n_cpu_moe), margin):
        res.failed = "not even the context fits"
