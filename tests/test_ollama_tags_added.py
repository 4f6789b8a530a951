"""Ollama library names added from a public transcription of ollama.com/library (Jeffser/Alpaca
src/ollama_models.py): each tag -> the catalogued checkpoint, the quantization its download size
implies and the context; tags whose checkpoint is not catalogued are named, not guessed."""

from __future__ import annotations

import pytest

from servefit.engines.ollama.tags import lookup
from servefit.models import resolve_model


@pytest.mark.parametrize("tag,model,quant,context", [
    ("smollm", "HuggingFaceTB/SmolLM-1.7B-Instruct", "Q4_0", 2048),
    ("smollm:135m", "HuggingFaceTB/SmolLM-135M-Instruct", "Q4_0", 2048),
    ("aya-expanse", "CohereLabs/aya-expanse-8b", "Q4_K_M", 8192),
    ("aya-expanse:32b", "CohereLabs/aya-expanse-32b", "Q4_K_M", 8192),
    ("aya:35b", "CohereLabs/aya-23-35B", "Q4_0", 8192),
    ("yi", "01-ai/Yi-1.5-6B-Chat", "Q4_0", 4096),
    ("yi:9b-chat-q8_0", "01-ai/Yi-1.5-9B-Chat", "Q8_0", 4096),
    ("internlm2", "internlm/internlm2_5-7b-chat", "Q4_0", 32768),
    ("bge-large", "BAAI/bge-large-en-v1.5", "F16", 512),
    ("snowflake-arctic-embed", "Snowflake/snowflake-arctic-embed-l", "F16", 512),
    ("snowflake-arctic-embed:110m", "Snowflake/snowflake-arctic-embed-m", "F16", 512),
    ("granite-embedding:278m", "ibm-granite/granite-embedding-278m-multilingual", "F16", 512),
    ("falcon:180b", "tiiuae/falcon-180B-chat", "Q4_0", 2048),
])
def test_added_library_names(tag, model, quant, context):
    t = lookup(tag)
    assert (t.model, t.quant, t.context) == (model, quant, context)
    resolve_model(model)  # every size names a catalogued checkpoint


@pytest.mark.parametrize("tag,size", [("internlm2:1m", "1m"), ("internlm2:20b", "20b"),
                                      ("snowflake-arctic-embed:22m", "22m")])
def test_uncatalogued_sizes_are_named(tag, size):
    t = lookup(tag)
    assert t.model is None and f"the library has no {size} size" in t.note


def test_whiterabbitneo_is_not_a_library_name():
    assert lookup("whiterabbitneo").model is None
