"""Parameter counts of the encoder-only embedding models (BERT, RoBERTa / XLM-R, MPNet,
NomicBert). vLLM serves them as pooling models whose ENCODER_ONLY attention needs no KV cache
(v1/worker/gpu_model_runner.py::get_kv_cache_spec skips those layers; v1/engine/core.py::
_initialize_kv_caches gives an attention-free model no KV memory and runs no profiling); the
catalog marks their layers "none". Standard library only: this is on the fast path.
"""

from __future__ import annotations

from servefit.models.spec import ModelSpec

ENCODERS = ("bert", "roberta", "xlm-roberta", "mpnet", "nomic_bert")
_TYPE_VOCAB = {"bert": 2, "roberta": 1, "xlm-roberta": 1, "mpnet": 0, "nomic_bert": 2}


def count_encoder(s: ModelSpec) -> int:
    """modeling_bert.py BertModel (RoBERTa / XLM-R the same modules): word, position and
    token-type embeddings + LayerNorm; per layer biased q/k/v, attention output dense +
    LayerNorm, intermediate and output dense + LayerNorm; the pooler (dense h x h) when the
    checkpoint has one. modeling_mpnet.py adds relative_attention_bias (32 buckets x heads)
    and has no token types. NomicBert (nomic-ai contrastors): rotary positions, fused
    bias-free Wqkv and out_proj, SwiGLU fc11 / fc12 / fc2 without biases, post-norm. JinaBERT
    (jina-embeddings-v2: model_type bert with position_embedding_type "alibi" and feed_forward_type
    "geglu"): BERT without the position table, its MLP gated_layers (h -> 2 x inter, no bias) and
    wo; llmfit's exact counts of v2 base and small fit it (data/models/embedding.yaml). jina-embeddings-v3:
    XLM-R large with rotary positions (`rotary`: no position table)."""
    h, lay = s.hidden_size, s.layout
    inter = s.intermediate_size
    types = int(lay.get("type_vocab_size", _TYPE_VOCAB.get(s.model_type, 2)))
    n = s.vocab_size * h + types * h + 2 * h
    if s.model_type == "nomic_bert":
        return n + _nomic_layers(s)
    # no position table: JinaBERT's ALiBi biases (jina-embeddings-v2); rotary positions (jina-embeddings-v3's
    # XLM-R, vLLM bert_with_rope.py JinaRobertaModel; transformers modeling_jina_embeddings_v3.py)
    if not (lay.get("alibi") or lay.get("rotary")):
        n += s.max_position_embeddings * h
    # JinaBERT's GLU MLP: gated_layers (h -> 2 x inter, no bias), wo (inter -> h, bias)
    mlp = h * 2 * inter + inter * h + h if lay.get("glu_mlp") else (h * inter + inter) + (inter * h + h)
    per = 4 * (h * h + h) + mlp + 2 * 2 * h
    n += s.num_hidden_layers * per
    if s.model_type == "mpnet":
        n += int(lay.get("relative_attention_num_buckets", 32)) * s.num_attention_heads
    if lay.get("pooler", True):
        n += h * h + h
    labels = int(lay.get("classifier_labels", 0))
    if labels:  # rerankers: *ForSequenceClassification heads
        # RobertaClassificationHead: dense (h x h) + out_proj; BertForSequenceClassification: one Linear
        head = h * h + h if s.model_type in ("roberta", "xlm-roberta") else 0
        n += head + h * labels + labels
    return n


def _nomic_layers(s: ModelSpec) -> int:
    """vLLM bert_with_rope.py BertWithRopeBlock (NomicBertModel): fused qkv and out_proj, a SwiGLU
    (gate_up / down) or, with a GELU, an up / down MLP, attn_ln and mlp_ln; biases where the config
    has them (nomic-embed-text-v1.5: none; v2-moe: qkv_proj_bias, mlp_fc1/fc2_bias). Every
    moe_every_n_layers-th layer (index % n == 1) holds a NomicMoE instead of the MLP: a bias-free
    router (h x experts), w1 / w2 (experts x inter x h each) and one output bias."""
    h, inter, lay = s.hidden_size, s.intermediate_size, s.layout
    attn = 4 * h * h + (4 * h if lay.get("attention_bias") else 0) + 2 * 2 * h
    gated = lay.get("glu_mlp", True)
    mlp = (3 if gated else 2) * h * inter + (((2 if gated else 1) * inter + h) if lay.get("mlp_bias") else 0)
    every = int(lay.get("moe_every_n_layers", 0))
    moe = h * s.num_experts + 2 * s.num_experts * inter * h + h
    return sum(attn + (moe if every and i % every == 1 else mlp) for i in range(s.num_hidden_layers))
