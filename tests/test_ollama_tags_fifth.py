"""Ollama library names of issue 13's fifth round (data/ollama_tags.yaml, last block): the breadth
self-check's misses whose base checkpoint is catalogued, each with the quantization its download
size implies and the context the library states."""

from __future__ import annotations

import pytest

from servefit.engines.ollama.tags import lookup
from servefit.models import resolve_model


@pytest.mark.parametrize("tag,model,quant,context", [
    ("yarn-llama2", "meta-llama/Llama-2-7b-hf", "Q4_0", 131072),
    ("yarn-llama2:13b", "meta-llama/Llama-2-13b-hf", "Q4_0", 131072),
    ("yarn-mistral:7b", "mistralai/Mistral-7B-v0.1", "Q4_0", 131072),
    ("wizardcoder", "codellama/CodeLlama-7b-Python-hf", "Q4_0", 16384),
    ("wizardcoder:python", "codellama/CodeLlama-7b-Python-hf", "Q4_0", 16384),
    ("wizardcoder:33b", "deepseek-ai/deepseek-coder-33b-instruct", "Q4_0", 16384),
    ("reflection", "meta-llama/Llama-3.1-70B-Instruct", "Q4_0", 131072),
    ("nexusraven:13b", "codellama/CodeLlama-13b-hf", "Q4_0", 16384),
    ("magicoder", "codellama/CodeLlama-7b-Python-hf", "Q4_0", 16384),
    ("nemotron-3-nano", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "Q4_K_M", 262144),
    ("nemotron-3-nano:4b", "nvidia/NVIDIA-Nemotron-3-Nano-4B-BF16", "Q4_K_M", 262144),
    ("nemotron-cascade-2", "nvidia/Nemotron-Cascade-2-30B-A3B", "Q4_K_M", 262144),
    ("nemotron-3-super", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16", "Q4_K_M", 262144),
])
def test_fifth_round_library_names(tag, model, quant, context):
    t = lookup(tag)
    assert (t.model, t.quant, t.context) == (model, quant, context)
    resolve_model(model)  # every size names a catalogued checkpoint


def test_nemotron_3_nano_sizes_resolve_to_their_own_layouts():
    small, large = resolve_model(lookup("nemotron-3-nano:4b").model), resolve_model(lookup("nemotron-3-nano").model)
    assert (small.hidden_size, small.num_hidden_layers) == (3136, 42)
    assert (large.hidden_size, large.num_hidden_layers) == (2688, 52)
    assert lookup("nemotron-3-nano:30b-cloud").cloud
