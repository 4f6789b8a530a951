"""Which linear layers a quantized checkpoint keeps in 16 bits.

Quantized checkpoints often leave some projections unquantized: Meta's Llama-3.1-405B-FP8
keeps every self-attention projection and the first and last decoder layers in bf16
(fbgemm_fp8 `modules_to_not_convert`), llm-compressor recipes `ignore` routers or attention,
ModelOpt exports list `exclude_modules`. vLLM gives those layers UnquantizedLinearMethod
(model_executor/layers/quantization/fbgemm_fp8.py::FBGEMMFp8Config.get_quant_method,
fp8.py::Fp8Config.get_quant_method with `ignored_layers`, compressed_tensors.py
`ignore`, modelopt.py `exclude_modules`, awq.py::is_layer_skipped_awq, bitsandbytes
`llm_int8_skip_modules`), so they weigh 2 bytes per parameter, not 1 or 0.5.

Names follow the Hugging Face layout (`model.layers.7.self_attn.q_proj`). An entry matches a
module when it names it or one of its parents (`model.layers.0`), as a glob (`*self_attn*`),
as a compressed-tensors regex (`re:.*mlp.gate$`), or, for AWQ, as a substring (vLLM's AWQ
check is `name in prefix`)."""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from servefit.memory.params import attention_projections
from servefit.models.spec import ModelSpec

SKIP_KEYS = ("modules_to_not_convert", "ignored_layers", "ignore", "exclude_modules", "llm_int8_skip_modules")
_PREFIXES = ("model.language_model.", "language_model.model.", "language_model.")


def skip_list(quant: dict[str, Any] | None) -> list[str]:
    """The module names a quantization_config leaves unquantized (all keys engines read)."""
    out: list[str] = []
    for key in SKIP_KEYS:
        v = (quant or {}).get(key)
        if isinstance(v, list):
            out += [str(x) for x in v if isinstance(x, str) and x]
    return out


def _norm(name: str) -> str:
    for p in _PREFIXES:
        if name.startswith(p):
            return "model." + name[len(p):]
    return name


class _Matcher:
    def __init__(self, entries: list[str], substring: bool):
        self.exact = {_norm(e) for e in entries if not e.startswith("re:") and not any(c in e for c in "*?[")}
        self.globs = [_norm(e) for e in entries if not e.startswith("re:") and any(c in e for c in "*?[")]
        self.regexes = []
        for e in entries:
            if e.startswith("re:"):
                try:
                    self.regexes.append(re.compile(e[3:]))
                except re.error:
                    continue
        self.substrings = [e for e in self.exact if e] if substring else []

    def __call__(self, path: str) -> bool:
        parts = path.split(".")
        if any(".".join(parts[:k]) in self.exact for k in range(1, len(parts) + 1)):
            return True
        if any(fnmatch.fnmatchcase(path, g) for g in self.globs):
            return True
        if any(r.match(path) for r in self.regexes):
            return True
        return any(s in path for s in self.substrings)


def _share(match: _Matcher, base: str, shares: dict[str, int]) -> float:
    """Fraction of a block's parameters (by projection) that `match` keeps unquantized."""
    total = sum(shares.values())
    if not total:
        return 0.0
    return sum(v for k, v in shares.items() if match(f"{base}.{k}")) / total


def kept_fractions(m: ModelSpec, quant: dict[str, Any] | None,
                   moe_layer: list[bool]) -> list[tuple[float, float, float]] | None:
    """Per decoder layer (`moe_layer` says which hold routed experts), the fraction of
    (attention, dense MLP / shared experts + router, routed experts) parameters kept in 16
    bits; None when the checkpoint skips nothing."""
    entries = skip_list(quant)
    if not entries:
        return None
    method = str((quant or {}).get("quant_method", "")).lower()
    match = _Matcher(entries, substring=method.startswith("awq"))
    attn = attention_projections(m)
    gated = {"gate_proj": 1, "up_proj": 1, "down_proj": 1}
    out: list[tuple[float, float, float]] = []
    any_kept = False
    for i, moe in enumerate(moe_layer):
        layer = f"model.layers.{i}"
        fa = _share(match, f"{layer}.self_attn", attn)
        if moe:
            inter = m.moe_intermediate_size or m.intermediate_size
            shared = 3 * m.hidden_size * inter * m.num_shared_experts
            parts = {"shared_experts": shared, "gate": m.hidden_size * m.num_experts}
            fm = _share(match, f"{layer}.mlp", parts)
            # compressed-tensors asks for expert 0's projections (vLLM compressed_tensors_moe.py::
            # CompressedTensorsMoEMethod.get_moe_method, 0.25.1: "{prefix}.0.gate_proj" ...; all
            # three ignored -> UnquantizedFusedMoEMethod), so an ignore regex naming experts one by one counts
            fx = 1.0 if match(f"{layer}.mlp.experts") or all(
                match(f"{layer}.mlp.experts.0.{p}") for p in gated) else 0.0
        else:
            fm, fx = _share(match, f"{layer}.mlp", gated), 0.0
        any_kept = any_kept or bool(fa or fm or fx)
        out.append((fa, fm, fx))
    return out if any_kept else None
