"""ModelSpec from a Hugging Face config.json (reading the file and the checkpoint's safetensors
headers: models/checkpoint_files.py).

`from_config` reads the keys engines read, under every alias the families use (ChatGLM's
`num_layers` / `multi_query_group_num`, Falcon's `n_head_kv`, DeepSeek's `n_routed_experts`,
Mixtral's `num_local_experts`, ...), unwraps the `text_config` of multimodal checkpoints and turns
every per-layer attention scheme (Gemma sliding patterns, gpt-oss `layer_types`, Llama-4 chunked
attention, Qwen3-Next linear attention) into `ModelSpec.layer_types`.

The architecture's own count is models/architecture.py::count_params. Standard library only:
this is on the fast path.
"""

from __future__ import annotations

from typing import Any

from servefit.models import config_layouts, config_towers
from servefit.models.architecture import count_params, layer_kind, pattern_layers
from servefit.models.recurrent_state import linear_attention_state
from servefit.models.seq2seq import config_line
from servefit.models.spec import ModelSpec
from servefit.models.vision import count_vision_params

# ---------------------------------------------------------------------------------------------
# config.json -> ModelSpec
# ---------------------------------------------------------------------------------------------

# Defaults of the transformers config classes for keys real checkpoints leave out (Gemma 3's
# text_config relies on them for heads, head_dim and vocab).
_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
                    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
                    "head_dim": 256, "max_position_embeddings": 131072, "sliding_window": 4096,
                    "tie_word_embeddings": True},
    "gemma2": {"head_dim": 256, "sliding_window": 4096, "max_position_embeddings": 8192,
               "tie_word_embeddings": True},
    "gemma": {"head_dim": 256, "max_position_embeddings": 8192, "tie_word_embeddings": True},
    "llama": {"vocab_size": 32000, "max_position_embeddings": 2048, "tie_word_embeddings": False},
    "mistral": {"vocab_size": 32000, "max_position_embeddings": 131072, "tie_word_embeddings": False},
    "falcon": {"vocab_size": 65024, "max_position_embeddings": 2048, "tie_word_embeddings": True},
    "cohere": {"tie_word_embeddings": True},
    # MPT's config.json leaves tie_word_embeddings to PretrainedConfig's default (True); vLLM
    # mpt.py MPTForCausalLM reuses wte as the lm_head
    "mpt": {"tie_word_embeddings": True},
    "chatglm": {"tie_word_embeddings": False},
    "llama4_text": {"tie_word_embeddings": False},
}

_FIRST_OF = {
    "num_hidden_layers": ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "num_transformer_layers"),
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim", "model_dim"),
    "num_attention_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "intermediate_size": ("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim"),
    "vocab_size": ("padded_vocab_size", "vocab_size", "n_vocab"),
    "max_position_embeddings": ("max_position_embeddings", "seq_length", "n_positions",
                                "max_sequence_length", "max_seq_len", "n_ctx", "max_context_length"),
}


def _first(cfg: dict[str, Any], keys: tuple[str, ...], default: Any = None) -> Any:
    for k in keys:
        v = cfg.get(k)
        if v is not None:
            return v
    return default


def _int(v: Any, default: int = 0) -> int:
    try:
        return int(v) if v is not None and not isinstance(v, (list, dict)) else default
    except (TypeError, ValueError, OverflowError):
        return default


# Fields read as counts, checked by type and range before use (budget.COUNT_LIMITS: far above
# the largest real model, far below what makes a per-layer loop or a table expensive). The
# second element is the smallest valid value: 1 for anything that divides or is a period.
_COUNTS: dict[str, tuple[str, int]] = {
    **{k: ("layers", 0) for k in ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "first_k_dense_replace",
                                  "max_window_layers", "depth", "num_transformer_layers")},
    **{k: ("hidden", 0) for k in ("hidden_size", "n_embd", "d_model", "embed_dim", "out_hidden_size", "model_dim")},
    **{k: ("heads", 1) for k in ("num_attention_heads", "n_head", "num_heads", "n_heads", "num_query_heads")},
    **{k: ("heads", 0) for k in ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num",
                                 "index_n_heads", "linear_num_key_heads", "linear_num_value_heads", "mamba_n_heads",
                                 "mamba_num_heads")},
    **{k: ("head_dim", 0) for k in ("head_dim", "kv_channels", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                                    "index_head_dim", "linear_key_head_dim", "linear_value_head_dim", "mamba_d_head",
                                    "mamba_head_dim")},
    **{k: ("intermediate", 0) for k in ("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim",
                                        "moe_intermediate_size", "shared_expert_intermediate_size",
                                        "intermediate_size_mlp")},
    **{k: ("vocab", 0) for k in ("padded_vocab_size", "vocab_size", "n_vocab")},
    **{k: ("positions", 0) for k in ("max_position_embeddings", "seq_length", "n_positions", "max_sequence_length",
                                     "max_seq_len", "n_ctx", "original_max_position_embeddings",
                                     "max_context_length")},
    **{k: ("experts", 0) for k in ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts",
                                   "num_experts_per_tok", "num_experts_per_token", "experts_per_token", "moe_top_k",
                                   "num_selected_experts", "n_shared_experts", "num_shared_experts")},
    **{k: ("rank", 0) for k in ("kv_lora_rank", "q_lora_rank", "index_topk", "mamba_d_state", "ssm_state_size",
                                "state_size")},
    **{k: ("window", 0) for k in ("sliding_window", "attention_chunk_size")},
    **{k: ("small", 1) for k in ("attn_layer_period", "full_attention_interval", "sliding_window_pattern_size",
                                 "no_rope_layer_interval", "patch_size", "temporal_patch_size", "spatial_merge_size",
                                 "mamba_expand", "expand", "mamba_n_groups", "n_groups", "mamba_d_conv",
                                 "conv_kernel", "linear_conv_kernel_dim", "mamba_conv_kernel", "in_chans",
                                 "in_channels", "short_conv_kernel_size", "image_size")},
    "attn_layer_offset": ("layers", 0),
}
_LISTS = ("layer_types", "no_rope_layers", "full_attn_layers", "architectures", "block_configs")


def validate_config(cfg: dict[str, Any], where: str = "") -> None:
    """Check every count config.json gives (top level, text_config, vision_config,
    linear_attn_config) by type and range, and the nesting depth; BadValue names the field."""
    from servefit.budget import BadValue, count, json_depth, number

    json_depth(cfg)
    parts: list[tuple[str, Any]] = [(where, cfg)]
    for sub in ("text_config", "language_config", "vision_config", "linear_attn_config", "rope_scaling",
                "rope_parameters", "quantization_config", "compression_config"):
        if isinstance(cfg.get(sub), dict):
            parts.append((f"{where}{sub}.", cfg[sub]))
        elif cfg.get(sub) is not None and not (sub == "vision_config" and cfg[sub] == {}):
            raise BadValue(f"{where}{sub} is {type(cfg[sub]).__name__}, not an object")
    for prefix, d in parts:
        for key, (kind, low) in _COUNTS.items():
            if key in d and d[key] is not None:
                if key == "sliding_window" and d[key] is False:
                    continue
                if key in ("mamba_expand", "expand") and isinstance(d[key], float):
                    number(d[key], prefix + key, minimum=0, maximum=64, open_min=True)
                    continue
                if isinstance(d[key], list) and kind in ("intermediate", "heads", "head_dim", "window"):
                    # per-layer widths are a language model's (Gemma 3n); a tower's MLP has one width
                    if not d[key] or (kind == "intermediate" and prefix.endswith("vision_config.")):
                        raise BadValue(f"{prefix}{key} is a list of {len(d[key])}, not a number")
                    if len(d[key]) > 4096:  # per-layer lists (Gemma 3n intermediate_size)
                        raise BadValue(f"{prefix}{key} has {len(d[key]):,} entries, more than the 4,096 servefit reads")
                    for i, x in enumerate(d[key]):
                        count(x, f"{prefix}{key}[{i}]", kind, minimum=0)
                    continue
                count(d[key], prefix + key, kind, minimum=low)
        for key in _LISTS:
            v = d.get(key)
            if v is not None and not isinstance(v, list):
                raise BadValue(f"{prefix}{key} is {type(v).__name__}, not a list")
            if isinstance(v, list) and len(v) > 4096:
                raise BadValue(f"{prefix}{key} has {len(v):,} entries, more than the 4,096 servefit reads")
        for key in ("torch_dtype", "dtype", "model_type", "quant_method"):
            v = d.get(key)
            if v is not None and not isinstance(v, str):
                raise BadValue(f"{prefix}{key} is {type(v).__name__}, not a string")
        for key in ("factor", "rope_theta", "mlp_ratio", "partial_rotary_factor"):
            if d.get(key) is not None:
                number(d[key], prefix + key, minimum=0, maximum=1e12, open_min=key != "partial_rotary_factor")
        for key, low in (("bits", 0), ("w_bit", 0), ("group_size", -1), ("q_group_size", -1)):  # GPTQ: -1
            if key == "bits" and isinstance(d.get(key), float) and str(d.get("quant_method")).startswith("exl"):
                number(d[key], prefix + key, minimum=0, maximum=32, open_min=True)  # ExLlama: 4.65 bits per weight
            elif d.get(key) is not None:
                count(d[key], prefix + key, "small", minimum=low)
    config_layouts.validate_blocks(cfg, where)  # DeciLM block_configs
    kda = cfg.get("linear_attn_config")
    if isinstance(kda, dict) and isinstance(kda.get("full_attn_layers"), list):
        for i, x in enumerate(kda["full_attn_layers"]):
            count(x, f"{where}linear_attn_config.full_attn_layers[{i}]", "layers", minimum=0)


def _kv_heads(c: dict[str, Any], heads: int) -> int:
    if c.get("multi_query") and not c.get("new_decoder_architecture"):
        return 1  # Falcon-7B: one K/V head shared by every query head
    for key in ("num_key_value_heads", "num_kv_heads", "n_head_kv"):
        v = c.get(key)
        if isinstance(v, list):  # per layer (OpenELM): the widest layer's, validated above
            return max(int(x) for x in v) if v else heads
        if v is not None:
            return int(v)
    if c.get("multi_query_group_num") is not None and c.get("multi_query_attention", True):
        return int(c["multi_query_group_num"])
    return heads


def _layer_types(c: dict[str, Any], model_type: str, n: int, sliding: int, max_pos: int) -> list[str]:
    if model_type == "deepseek_v4":  # a sliding window in every layer; compression per layer in layout
        return ["sliding"] * n
    lt = c.get("layer_types")
    if isinstance(lt, list) and lt:
        return [layer_kind(x) for x in lt]
    pattern = c.get("hybrid_override_pattern")
    if isinstance(pattern, str) and len(pattern) == n:  # Nemotron-H: M mamba, * attention, - MLP only
        return ["mamba" if ch == "M" else "full" if ch == "*" else "none" for ch in pattern]
    if c.get("attn_layer_period") and any(k.startswith("mamba") for k in c):  # Jamba
        period, offset = int(c["attn_layer_period"]), _int(c.get("attn_layer_offset"))
        return ["full" if i % period == offset else "mamba" for i in range(n)]
    kda = c.get("linear_attn_config")
    if isinstance(kda, dict) and isinstance(kda.get("full_attn_layers"), list):  # Kimi-Linear, 1-based
        full = {int(i) - 1 for i in kda["full_attn_layers"]}
        return ["full" if i in full else "linear" for i in range(n)]
    if c.get("full_attention_interval"):  # Qwen3-Next: 3 Gated DeltaNet layers, then 1 full
        every = int(c["full_attention_interval"])
        return pattern_layers(n, every, every - 1, "linear")
    if c.get("attention_chunk_size"):  # Llama 4: NoPE layers are global, the RoPE ones chunked
        nope = c.get("no_rope_layers")
        if isinstance(nope, list) and len(nope) == n:
            return ["chunked" if use_rope else "full" for use_rope in nope]
        every = _int(c.get("no_rope_layer_interval"), 4)
        return pattern_layers(n, every, every - 1, "chunked")
    if not sliding:
        return []
    if model_type == "gemma2":
        return pattern_layers(n, 2, 1, "sliding")
    if model_type in ("gemma3", "gemma3_text", "cohere2"):
        every = _int(c.get("sliding_window_pattern") or c.get("sliding_window_pattern_size"),
                     4 if model_type == "cohere2" else 6)
        return pattern_layers(n, every, every - 1, "sliding")
    if model_type.startswith(("qwen2", "qwen3")):
        if not c.get("use_sliding_window"):
            return []
        first = _int(c.get("max_window_layers"), n)
        return ["sliding" if i >= first else "full" for i in range(n)]
    if c.get("use_sliding_window") is False or (max_pos and sliding >= max_pos):
        return []
    return ["sliding"] * n  # Mistral v0.1, Phi-3, Starcoder2: every layer windowed


def _rope(c: dict[str, Any]) -> dict[str, Any] | None:
    rs = c.get("rope_scaling")
    if not rs and isinstance(c.get("rope_parameters"), dict):
        rp = c["rope_parameters"]
        if rp.get("rope_type", "default") != "default":
            rs = {k: v for k, v in rp.items() if k != "rope_theta"}
    return dict(rs) if isinstance(rs, dict) and rs else None


def _vision_config(cfg: dict[str, Any]) -> dict[str, Any] | None:
    v = cfg.get("vision_config")
    return v if isinstance(v, dict) and v else None


def from_config(cfg: dict[str, Any], name: str, *, resolved_from: str = "config") -> ModelSpec:
    """A ModelSpec from a config.json dict; `params` is counted from the architecture."""
    cfg = config_layouts.unwrap(cfg)  # Qwen2.5-Omni: the thinker
    validate_config(cfg)
    seq2seq = config_line(cfg, name)
    if seq2seq:  # T5, BART, Whisper...: no decoder-only count for them
        raise ValueError(seq2seq)
    top = cfg
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else None
    if text is None and isinstance(cfg.get("language_config"), dict):  # DeepSeek-VL2 / OCR
        text = cfg["language_config"]
    # LLM keys from text_config (Gemma 3, Llama 4, Mistral 3, Llava...), anything else from the top
    c: dict[str, Any] = dict(top)
    if text is not None:
        c.update(text)
    archs = top.get("architectures") or []
    architecture = str(archs[0]) if archs else ""
    model_type = str(top.get("model_type") or c.get("model_type") or "")
    text_type = str((text or {}).get("model_type") or model_type)
    if model_type == "gemma3" and text is not None and not text.get("model_type"):
        text_type = "gemma3_text"
    for mt in (text_type, model_type):
        for k, v in _DEFAULTS.get(mt, {}).items():
            if c.get(k) is None:
                c[k] = v
    n = _int(_first(c, _FIRST_OF["num_hidden_layers"]))
    h = _int(_first(c, _FIRST_OF["hidden_size"]))
    heads = _int(_first(c, _FIRST_OF["num_attention_heads"]), 1) or 1
    if not n or not h:
        raise ValueError(f"{name}: config.json has no layer count or hidden size")
    kv = _kv_heads(c, heads)
    head_dim = _int(c.get("head_dim") or c.get("kv_channels")) or h // heads
    inter = _int(_first(c, _FIRST_OF["intermediate_size"]))
    if not inter:  # MPT: expansion_ratio x d_model (configuration_mpt.py); GPT-2: 4 x n_embd
        ratio = _int(c.get("expansion_ratio"), 4)
        inter = (ratio if 0 < ratio <= 64 else 4) * h
    vocab = _int(_first(c, _FIRST_OF["vocab_size"]))
    max_pos = _int(_first(c, _FIRST_OF["max_position_embeddings"]))
    tie = c.get("tie_word_embeddings")
    if tie is None:
        tie = top.get("tie_word_embeddings", False)

    # mixture of experts
    experts = _int(_first(c, ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts")))
    per_tok = _int(_first(c, ("num_experts_per_tok", "num_experts_per_token", "experts_per_token", "moe_top_k",
                              "num_selected_experts")))
    moe_inter = _int(c.get("moe_intermediate_size"))
    shared = _int(_first(c, ("n_shared_experts", "num_shared_experts")))
    if text_type in ("llama4_text", "llama4") and experts:
        moe_inter = _int(c.get("intermediate_size"))
        inter = _int(c.get("intermediate_size_mlp"), inter)
        shared = 1
    if experts and not moe_inter:
        moe_inter = inter  # Mixtral, PhiMoE, gpt-oss: intermediate_size is the expert's
    shared_size = _int(c.get("shared_expert_intermediate_size"))
    if experts and shared_size and not shared:
        shared = max(1, round(shared_size / moe_inter)) if moe_inter else 1
    step = _int(_first(c, ("interleave_moe_layer_step", "decoder_sparse_step", "moe_layer_freq")), 1) or 1
    first_dense = _int(c.get("first_k_dense_replace"))
    mlp_types = c.get("mlp_layer_types")
    if c.get("first_k_dense_replace") is None and isinstance(mlp_types, list):  # Hy3: leading "dense" layers
        first_dense = next((i for i, t in enumerate(mlp_types) if t != "dense"), len(mlp_types))

    # multi-head latent attention
    kv_lora = _int(c.get("kv_lora_rank")) if c.get("use_mla") is not False else 0  # DeepSeek-VL2-tiny: MHA
    qk_nope = _int(c.get("qk_nope_head_dim"))
    qk_rope = _int(c.get("qk_rope_head_dim"))
    if kv_lora:
        head_dim = qk_nope + qk_rope

    sliding = _int(c.get("sliding_window"))
    layer_types = _layer_types(c, text_type or model_type, n, sliding, max_pos)
    if "sliding" not in layer_types and c.get("use_sliding_window") is False:
        sliding = 0

    mamba: dict[str, Any] = {}
    kda = c.get("linear_attn_config")
    if isinstance(kda, dict) and kda.get("num_heads"):  # Kimi Delta Attention (vLLM kimi_gdn_linear_attn.py)
        heads, hd = _int(kda.get("num_heads")), _int(kda.get("head_dim"), 128)
        mamba = linear_attention_state({
            "kind": "kda", "conv_kernel": _int(kda.get("short_conv_kernel_size"), 4),
            "num_key_heads": heads, "num_value_heads": heads, "key_head_dim": hd, "value_head_dim": hd,
        })
    elif c.get("linear_num_value_heads"):
        mamba = linear_attention_state({
            "kind": "gated_deltanet",
            "conv_kernel": _int(c.get("linear_conv_kernel_dim"), 4),
            "num_key_heads": _int(c.get("linear_num_key_heads")),
            "num_value_heads": _int(c.get("linear_num_value_heads")),
            "key_head_dim": _int(c.get("linear_key_head_dim")),
            "value_head_dim": _int(c.get("linear_value_head_dim")),
        })

    elif "mamba" in layer_types:
        # (m_heads, not heads: the attention head count is still needed below)
        m_heads = _int(_first(c, ("mamba_n_heads", "mamba_num_heads")))
        hd = _int(_first(c, ("mamba_d_head", "mamba_head_dim")))
        expand = _int(_first(c, ("mamba_expand", "expand")), 2)
        groups = _int(_first(c, ("mamba_n_groups", "n_groups")), 1)
        if not m_heads and hd:
            m_heads = expand * h // hd
        elif not hd:  # Mamba1 (Jamba): a d_inner x d_state state, no heads or groups
            m_heads, hd, groups = expand * h, 1, 0
        mamba = linear_attention_state({
            "kind": "mamba2",
            "conv_kernel": _int(_first(c, ("mamba_d_conv", "conv_kernel", "mamba_conv_kernel")), 4),
            "num_heads": m_heads, "head_dim": hd, "n_groups": groups,
            "state_size": _int(_first(c, ("mamba_d_state", "ssm_state_size", "state_size")), 128),
        })

    rope = _rope(c)
    orig = _int(c.get("original_max_position_embeddings")) or _int((rope or {}).get(
        "original_max_position_embeddings"))
    quant = top.get("quantization_config") or c.get("quantization_config") or top.get("compression_config")
    dtype = str(c.get("torch_dtype") or c.get("dtype") or top.get("torch_dtype") or top.get("dtype")
                or "bfloat16")
    vision = config_towers.tower(top, _vision_config(top))
    spec = ModelSpec(
        name=name, architecture=architecture, model_type=model_type,
        num_hidden_layers=n, hidden_size=h, num_attention_heads=heads, num_key_value_heads=kv,
        head_dim=head_dim, intermediate_size=inter, vocab_size=vocab, max_position_embeddings=max_pos,
        tie_word_embeddings=bool(tie), torch_dtype=dtype,
        num_experts=experts, num_experts_per_tok=per_tok if experts else 0,
        num_shared_experts=shared if experts else 0, moe_intermediate_size=moe_inter if experts else 0,
        first_k_dense_replace=first_dense if experts else 0,
        kv_lora_rank=kv_lora, q_lora_rank=_int(c.get("q_lora_rank")), qk_rope_head_dim=qk_rope,
        qk_nope_head_dim=qk_nope,
        # MiniCPM3's config.json states no v_head_dim: its config class derives it from qk_nope_head_dim,
        # and vLLM minicpm3.py MiniCPM3Attention reads config.v_head_dim
        v_head_dim=_int(c.get("v_head_dim")) or (qk_nope if text_type == "minicpm3" else 0),
        index_n_heads=_int(c.get("index_n_heads")) if kv_lora else 0,  # DeepSeek-V3.2 / GLM-5 indexer
        index_head_dim=_int(c.get("index_head_dim")), index_topk=_int(c.get("index_topk")),
        sliding_window=sliding, attention_chunk_size=_int(c.get("attention_chunk_size")),
        layer_types=layer_types, mamba=mamba, rope_scaling=rope, original_max_position_embeddings=orig,
        model_max_length=_int(top.get("model_max_length") or c.get("model_max_length")),
        max_length_in_config=bool(max_pos or _int(top.get("model_max_length") or c.get("model_max_length"))),
        quantization=dict(quant) if isinstance(quant, dict) else None,
        multimodal=vision is not None or text is not None,
        resolved_from=resolved_from, moe_layer_step=step if experts else 1,
    )
    config_layouts.apply(c, spec)  # OPT, encoders, Falcon-H1, Granite 4, Nemotron-H, LFM2 keys
    # the Mamba2 chunk size vLLM's "all" cache mode aligns to (config/model.py::ModelConfig.get_mamba_chunk_size:
    # mamba_chunk_size, else chunk_size)
    if (spec.mamba or {}).get("kind") == "mamba2" and (chunk := _int(_first(c, ("mamba_chunk_size", "chunk_size")))):
        spec.mamba = {**spec.mamba, "chunk_size": chunk}
    if vision is not None:
        spec.vision_params = count_vision_params(vision, h, model_type, top)
        spec.vision = dict(vision)
    spec.params = count_params(spec)
    return spec


# ---------------------------------------------------------------------------------------------
# Files: config.json and safetensors headers
# ---------------------------------------------------------------------------------------------
