"""config.json as TGI's launcher reads it (launcher/src/main.rs: RawConfig -> Config::from,
get_config, Config::get_head_dim). The launcher's defaults (attention backend, prefill tokens,
the 2.x length defaults) follow this view, not the model as the shards load it:

- Top-level keys only: a VLM whose language model sits under `text_config` (Gemma 3, LLaVA-NeXT,
  Idefics 2/3, Mllama, Llama 4, PaliGemma) shows the launcher no heads, layers, widths or
  max_position_embeddings. Its head size is unknown before 3.2.1; from 3.2.1 `text_config.head_dim`
  counts when the file states it, and from 3.3.0 Gemma 3 without one is taken as 256.
- MoE counts come from `num_local_experts` (Mixtral-style configs; 1 otherwise),
  `num_experts_per_tok` and `n_shared_experts`; `intermediate_size` is read as the file has it.
- `quantization_config.quant_method` must be one of the launcher's `Quantization` values
  (kebab-case); any other value (fbgemm_fp8, modelopt, mxfp4, ...) fails the whole parse and
  get_config(...).ok() leaves the launcher with no config at all (from 2.3.0, where it is read)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from servefit.engines.tgi.era import Era
    from servefit.models.spec import ModelSpec

# model types whose config.json nests the language model under text_config (transformers'
# composite configs: no top-level num_attention_heads / num_hidden_layers / max_position_embeddings)
NESTED_TEXT_CONFIG = {"gemma3", "llava", "llava_next", "idefics2", "idefics3", "mllama", "llama4", "paligemma"}
# nested configs whose text_config states head_dim: transformers writes a sub-config's values that
# differ from the class defaults, and Gemma3TextConfig's default is 256; Llama 4 files list it
TEXT_HEAD_DIM_DEFAULT = {"gemma3": 256}
TEXT_HEAD_DIM_STATED = {"llama4"}
LOCAL_EXPERTS = {"mixtral", "phimoe", "granitemoe", "gpt_oss", "minimax"}  # `num_local_experts` in config.json
SHARED_EXPERTS_KEY = {"deepseek_v2", "deepseek_v3"}  # `n_shared_experts` in config.json
# enum Quantization (serde kebab-case) per release
QUANT_2_3 = frozenset({"awq", "eetq", "exl2", "gptq", "marlin", "bitsandbytes", "bitsandbytes-nf4", "bitsandbytes-fp4",
                       "fp8"})
QUANT_2_4_1 = QUANT_2_3 | {"compressed-tensors"}


@dataclass(frozen=True)
class LauncherConfig:
    """What the launcher's Config holds (None where the file gives it nothing)."""

    model_type: str
    max_position_embeddings: int | None
    head_dim: int | None
    num_heads: int | None
    num_kv_heads: int | None
    num_layers: int | None
    hidden_size: int | None
    intermediate_size: int | None
    vocab_size: int | None
    num_experts: int
    num_experts_per_token: int
    num_shared_experts: int
    vision: bool
    quantized: bool


def _head_dim(model: ModelSpec, e: Era, nested: bool) -> int | None:
    if nested:
        if e.v < (3, 2, 1):
            return None
        default = TEXT_HEAD_DIM_DEFAULT.get(model.model_type)
        if model.model_type in TEXT_HEAD_DIM_STATED or (default is not None and model.head_dim != default):
            return model.head_dim
        return 256 if model.model_type == "gemma3" and e.v >= (3, 3, 0) else None
    if model.is_mla:  # DeepSeek files state no head_dim: hidden_size / num_attention_heads
        h, n = model.hidden_size, model.num_attention_heads
        return h // n if n and h % n == 0 else None
    return model.head_dim


def read(model: ModelSpec, e: Era) -> LauncherConfig | None:
    """The launcher's Config for this model at this release; None when it cannot parse the file."""
    method = str((model.quantization or {}).get("quant_method") or "").lower()
    if method and e.v >= (2, 3, 0) and method not in (QUANT_2_4_1 if e.v >= (2, 4, 1) else QUANT_2_3):
        return None
    nested = model.model_type in NESTED_TEXT_CONFIG

    def top(value: int) -> int | None:
        return None if nested or not value else value

    return LauncherConfig(
        model_type=model.model_type, max_position_embeddings=top(model.max_position_embeddings), head_dim=_head_dim(model, e, nested),
        num_heads=top(model.num_attention_heads), num_kv_heads=top(model.num_key_value_heads or model.num_attention_heads),
        num_layers=top(model.num_hidden_layers), hidden_size=top(model.hidden_size),
        intermediate_size=top(model.intermediate_size), vocab_size=top(model.vocab_size),
        num_experts=(model.num_experts or 1) if model.model_type in LOCAL_EXPERTS else 1,
        num_experts_per_token=(model.num_experts_per_tok or 1) if model.is_moe else 1,
        num_shared_experts=model.num_shared_experts if model.model_type in SHARED_EXPERTS_KEY else 0,
        vision=model.multimodal, quantized=bool(method))
