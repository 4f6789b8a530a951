"""What TGI's model code does with KV heads that do not divide among the shards, by model family and
release (server/text_generation_server/models/custom_modeling/flash_*_modeling.py, each model's
attention __init__ and `_load_gqa`; models/__init__.py::get_model picks the file by model_type)."""

from __future__ import annotations

from servefit.models.spec import ModelSpec

# flash_llama_modeling.py::FlashLlamaAttention.__init__ raises ValueError from v2.1.0 (not in v2.0.4);
# get_model runs llama, phi3, granite, baichuan and phimoe with FlashLlamaForCausalLM
_LLAMA = frozenset({"llama", "phi3", "granite", "baichuan", "phimoe"})
# the families whose `_load_gqa` asserts the fused q/k/v weight's shape, from the first release servefit
# reads with their file (gemma, cohere, mixtral, phi, starcoder2 at v1.4.5; gemma2 at v2.1.0, gemma3 at
# v3.2.0), and mistral until v2.1.0, where flash_mistral_modeling.py dropped `_load_gqa`
_SHAPE_ASSERT = frozenset({"gemma", "gemma2", "gemma3", "gemma3_text", "cohere", "mixtral", "phi", "starcoder2"})


def kv_heads_error(model: ModelSpec, shards: int, version: tuple[int, ...], quantized: bool) -> str:
    """The error loading fails with when `num_key_value_heads` does not divide among `shards`."""
    kv, hd = model.num_key_value_heads, model.head_dim
    mt = model.model_type
    if mt in _LLAMA and version >= (2, 1, 0):
        return (f"ValueError: `num_key_value_heads` must be divisible by `num_shards` (got `num_key_value_heads`: "
                f"{kv} and `num_shards`: {shards}")
    if mt in _SHAPE_ASSERT or (mt == "mistral" and version < (2, 1, 0)):
        if (kv * hd) % shards:  # utils/weights.py::Weights.get_sharded, loading k_proj by rows
            return f"AssertionError: The choosen size {kv * hd} is not compatible with sharding on {shards} shards"
        if not quantized:  # `_load_gqa`: q, k and v each split by rows, then the fused shape checked
            heads = model.num_attention_heads // shards
            rows = heads * hd + 2 * (kv * hd // shards)
            want = (heads + 2 * kv) * hd
            return f"AssertionError: [{rows}, {model.hidden_size}] != [{want}, {model.hidden_size}]"
    return (f"num_key_value_heads {kv} does not divide among num_shard={shards}: TGI's {mt} code splits K and V "
            "by head, so the shards fail while loading the model")
