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
    ("tinyllama", "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "Q4_0", 2048),
    ("vicuna:13b", "lmsys/vicuna-13b-v1.5", "Q4_0", 4096),
    ("solar", "upstage/SOLAR-10.7B-Instruct-v1.0", "Q4_0", 4096),
    ("llama-guard3", "meta-llama/Llama-Guard-3-8B", "Q4_K_M", 131072),
    ("llama-guard3:1b", "meta-llama/Llama-Guard-3-1B", "Q8_0", 131072),  # a size with its own quantization
    ("granite3.1-moe:1b", "ibm-granite/granite-3.1-1b-a400m-instruct", "Q8_0", 131072),
    ("qwen3-embedding:0.6b", "Qwen/Qwen3-Embedding-0.6B", "Q8_0", 32768),  # and its own context
    ("qwen3-embedding", "Qwen/Qwen3-Embedding-8B", "Q4_K_M", 40960),
    ("gpt-oss-safeguard:120b", "openai/gpt-oss-safeguard-120b", "OLLAMA_MXFP4", 131072),
    ("qwen3-next", "Qwen/Qwen3-Next-80B-A3B-Instruct", "Q4_K_M", 262144),
    ("olmo-3:32b", "allenai/Olmo-3-1125-32B", "Q4_K_M", 65536),
    ("lfm2", "LiquidAI/LFM2-24B-A2B", "Q4_K_M", 128000),
    # the second batch (issue 13): quant from download size / parameters, context the checkpoint's
    ("starcoder2", "bigcode/starcoder2-3b", "Q4_0", 16384),
    ("starcoder2:15b-q8_0", "bigcode/starcoder2-15b", "Q8_0", 16384),
    ("neural-chat", "Intel/neural-chat-7b-v3-3", "Q4_0", 32768),
    ("openchat:7b", "openchat/openchat-3.5-0106", "Q4_0", 8192),
    ("dolphin-mixtral:8x22b", "cognitivecomputations/dolphin-2.9.2-mixtral-8x22b", "Q4_0", 65536),
    ("deepscaler", "agentica-org/DeepScaleR-1.5B-Preview", "F16", 131072),
    ("functiongemma", "google/functiongemma-270m-it", "Q8_0", 32768),
    ("command-a", "CohereLabs/c4ai-command-a-03-2025", "Q4_K_M", 8192),
    ("llama3-gradient:70b", "gradientai/Llama-3-70B-Instruct-Gradient-1048k", "Q4_0", 1048576),
    ("internlm2:20b", "internlm/internlm2_5-20b-chat", "Q4_0", 32768),
    ("granite4:350m", "ibm-granite/granite-4.0-350m", "F16", 32768),
    ("granite4:1b", "ibm-granite/granite-4.0-1b", "F16", 131072),
    # the second round: checkpoints catalogued from exact llmfit counts (data/models/finetunes_exact.yaml)
    ("deepcoder", "agentica-org/DeepCoder-14B-Preview", "Q4_K_M", 131072),
    ("deepcoder:1.5b", "agentica-org/DeepCoder-1.5B-Preview", "Q4_K_M", 131072),
    ("openthinker", "open-thoughts/OpenThinker-7B", "Q4_K_M", 32768),
    ("granite3-guardian", "ibm-granite/granite-guardian-3.0-2b", "Q8_0", 4096),
    ("granite3-guardian:8b", "ibm-granite/granite-guardian-3.0-8b", "Q5_K_M", 4096),
    ("athene-v2", "Nexusflow/Athene-V2-Chat", "Q4_K_M", 32768),
    ("nuextract", "numind/NuExtract", "Q4_0", 4096),
    ("glm-4.7-flash:q8_0", "zai-org/GLM-4.7-Flash", "Q8_0", 202752),  # one size, tags name only the quantization
    ("qwen3-coder-next", "Qwen/Qwen3-Coder-Next", "Q4_K_M", 262144),
    ("cogito-2.1:671b", "deepcogito/cogito-671b-v2.1", "BF16", 163840),
    ("nous-hermes:13b", "NousResearch/Nous-Hermes-Llama2-13b", "Q4_0", 4096),
    ("wizard-vicuna-uncensored", "cognitivecomputations/Wizard-Vicuna-7B-Uncensored", "Q4_0", 2048),
    ("codeup", "deepse/CodeUp-Llama-2-13b-chat-hf", "Q4_0", 4096),
    ("exaone3.5", "LGAI-EXAONE/EXAONE-3.5-7.8B-Instruct", "Q4_K_M", 32768),
    ("exaone3.5:2.4b", "LGAI-EXAONE/EXAONE-3.5-2.4B-Instruct", "Q4_K_M", 32768),
    ("exaone-deep:32b", "LGAI-EXAONE/EXAONE-Deep-32B", "Q4_K_M", 32768),
    # issue 13's fifth round (the breadth self-check's misses whose base is catalogued)
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
    # the third round: library names whose base the description names (data/ollama_tags.yaml, last block)
    ("wizardlm2", "mistralai/Mistral-7B-v0.1", "Q4_0", 32768),
    ("wizardlm2:8x22b", "microsoft/WizardLM-2-8x22B", "Q4_0", 65536),
    ("sqlcoder:15b", "bigcode/starcoder", "Q4_0", 8192),
    ("stable-code", "stabilityai/stable-code-3b", "Q4_0", 16384),
    ("stablelm2", "stabilityai/stablelm-2-1_6b", "Q4_K_M", 4096),
    ("orca2:13b", "meta-llama/Llama-2-13b-hf", "Q4_0", 4096),
    ("everythinglm", "meta-llama/Llama-2-13b-hf", "Q4_0", 16384),
    ("smallthinker", "Qwen/Qwen2.5-3B-Instruct", "Q8_0", 32768),
    ("r1-1776:671b", "deepseek-ai/DeepSeek-R1", "Q4_K_M", 163840),
    ("cogito", "meta-llama/Llama-3.1-8B-Instruct", "Q4_K_M", 131072),
    ("cogito:14b", "deepcogito/cogito-v1-preview-qwen-14B", "Q4_K_M", 32768),
    ("granite-code:20b", "ibm-granite/granite-20b-code-instruct-8k", "Q4_K_M", 8192),
    ("granite-code:34b-instruct-q8_0", "ibm-granite/granite-34b-code-instruct-8k", "Q8_0", 8192),
    ("devstral-2", "mistralai/Devstral-2-123B-Instruct-2512", "Q4_K_M", 262144),
    ("rnj-1", "EssentialAI/rnj-1-instruct", "Q4_K_M", 32768),
    ("translategemma:27b", "google/gemma-3-27b-it", "Q4_K_M", 131072),
    # the fourth round: library names the breadth list missed whose base is catalogued
    ("falcon2", "tiiuae/falcon-11B", "Q4_0", 8192),
    ("alfred", "tiiuae/falcon-40b", "Q4_0", 8192),  # a Falcon-40B fine-tune with context 8192
    ("duckdb-nsql:7b-q8_0", "meta-llama/Llama-2-7b-hf", "Q8_0", 4096),  # a Llama 2 7B fine-tune
])
def test_added_library_names(tag, model, quant, context):
    t = lookup(tag)
    assert (t.model, t.quant, t.context) == (model, quant, context)
    resolve_model(model)  # every size names a catalogued checkpoint


@pytest.mark.parametrize("tag,size", [("internlm2:1m", "1m"), ("yi-coder:1.5b", "1.5b"),
                                      ("snowflake-arctic-embed:22m", "22m"), ("openthinker:32b", "32b"),
                                      ("wizard-vicuna-uncensored:30b", "30b")])
def test_uncatalogued_sizes_are_named(tag, size):
    t = lookup(tag)
    assert t.model is None and f"the library has no {size} size" in t.note


def test_cloud_tag_of_an_added_name():
    assert lookup("qwen3-next:80b-cloud").cloud


def test_whiterabbitneo_is_not_a_library_name():
    assert lookup("whiterabbitneo").model is None
