"""config.json keys of the layouts in models/arch_classic.py, arch_hybrid.py and encoders.py:
what from_config (models/config_json.py) reads generically is completed here per model_type,
so a local checkpoint, --model-config or the model lock counts and plans these families as the
catalog does. Standard library only: this is on the fast path."""

from __future__ import annotations

import importlib
from typing import Any

from servefit.models.arch_laguna import FAMILIES as LAGUNA_LIKE
from servefit.models.encoders import ENCODERS
from servefit.models.recurrent_state import linear_attention_state
from servefit.models.spec import ModelSpec

_READERS = {"zaya": "arch_zaya", "inkling_mm_model": "arch_inkling", "inkling_text": "arch_inkling"}
_TIED_BY_DEFAULT = ("opt", "gpt2", "gpt_neo", "bloom", "lfm2", "lfm2_moe", "granitemoehybrid", "gpt_bigcode", "mamba",
                    "falcon_mamba", "gemma3n", "zamba2", "zaya")
_SSM = ("mamba", "falcon_mamba", "mamba2")  # attention-free: every layer is the recurrent mixer


def as_int(v: Any, default: int = 0) -> int:
    """A config.json count, or default where it is absent or no number."""
    try:
        return int(v) if v is not None else default
    except (TypeError, ValueError):
        return default


def as_dict(v: Any) -> dict[str, Any]:
    """A config.json sub-config, or {} where it is absent or no mapping."""
    return v if isinstance(v, dict) else {}


def lfm2_ff_dim(c: dict[str, Any]) -> int:
    """modeling_lfm2.py Lfm2MLP: with block_auto_adjust_ff_dim the width is 2/3 of block_ff_dim,
    times block_ffn_dim_multiplier, rounded up to block_multiple_of."""
    ff = as_int(c.get("block_ff_dim") or c.get("intermediate_size"))
    if c.get("block_auto_adjust_ff_dim", True) and ff:
        ff = int(2 * ff / 3)
        mult = c.get("block_ffn_dim_multiplier")
        if mult is not None:
            ff = int(float(mult) * ff)
        step = as_int(c.get("block_multiple_of"), 256) or 1
        ff = step * -(-ff // step)
    return ff


def _mamba2(c: dict[str, Any], h: int) -> dict[str, Any]:
    heads = as_int(c.get("mamba_n_heads") or c.get("mamba_num_heads"))
    hd = as_int(c.get("mamba_d_head") or c.get("mamba_head_dim"))
    d_ssm = as_int(c.get("mamba_d_ssm")) or (heads * hd) or as_int(c.get("mamba_expand"), 2) * h
    if not hd and heads:
        hd = d_ssm // heads
    m: dict[str, Any] = {"kind": "mamba2", "num_heads": heads, "head_dim": hd}
    if d_ssm != heads * hd:
        m["d_inner"] = d_ssm
    return linear_attention_state({
        **m,
        "n_groups": as_int(c.get("mamba_n_groups") or c.get("n_groups"), 1),
        "state_size": as_int(c.get("mamba_d_state") or c.get("ssm_state_size"), 128),
        "conv_kernel": as_int(c.get("mamba_d_conv") or c.get("conv_kernel"), 4)})


def unwrap(cfg: dict[str, Any]) -> dict[str, Any]:
    """Qwen2.5-Omni's config.json nests the served model in thinker_config (vLLM
    qwen2_5_omni_thinker.py serves the thinker only): that, with the top-level names."""
    if isinstance(cfg.get("thinker_config"), dict):
        return {**cfg["thinker_config"], "architectures": cfg.get("architectures"), "model_type": cfg.get("model_type")}
    return cfg


def validate_blocks(cfg: dict[str, Any], where: str) -> None:
    """DeciLM block_configs: each n_heads_in_group and ffn_mult in range (BadValue names the field)."""
    from servefit.budget import count, number

    for i, b in enumerate(cfg.get("block_configs") or []):
        attn = b.get("attention") if isinstance(b, dict) else None
        ffn = b.get("ffn") if isinstance(b, dict) else None
        if isinstance(attn, dict) and attn.get("n_heads_in_group") is not None:
            count(attn["n_heads_in_group"], f"{where}block_configs[{i}].attention.n_heads_in_group", "heads", minimum=1)
        if isinstance(ffn, dict) and ffn.get("ffn_mult") is not None:
            number(ffn["ffn_mult"], f"{where}block_configs[{i}].ffn.ffn_mult", minimum=0, maximum=1000)


def _mamba1(c: dict[str, Any], h: int, jamba: bool) -> dict[str, Any]:
    """Mamba1 mixer keys: MambaConfig / FalconMambaConfig (state_size, expand, conv_kernel,
    time_step_rank, use_bias, use_conv_bias) or JambaConfig's mamba_* names."""
    p = "mamba_" if jamba else ""
    rank = c.get(p + "dt_rank" if jamba else "time_step_rank")
    m: dict[str, Any] = {
        "kind": "mamba1", "d_inner": as_int(c.get("intermediate_size")) if not jamba and c.get("intermediate_size")
        else as_int(c.get(p + "expand"), 2) * h,
        "state_size": as_int(c.get(p + "d_state" if jamba else "state_size"), 16),
        "conv_kernel": as_int(c.get(p + "d_conv" if jamba else "conv_kernel"), 4),
        "dt_rank": as_int(rank) if rank not in (None, "auto") else -(-h // 16),
        "conv_bias": bool(c.get(p + "conv_bias" if jamba else "use_conv_bias", True)),
        "proj_bias": bool(c.get(p + "proj_bias" if jamba else "use_bias", False)),
    }
    if jamba:
        m["bc_norms"] = True  # vLLM jamba.py MambaMixer(use_rms_norm=True): dt / B / C norms with weights
    return linear_attention_state(m)


def _decilm(c: dict[str, Any], spec: ModelSpec) -> None:
    """block_configs of a DeciLM (Llama-Nemotron NAS) config: attention no-ops become "none"
    layers, each FFN its ffn_mult (0: no-op); the KV heads are the attention layers' largest
    num_attention_heads // n_heads_in_group (vLLM nemotron_nas.py DeciLMDecoderLayer)."""
    blocks = c.get("block_configs")
    if not isinstance(blocks, list) or len(blocks) != spec.num_hidden_layers:
        return
    kinds, mults, kv = [], [], []
    for b in blocks:
        attn = b.get("attention") if isinstance(b, dict) else None
        ffn = b.get("ffn") if isinstance(b, dict) else None
        attn, ffn = attn if isinstance(attn, dict) else {}, ffn if isinstance(ffn, dict) else {}
        if attn.get("no_op"):
            kinds.append("none")
        else:
            kinds.append("full")
            kv.append(spec.num_attention_heads // max(1, as_int(attn.get("n_heads_in_group"), 1)))
        mult = ffn.get("ffn_mult")
        mults.append(0 if ffn.get("no_op") else float(mult) if isinstance(mult, (int, float)) else 0)
    spec.layer_types = kinds
    spec.layout["ffn_mult"] = mults
    if kv:
        spec.num_key_value_heads = max(kv)
    if any(mults):
        from servefit.models.arch_classic import decilm_ffn_width

        spec.intermediate_size = max(decilm_ffn_width(x, spec.hidden_size) for x in mults if x)


def _minimax_m3(c: dict[str, Any], spec: ModelSpec) -> None:
    """MiniMax-M3 (transformers configuration_minimax_m3_vl.py MiniMaxM3VLTextConfig): intermediate_size
    is the expert's, dense_intermediate_size the dense layers', shared_intermediate_size the shared
    expert's; sparse_attention_config.sparse_attention_freq marks the layers with a Lightning Indexer
    and moe_layer_freq the MoE ones (vLLM models/minimax_m3/nvidia/model.py)."""
    spec.model_type, lay = "minimax_m3_vl", spec.layout
    sparse = as_dict(c.get("sparse_attention_config"))
    if spec.num_experts:
        spec.moe_intermediate_size = as_int(c.get("intermediate_size"), spec.moe_intermediate_size)
        shared = as_int(c.get("shared_intermediate_size"))
        spec.num_shared_experts = max(1, round(shared / spec.moe_intermediate_size)) if shared else 0
    spec.intermediate_size = as_int(c.get("dense_intermediate_size"), spec.intermediate_size)
    spec.index_n_heads = as_int(c.get("index_n_heads") or sparse.get("sparse_num_index_heads"), 4)
    spec.index_head_dim = as_int(c.get("index_head_dim") or sparse.get("sparse_index_dim"), 128)
    freq = sparse.get("sparse_attention_freq")
    lay["index_free_layers"] = sum(1 for f in freq if not f) if isinstance(freq, list) else 0
    moe = c.get("moe_layer_freq")
    if isinstance(moe, list):  # dense layers lead (DeepSeek-style first_k_dense_replace)
        spec.first_k_dense_replace = sum(1 for f in moe if not f)
    spec.layer_types = []  # every layer caches K and V (full or block-sparse attention)


def _mimo_v2(c: dict[str, Any], spec: ModelSpec) -> None:
    """MiMo-V2-Flash's config.json as vLLM 0.33.0 mimo_v2.py reads it: hybrid_layer_pattern (1: a
    sliding-window layer with swa_num_key_value_heads and, with add_swa_attention_sink_bias, sinks),
    sliding_window_size, moe_layer_freq (the dense layers are its leading zeros); transformers'
    configuration_mimo_v2_flash.py names (layer_types, sliding_window = size + 1) otherwise."""
    n = spec.num_hidden_layers
    pattern = c.get("hybrid_layer_pattern")
    if isinstance(pattern, list) and len(pattern) == n:
        spec.layer_types = ["sliding" if int(x) == 1 else "full" for x in pattern]
    elif not isinstance(c.get("layer_types"), list):  # the config class's default: full at 0 and every 6th
        spec.layer_types = ["full" if i == 0 or (i + 1) % 6 == 0 else "sliding" for i in range(n)]
    if c.get("sliding_window_size"):
        spec.sliding_window = as_int(c["sliding_window_size"])
    elif c.get("sliding_window"):
        spec.sliding_window = as_int(c["sliding_window"]) - 1
    spec.layout["swa_num_key_value_heads"] = as_int(c.get("swa_num_key_value_heads"), 2 * spec.num_key_value_heads)
    spec.layout["swa_attention_sinks"] = bool(c.get("add_swa_attention_sink_bias", "hybrid_layer_pattern" not in c))
    spec.v_head_dim = as_int(c.get("swa_v_head_dim") or c.get("v_head_dim"), spec.head_dim)
    freq = c.get("moe_layer_freq")
    if isinstance(freq, list) and freq:
        spec.first_k_dense_replace = next((i for i, x in enumerate(freq) if x), len(freq))
    elif isinstance(c.get("mlp_layer_types"), list):  # transformers: "dense" / "sparse" per layer
        kinds = c["mlp_layer_types"]
        spec.first_k_dense_replace = next((i for i, x in enumerate(kinds) if x == "sparse"), len(kinds))
    elif spec.num_experts:
        spec.first_k_dense_replace = 1  # the config class: one dense layer, then MoE


def apply(c: dict[str, Any], spec: ModelSpec) -> None:
    """Complete `spec` (from the merged config dict `c`) for the layouts beyond the Llama one."""
    mt, h, n = spec.model_type, spec.hidden_size, spec.num_hidden_layers
    lay = spec.layout
    if mt == "lfm2_vl":  # counted and planned as its language model (vLLM lfm2_vl.py over lfm2.py)
        spec.model_type = mt = "lfm2_moe" if c.get("model_type") == "lfm2_moe" else "lfm2"
    if mt in _TIED_BY_DEFAULT and c.get("tie_word_embeddings") is None:
        spec.tie_word_embeddings = True  # the config class default (PretrainedConfig: True)
    if mt == "opt":
        lay["word_embed_proj_dim"] = as_int(c.get("word_embed_proj_dim"), h)
        lay["do_layer_norm_before"] = bool(c.get("do_layer_norm_before", True))
    elif mt in ENCODERS:
        spec.layer_types = ["none"] * n  # ENCODER_ONLY attention: no KV cache in vLLM
        if c.get("type_vocab_size") is not None:
            lay["type_vocab_size"] = as_int(c.get("type_vocab_size"))
        if mt == "nomic_bert":  # vLLM bert_with_rope.py: biases, GELU or SwiGLU MLP, NomicMoE layers
            lay["attention_bias"] = bool(c.get("qkv_proj_bias", False))
            lay["mlp_bias"] = bool(c.get("mlp_fc1_bias", False))
            lay["glu_mlp"] = str(c.get("activation_function", "swiglu")) in ("swiglu", "geglu", "silu")
            if as_int(c.get("moe_every_n_layers")):
                lay["moe_every_n_layers"] = as_int(c.get("moe_every_n_layers"))
        if c.get("position_embedding_type") == "alibi":  # JinaBERT (jina-embeddings-v2)
            lay["alibi"] = True
        elif c.get("position_embedding_type") == "rotary":  # jina-embeddings-v3 (XLM-R with rotary positions)
            lay["rotary"] = True
        if str(c.get("feed_forward_type", "")).endswith("glu"):
            lay["glu_mlp"] = True
    elif mt == "deepseek_v4":
        from servefit.models.arch_deepseek_v4 import read_config

        read_config(c, spec)
    elif mt == "longcat_flash":  # vLLM longcat_flash.py: num_layers decoder layers of two attention sublayers
        spec.num_hidden_layers = 2 * n
        spec.moe_layer_step, spec.first_k_dense_replace = 2, 0
        spec.moe_intermediate_size = as_int(c.get("expert_ffn_hidden_size"), spec.moe_intermediate_size)
        lay["dense_with_moe"] = True
        lay["zero_experts"] = as_int(c.get("zero_expert_num"))
    elif mt == "gpt_neo":  # GPTNeoConfig attention_types [[["global", "local"], 12]]: local = window_size
        kinds = [k for group, times in (c.get("attention_types") or [[["global", "local"], n // 2]])
                 for _ in range(int(times)) for k in group]
        if len(kinds) == n:
            spec.layer_types = ["full" if k == "global" else "sliding" for k in kinds]
            spec.sliding_window = as_int(c.get("window_size"), 256)
    elif mt == "falcon" and c.get("num_ln_in_parallel_attn") is not None:
        lay["num_ln_in_parallel_attn"] = as_int(c.get("num_ln_in_parallel_attn"))
    elif mt == "zamba2":  # Zamba2Config (vLLM zamba2.py): hybrid layers run the shared attention block
        blocks = c.get("layers_block_type")
        if isinstance(blocks, list) and len(blocks) == n:
            spec.layer_types = ["full" if k == "hybrid" else "mamba" for k in blocks]
        spec.head_dim = 2 * h // max(spec.num_attention_heads, 1)  # attention_head_dim over 2 x hidden
        heads = as_int(c.get("n_mamba_heads"), 8)
        d_inner = int(float(c.get("mamba_expand") or 2) * h)
        spec.mamba = linear_attention_state({
            "kind": "mamba2", "num_heads": heads, "head_dim": d_inner // max(heads, 1),
            "n_groups": as_int(c.get("mamba_ngroups"), 1), "state_size": as_int(c.get("mamba_d_state"), 64),
            "conv_kernel": as_int(c.get("mamba_d_conv"), 4)})
        spec.intermediate_size = as_int(c.get("intermediate_size")) or 4 * h
        lay["num_mem_blocks"] = as_int(c.get("num_mem_blocks"), 1)
        lay["adapter_rank"] = as_int(c.get("adapter_rank"), 128)
        lay["use_shared_attention_adapter"] = bool(c.get("use_shared_attention_adapter", False))
    elif mt == "falcon_h1":
        spec.mamba = _mamba2(c, h)
        lay["mamba_rms_norm"] = bool(c.get("mamba_rms_norm", False))
    elif mt in ("granitemoehybrid", "granitemoe_swa"):  # granitemoe_swa: every layer attention, shared MLP
        if spec.num_experts:
            spec.moe_intermediate_size = as_int(c.get("intermediate_size"))
        spec.intermediate_size = as_int(c.get("shared_intermediate_size"), spec.intermediate_size)
        if "mamba" in spec.kinds():
            spec.mamba = _mamba2(c, h)
    elif mt == "kimi_k3":  # text_config kimi_linear: SGLang kimi_k3.py reads these (models/arch_kimi_k3.py)
        for src, key in (("routed_expert_hidden_size", "moe_latent_size"), ("attn_res_block_size", "attn_res_block_size")):
            if c.get(src):
                lay[key] = as_int(c[src])
        for src, key in (("latent_moe_use_norm", "latent_moe_norm"), ("mla_use_output_gate", "mla_output_gate")):
            if c.get(src):
                lay[key] = True
    elif mt == "mimo_v2_flash":
        _mimo_v2(c, spec)
    elif mt in _READERS:  # a layout whose module reads its own keys: models/arch_<name>.py read_config
        importlib.import_module(f"servefit.models.{_READERS[mt]}").read_config(c, spec)
    elif mt == "nemotron_h":
        spec.head_dim = as_int(c.get("attention_head_dim") or c.get("head_dim"), spec.head_dim)
        for key in ("moe_shared_expert_intermediate_size", "moe_latent_size"):  # latent: Nemotron 3 Super
            if c.get(key):
                lay[key] = as_int(c[key])
        spec.mamba = _mamba2(c, h)
    elif mt in ("lfm2", "lfm2_moe"):
        spec.intermediate_size = lfm2_ff_dim(c)
        spec.mamba = linear_attention_state({"kind": "short_conv", "conv_kernel": as_int(c.get("conv_L_cache"), 3),
                                             "conv_dim": h})
        if mt == "lfm2_moe":
            spec.first_k_dense_replace = as_int(c.get("num_dense_layers"))
            lay["use_expert_bias"] = bool(c.get("use_expert_bias", True))
    elif mt in _SSM:
        spec.layer_types = ["mamba"] * n
        if mt == "mamba2":  # Mamba2Config names (num_heads, head_dim, n_groups, state_size, conv_kernel)
            keys = {"mamba_n_heads": "num_heads", "mamba_d_head": "head_dim", "mamba_n_groups": "n_groups",
                    "mamba_d_state": "state_size", "mamba_d_conv": "conv_kernel", "mamba_expand": "expand"}
            spec.mamba = _mamba2({k: c.get(v) for k, v in keys.items()}, h)
        else:
            spec.mamba = _mamba1(c, h, jamba=False)
    elif mt == "jamba":
        spec.mamba = _mamba1(c, h, jamba=True)
        period, offset = as_int(c.get("expert_layer_period"), 2), as_int(c.get("expert_layer_offset"), 1)
        if spec.num_experts and offset == period - 1:  # MoE where i % period == offset
            spec.moe_layer_step = period
    elif mt == "nemotron-nas":
        _decilm(c, spec)
    elif mt == "dbrx":  # vLLM dbrx.py: attn_config.kv_n_heads, ffn_config (experts of ffn_hidden_size)
        attn, ffn = as_dict(c.get("attn_config")), as_dict(c.get("ffn_config"))
        spec.num_key_value_heads = as_int(attn.get("kv_n_heads"), spec.num_key_value_heads)
        spec.num_experts = as_int(ffn.get("moe_num_experts"))
        spec.num_experts_per_tok = as_int(ffn.get("moe_top_k"))
        spec.moe_intermediate_size = spec.intermediate_size = as_int(ffn.get("ffn_hidden_size"), spec.intermediate_size)
    elif mt == "gemma3n":  # Gemma3nTextConfig: per-layer MLP widths (one for all here), PLE, AltUp, LAuReL
        widths = c.get("intermediate_size")
        if isinstance(widths, list) and widths:
            spec.intermediate_size = max(as_int(x) for x in widths)
        for key, default in (("hidden_size_per_layer_input", 256), ("vocab_size_per_layer_input", 262144),
                             ("num_kv_shared_layers", 0), ("altup_num_inputs", 4), ("laurel_rank", 64)):
            lay[key] = as_int(c.get(key), default)
    elif mt in ("molmo", "molmo2"):  # vLLM molmo.py / molmo2.py: 128 new token rows, the LM's norms / biases
        lay["additional_vocab"] = as_int(c.get("additional_vocab_size"), 128)
        if mt == "molmo":  # Molmo's intermediate_size is the fused gate + up width
            spec.intermediate_size //= 2
            spec.vocab_size = as_int(c.get("embedding_size"), spec.vocab_size)
        if c.get("qkv_bias"):
            lay["attention_bias"] = True
        if c.get("use_qk_norm"):
            lay["qk_norm" if c.get("qk_norm_type") == "qwen3" else "qk_norm_full"] = True
    elif mt == "bailing_moe":  # vLLM bailing_moe.py: Ling v1 has neither q/k norms nor the expert bias
        for key, flag in (("use_qk_norm", "qk_norm"), ("moe_router_enable_expert_bias", "expert_score_bias")):
            if isinstance(c.get(key), bool):
                lay[flag] = c[key]
    elif mt == "qwen2_5_omni":  # the thinker's language model is Qwen2.5's (q/k/v biases)
        lay["attention_bias"] = True
    elif mt == "minicpmv":  # vLLM minicpmv.py init_llm by config.version: 2.6 Qwen2 (q/k/v biases), 4.5 Qwen3
        version = str(c.get("version") or "")
        if version.startswith("2.6"):
            lay["attention_bias"] = True
        elif version.startswith("4.5"):
            lay["qk_norm"] = True
    elif mt == "openelm":  # per-layer heads and FFN widths from the multipliers (models/arch_openelm.py)
        from servefit.models import arch_openelm

        arch_openelm.apply_config(c, spec)
    elif mt in ("minimax_m3_vl", "minimax_m3"):
        _minimax_m3(c, spec)
    elif mt == "hrm_text":  # cycled stacks: one KV cache per layer run (models/arch_hrm.py)
        from servefit.models import arch_hrm

        arch_hrm.apply_config(c, spec)
    elif mt in LAGUNA_LIKE:  # per-layer query heads and the output gate (models/arch_laguna.py)
        from servefit.models import arch_laguna

        arch_laguna.apply_config(c, spec)
    elif mt in ("gpt_neox", "nemotron"):
        pct = c.get("rotary_pct", c.get("partial_rotary_factor"))
        if isinstance(pct, (int, float)):
            lay["rotary_pct"] = float(pct)
    if mt == "bailing_moe":  # vLLM bailing_moe.py: Ling 1.x has neither (use_qk_norm, moe_router_enable_expert_bias)
        for key, field in (("use_qk_norm", "qk_norm"), ("moe_router_enable_expert_bias", "expert_score_bias")):
            if isinstance(c.get(key), bool):
                lay[field] = c[key]
    if spec.index_n_heads:  # GLM-5.2 IndexShare: which layers run the indexer (architecture.indexer_layers)
        for key in ("index_topk_freq", "index_skip_topk_offset"):
            if isinstance(c.get(key), int) and not isinstance(c.get(key), bool):
                lay[key] = c[key]
        if isinstance(c.get("index_topk_pattern"), str):
            lay["index_topk_pattern"] = c["index_topk_pattern"]
    if mt in ("glm4", "seed_oss") and isinstance(c.get("attention_bias"), bool):  # vLLM glm4.py, seed_oss.py: q/k/v bias
        lay["attention_bias"] = c["attention_bias"]
    if mt in ("llama", "mistral") and c.get("attention_bias") is True:  # vLLM llama.py: q/k/v and o_proj biases
        lay["attention_bias"] = lay["o_bias"] = True
    if mt in ("llama", "mistral") and c.get("mlp_bias") is True:  # vLLM llama.py LlamaMLP(bias=config.mlp_bias)
        lay["mlp_bias"] = True
    if spec.architecture in ("MistralModel", "LlamaModel", "Qwen2Model"):  # bare decoders (e5-mistral)
        lay["no_lm_head"] = True
    if spec.architecture == "JinaForRanking":  # vLLM jina.py: Qwen3Model + a projector, no lm_head loaded;
        # models/config.py JinaForRankingConfig sets the projector's embedding_size to 512 whatever config.json says
        lay["ranking_projector"], lay["no_lm_head"] = 512, True
