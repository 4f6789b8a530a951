"""Naming styles of real deployment files that issue 13's second round found unparsed, one test
per class: a GGUF named after an Ollama model (`name_tag`, the colon written as `_`), the K-quants
written without underscores (`q4km`), an organization glued to the name by a download tool
(`QwenQwen2.5-7B-Instruct`), a Windows drive path as a Modelfile FROM, and a `repo:FILE-QUANT` tag."""

from __future__ import annotations

import pytest

from servefit.core import UsageError
from servefit.engines.ollama.tags import library_size, lookup
from servefit.models import resolve_model
from servefit.models.gguf_names import parse_ref, resolve_gguf_ref, split_quant
from servefit.models.names import words


@pytest.mark.parametrize("ref,model,shown,quant", [
    ("/models/deepseek-r1_8b-llama-distill-q4_K_M.gguf", "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
     "deepseek-r1:8b-llama-distill-q4_k_m", "Q4_K_M"),
    ("/models/deepseek-r1_32b-qwen-distill-q4_K_M.gguf", "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
     "deepseek-r1:32b-qwen-distill-q4_k_m", "Q4_K_M"),
    ("/models/llama4_scout.gguf", "meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama4:scout", "Q4_K_M"),
])
def test_a_gguf_named_after_an_ollama_model(ref, model, shown, quant):
    spec = resolve_gguf_ref(ref)
    assert spec.name == model and spec.resolved_from == "derivative"
    assert spec.assumptions[-1] == (f"GGUF {ref.rsplit('/', 1)[1]!r} taken as {model}: its name is Ollama's "
                                    f"{shown} written as a file name ({quant}; no file to read)")


def test_the_ollama_reading_needs_a_library_name_and_one_of_its_sizes():
    assert library_size("deepseek-r1", "8b-llama-distill") is not None
    assert library_size("qwen", "Qwen3-8B") is None  # bartowski's org_name style is not a tag
    assert library_size("llama3", "2b") is None  # the library has no such size
    assert library_size("notalibraryname", "7b") is None
    with pytest.raises(UsageError, match="cannot tell which model"):
        resolve_gguf_ref("/models/mymodel_7b-q4_K_M.gguf")


@pytest.mark.parametrize("name,quant", [("zephyr_zephyr_q4km", "Q4_K_M"), ("Qwen3-4B-Q5KS", "Q5_K_S"),
                                        ("model-q6k", "Q6_K"), ("x-Q3KL", "Q3_K_L")])
def test_k_quants_written_without_underscores(name, quant):
    assert split_quant(name + ".gguf")[1] == quant


def test_compact_k_quant_is_not_a_name_word():
    assert words("Qwen3-4B-Q4KM.gguf") == ["qwen3", "4b"]
    spec = resolve_gguf_ref("/models/Qwen3-4B-Q4KM.gguf")
    assert spec.name == "Qwen/Qwen3-4B" and "quant Q4_K_M" in spec.assumptions[-1]


@pytest.mark.parametrize("ref,model,org", [
    ("F:/Projects/Models/QwenQwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct", "qwen"),
    ("/models/GoogleGemma-3-12b-it", "google/gemma-3-12b-it", "google"),
])
def test_organization_glued_to_the_name(ref, model, org):
    spec = resolve_model(ref, hf_home="/nonexistent")
    assert spec.name == model
    assert f"the name starts with the organization '{org}' written without a separator" in spec.assumptions[-1]


def test_a_glued_word_that_is_a_catalogued_family_stays_that_family():
    assert resolve_model("/m/llamaguard-7b", hf_home="/nonexistent").name == "meta-llama/LlamaGuard-7b"
    assert resolve_model("/m/codeqwen1.5-7b-chat", hf_home="/nonexistent").name == "Qwen/CodeQwen1.5-7B-Chat"


def test_windows_drive_path_is_not_an_ollama_tag():
    t = lookup("F:/Projects/Models/MyModel")
    assert t.model is None and t.note == "F:/Projects/Models/MyModel is a local path, not an Ollama library name"
    assert lookup(r"C:\models\x").model is None


def test_ollama_from_a_local_folder_gives_the_name_heuristics_answer():
    from servefit.engines.ollama import ENGINE

    class T:
        model, online, models = "F:/Projects/Models/QwenQwen2.5-7B-Instruct", False, None
    assert ENGINE.resolve_model(None, T()).name == "Qwen/Qwen2.5-7B-Instruct"  # type: ignore[arg-type]
    T.model = "D:/models/my-own-model"
    with pytest.raises(UsageError, match="^unknown model 'D:/models/my-own-model'"):
        ENGINE.resolve_model(None, T())  # type: ignore[arg-type]


@pytest.mark.parametrize("ref,quant", [("unsloth/DeepSeek-R1-GGUF:DeepSeek-R1-UD-IQ1_M", "IQ1_M"),
                                       ("unsloth/Qwen3-8B-GGUF:Q4_K_M", "Q4_K_M"),
                                       ("unsloth/Qwen3-8B-GGUF:q8_0", "Q8_0")])
def test_a_repo_tag_that_is_a_file_name_prefix(ref, quant):
    assert parse_ref(ref)[1] == quant


# --- checkpoints whose names do not carry their base, catalogued from exact counts -----------------

@pytest.mark.parametrize("ref,model,via", [
    ("./foundation-sec-8b.gguf", "fdtn-ai/Foundation-Sec-8B", "gguf"),
    ("fdtn-ai/Foundation-Sec-8B-Instruct", "fdtn-ai/Foundation-Sec-8B", "model"),
    ("$HOME/models/AgentCPM-Explore", "openbmb/AgentCPM-Explore", "model"),
    ("/srv/vllm2/models/Ornith-1.0-35B-FP8", "ornith-ai/Ornith-1.0-35B", "model"),
    ("THUDM/codegeex4-all-9b", "zai-org/codegeex4-all-9b", "model"),
    ("/path/to/ChatGLM3-6B", "THUDM/chatglm3-6b", "model"),
    ("/models/EXAONE-3.5-7.8B-Instruct-AWQ", "LGAI-EXAONE/EXAONE-3.5-7.8B-Instruct", "model"),
])
def test_checkpoints_named_without_their_base(ref, model, via):
    spec = resolve_gguf_ref(ref) if via == "gguf" else resolve_model(ref, hf_home="/nonexistent")
    assert spec.name == model


def test_ornith_fp8_folder_keeps_its_quantization_and_the_qwen35_layout():
    spec = resolve_model("/srv/vllm2/models/Ornith-1.0-35B-FP8", hf_home="/nonexistent")
    assert spec.quantization == {"quant_method": "fp8"} and spec.model_type == "qwen3_5_moe"
    assert (spec.num_hidden_layers, spec.hidden_size, spec.params) == (40, 2048, 35107181936)
