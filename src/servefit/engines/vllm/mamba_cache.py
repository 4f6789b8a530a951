"""Prefix caching and the Mamba cache mode of a hybrid (recurrent + attention) model in vLLM, by release:
whether prefix caching is on, and so which mode ("none", "align", "all") sizes the recurrent state.

model_executor/models/config.py::MambaModelConfig.verify_and_update_config picks the mode: "none" without
prefix caching; with it, a mode left at "none" becomes "all" for an architecture declaring
SupportsMambaPrefixCaching (0.15.0 - 0.27.1) or "align" (every other model, and every model from 0.28.0);
an "all" the architecture does not support falls back to "align". "all" leaves --mamba-cache-mode's
choices in 0.32.0 (config/cache.py MambaCacheMode: "all", "align", "none" in 0.15.0 - 0.31.0; "align",
"none" in 0.32.0 and 0.33.0). 0.20 - 0.21 pick "align" rather than "all" when speculative decoding is on
(MambaModelConfig: "Mamba cache mode is set to 'align' ... when prefix caching and speculative decoding are
enabled", read in the 0.20.0, 0.20.1 and 0.21.0 wheels; not in 0.15.0 - 0.19.0 or 0.22.0; 0.23 not read).

In "all" mode the state block follows the model's Mamba chunk size (mamba_chunk_size), which sizes it in
kvcache.py::hybrid_state.
"""

from __future__ import annotations

from math import lcm
from typing import Any

from servefit.models.spec import ModelSpec

# the release from which prefix caching is on by default for a hybrid model (hybrid_prefix_caching)
HYBRID_PREFIX_CACHING_FROM = (0, 28, 0)
MAMBA_CACHE_MODE_FROM = (0, 15, 0)  # CacheConfig.mamba_cache_mode (absent in 0.14.0)
ALL_BY_DEFAULT_UNTIL = (0, 28, 0)  # prefix caching picks "all" for a supporting architecture before this
ALL_MODE_UNTIL = (0, 32, 0)  # --mamba-cache-mode all is accepted before this
SPEC_ALIGN = ((0, 20, 0), (0, 22, 0))  # releases whose default is "align" with speculative decoding
# config/model.py::ModelConfig.get_mamba_chunk_size: Mamba1 has no chunk notion, vLLM takes 2048
MAMBA1_CHUNK = 2048
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
        spec = bool(settings.get("speculative_config")) and SPEC_ALIGN[0] <= version < SPEC_ALIGN[1]
        return "all" if supports and version < ALL_BY_DEFAULT_UNTIL and not spec else "align"
    return "all" if asked == "all" and supports else "align"


def mamba_chunk_size(model: ModelSpec) -> int | None:
    """The chunk size vLLM aligns the "all" mode's blocks to (config/model.py::ModelConfig.
    get_mamba_chunk_size: the HF config's `mamba_chunk_size`, else `chunk_size`, else 2048; read in the 0.15.0,
    0.20.0, 0.27.1 and 0.31.0 wheels): the catalog's `mamba.chunk_size`; 2048 for a Mamba1 mixer (Jamba's
    config.json has neither key); None where the catalog does not record it."""
    m = model.mamba or {}
    if m.get("chunk_size"):
        return int(m["chunk_size"])
    return MAMBA1_CHUNK if m.get("kind") == "mamba1" else None


def all_mode_note(settings: dict[str, Any], model: ModelSpec, version: tuple[int, ...]) -> str | None:
    """What the plan leaves out where vLLM runs the "all" mode and the catalog lacks the model's Mamba chunk
    size: MambaSpec.max_memory_usage_bytes then counts cdiv(max_model_len, mamba_block_size) state blocks a
    request (+ speculative blocks from 0.22), and platforms/interface.py::_align_hybrid_block_size
    (models/config.py::HybridAttentionMambaModelConfig in 0.15 - 0.19) rounds the attention block up to a
    multiple of lcm(the chunk size, the kernel block). With a known chunk size the plan is exact
    (kvcache.py::hybrid_state) and there is no note."""
    kinds = model.kinds()
    if "mamba" not in kinds or not any(k in ("full", "sliding", "chunked") for k in kinds):
        return None
    if mamba_cache_mode(settings, model, version, hybrid_prefix_caching(settings, version)) != "all":
        return None
    if mamba_chunk_size(model) or settings.get("mamba_block_size"):
        return None
    return ("prefix caching runs this model's Mamba layers in vLLM's 'all' cache mode, which keeps a state block "
            "per block of context for every request (block size a multiple of the Mamba chunk size, which the "
            "model catalog lacks for this model); servefit plans the 'align' mode's 2 state blocks a request, "
            "so the KV cache tokens and concurrency are overstated: pass --mamba-cache-mode align (or --no-enable-prefix-caching) to run as planned")


ALL_SPEC_BLOCKS_FROM = (0, 22, 0)  # MambaSpec.max_memory_usage_bytes adds num_speculative_blocks in "all" mode


def all_mode_block(chunk: int, mamba_page: int, attn_bytes_1_token: float, block_size: int, alignment: int,
                   version: tuple[int, ...]) -> int:
    """The "all" mode's Mamba block size (mamba_block_size), which the attention block is raised to: the
    smallest multiple of lcm(chunk, kernel alignment) whose attention page holds one state
    (`chunk_size * cdiv(cdiv(mamba_page, attn_page_1_token), chunk_size)`). `chunk` is --mamba-block-size
    where given, else the model's Mamba chunk size. The kernel alignment is the fixed 16 (an MLA cache's
    64 / 128) up to 0.19 (models/config.py::HybridAttentionMambaModelConfig.verify_and_update_config, read
    in 0.15.0, 0.17.0 - 0.19.0); from 0.20 platforms/interface.py::_align_hybrid_block_size takes
    max(the backend's smallest kernel block, --block-size) (read in 0.20.0, 0.20.1, 0.21.0, 0.22.0, 0.24.0,
    0.27.1 and 0.31.0). Up to 0.19 a --block-size above the result keeps the attention block larger
    than the Mamba block."""
    kernel = max(alignment, block_size) if version >= (0, 20, 0) else alignment
    step = lcm(chunk, kernel)
    tokens_per_state = -(-mamba_page // int(attn_bytes_1_token))  # cdiv
    return step * -(-tokens_per_state // step)


def all_mode_blocks(version: tuple[int, ...], num_spec: int) -> int:
    """The blocks a request's state holds in "all" mode beyond cdiv(max_model_len, mamba_block_size):
    MambaSpec.max_memory_usage_bytes adds num_speculative_blocks from 0.22 (read in the 0.22.0, 0.24.0,
    0.27.1 and 0.31.0 wheels), not before (0.15.0, 0.17.0, 0.20.0, 0.20.1, 0.21.0)."""
    return num_spec if version >= ALL_SPEC_BLOCKS_FROM else 0
