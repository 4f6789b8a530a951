"""Qwen3-VL-Embedding (Qwen3-VL served with --runner pooling) and jina-reranker-v3 (vLLM JinaForRanking: Qwen3
with a projector): counts by hand against the documents their entries name, and how vLLM runs them."""

from __future__ import annotations

from servefit.engines.vllm.forward import pooling_runner
from servefit.memory.params import param_groups
from servefit.models import count_params, resolve_model
from servefit.models.config_json import from_config
from servefit.pipeline import Target, evaluate, site_from_argv


def test_vl_embedding_counts_are_the_instruct_layouts():
    two = resolve_model("Qwen/Qwen3-VL-Embedding-2B")
    inst = resolve_model("Qwen/Qwen3-VL-2B-Instruct")
    assert count_params(two) == two.params == inst.params == 2_127_532_032  # mteb n_parameters
    assert two.vocab_size * two.hidden_size == 311_164_928  # mteb n_embedding_parameters
    eight = resolve_model("Qwen/Qwen3-VL-Embedding-8B")
    # mteb's 8144793840 is Qwen3-VL-8B-Instruct's count less its untied lm_head (151936 x 4096)
    assert resolve_model("Qwen/Qwen3-VL-8B-Instruct").params - 151936 * 4096 == eight.params == count_params(eight)
    assert param_groups(eight).lm_head == 0 and eight.max_position_embeddings == 262144


def test_vl_embedding_runs_as_pooling_model_only_when_asked():
    m = resolve_model("Qwen/Qwen3-VL-Embedding-2B")
    assert pooling_runner(m, {"runner": "pooling"}, True)
    assert not pooling_runner(m, {}, True)  # Qwen3VLForConditionalGeneration alone is a generating model
    argv = ["vllm", "serve", "Qwen/Qwen3-VL-Embedding-2B", "--max-model-len", "8192"]
    t = Target(gpu="L4", gpus=1, engine_version="0.33.0")
    pooled = evaluate(site_from_argv([*argv, "--runner", "pooling"]), t).plan
    generating = evaluate(site_from_argv(argv), t).plan
    assert pooled.outcome == generating.outcome == "started"
    # the same weights (tied: no lm_head to drop); the vision encoder's profiling peak dominates either way
    assert pooled.memory.weights == generating.memory.weights >= 2 * m.params
    assert pooled.memory.activation_peak == generating.memory.activation_peak


def test_jina_reranker_v3_is_qwen3_with_its_projector():
    m = resolve_model("jinaai/jina-reranker-v3")
    qwen = resolve_model("Qwen/Qwen3-0.6B")
    # vLLM jina.py JinaForRanking: Linear(1024, 512) and Linear(512, embedding_size 512), no biases
    assert m.params == count_params(m) == qwen.params + 1024 * 512 + 512 * 512 == 596_836_352
    assert param_groups(m).total - param_groups(qwen).total == 786_432
    assert pooling_runner(m, {}, True)  # a late-interaction pooling model: no sampler in the profile


def test_jina_ranking_config_json_sets_the_projector():
    cfg = {"architectures": ["JinaForRanking"], "model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
           "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
           "vocab_size": 151936, "max_position_embeddings": 131072, "tie_word_embeddings": True,
           "torch_dtype": "bfloat16"}
    m = from_config(cfg, "local/jina-reranker-v3")
    # vLLM models/config.py JinaForRankingConfig sets embedding_size 512, whatever config.json says
    assert m.layout.get("ranking_projector") == 512 and m.params == 596_836_352
    assert from_config(dict(cfg, embedding_size=256), "y").params == m.params
    untied = from_config(dict(cfg, tie_word_embeddings=False), "x")  # the lm_head is never loaded
    assert untied.params == m.params


def test_jina_ranking_needs_vllm_0_20():
    argv = ["vllm", "serve", "jinaai/jina-reranker-v3", "--max-model-len", "8192"]
    old = evaluate(site_from_argv(argv), Target(gpu="L4", gpus=1, engine_version="0.19.1"))
    assert any(f.code == "VLLM024" and "added in 0.20.0" in f.message for f in old.plan.findings)
    new = evaluate(site_from_argv(argv), Target(gpu="L4", gpus=1, engine_version="0.33.0"))
    assert new.plan.outcome == "started" and not any(f.code == "VLLM024" for f in new.plan.findings)


def test_qwen3_vl_deepstack_buffers_load_with_the_weights():
    """qwen3_vl.py __init__ allocates one max_num_batched_tokens x hidden tensor per deepstack level with the
    model ("Model loading took" counts them): three levels of 2048 in fp16 here, on each TP rank."""
    def weights(tokens: int, tp: int = 1) -> int:
        argv = ["vllm", "serve", "Qwen/Qwen3-VL-Embedding-2B", "--runner", "pooling", "--dtype", "half",
                "--max-model-len", "8192", "--max-num-batched-tokens", str(tokens), "--tensor-parallel-size", str(tp)]
        return evaluate(site_from_argv(argv), Target(gpu="L4", gpus=tp, engine_version="0.11.0")).plan.memory.weights

    assert weights(16384) - weights(8192) == 3 * 8192 * 2048 * 2
    assert weights(16384, 2) - weights(8192, 2) == 3 * 8192 * 2048 * 2  # not split by TP
