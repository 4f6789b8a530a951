"""Weight choices tune may offer: keep the checkpoint, quantize it online (vLLM's and SGLang's
`--quantization fp8`, TGI's `--quantize fp8`), or switch to a pre-quantized checkpoint of the same
model that the catalog resolves to the same architecture; for GGUF engines, another quantization of
the same GGUF (llama.cpp `-hf repo:QUANT`, an Ollama tag's quantization suffix).

Pre-quantized repository names follow the publishers' conventions (RedHatAI `-FP8-dynamic` /
`-quantized.w8a8` / `-quantized.w4a16`, hugging-quants `-AWQ-INT4` / `-GPTQ-INT4`, Qwen's own
`-AWQ` / `-GPTQ-Int4`); servefit cannot check offline that a repository exists, so every
checkpoint change is an unsafe edit and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from servefit.tune.objective import W_FP8, W_INT4, W_INT8, W_LOW, W_MID, W_NONE

# --allow quant=... words -> the weight families they open
QUANT_WORDS = {
    "fp8": {"fp8"}, "awq": {"awq"}, "gptq": {"gptq"}, "int8": {"int8"}, "w8a8": {"int8"}, "8bit": {"int8", "fp8"},
    "int4": {"awq", "gptq", "int4"}, "w4a16": {"int4"}, "4bit": {"awq", "gptq", "int4", "nvfp4"},
    "nvfp4": {"nvfp4"}, "gguf": {"gguf"}, "any": {"fp8", "awq", "gptq", "int8", "int4", "nvfp4", "gguf"},
}
GGUF_LADDER = ("F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0", "IQ4_XS", "Q3_K_M")


@dataclass
class Variant:
    """A weight choice tune may offer: keep the checkpoint, quantize it online, or switch checkpoint or GGUF
    quantization, with the settings or reference it writes."""

    key: str  # "none" | "fp8" | "ref:<repo>" | "gguf:<QUANT>"
    label: str
    level: int  # weight level (objective.W_*)
    settings: dict[str, Any] = field(default_factory=dict)  # settings the engine reads
    model: Any = None  # ModelSpec of a replacement checkpoint
    ref: str | None = None  # the model reference to write
    note: str = ""

    @property
    def changes_checkpoint(self) -> bool:
        return self.key != "none"


def level_of(quant: dict[str, Any] | None, gguf_type: str | None = None) -> int:
    """Weight level of a checkpoint's quantization_config (or a GGUF type)."""
    if gguf_type:
        g = gguf_type.upper()
        if g.startswith(("F16", "BF16", "F32")):
            return W_NONE
        if g.startswith("Q8"):
            return W_INT8
        if g.startswith(("Q6", "Q5")):
            return W_MID
        if g.startswith(("Q4", "IQ4", "MXFP4")):
            return W_INT4
        return W_LOW
    if not quant:
        return W_NONE
    method = str(quant.get("quant_method", "")).lower()
    bits = int(quant.get("bits") or quant.get("w_bit") or (8 if "fp8" in method else 4))
    if method == "gguf":
        return level_of(None, str(quant.get("type") or "Q4_K_M"))
    if "fp8" in method or method in ("modelopt", "fbgemm_fp8", "ptpc_fp8"):
        return W_FP8
    if bits >= 8:
        return W_INT8
    if bits >= 5:
        return W_MID
    if bits >= 4:
        return W_INT4
    return W_LOW


def families(allow: frozenset[str]) -> set[str]:
    out: set[str] = set()
    for word in allow:
        out |= QUANT_WORDS.get(word.lower(), {word.lower()})
    return out


def _names(model: Any, ref: str) -> tuple[str, str, str]:
    """(org, name as written, the Meta- name third-party publishers use)."""
    org, _, name = ref.rpartition("/")
    meta = name
    for alias in [model.name, *getattr(model, "aliases", [])]:
        base = alias.rsplit("/", 1)[-1]
        if base.startswith("Meta-") and base.replace("Meta-", "", 1) == name.replace("Meta-", "", 1):
            meta = base
    return org, name, meta


def hub_candidates(model: Any, ref: str, fams: set[str]) -> list[tuple[str, str]]:
    """(family, repository) names that publishers use for pre-quantized copies of `ref`."""
    org, name, meta = _names(model, ref)
    own = org.lower() in ("qwen", "mistralai", "google")
    out: list[tuple[str, str]] = []
    if "fp8" in fams:
        out.append(("fp8", f"RedHatAI/{meta}-FP8-dynamic"))
    if "int8" in fams:
        out.append(("int8", f"RedHatAI/{meta}-quantized.w8a8"))
    if "awq" in fams:
        out.append(("awq", f"{org}/{name}-AWQ" if own else f"hugging-quants/{meta}-AWQ-INT4"))
    if "gptq" in fams:
        out.append(("gptq", f"{org}/{name}-GPTQ-Int4" if own else f"hugging-quants/{meta}-GPTQ-INT4"))
    if "int4" in fams:
        out.append(("int4", f"RedHatAI/{meta}-quantized.w4a16"))
    if "nvfp4" in fams:
        out.append(("nvfp4", f"RedHatAI/{meta}-NVFP4"))
    return out


def checkpoint_variants(model: Any, ref: str | None, fams: set[str], extra: tuple[str, ...],
                        online: bool = False) -> list[Variant]:
    """Pre-quantized checkpoints of `model` that resolve to the same architecture."""
    from servefit.core import UsageError
    from servefit.models import resolve_model

    if not ref or model.quantization:
        cands: list[tuple[str, str]] = []
    else:
        cands = hub_candidates(model, ref, fams)
    cands += [("named", r) for r in extra]
    out: list[Variant] = []
    seen: set[str] = set()
    for fam, repo in cands:
        if repo in seen or repo == ref:
            continue
        seen.add(repo)
        try:
            spec = resolve_model(repo, online=online)
        except UsageError:
            continue
        if spec.name != model.name or not spec.quantization:
            continue
        q = spec.quantization
        label = f"{q.get('quant_method')}{' ' + str(q['bits']) + '-bit' if q.get('bits') else ''} ({repo})"
        note = "" if fam == "named" else f"a {fam} checkpoint named the way its publisher names them; check it exists"
        out.append(Variant(key=f"ref:{repo}", label=label, level=level_of(q), model=spec, ref=repo, note=note))
    return out
