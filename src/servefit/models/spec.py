"""ModelSpec: the config.json facts that GPU memory depends on, whatever the source."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ModelSpec:
    """Architecture facts in Hugging Face config.json terms.

    `layer_types` lists every decoder layer's attention kind, in order:
    "full", "sliding" (window = `sliding_window`), "chunked" (Llama-4 local attention,
    `attention_chunk_size`), "mamba" / "linear" (recurrent state, no KV growth), or "none".
    Empty means all "full". MLA models set `kv_lora_rank`; their layers are still "full".
    """

    name: str  # canonical id, e.g. "meta-llama/Llama-3.1-8B-Instruct"
    architecture: str  # HF architectures[0], e.g. "LlamaForCausalLM"
    model_type: str  # HF model_type, e.g. "llama"
    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    torch_dtype: str = "bfloat16"
    params: int = 0  # total parameters of the checkpoint (embeddings included)
    # Mixture of experts
    num_experts: int = 0  # routed experts per MoE layer (0 = dense)
    num_experts_per_tok: int = 0
    num_shared_experts: int = 0
    moe_intermediate_size: int = 0
    first_k_dense_replace: int = 0  # leading dense layers before MoE layers start
    # Multi-head latent attention (DeepSeek V2/V3)
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    # DeepSeek-V3.2 / GLM-5 sparse-attention indexer (index_n_heads 0 = none)
    index_n_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    # Attention variants
    sliding_window: int = 0
    attention_chunk_size: int = 0
    layer_types: list[str] = field(default_factory=list)
    # Recurrent / linear-attention state (Mamba2, GatedDeltaNet), per such layer
    mamba: dict[str, Any] = field(default_factory=dict)
    rope_scaling: dict[str, Any] | None = None
    original_max_position_embeddings: int = 0
    model_max_length: int = 0  # config.json "model_max_length" when present
    # False where the config names no maximum length at all (BLOOM's ALiBi: no max_position_embeddings, n_positions,
    # seq_length...): max_position_embeddings is then the engines' fallback, and vLLM takes --max-model-len as given
    max_length_in_config: bool = True
    quantization: dict[str, Any] | None = None  # quantization_config: quant_method, bits, group_size...
    multimodal: bool = False
    vision_params: int = 0  # parameters of a vision tower (counted in params)
    vision: dict[str, Any] = field(default_factory=dict)  # its vision_config (encoder profiling)
    aliases: list[str] = field(default_factory=list)
    resolved_from: str = "catalog"  # lock | catalog | local | hf-cache | hub | gguf | config | mapping
    assumptions: list[str] = field(default_factory=list)
    # MoE layers interleave with dense ones: layer i (from first_k_dense_replace on) is MoE when
    # (i + 1) % moe_layer_step == 0 (Llama-4 interleave_moe_layer_step, Qwen2-MoE decoder_sparse_step)
    moe_layer_step: int = 1
    gguf: Any = None  # the GgufInfo of a locked GGUF header (llama.cpp / Ollama size from its tensors)
    # architecture facts count_params needs beyond the common ones (OPT word_embed_proj_dim,
    # GPT-2 / BERT position tables, hybrid Mamba widths...): see models/arch_classic.py
    layout: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.layout = dict(self.layout)  # never share the catalog's parsed dict

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def kinds(self) -> list[str]:
        """Attention kind of every layer (all "full" when the catalog says nothing)."""
        if self.layer_types:
            return list(self.layer_types)
        return ["full"] * self.num_hidden_layers
