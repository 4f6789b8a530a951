"""What a DeepSeek-V4 rank holds beyond its 1/TP share of the checkpoint, as SGLang builds the model
(python/sglang/srt/models/deepseek_v4.py, read in the 0.5.12 and 0.5.23 wheels). The generic weight
count splits every parameter over the tensor-parallel ranks at the checkpoint's FP8 size; SGLang keeps
these whole on every rank, some in a wider dtype:

- MQALayer: wqkv_a (hidden -> q_lora_rank + head_dim; SGLANG_OPT_FUSE_WQA_WKV, on by default), a
  ReplicatedLinear in FP8;
- Compressor (layers/attention/dsv4/compressor.py, rate 4 and 128 layers): wkv_gate (hidden ->
  2 x coff x head_dim, coff 2 at rate 4) a ReplicatedLinear in bf16, ape (rate x coff x head_dim) fp32;
- C4Indexer (layers/attention/dsv4/indexer.py, rate 4 layers): wq_b (q_lora_rank -> index heads x
  index_head_dim) replicated FP8, weights_proj (hidden -> index heads) replicated bf16, and its own
  Compressor at index_head_dim;
- MoEGate (models/deepseek_v2.py): the router (experts x hidden) in bf16 on every rank;
- DeepseekV4DecoderLayer: hc_attn_fn / hc_ffn_fn ((2 + hc) x hc x hc x hidden) in fp32;
- precompute_freqs_cis (layers/deepseek_v4_rope.py, lru_cache(2)): one complex64 table of
  max_position_embeddings x qk_rope_head_dim / 2 for the sliding layers and one for the compressed
  ones, built on the GPU while the model is constructed and shared by the layers as a buffer.
"""

from __future__ import annotations

from servefit.models import arch_deepseek_v4 as v4
from servefit.models.spec import ModelSpec

BF16, FP32, COMPLEX64 = 2, 4, 8


def extra_bytes(model: ModelSpec, tp: int, fp8_bytes: float) -> int:
    """Bytes one rank holds beyond weight_bytes / tp, where weight_bytes counts the attention and the
    router at `fp8_bytes` a parameter and the hyper-connections at bf16."""
    h, hd, qr = model.hidden_size, model.head_dim, model.q_lora_rank
    hc = int(model.layout.get("hc_mult") or 4)
    ratios = v4.compress_ratios(model)[:model.num_hidden_layers]
    share = fp8_bytes / tp  # what the generic count gave each rank for one linear parameter

    def replicated(n: int, dtype: float) -> float:
        return n * (dtype - share)

    out = 0.0
    for ratio in ratios:
        out += replicated(h * (qr + hd), fp8_bytes)  # wqkv_a
        if ratio:
            coff = 2 if ratio == 4 else 1
            out += replicated(h * 2 * coff * hd, BF16) + replicated(ratio * coff * hd, FP32)
        if ratio == 4 and model.index_n_heads:
            ih, ihd = model.index_n_heads, model.index_head_dim
            out += replicated(qr * ih * ihd, fp8_bytes) + replicated(h * ih, BF16)
            out += replicated(h * 2 * 2 * ihd, BF16) + replicated(4 * 2 * ihd, FP32)
        out += replicated(model.num_experts * h, BF16)  # MoEGate.weight
        out += 2 * (2 + hc) * hc * hc * h * (FP32 - BF16 / tp)  # hc_attn_fn, hc_ffn_fn
    tables = len({bool(r) for r in ratios})  # lru_cache keys: sliding (rate 0) and compressed rope
    out += tables * model.max_position_embeddings * (model.qk_rope_head_dim // 2) * COMPLEX64
    return int(out)
