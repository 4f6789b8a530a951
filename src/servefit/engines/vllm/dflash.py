"""The DFlash speculative-decoding drafter (`--speculative-config '{"method": "dflash", "model": ...}'`,
vLLM 0.20+): its weights and the KV-cache layers it adds to the target's pool.

vllm/model_executor/models/qwen3_dflash.py (read in the 0.20.0, 0.20.1, 0.22.0 and 0.24.0 wheels):
DFlashQwen3ForCausalLM builds `num_hidden_layers` DFlashQwen3DecoderLayer (Qwen3 attention with
q/k norms: QKVParallelLinear + RowParallelLinear o_proj, Qwen2MLP gate_up / down, two RMSNorms), a
ReplicatedLinear `fc` of target_hidden_size x len(dflash_config.target_layer_ids) -> hidden_size, and
the hidden_norm / norm RMSNorms. Its embed_tokens and lm_head are replaced by the target's
(v1/spec_decode/llm_base_proposer.py::_maybe_share_embeddings / _maybe_share_lm_head), so they do not
stay; the rest loads inside the runner's load_model and so counts in "Model loading took". The
weights are the drafter's own dtype (get_draft_quant_config: no quantization for these checkpoints).

Each decoder layer's Attention (a plain DECODER Attention, no per-layer sliding window up to 0.24)
registers in the same forward context as the target's layers, so gpu_model_runner.py::get_kv_cache_spec
gives it a FullAttentionSpec of the drafter's own num_kv_heads / head_dim. That spec differs from the
target's, so kv_cache_utils.py::_get_kv_cache_groups_uniform_page_size puts the drafter's layers in a
type of their own: with a hybrid Qwen3.5 / 3.6 target (16 full + 48 GatedDeltaNet layers) and the
5-layer drafter the group size is 5, giving 4 full + 1 drafter + 10 state groups ("Add 4 padding
layers" / "Add 2 padding layers" in the club-3090 logs). Up to 0.20.x the drafter's layers are built
without the cache config (cache_config=None: kv_cache_dtype "auto", the model dtype, whatever
--kv-cache-dtype says); from 0.22.0 they take the target's cache config (read in 0.22.0 and 0.24.0).

From 0.25.0 qwen3_dflash.py::_resolve_layer_attention reads the drafter's layer_types: a
"sliding_attention" layer gets the config's sliding_window (dflash_config.swa_window_size first). A
drafter mixing sliding and full layers raises NotImplementedError in 0.25.0 / 0.25.1 ("DFlash does
not yet support mixed sliding/full attention"), and from 0.26.0 unless the V2 model runner runs
("require the V2 model runner; relaunch with VLLM_USE_V2_MODEL_RUNNER=1"; read in 0.26.0, 0.28.0,
0.30.0 and 0.33.0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LAYER_TYPES_FROM = (0, 25, 0)  # _resolve_layer_attention: layer_types decide sliding / full per layer
MIXED_V2_FROM = (0, 26, 0)  # mixed sliding / full drafters start with the V2 model runner only
CACHE_CONFIG_FROM = (0, 22, 0)  # qwen3_dflash.py passes current_vllm_config.cache_config to its layers
DFLASH_FROM = (0, 20, 0)  # DFlashDraftModel in _SPECULATIVE_DECODING_MODELS (vllm_architectures.yaml)


@dataclass(frozen=True)
class Drafter:
    """The config.json facts of a DFlash drafter that vLLM's memory depends on."""

    num_hidden_layers: int
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    target_layers: int  # len(dflash_config.target_layer_ids): the fc input is target_hidden x this
    target_hidden_size: int
    sliding_layers: int = 0  # layer_types entries "sliding_attention" (read from 0.25.0)
    sliding_window: int = 0


# z-lab/Qwen3.6-27B-DFlash config.json as test fixtures of the public-code index quote it (search-index
# files 68349552789: architectures DFlashDraftModel, hidden 5120, intermediate 17408, 32 heads, 8 KV
# heads, head_dim 128, 5 layers, dflash_config.target_layer_ids [1, 16, 31, 46, 61]; 61856208997 and
# 61928133940 agree on layers, hidden and target layers). Its layer_types (4 sliding of 2048 + 1 full)
# are not read by vLLM up to 0.24 (qwen3_dflash.py has no per-layer sliding window there).
DRAFTERS: dict[str, Drafter] = {
    "z-lab/qwen3.6-27b-dflash": Drafter(5, 5120, 17408, 32, 8, 128, 5, 5120, sliding_layers=4, sliding_window=2048),
}


def layer_kinds(d: Drafter, version: tuple[int, ...]) -> list[tuple[str, int]]:
    """(kind, window) of the drafter's attention layers: "draft" (a full-attention spec of the drafter's
    own shape, a KV-cache type apart from the target's full layers) or, from 0.25, "sliding" for the
    layers layer_types names so."""
    sliding = d.sliding_layers if version >= LAYER_TYPES_FROM and d.sliding_window else 0
    return [("sliding", d.sliding_window)] * sliding + [("draft", 0)] * (d.num_hidden_layers - sliding)


def refusal(d: Drafter, version: tuple[int, ...], v2_runner: bool) -> str:
    """What vLLM raises at start for a drafter mixing sliding and full layers ("" where it starts)."""
    if version < LAYER_TYPES_FROM or not 0 < d.sliding_layers < d.num_hidden_layers:
        return ""
    if version < MIXED_V2_FROM:
        return ("this DFlash drafter mixes sliding and full attention layers, which vLLM "
                f"{'.'.join(map(str, version))} refuses at start (NotImplementedError: \"DFlash does not yet "
                "support mixed sliding/full attention\"); 0.26 and later run it with the V2 model runner")
    if not v2_runner:
        return ("this DFlash drafter mixes sliding and full attention layers: vLLM refuses it at start "
                "without the V2 model runner (set VLLM_USE_V2_MODEL_RUNNER=1)")
    return ""


def drafter(settings: dict[str, Any], version: tuple[int, ...]) -> tuple[Drafter | None, str]:
    """(the DFlash drafter of --speculative-config, "") when it is one servefit knows; (None, a note) for
    a DFlash drafter it does not; (None, "") without DFlash."""
    sc = settings.get("speculative_config")
    if not isinstance(sc, dict) or str(sc.get("method") or "") != "dflash" or version < DFLASH_FROM:
        return None, ""
    name = str(sc.get("model") or "")
    d = DRAFTERS.get(name.strip().lower())
    if d is None:
        return None, (f"the DFlash drafter {name or '(no model given)'} is not in servefit's list; its "
                      "weights and KV-cache layers are not counted")
    return d, ""


def weight_bytes(d: Drafter, tp: int, dtype_bytes: float) -> int:
    """The drafter's weights on one TP rank: the decoder layers' linears sharded over TP (heads, MLP),
    the fc, q/k norms and RMSNorms replicated; no embed_tokens / lm_head (shared with the target)."""
    tp = max(tp, 1)
    h, hd = d.hidden_size, d.head_dim
    # QKVParallelLinear: heads // tp query heads and max(1, kv // tp) KV heads (replicated below tp)
    qkv = h * (d.num_attention_heads // tp + 2 * max(1, d.num_key_value_heads // tp)) * hd
    o = d.num_attention_heads * hd * h // tp
    mlp = 3 * h * d.intermediate_size // tp
    norms = 2 * h + 2 * hd
    fc = d.target_hidden_size * d.target_layers * h
    return int((d.num_hidden_layers * (qkv + o + mlp + norms) + fc + 2 * h) * dtype_bytes)


def kv_bytes_per_token(d: Drafter, tp: int, kv_dtype_bytes: float, model_dtype_bytes: float,
                       version: tuple[int, ...]) -> float:
    """K+V bytes one drafter layer stores per token on one TP rank (FullAttentionSpec of max(1, kv // tp)
    heads); the model dtype before 0.22 (cache_config=None, see the module docstring)."""
    b = kv_dtype_bytes if version >= CACHE_CONFIG_FROM else model_dtype_bytes
    return 2 * max(1, d.num_key_value_heads // max(tp, 1)) * d.head_dim * b
