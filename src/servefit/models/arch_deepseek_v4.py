"""DeepSeek-V4 (V4-Flash, V4-Pro and their -Base checkpoints): parameters of the layout.

Not the MLA layout of V2 / V3: every layer is shared-KV multi-query attention (one KV head of
head_dim 512 read as key and value) over a 128-token sliding window, and most layers add a
compressed branch whose rate `layout.compress_ratios` gives per layer (config.json
`compress_ratios`, one entry per layer plus the MTP layer's: 0 sliding only, 4 compressed
sparse attention with a Lightning Indexer, 128 heavily compressed attention). The residual is
`hc_mult` streams mixed by hyper-connections; the output projection is grouped and low-rank.

Layouts (transformers 5.24.0 models/deepseek_v4/modeling_deepseek_v4.py; the checkpoint's own
tensor names as vLLM 0.33.0 models/deepseek_v4/attention.py and nvidia/mtp.py load them):
- attention (DeepseekV4Attention): q_a (hidden -> q_lora_rank) + q_norm, q_b (q_lora_rank ->
  heads x head_dim), wkv (hidden -> head_dim) + kv_norm, wo_a (DeepseekV4GroupedLinear:
  heads x head_dim / o_groups -> o_groups x o_lora_rank), wo_b (o_groups x o_lora_rank ->
  hidden), attn_sink (one per head);
- compressor (DeepseekV4CSACompressor / DeepseekV4HCACompressor): wkv and wgate (hidden ->
  coff x head_dim, coff 2 at rate 4 and 1 at 128), ape (rate x coff x head_dim), norm (head_dim);
- indexer (DeepseekV4Indexer, rate-4 layers only): its own compressor at index_head_dim, wq_b
  (q_lora_rank -> index heads x index_head_dim), weights_proj (hidden -> index heads);
- MoE on every layer (DeepseekV4SparseMoeBlock): routed experts and a shared expert of
  moe_intermediate_size, the gate (experts x hidden) with e_score_correction_bias, except the first
  `num_hash_layers` layers, whose DeepseekV4HashRouter stores tid2eid (vocab x experts per token)
  instead of the bias;
- two RMSNorms and two DeepseekV4HyperConnection per layer: fn ((2 + hc) x hc, hc x hidden), base
  ((2 + hc) x hc), scale (3); DeepseekV4HyperHead at the top (hc x hc x hidden + hc + 1);
- the MTP layer (vLLM nvidia/mtp.py DeepSeekV4MultiTokenPredictorLayer): a decoder layer plus
  enorm / hnorm, e_proj / h_proj (hidden x hidden), its hc_head and a final norm. Left out of
  `params` as for DeepSeek-V3 (engines load it for MTP decoding only); `mtp_params` counts it.
Standard library only: this is on the fast path.
"""

from __future__ import annotations

from typing import Any

from servefit.models.spec import ModelSpec

FP8_BLOCK = 128  # quantization_config.weight_block_size [128, 128]
FP4_GROUP = 32  # FP4 experts: one e8m0 scale per 32 inputs (w1.scale [I, H / 32] in the checkpoint)


# transformers 5.24.0 configuration_deepseek_v4.py _COMPRESS_RATIO_TO_LAYER_TYPE, inverted
_RATES = {"sliding_attention": 0, "compressed_sparse_attention": 4, "heavily_compressed_attention": 128}


def _int(v: Any, default: int = 0) -> int:
    try:
        return int(v) if v is not None else default
    except (TypeError, ValueError):
        return default


def read_config(c: dict[str, Any], spec: ModelSpec) -> None:
    """The config.json keys (models/config_layouts.py calls this): the per-layer compression rates
    from the checkpoint's `compress_ratios` or a transformers-saved `layer_types` + `compress_rates`
    (DeepseekV4Config.__post_init__), hyper-connections, the grouped output projection, hash layers
    and the indexer; routed experts are FP4 unless the config says otherwise (vLLM 0.33.0
    models/deepseek_v4/quant_config.py: a missing expert_dtype is "fp4")."""
    lay = spec.layout
    ratios = c.get("compress_ratios")
    if not isinstance(ratios, list):
        given = c.get("compress_rates")
        rates = {**_RATES, **(given if isinstance(given, dict) else {})}
        types = c.get("layer_types")
        ratios = [_int(rates.get(str(t), 0)) for t in types] if isinstance(types, list) else []
    lay["compress_ratios"] = [_int(r) for r in ratios]
    lay["hc_mult"] = _int(c.get("hc_mult"), 4)
    lay["o_groups"] = _int(c.get("o_groups"), 1)
    lay["o_lora_rank"] = _int(c.get("o_lora_rank"))
    mlp = c.get("mlp_layer_types")
    lay["num_hash_layers"] = sum(1 for t in mlp if t == "hash_moe") if isinstance(mlp, list) \
        else _int(c.get("num_hash_layers"))
    spec.index_n_heads = _int(c.get("index_n_heads"))
    spec.intermediate_size = spec.moe_intermediate_size or spec.intermediate_size
    spec.first_k_dense_replace = 0
    q = spec.quantization
    if q is not None and str(q.get("quant_method")) == "fp8" and "expert_dtype" not in q:
        spec.quantization = {**q, "expert_dtype": str(c.get("expert_dtype") or "fp4")}


def is_deepseek_v4(s: ModelSpec) -> bool:
    return s.model_type == "deepseek_v4"


def compress_ratios(s: ModelSpec) -> list[int]:
    """Compression rate of each decoder layer and, last, of the MTP layer (0 when the list
    stops short: vLLM attention.py treats a layer past the list as sliding only)."""
    given = [int(r) for r in s.layout.get("compress_ratios") or []]
    n = s.num_hidden_layers + 1
    return (given + [0] * n)[:n]


def _hc(s: ModelSpec) -> int:
    return int(s.layout.get("hc_mult") or 4)


def layer_attention(s: ModelSpec, ratio: int) -> int:
    """Attention parameters of one layer at this compression rate (compressor and indexer included)."""
    h, heads, hd, qr = s.hidden_size, s.num_attention_heads, s.head_dim, s.q_lora_rank
    groups, o_rank = int(s.layout.get("o_groups") or 1), int(s.layout.get("o_lora_rank") or 0)
    n = h * qr + qr + qr * heads * hd + h * hd + hd
    n += heads * hd // groups * groups * o_rank + groups * o_rank * h + heads
    if ratio > 1:
        coff = 2 if ratio == 4 else 1
        n += 2 * h * coff * hd + ratio * coff * hd + hd
    if ratio == 4 and s.index_n_heads:
        ihd, ih = s.index_head_dim, s.index_n_heads
        n += 2 * h * 2 * ihd + ratio * 2 * ihd + ihd + qr * ih * ihd + h * ih
    return n


def layer_moe(s: ModelSpec, i: int) -> tuple[int, int]:
    """(routed experts, shared expert + gate + its bias or hash table) of layer i."""
    h, inter = s.hidden_size, s.moe_intermediate_size or s.intermediate_size
    experts = s.num_experts * 3 * h * inter
    rest = s.num_shared_experts * 3 * h * inter + s.num_experts * h
    hashed = i < int(s.layout.get("num_hash_layers") or 0)
    rest += s.vocab_size * s.num_experts_per_tok if hashed else s.num_experts
    return experts, rest


def layer_extra(s: ModelSpec) -> int:
    """Per layer: the two RMSNorms and the two hyper-connections."""
    hc, h = _hc(s), s.hidden_size
    return 2 * h + 2 * ((2 + hc) * hc * hc * h + (2 + hc) * hc + 3)


def _head(s: ModelSpec) -> int:
    hc = _hc(s)
    return hc * hc * s.hidden_size + hc + 1


def count_text(s: ModelSpec) -> int:
    """Parameters of the main model (embedding, layers, hc_head, norm, lm_head); MTP left out."""
    h = s.hidden_size
    total = s.vocab_size * h * (1 if s.tie_word_embeddings else 2) + h + _head(s)
    for i, ratio in enumerate(compress_ratios(s)[:s.num_hidden_layers]):
        total += layer_attention(s, ratio) + sum(layer_moe(s, i)) + layer_extra(s)
    return total


def mtp_params(s: ModelSpec, layers: int = 1) -> int:
    """One MTP layer (vLLM nvidia/mtp.py): a decoder layer at the list's last rate, enorm / hnorm,
    e_proj / h_proj, hc_head and the shared head's norm (its embedding and lm_head are the main
    model's, except in the -Base checkpoints, which store copies)."""
    h = s.hidden_size
    ratio = compress_ratios(s)[-1]
    one = layer_attention(s, ratio) + sum(layer_moe(s, s.num_hidden_layers)) + layer_extra(s)
    return layers * (one + 2 * h + 2 * h * h + _head(s) + h)


def _blocks(rows: int, cols: int) -> int:
    return -(-rows // FP8_BLOCK) * -(-cols // FP8_BLOCK)


def _fp8_scales(s: ModelSpec, ratio: int) -> int:
    """FP8 block-scale elements of one layer's quantized attention and shared-expert weights."""
    h, heads, hd, qr = s.hidden_size, s.num_attention_heads, s.head_dim, s.q_lora_rank
    groups, o_rank = int(s.layout.get("o_groups") or 1), int(s.layout.get("o_lora_rank") or 0)
    inter = s.moe_intermediate_size or s.intermediate_size
    n = (_blocks(qr, h) + _blocks(heads * hd, qr) + _blocks(hd, h)
         + _blocks(groups * o_rank, heads * hd // groups) + _blocks(h, groups * o_rank))
    n += s.num_shared_experts * (2 * _blocks(inter, h) + _blocks(h, inter))
    if ratio == 4 and s.index_n_heads:
        n += _blocks(s.index_n_heads * s.index_head_dim, qr)
    return n


def stored_total(s: ModelSpec, experts_fp4: bool, mtp_embeddings: bool) -> int:
    """The checkpoint's safetensors element total: the main model and its MTP layer with FP8
    weights and one scale per 128 x 128 block, routed experts either FP4 (two values a byte, one
    e8m0 scale per 32 inputs) or FP8; -Base checkpoints also store the MTP layer's own embedding and
    lm_head. Reproduces the Hub totals the catalog notes quote (tests/test_deepseek_v4.py)."""
    h, inter = s.hidden_size, s.moe_intermediate_size or s.intermediate_size
    ratios = compress_ratios(s)
    total = count_text(s) + mtp_params(s)
    total += sum(_fp8_scales(s, r) for r in ratios) + 2 * _blocks(h, h)  # + MTP e_proj / h_proj
    experts = s.num_experts * 3 * h * inter * len(ratios)
    if experts_fp4:
        total += experts // 2 - experts + experts // FP4_GROUP
    else:
        total += s.num_experts * (2 * _blocks(inter, h) + _blocks(h, inter)) * len(ratios)
    if mtp_embeddings:
        total += 2 * s.vocab_size * h
    return total

