"""A model's parameters split into the groups engines place and shard differently.

Counting follows the Hugging Face module layout of each family (q/k/v/o projections, gated MLP,
routed + shared experts with a router, MLA down/up projections, RMS norms, embeddings and an
untied lm_head)."""

from __future__ import annotations

from dataclasses import dataclass

from servefit.models.arch_laguna import FAMILIES as LAGUNA_LIKE
from servefit.models.spec import ModelSpec

_QKV_BIAS = {"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl"}  # q/k/v carry a bias


@dataclass(frozen=True)
class ParamGroups:
    """A model's parameters by the groups engines treat differently (embeddings, head, attention, MLP, routed
    experts), so weights can be sharded, quantized and placed group by group."""

    embed: int  # token embedding (vocab x hidden)
    lm_head: int  # 0 when tied
    attn: tuple[int, ...]  # per layer: attention projections (+ biases)
    mlp: tuple[int, ...]  # per layer: dense MLP, or shared experts + router for MoE layers
    experts: tuple[int, ...]  # per layer: routed experts (0 for dense layers)
    norms: int  # every norm weight
    other: int  # vision tower, MTP heads... counted in the checkpoint, not in the layers

    @property
    def total(self) -> int:
        return self.embed + self.lm_head + sum(self.attn) + sum(self.mlp) + sum(self.experts) + self.norms + self.other

    @property
    def linear(self) -> int:
        """Parameters of the quantizable linear layers (everything but embeddings, head, norms)."""
        return sum(self.attn) + sum(self.mlp) + sum(self.experts)


def attention_projections(m: ModelSpec) -> dict[str, int]:
    """Weight parameters of each attention projection, by its Hugging Face module name."""
    h, nh = m.hidden_size, m.num_attention_heads
    if m.is_mla:
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = {"q_a_proj": h * m.q_lora_rank, "q_b_proj": m.q_lora_rank * nh * qk} if m.q_lora_rank \
            else {"q_proj": h * nh * qk}
        return {**q, "kv_a_proj_with_mqa": h * (m.kv_lora_rank + m.qk_rope_head_dim),
                "kv_b_proj": m.kv_lora_rank * nh * (m.qk_nope_head_dim + m.v_head_dim), "o_proj": nh * m.v_head_dim * h}
    hd, kv = m.head_dim, m.num_key_value_heads
    return {"q_proj": h * nh * hd, "k_proj": h * kv * hd, "v_proj": h * kv * hd, "o_proj": nh * hd * h}


def attention_params(m: ModelSpec) -> int:
    """The projections plus MLA's q_a / kv_a norms or Qwen2's q/k/v biases."""
    extra = 0
    if m.is_mla:
        extra = m.q_lora_rank + m.kv_lora_rank
    elif m.model_type in _QKV_BIAS:
        extra = (m.num_attention_heads + 2 * m.num_key_value_heads) * m.head_dim
    return sum(attention_projections(m).values()) + extra


def is_gated(m: ModelSpec) -> bool:
    """Whether the MLP has a gate projection (gate, up, down) or is a plain up / down pair."""
    from servefit.models.family_traits import is_gated_mlp

    return is_gated_mlp(m)


def mlp_params(hidden: int, inter: int, gated: bool = True) -> int:
    return (3 if gated else 2) * hidden * inter


def param_groups(m: ModelSpec) -> ParamGroups:
    gated = is_gated(m)
    kinds = m.kinds()
    attn, mlp, experts = [], [], []
    for i, kind in enumerate(kinds):
        attn.append(0 if kind in ("mamba", "linear", "none") else attention_params(m))
        if m.is_moe and i >= m.first_k_dense_replace and (i + 1) % max(m.moe_layer_step, 1) == 0:
            inter = m.moe_intermediate_size or m.intermediate_size
            experts.append(m.num_experts * mlp_params(m.hidden_size, inter, gated))
            shared = m.num_shared_experts * mlp_params(m.hidden_size, inter, gated)
            mlp.append(shared + m.hidden_size * m.num_experts)  # + router
        else:
            experts.append(0)
            mlp.append(mlp_params(m.hidden_size, m.intermediate_size, gated))
    embed = m.vocab_size * m.hidden_size
    lm_head = 0 if m.tie_word_embeddings else embed
    norms = (2 * len(kinds) + 1) * m.hidden_size
    from servefit.models.architecture import ranking_projector_params

    other = m.vision_params + ranking_projector_params(m)
    if m.layout.get("global_head_dim") or m.layout.get("altup_num_inputs"):
        # Gemma 4 / Gemma 3n: per-kind attention, KV-shared layers, PLE (and AltUp, LAuReL, audio)
        # in `other`
        from servefit.models import arch_gemma3n, arch_gemma4
        from servefit.models.arch_gemma4 import layer_attention, layer_mlp_width

        text = arch_gemma3n.count_text(m) if arch_gemma3n.is_gemma3n(m) else arch_gemma4.count_text(m)
        attn = [layer_attention(m, i, k) for i, k in enumerate(kinds)]
        mlp = [mlp_params(m.hidden_size, layer_mlp_width(m, i)) + (x and m.hidden_size * m.num_experts)
               for i, x in enumerate(experts)]
        other += text - (embed + lm_head + sum(attn) + sum(mlp) + sum(experts) + norms)
    if m.model_type == "deepseek_v4":  # per-layer compressed attention, MoE on every layer (arch_deepseek_v4.py)
        from servefit.models import arch_deepseek_v4 as v4

        ratios = v4.compress_ratios(m)[:len(kinds)]
        attn = [v4.layer_attention(m, r) for r in ratios]
        moe = [v4.layer_moe(m, i) for i in range(len(kinds))]
        experts, mlp = [x for x, _ in moe], [rest for _, rest in moe]
        other += v4.count_text(m) - (embed + lm_head + sum(attn) + sum(mlp) + sum(experts) + norms)
    if m.model_type == "openelm":  # every layer its own heads and FFN width (models/arch_openelm.py)
        from servefit.models import arch_openelm

        shapes = [arch_openelm.layer_params(m, *x) for x in arch_openelm.layer_shapes(m)]
        attn, mlp = [a for a, _ in shapes], [f for _, f in shapes]
        other += arch_openelm.count_text(m) - (embed + lm_head + sum(attn) + sum(mlp) + norms)
    if m.model_type in LAGUNA_LIKE:  # every layer its own query heads, a gate (models/arch_laguna.py)
        from servefit.models import arch_laguna

        attn = [arch_laguna.layer_attention(m, q) for q in arch_laguna.layer_heads(m)]
        other += arch_laguna.count_text(m) - (embed + lm_head + sum(attn) + sum(mlp) + sum(experts) + norms)
    if m.model_type == "mimo_v2_flash":  # per-kind attention shapes (models/arch_mimo_v2.py)
        from servefit.models import arch_mimo_v2

        attn = [arch_mimo_v2.layer_attention(m, k) for k in kinds]
        other += arch_mimo_v2.count_text(m) - (embed + lm_head + sum(attn) + sum(mlp) + sum(experts) + norms)
    if m.model_type == "kimi_k3":  # KDA / gated MLA layers, latent MoE (models/arch_kimi_k3.py)
        from servefit.models import arch_kimi_k3 as k3

        attn = [k3.layer_attention(m, k) for k in kinds]
        experts = [k3.routed_experts(m) if x else 0 for x in experts]
        mlp = [k3.moe_rest(m) if x else mlp for x, mlp in zip(experts, mlp, strict=True)]
        other += k3.count_text(m) - (embed + lm_head + sum(attn) + sum(mlp) + sum(experts) + norms)
    if m.model_type in ("inkling_mm_model", "inkling_text"):  # per-kind attention, sconvs (models/arch_inkling.py)
        from servefit.models import arch_inkling

        attn = [arch_inkling.layer_attention(m, k) for k in kinds]
        split = [arch_inkling.layer_mlp(m, i) for i in range(len(kinds))]
        experts, mlp = [x for x, _ in split], [rest for _, rest in split]
        other += arch_inkling.count_text(m) - (embed + lm_head + sum(attn) + sum(mlp) + sum(experts) + norms)
    if m.model_type == "zaya":  # CCA attention with its convolutions, router MLP (models/arch_zaya.py)
        from servefit.models import arch_zaya

        attn = [arch_zaya.layer_attention(m)] * len(kinds)
        mlp = [arch_zaya.layer_router(m, i) for i in range(len(kinds))]
        other += arch_zaya.count_text(m) - (embed + lm_head + sum(attn) + sum(mlp) + sum(experts) + norms)
    return ParamGroups(embed=embed, lm_head=lm_head, attn=tuple(attn), mlp=tuple(mlp),
                       experts=tuple(experts), norms=norms, other=other)
