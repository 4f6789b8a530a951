"""The Ollama tag table (data/ollama_tags.yaml): schema, coverage of the issue's families, and
what tags resolve to (issue 13, item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from servefit.engines.ollama.tags import Tag, lookup
from servefit.models import resolve_model

ROOT = Path(__file__).resolve().parents[1] / "src" / "servefit"
TABLE = yaml.safe_load((ROOT / "data" / "ollama_tags.yaml").read_text(encoding="utf-8"))


def test_table_validates_against_its_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "schemas" / "ollama_tags.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(TABLE, schema)


def test_schema_rejects_a_tag_without_a_source():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "schemas" / "ollama_tags.schema.json").read_text(encoding="utf-8"))
    bad = {"defaults": {"quant": "Q4_K_M"}, "library": {"x": {"default": "7b", "sizes": {"7b": "a/b"}}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_every_default_and_alias_names_a_size():
    for name, lib in TABLE["library"].items():
        assert str(lib["default"]) in lib["sizes"], name
        for alias, size in (lib.get("aliases") or {}).items():
            assert str(size) in lib["sizes"], (name, alias)
        for size, entry in lib["sizes"].items():  # every tag has a context, from the size or the name
            has = (isinstance(entry, dict) and entry.get("context")) or lib.get("context")
            assert has or name == "gemma4", (name, size)


@pytest.mark.parametrize("name", [
    "llama3", "llama3.1", "llama3.2", "llama3.3", "llama4", "qwen2.5", "qwen2.5-coder", "qwen3", "qwen3-coder",
    "qwen3-vl", "qwq", "deepseek-r1", "deepseek-v3", "gemma2", "gemma3", "gemma3n", "gemma4", "phi3", "phi4",
    "phi4-mini", "mistral", "mistral-nemo", "mistral-small", "mixtral", "devstral", "magistral", "granite3.3",
    "granite4", "gpt-oss", "command-r", "smollm2", "olmo2", "nomic-embed-text", "mxbai-embed-large", "bge-m3", "llava",
])
def test_the_issues_families_are_covered(name):
    assert name in TABLE["library"]


@pytest.mark.parametrize("ref,tag", [
    ("llama3.1", Tag("meta-llama/Llama-3.1-8B-Instruct", "Q4_K_M", 131072,
                     "llama3.1:latest -> meta-llama/Llama-3.1-8B-Instruct (Q4_K_M)")),
    ("llama3.1:70b-instruct-q8_0", Tag("meta-llama/Llama-3.1-70B-Instruct", "Q8_0", 131072,
                                        "llama3.1:70b-instruct-q8_0 -> meta-llama/Llama-3.1-70B-Instruct (Q8_0)")),
    ("llama3:8b", Tag("meta-llama/Meta-Llama-3-8B-Instruct", "Q4_0", 8192,
                      "llama3:8b -> meta-llama/Meta-Llama-3-8B-Instruct (Q4_0)")),
    ("llama4:scout", Tag("meta-llama/Llama-4-Scout-17B-16E-Instruct", "Q4_K_M", 10485760,
                         "llama4:scout -> meta-llama/Llama-4-Scout-17B-16E-Instruct (Q4_K_M)")),
    ("qwen3:30b-a3b", Tag("Qwen/Qwen3-30B-A3B", "Q4_K_M", 40960, "qwen3:30b-a3b -> Qwen/Qwen3-30B-A3B (Q4_K_M)")),
    ("llama3.2:1b", Tag("meta-llama/Llama-3.2-1B-Instruct", "Q8_0", 131072,
                        "llama3.2:1b -> meta-llama/Llama-3.2-1B-Instruct (Q8_0)")),
    ("llama3.2", Tag("meta-llama/Llama-3.2-3B-Instruct", "Q4_K_M", 131072,
                     "llama3.2:latest -> meta-llama/Llama-3.2-3B-Instruct (Q4_K_M)")),
    ("gemma3:1b", Tag("google/gemma-3-1b-it", "Q4_K_M", 32768, "gemma3:1b -> google/gemma-3-1b-it (Q4_K_M)")),
    ("mixtral:8x22b", Tag("mistralai/Mixtral-8x22B-Instruct-v0.1", "Q4_0", 65536,
                          "mixtral:8x22b -> mistralai/Mixtral-8x22B-Instruct-v0.1 (Q4_0)")),
    ("registry.ollama.ai/library/phi3:medium", Tag("microsoft/Phi-3-medium-128k-instruct", "Q4_0", 131072,
                                                   "phi3:medium -> microsoft/Phi-3-medium-128k-instruct (Q4_0)")),
    ("granite4:tiny-h", Tag("ibm-granite/granite-4.0-h-tiny", "Q4_K_M", 131072,
                            "granite4:tiny-h -> ibm-granite/granite-4.0-h-tiny (Q4_K_M)")),
    ("gpt-oss:20b", Tag("openai/gpt-oss-20b", "OLLAMA_MXFP4", 131072, "gpt-oss:20b -> openai/gpt-oss-20b (OLLAMA_MXFP4)")),
    ("nomic-embed-text", Tag("nomic-ai/nomic-embed-text-v1.5", "F16", 2048,
                             "nomic-embed-text:latest -> nomic-ai/nomic-embed-text-v1.5 (F16)")),
    ("mistral:7b-instruct-v0.3-fp16", Tag("mistralai/Mistral-7B-Instruct-v0.3", "F16", 32768,
                                          "mistral:7b-instruct-v0.3-fp16 -> mistralai/Mistral-7B-Instruct-v0.3 (F16)")),
    ("deepseek-r1:8b", Tag("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "Q4_K_M", 131072,
                           "deepseek-r1:8b -> deepseek-ai/DeepSeek-R1-Distill-Llama-8B (Q4_K_M)")),
    ("deepseek-r1:8b-0528-qwen3-q8_0", Tag("deepseek-ai/DeepSeek-R1-0528-Qwen3-8B", "Q8_0", 131072,
                                           "deepseek-r1:8b-0528-qwen3-q8_0 -> deepseek-ai/DeepSeek-R1-0528-Qwen3-8B "
                                           "(Q8_0)")),
    ("deepseek-r1:671b", Tag("deepseek-ai/DeepSeek-R1", "Q4_K_M", 163840,
                             "deepseek-r1:671b -> deepseek-ai/DeepSeek-R1 (Q4_K_M)")),
])
def test_tags(ref, tag):
    assert lookup(ref) == tag


def test_unknown_size_of_a_known_name_is_not_the_default():
    t = lookup("qwen2.5:9b")
    assert t.model is None
    assert t.note == "qwen2.5:9b: the library has no 9b size (it has 0.5b, 1.5b, 3b, 7b, 14b, 32b, 72b)"


def test_cloud_tags_run_elsewhere():
    for ref in ("gpt-oss:120b-cloud", "glm-4.7:cloud"):
        t = lookup(ref)
        assert t.cloud and t.model is None and "runs on Ollama's cloud" in t.note


@pytest.mark.parametrize("ref,quant", [
    ("hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q8_0", "Q8_0"),
    ("huggingface.co/bartowski/Llama-3.2-3B-Instruct-GGUF:IQ4_XS", "IQ4_XS"),
    ("hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF", "Q4_K_M"),  # Ollama pulls Q4_K_M when the tag is left out
])
def test_hf_co_tags_give_the_repo_and_quant(ref, quant):
    t = lookup(ref)
    assert t.model is None and t.quant == quant and t.note == "Hugging Face GGUF Llama-3.2-3B-Instruct"


def test_library_tags_resolve_to_catalogued_models():
    """Tags whose checkpoint is catalogued resolve to it exactly; the rest resolve to a base by
    name or stay unknown until the catalog has them (no wrong size either way)."""
    exact = 0
    for lib in TABLE["library"].values():
        for entry in lib["sizes"].values():
            model = entry["model"] if isinstance(entry, dict) else entry
            try:
                m = resolve_model(model, hf_home="/nonexistent-hf-home")
            except Exception:
                continue
            if m.resolved_from == "catalog":
                exact += 1
    assert exact >= 40


def test_a_cloud_tag_is_not_sized_as_a_local_model():
    from servefit.core import UsageError

    with pytest.raises(UsageError):
        resolve_model("gpt-oss:120b-cloud", hf_home="/nonexistent-hf-home")


def test_the_library_context_caps_num_ctx_for_a_model_sized_from_the_catalog():
    """llama3:8b's GGUF says 8192 tokens; a spec that says 131072 must not lift Ollama's cap."""
    from servefit.core import LaunchSite, ModelInputs, Token
    from servefit.engines.ollama import ENGINE
    from servefit.hardware.spec import GpuSpec

    site = LaunchSite(file="compose.yaml", line=1, argv=[Token(w) for w in "ollama run llama3:8b".split()],
                      env={}, name="ollama", inputs=ModelInputs(request_options={"num_ctx": "32768"}))
    cfg = ENGINE.parse(site, "0.12.3")
    assert cfg.settings["tag_context"] == 8192
    spec = resolve_model("meta-llama/Llama-3.1-8B-Instruct")  # 131072 positions
    gpu = GpuSpec(key="rtx-4090", name="NVIDIA GeForce RTX 4090", vendor="nvidia", memory_bytes=24111 * 2**20,
                  compute_capability=89)
    p = ENGINE.plan(cfg, spec, gpu, 1)
    assert p.detail.as_dict()["n_ctx_per_seq"] == 8192


@pytest.mark.parametrize("ref", ["hf.co/bartowski/ToolACE-2-Llama-3.1-8B-GGUF:Q5_K_M",
                                 "huggingface.co/bartowski/ToolACE-2-Llama-3.1-8B-GGUF:Q5_K_M"])
def test_ollama_serves_hf_co_tags_as_the_base_with_the_tags_quant(ref):
    from servefit.core import LaunchSite, Token
    from servefit.engines.ollama import ENGINE

    site = LaunchSite(file="x.sh", line=1, argv=[Token("ollama"), Token("run"), Token(ref)], env={}, name="ollama")
    cfg = ENGINE.parse(site, None)
    assert cfg.settings["quant"] == "Q5_K_M"
    m = ENGINE.resolve_model(cfg)
    assert m.name == "meta-llama/Llama-3.1-8B-Instruct" and m.resolved_from == "derivative"
    assert m.assumptions[0].startswith("resolved 'ToolACE-2-Llama-3.1-8B' to catalog entry "
                                       "'meta-llama/Llama-3.1-8B-Instruct' by name (its name carries")


@pytest.mark.parametrize("ref,model,quant,base", [
    ("huihui_ai/deepseek-r1-abliterated:8b", "deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "Q4_K_M", "deepseek-r1"),
    ("someone/llama3.1-uncensored:70b-q8_0", "meta-llama/Llama-3.1-70B-Instruct", "Q8_0", "llama3.1"),
    ("qwen2.5-coder-abliterate:7b", "Qwen/Qwen2.5-Coder-7B-Instruct", "Q4_K_M", "qwen2.5-coder"),
])
def test_a_name_outside_the_library_carrying_a_library_name_and_size(ref, model, quant, base):
    t = lookup(ref)
    size = ref.split(":")[1].split("-")[0]
    assert (t.model, t.quant) == (model, quant)
    assert t.note == (f"{ref} -> {model} ({quant}); not a library name: its name carries the library's {base} "
                      f"and the tag its size {size}, and a fine-tune keeps its base's architecture")


@pytest.mark.parametrize("ref", ["someone/llama3.1-uncensored", "someone/llama3.1-uncensored:latest",
                                 "llama3.1-custom:9b", "someone/foo-mistral:7b"])
def test_a_name_outside_the_library_without_a_size_of_its_base_stays_unknown(ref):
    t = lookup(ref)
    assert t.model is None and t.note.endswith("is not in servefit's Ollama tag table")
