"""DeepSeek-Prover, jina-embeddings-v3 (rotary XLM-R), DeepSeek-V3.1-Terminus, V3.2-Speciale and Math-V2
(catalog entries with their provenance), resolved by the names deployment files use."""

from __future__ import annotations

import pytest

from servefit.models import resolve_model
from servefit.models.config_json import from_config

# jina-embeddings-v3's config.json keys that the count depends on (transformers 5.24.0
# JinaEmbeddingsV3Config defaults; the original repo's model_type is xlm-roberta)
JINA_V3 = {"architectures": ["XLMRobertaModel"], "model_type": "xlm-roberta", "position_embedding_type": "rotary",
           "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096,
           "max_position_embeddings": 8194, "type_vocab_size": 1, "vocab_size": 250002}


def test_rotary_xlm_roberta_has_no_position_table():
    m = from_config(JINA_V3, "local/jina-v3")
    assert m.params == resolve_model("jinaai/jina-embeddings-v3").params == 559_364_096
    assert set(m.kinds()) == {"none"}
    absolute = from_config(dict(JINA_V3, position_embedding_type="absolute"), "x")
    assert absolute.params - m.params == 8194 * 1024


@pytest.mark.parametrize(("ref", "name", "params"), [
    ("deepseek-ai/DeepSeek-Prover-V2-7B", "deepseek-ai/DeepSeek-Prover-V2-7B", 6_910_365_696),
    ("deepseek-ai/DeepSeek-Prover-V1.5-RL", "deepseek-ai/DeepSeek-Prover-V1.5-Base", 6_910_365_696),
    ("deepseek-ai/DeepSeek-Prover-V2-671B", "deepseek-ai/DeepSeek-Prover-V2-671B", 671_026_419_200),
    ("jinaai/jina-embeddings-v3-hf", "jinaai/jina-embeddings-v3", 559_364_096),
    ("deepseek-ai/DeepSeek-V3.1-Terminus", "deepseek-ai/DeepSeek-V3.1-Terminus", 671_026_419_200),
    ("deepseek-ai/DeepSeek-V3.2-Speciale", "deepseek-ai/DeepSeek-V3.2-Speciale", 671_877_944_064),
    ("deepseek-ai/DeepSeek-Math-V2", "deepseek-ai/DeepSeek-Math-V2", 671_877_944_064),
])
def test_entries_resolve(ref, name, params):
    m = resolve_model(ref)
    assert (m.name, m.params) == (name, params)


def test_prover_facts():
    m = resolve_model("deepseek-ai/DeepSeek-Prover-V2-7B")
    assert (m.max_position_embeddings, m.num_hidden_layers, m.vocab_size) == (65536, 30, 102400)
    assert resolve_model("deepseek-ai/DeepSeek-Prover-V1.5-Base").max_position_embeddings == 4096
    big = resolve_model("deepseek-ai/DeepSeek-Prover-V2-671B")
    assert (big.kv_lora_rank, big.num_experts, big.quantization["quant_method"]) == (512, 256, "fp8")


def test_local_prover_folder_resolves_by_name_with_its_assumption():
    m = resolve_model("/data/models/base/deepseek-prover-v2-7b")
    assert m.name == "deepseek-ai/DeepSeek-Prover-V2-7B" and m.resolved_from == "derivative"
    assert "a local folder of that name" in m.assumptions[0]
