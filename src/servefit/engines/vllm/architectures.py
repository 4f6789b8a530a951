"""Whether the vLLM release in force can load the model's architecture at all: vLLM builds its
model registry from per-release tables (model_executor/models/registry.py) and refuses a name
it lacks at start, unless its Transformers backend takes it (--model-impl auto). The facts are
data/engines/vllm_architectures.yaml (tools/extract_vllm_architectures.py, read from the wheels);
it is loaded only when a vLLM server is planned."""

from __future__ import annotations

from typing import Any

from servefit import data
from servefit.core import EngineConfig, Finding
from servefit.engines.options import FlagHistory, _vkey
from servefit.models.spec import ModelSpec
from servefit.rules.catalog import finding
from servefit.rules.registry import rule

FILE = "engines/vllm_architectures.yaml"
# what each fallback check asks of the transformers class (model_loader/utils.py::
# is_transformers_impl_compatible up to 0.7.3; registry.py::_try_resolve_transformers later)
CHECKS = {"flex_attn": ("flex_attn",), "backend": ("backend",), "backend_or_settable": ("backend", "settable")}


def _era(eras: dict[str, dict[str, Any]], version: str) -> dict[str, Any]:
    """The era entry in force at `version`: the newest key not after it (the oldest before all)."""
    keys = sorted(eras, key=_vkey)
    fit = [k for k in keys if _vkey(k) <= _vkey(version)]
    return eras[fit[-1] if fit else keys[0]]


def _present(archs: dict[str, Any], name: str, version: str) -> bool:
    entry = archs.get(name)
    return entry is not None and FlagHistory(tuple((a, b) for a, b in entry["in"])).present(version)


def _converted(archs: dict[str, Any], name: str, version: str, suffixes: list[str]) -> bool:
    """registry.py::_normalize_arch: `FooForSequenceClassification` loads as `FooForCausalLM`
    converted to a pooling model, where the release normalizes (config _SUFFIX_TO_DEFAULTS)."""
    return any(_present(archs, name[: -len(s)] + r, version) for s in suffixes if name.endswith(s) for r in suffixes)


def _fallback(entry: dict[str, Any], era: dict[str, Any]) -> str | None:
    """The first transformers release read whose class passes this era's fallback check; None: none does."""
    hf = entry.get("transformers") or {}
    firsts = [hf[k] for k in CHECKS.get(str(era.get("fallback_check")), ()) if k in hf]
    return min(firsts, key=_vkey) if firsts else None


def _quote(era: dict[str, Any], entry: dict[str, Any], arch: str, version: str, fallback: bool) -> str:
    """vLLM's own words for the refusal, as the release in force words it."""
    listed = entry.get("listed_since")
    if listed and _vkey(version) >= _vkey(listed):  # registry.py::_raise_for_unsupported
        return (f"Model architecture {arch} was supported in vLLM until v{entry['last_supported']}, and is not "
                "supported anymore. Please use an older version of vLLM if you want to use this model architecture.")
    template = str(era["refusal"])
    if not fallback and "{arch}" in template:  # --model-impl vllm skips the loader's fallback
        template = "Model architectures {architectures} are not supported for now. Supported architectures: [...]"
    return template.replace("{architectures}", repr([arch])).replace("{arch}", arch)


@rule("VLLM024")
def architecture_check(cfg: EngineConfig, model: ModelSpec, notes: list[str]) -> list[Finding]:
    """VLLM024 when the release in force has no `model.architecture` and its Transformers
    fallback would not take it; a note (no finding) when the fallback would. Names no release
    read ever registered (remote code, plugins, transformers-only classes) are left alone."""
    arch = model.architecture
    impl = str(cfg.settings.get("model_impl") or "auto")
    if not arch or impl not in ("auto", "vllm"):
        return []  # --model-impl transformers / terratorch: the registry is not asked
    facts = data.load(FILE)
    archs: dict[str, Any] = facts["architectures"]
    version = cfg.version or facts["releases_read"][-1]
    era = _era(facts["eras"], version)
    entry = archs.get(arch)
    if entry is None:
        return []
    reads = facts["releases_read"]
    near = [r for r in reads if _vkey(r) <= _vkey(version)][-1:] + [r for r in reads if _vkey(r) >= _vkey(version)][:1]
    # a release between two read ones may have the name either read one has: judged only where both lack it
    if any(_present(archs, arch, r) or _converted(archs, arch, r, list(_era(facts["eras"], r).get("convert_suffixes")
                                                                      or [])) for r in near or [version]):
        return []
    can_fall = impl == "auto" and bool(era.get("transformers_fallback"))
    first = _fallback(entry, era) if can_fall else None
    below = era.get("transformers_below")
    if first is not None and below and _vkey(first) >= _vkey(below):
        first = None  # only a transformers this release does not accept (METADATA) has the class
    if first is not None:
        least = era.get("transformers_min")
        when = "" if least and _vkey(first) <= _vkey(least) else \
            f" if the transformers installed is {first} or newer (vLLM {version} asks for {least or 'any'})"
        notes.append(f"{arch} has no vLLM implementation in vLLM {version}: vLLM hands it to its Transformers "
                     f"backend instead of refusing (--model-impl auto falls back){when}; some features and speed "
                     "may differ, and a model that backend cannot run fails while loading")
        return []
    why = FlagHistory(tuple((a, b) for a, b in entry["in"])).why_absent(version)
    if why.startswith("removed in"):
        gone = why.split()[2].rstrip(",")
        had = [v for v in reads if _present(archs, arch, v) and _vkey(v) < _vkey(gone)]
        why = f"{why}; the last release with it is {had[-1]}" if had else why
    told = _quote(era, entry, arch, version, can_fall)
    tail = ""
    if any(a.startswith(f"WARNING: vLLM {version} assumed") for a in cfg.assumptions):
        tail = f" (vLLM {version} assumed: no version given; pin the image tag or pass --engine-version)"
    return [finding("VLLM024", f"vLLM {version} cannot load {arch} ({model.name}): {why}. vLLM says: \"{told}\"{tail}",
                    span=cfg.spans.get("model"), setting="model",
                    site=cfg.site.name if cfg.site else "")]
