"""Prefix caching and the Mamba cache mode of a hybrid (recurrent + attention) model in vLLM, by release:
whether prefix caching is on, and so which mode ("none", "align", "all") sizes the recurrent state.

model_executor/models/config.py::MambaModelConfig.verify_and_update_config picks the mode: "none" without
prefix caching; with it, a mode left at "none" becomes "all" for an architecture declaring
SupportsMambaPrefixCaching (0.15.0 - 0.27.1) or "align" (every other model, and every model from 0.28.0);
an "all" the architecture does not support falls back to "align". "all" leaves --mamba-cache-mode's
choices in 0.32.0 (config/cache.py MambaCacheMode: "all", "align", "none" in 0.15.0 - 0.31.0; "align",
"none" in 0.32.0 and 0.33.0).
"""

from __future__ import annotations

from typing import Any

from servefit.models.spec import ModelSpec

# the release from which prefix caching is on by default for a hybrid model (hybrid_prefix_caching)
HYBRID_PREFIX_CACHING_FROM = (0, 28, 0)
MAMBA_CACHE_MODE_FROM = (0, 15, 0)  # CacheConfig.mamba_cache_mode (absent in 0.14.0)
ALL_BY_DEFAULT_UNTIL = (0, 28, 0)  # prefix caching picks "all" for a supporting architecture before this
ALL_MODE_UNTIL = (0, 32, 0)  # --mamba-cache-mode all is accepted before this
# hybrid architectures declaring SupportsMambaPrefixCaching (model_executor/models/*.py, read in the 0.15.0,
# 0.17.0, 0.27.1, 0.28.0 and 0.32.0 wheels; 0.15 / 0.17 also list Bamba, which the catalog lacks)
ALL_MODE_ARCHITECTURES = frozenset({"FalconH1ForCausalLM", "GraniteMoeHybridForCausalLM", "JambaForCausalLM",
                                    "NemotronHForCausalLM", "Zamba2ForCausalLM"})


def hybrid_prefix_caching(settings: dict[str, Any], version: tuple[int, ...]) -> bool:
    """Whether a hybrid model runs with prefix caching. --enable-prefix-caching decides where given. The
    default, by release: up to 0.25 config/model.py::ModelConfig.is_prefix_caching_supported says no
    ("Hybrid models do not support prefix caching since the feature is still experimental", read in the
    0.14.0 - 0.25.1 wheels); in 0.26.0 - 0.27.1 it says yes but engine/arg_utils.py::EngineArgs.
    _set_default_chunked_prefill_and_prefix_caching_args keeps it opt-in (`is_prefix_caching_supported and
    not model_config.is_hybrid`, read in the 0.26.0, 0.27.0 and 0.27.1 wheels); from 0.28.0 the default is
    is_prefix_caching_supported alone (read in the 0.28.0 - 0.33.0 wheels)."""
    prefix = settings.get("enable_prefix_caching")
    return version >= HYBRID_PREFIX_CACHING_FROM if prefix is None else bool(prefix)


def mamba_cache_mode(settings: dict[str, Any], model: ModelSpec, version: tuple[int, ...], prefix: bool) -> str:
    """The Mamba cache mode vLLM settles on (see the module's docstring); "none" before 0.15."""
    if version < MAMBA_CACHE_MODE_FROM or not prefix:
        return "none"
    asked = str(settings.get("mamba_cache_mode") or "none").lower()
    supports = model.architecture in ALL_MODE_ARCHITECTURES and version < ALL_MODE_UNTIL
    if asked == "none":
        return "all" if supports and version < ALL_BY_DEFAULT_UNTIL else "align"
    return "all" if asked == "all" and supports else "align"


def all_mode_note(settings: dict[str, Any], model: ModelSpec, version: tuple[int, ...]) -> str | None:
    """What the plan leaves out where vLLM runs the "all" mode: MambaSpec.max_memory_usage_bytes then counts
    cdiv(max_model_len, mamba_block_size) state blocks a request (+ speculative blocks), and
    platforms/interface.py::_align_hybrid_block_size (models/config.py in 0.15 - 0.20) rounds the
    attention block up to a multiple of lcm(the model's Mamba chunk size, the kernel block), which the
    model catalog does not record."""
    kinds = model.kinds()
    if "mamba" not in kinds or not any(k in ("full", "sliding", "chunked") for k in kinds):
        return None
    if mamba_cache_mode(settings, model, version, hybrid_prefix_caching(settings, version)) != "all":
        return None
    return ("prefix caching runs this model's Mamba layers in vLLM's 'all' cache mode, which keeps a state block "
            "per block of context for every request (block size a multiple of the Mamba chunk size); servefit "
            "plans the 'align' mode's 2 state blocks a request, so the KV cache tokens and concurrency are "
            "overstated: pass --mamba-cache-mode align (or --no-enable-prefix-caching) to run as planned")
