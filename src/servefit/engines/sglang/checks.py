"""SGLang's launch checks and the findings about the KV pool it would build: the settings its
argument parsing refuses, a pool shorter than the context, and a static fraction that leaves no room
for the prefill activations. plan.py computes the numbers these read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from servefit.core import EngineConfig, Finding, MemoryPlan
from servefit.hardware.spec import GpuSpec
from servefit.models.spec import ModelSpec
from servefit.rules.catalog import finding
from servefit.rules.registry import rule

if TYPE_CHECKING:
    from servefit.engines.sglang.plan import Resolved

GiB = 2**30


def finding_at(code: str, msg: str, cfg: EngineConfig, setting: str | None) -> Finding:
    """A finding pointed at the setting it is about (its span in the config, and the launch site)."""
    return finding(code, msg, span=cfg.spans.get(setting) if setting else None, setting=setting,
                   site=cfg.site.name if cfg.site else "")


@rule("SGL006", "SGL012")
def capacity(out: MemoryPlan, cfg: EngineConfig, r: Resolved, tokens: int) -> MemoryPlan:
    """The pool against context_len: shorter (requests rejected) or under two full-length requests."""
    if tokens - 1 < r.context_len - 1:
        out.findings.append(finding_at("SGL006", f"the KV pool holds {tokens} tokens, less than context_len={r.context_len}: "
                               f"requests longer than {tokens - 6} input tokens are rejected (max_req_input_len)",
                               cfg, "context_length" if "context_length" in cfg.spans else "mem_fraction_static"))
    elif tokens < 2 * r.context_len:
        out.findings.append(finding_at("SGL012", f"the KV pool holds {tokens} tokens: {tokens / r.context_len:.2f} requests of "
                               f"context_len={r.context_len} at once", cfg, "context_length"))
    return out


@rule("SGL003", "SGL008", "SGL009", "SGL010")
def checks(cfg: EngineConfig, model: ModelSpec, gpu: GpuSpec, count: int, r: Resolved) -> list[Finding]:
    s, out = cfg.settings, []
    ctx = s.get("context_length")
    if ctx and ctx > r.derived_len and cfg.env.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "").lower() \
            not in ("1", "true"):
        out.append(finding_at("SGL003", f"ValueError: User-specified context_length ({ctx}) is greater than the derived "
                      f"context_length ({r.derived_len}). This may lead to incorrect model outputs or CUDA errors. "
                      "To allow overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
                      cfg, "context_length"))
    if not model.is_mla and model.num_attention_heads % r.attn_tp:
        out.append(finding_at("SGL009", f"AssertionError: the {model.num_attention_heads} attention heads are not divisible "
                      f"by the attention tensor-parallel size {r.attn_tp}", cfg, "tp_size"))
    # managers/data_parallel_controller.py::launch_dp_schedulers: without DP attention each of the
    # dp_size replicas gets its own tp_size x pp_size GPUs (base_gpu_id moves on by tp_size per rank)
    replicas = 1 if s.get("enable_dp_attention") else r.dp
    world = r.tp * r.pp * replicas
    nodes = str(s.get("nnodes") or "1").strip()
    hosts = int(nodes) if nodes.isdigit() and int(nodes) > 1 else 1  # --nnodes: the ranks are split over the hosts
    if count and -(-world // hosts) > count:
        what = "tp_size x pp_size x dp_size" if replicas > 1 else "tp_size x pp_size"
        per = f" over {hosts} nodes, {-(-world // hosts)} on each" if hosts > 1 else ""
        out.append(finding_at("SGL010", f"{what} = {world} GPUs{per}, but only {count} are available", cfg, "tp_size"))
    cap = s.get("max_total_tokens")
    if cap is not None and cap <= r.context_len:
        out.append(finding_at("SGL008", f"--max-total-tokens {cap} caps SGLang's whole KV pool (all requests together), not "
                      "one request as TGI's flag of the same name does; for a per-request limit use --context-length",
                      cfg, "max_total_tokens"))
    return out


@rule("SGL011")
def reserve_finding(cfg: EngineConfig, model: ModelSpec, r: Resolved, plan: MemoryPlan) -> Finding | None:
    """The static pool leaves less than a prefill step's activations (forward.py) and the CUDA graphs need, a negative headroom, which is a finding rather than a silent "starts". SGLang's own
    reserve (server_args.py) only picks the default fraction: with an explicit one it checks nothing, so
    a fraction below that reserve is no finding by itself (it warned on most real multi-node files)."""
    m = plan.memory
    short = -m.free_headroom
    if short <= 0:
        return None
    outside = m.total - m.budget - m.non_torch
    return finding_at("SGL011", f"mem_fraction_static={r.fraction} leaves {outside / GiB:.2f} GiB outside the static pool; "
              f"the prefill activations ({m.activation_peak / GiB:.2f} GiB at chunked_prefill_size {r.chunk}) and "
              f"CUDA graphs ({m.cuda_graphs / GiB:.2f} GiB) need {short / GiB:.2f} GiB more: CUDA out of memory "
              "under a long prefill or while capturing graphs", cfg, "mem_fraction_static")
