"""Derivative names resolve to their catalogued base, one test per naming style (issue 13,
item 2), and say which base was assumed, why, and which quantization."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from servefit.core import UsageError
from servefit.models import catalog, catalog_entries, name_index, name_words, names, resolve_model
from servefit.models.name_words import Parsed

NO_CACHE = "/nonexistent-hf-home"
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128}
L31_8B, Q25_7B = "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct"


def resolved(ref: str):
    m = resolve_model(ref, hf_home=NO_CACHE)
    assert m.resolved_from == "derivative"
    assert len(m.assumptions) == 1
    return m


def assumption(ref: str, base: str, why: str, what: str) -> str:
    return f"resolved '{ref}' to catalog entry '{base}' by name ({why}); assumed {what}"


# --- quantized repacks: the quantization the name implies ----------------------------------------

@pytest.mark.parametrize("ref,base,quant,why,what", [
    ("TheBloke/Mistral-7B-Instruct-v0.2-AWQ", "mistralai/Mistral-7B-Instruct-v0.2", AWQ,
     "an AWQ 4-bit repack by TheBloke", "AWQ 4-bit, group 128"),
    ("casperhansen/llama-3-8b-instruct-awq", "meta-llama/Meta-Llama-3-8B-Instruct", AWQ,
     "an AWQ 4-bit repack by casperhansen", "AWQ 4-bit, group 128"),
    ("cyankiwi/Qwen3-30B-A3B-Instruct-2507-AWQ-4bit", "Qwen/Qwen3-30B-A3B-Instruct-2507", AWQ,
     "an AWQ 4-bit repack by cyankiwi", "AWQ 4-bit, group 128"),
    ("QuantTrio/Qwen3-235B-A22B-Instruct-2507-AWQ", "Qwen/Qwen3-235B-A22B-Instruct-2507", AWQ,
     "an AWQ 4-bit repack by QuantTrio", "AWQ 4-bit, group 128"),
    ("Qwen/Qwen2.5-7B-Instruct-AWQ", Q25_7B, AWQ, "its name is the base's with quantization words",
     "AWQ 4-bit, group 128"),
    ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", Q25_7B, {"quant_method": "gptq", "bits": 4, "group_size": 128},
     "its name is the base's with quantization words", "GPTQ 4-bit, group 128"),
    ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8", Q25_7B, {"quant_method": "gptq", "bits": 8, "group_size": 128},
     "its name is the base's with quantization words", "GPTQ 8-bit, group 128"),
    ("RedHatAI/Qwen2.5-7B-Instruct-FP8-dynamic", Q25_7B, {"quant_method": "fp8"},
     "an FP8 repack by RedHatAI", "FP8 weights"),
    ("RedHatAI/Llama-3.1-8B-Instruct-FP8", L31_8B, {"quant_method": "fp8"}, "an FP8 repack by RedHatAI",
     "FP8 weights"),
    ("RedHatAI/Llama-3.1-8B-Instruct-NVFP4", L31_8B, {"quant_method": "modelopt_fp4", "bits": 4, "group_size": 16},
     "an NVFP4 4-bit repack by RedHatAI", "NVFP4 4-bit, group 16"),
    ("unsloth/Llama-3.2-3B-Instruct-bnb-4bit", "meta-llama/Llama-3.2-3B-Instruct",
     {"quant_method": "bitsandbytes", "bits": 4}, "a bitsandbytes 4-bit repack by unsloth", "bitsandbytes 4-bit"),
    ("unsloth/Meta-Llama-3.1-8B-Instruct-unsloth-bnb-4bit", L31_8B, {"quant_method": "bitsandbytes", "bits": 4},
     "a bitsandbytes 4-bit repack by unsloth", "bitsandbytes 4-bit"),
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16", L31_8B,
     {"quant_method": "compressed-tensors", "bits": 4, "group_size": 128},
     "a compressed-tensors INT4 repack by RedHatAI", "compressed-tensors INT4 weights (W4A16), group 128"),
    ("neuralmagic/Meta-Llama-3.1-8B-Instruct-W4A16", L31_8B,
     {"quant_method": "compressed-tensors", "bits": 4, "group_size": 128},
     "a compressed-tensors INT4 repack by neuralmagic", "compressed-tensors INT4 weights (W4A16), group 128"),
])
def test_quantized_repacks(ref, base, quant, why, what):
    m = resolved(ref)
    assert m.name == base and m.quantization == quant
    assert m.assumptions == [assumption(ref, base, why, what)]


# --- GGUF files and repos ----------------------------------------------------------------------------

@pytest.mark.parametrize("ref,base,gtype,bits", [
    ("Qwen2.5-7B-Instruct-Q4_K_M.gguf", Q25_7B, "Q4_K_M", 4),
    ("Qwen2.5-7B-Instruct-IQ4_XS.gguf", Q25_7B, "IQ4_XS", 4),
    ("Qwen3-30B-A3B-UD-Q4_K_XL.gguf", "Qwen/Qwen3-30B-A3B", "Q4_K_XL", 4),
    ("Meta-Llama-3.1-8B-Instruct-Q8_0.gguf", L31_8B, "Q8_0", 8),
    ("Qwen2.5-7B-Instruct-BF16.gguf", Q25_7B, "BF16", 16),
    ("Llama-3.3-70B-Instruct-Q4_K_M-00001-of-00002.gguf", "meta-llama/Llama-3.3-70B-Instruct", "Q4_K_M", 4),
    ("/models/gguf/Meta-Llama-3.1-8B-Instruct-Q5_K_M.gguf", L31_8B, "Q5_K_M", 5),
])
def test_gguf_files(ref, base, gtype, bits):
    m = resolved(ref)
    assert m.name == base and m.quantization == {"quant_method": "gguf", "type": gtype, "bits": bits}
    why = "a local folder named after it" if ref.startswith("/") else "its name is the base's with quantization words"
    assert m.assumptions == [assumption(ref, base, why, f"GGUF {gtype}")]


@pytest.mark.parametrize("ref,base,org", [
    ("bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", L31_8B, "bartowski"),
    ("lmstudio-community/Qwen2.5-7B-Instruct-GGUF", Q25_7B, "lmstudio-community"),
    ("unsloth/Qwen3-30B-A3B-GGUF", "Qwen/Qwen3-30B-A3B", "unsloth"),
    ("ggml-org/gpt-oss-20b-GGUF", "openai/gpt-oss-20b", "ggml-org"),
    ("TheBloke/Llama-2-7B-Chat-GGUF", "meta-llama/Llama-2-7b-hf", "TheBloke"),
])
def test_gguf_repos(ref, base, org):
    m = resolved(ref)
    assert m.name == base and m.quantization == {"quant_method": "gguf"}
    assert m.assumptions == [assumption(ref, base, f"a GGUF repack by {org}", "GGUF")]


def test_qwens_own_gguf_repo():
    m = resolved("Qwen/Qwen2.5-7B-Instruct-GGUF")
    assert m.assumptions == [assumption("Qwen/Qwen2.5-7B-Instruct-GGUF", Q25_7B,
                                        "its name is the base's with quantization words", "GGUF")]


# --- community fine-tunes, distills, sibling families -------------------------------------------------

Q25_7B_BASE = "Qwen/Qwen2.5-7B"


@pytest.mark.parametrize("ref,base,shown", [
    ("Team-ACE/ToolACE-2-Llama-3.1-8B", L31_8B, "llama3.1-8b"),
    ("cognitivecomputations/dolphin-2.9-llama3-8b", "meta-llama/Meta-Llama-3-8B-Instruct", "llama3-8b"),
    ("acme/support-bot-Qwen2.5-7B-sft-v2", Q25_7B_BASE, "qwen2.5-7b"),  # no instruct word: the base release
    ("acme/support-bot-Qwen2.5-7B-Instruct-sft", Q25_7B, "qwen2.5-7b"),
    ("acme/support-bot-Qwen2.5-7B-chat-sft", Q25_7B, "qwen2.5-7b"),  # chat is an instruct release
    ("someone/phi-4-abliterated", "microsoft/phi-4", "phi4"),
    ("someone/Phi-3-mini-4k-finetune", "microsoft/Phi-3-mini-4k-instruct", "phi3-mini"),
])
def test_community_fine_tunes(ref, base, shown):
    m = resolved(ref)
    assert m.name == base and m.quantization is None
    why = f"its name carries the base's family and size, {shown}; a fine-tune keeps its base's architecture"
    assert m.assumptions == [assumption(ref, base, why, "the same architecture")]


@pytest.mark.parametrize("ref,base,shown", [
    ("liuhaotian/llava-v1.5-7b", "llava-hf/llava-1.5-7b-hf", "llava1.5-7b"),  # the original release's own name
    ("someone/starcoder-v2-15b", "bigcode/starcoder2-15b", "starcoder2-15b"),
])
def test_a_version_written_with_a_v_before_the_size(ref, base, shown):
    m = resolved(ref)
    assert m.name == base
    assert m.assumptions == [assumption(ref, base, f"its name is the base's family and size, {shown}",
                                        "the same architecture")]


@pytest.mark.parametrize("ref,base,read", [
    ("/models/qwen36-35b-nvfp4", "Qwen/Qwen3.6-35B-A3B", "'qwen36' as qwen3.6"),
    ("/models/llama31-8b-instruct", "meta-llama/Llama-3.1-8B-Instruct", "'llama31' as llama3.1"),
    ("/models/glm47-flash", "zai-org/GLM-4.7-Flash", "'glm47' as glm4.7"),
])
def test_a_version_written_without_its_dot(ref, base, read):
    m = resolve_model(ref, hf_home=NO_CACHE)
    assert m.name == base and m.resolved_from == "derivative"
    assert m.assumptions[0].endswith(f"; the name writes the version without its dot, read {read}); "
                                     + m.assumptions[0].rsplit("); ", 1)[1])


def test_a_glued_version_the_catalog_lacks_stays_unknown():
    with pytest.raises(UsageError):
        resolve_model("/models/qwen79-7b", hf_home=NO_CACHE)


@pytest.mark.parametrize("ref,base", [
    ("/data/models/Qwen3___5-35B-A3B/", "Qwen/Qwen3.5-35B-A3B"),  # ModelScope's cache writes . as ___
    ("/models/Llama-3___1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),
])
def test_modelscope_folder_names(ref, base):
    assert resolve_model(ref, hf_home=NO_CACHE).name == base


def test_a_v_version_elsewhere_stays_a_release_word():
    """Mistral-7B-Instruct-v0.2 keeps v0.2 as its release; llava-v1.6-vicuna-7b keeps its family apart."""
    from servefit.models.name_words import words

    assert words("Mistral-7B-Instruct-v0.2") == ["mistral", "7b", "instruct", "v0.2"]
    assert words("llava-v1.6-vicuna-7b-hf") == ["llava", "v1.6", "vicuna", "7b", "hf"]
    assert words("DeepSeek-V2-Lite") == ["deepseek", "v2", "lite"]


def test_fine_tune_repack_keeps_its_quantization():
    ref = "solidrust/ToolACE-2-Llama-3.1-8B-AWQ"
    m = resolved(ref)
    assert m.name == L31_8B and m.quantization == AWQ
    assert m.assumptions[0].endswith("a fine-tune keeps its base's architecture); assumed AWQ 4-bit, group 128")


def derive_without(ref: str, *absent: str) -> tuple[str, str, int] | None:
    """(base, why, context) as if the catalog had no entry whose name holds one of `absent`: the
    catalog grows, and a rule must still hold for the siblings it does not hold yet."""
    chunks = [c for c in catalog_entries._chunks() if not any(a in c[0] for a in absent)]
    d = names.derive(ref, name_index.build_index(chunks))
    return None if d is None else (chunks[d.entry][0], d.why, d.context)


SIBLING = "Qwen2.5-Coder has Qwen2.5's layers, widths and heads at each size, per servefit's table of sibling families"


def test_sibling_family_shares_the_base_at_its_size():
    assert derive_without("Qwen/Qwen2.5-Coder-7B-Instruct", "Coder") == (Q25_7B, SIBLING, 0)
    assert derive_without("acme/Qwen2.5-Coder-32B-Instruct-AWQ", "Coder")[0] == "Qwen/Qwen2.5-32B-Instruct"
    assert derive_without("Qwen/Qwen2.5-Coder-9B-Instruct", "Coder") is None  # no Qwen2.5 at 9B


def test_sibling_rule_sets_the_familys_context():
    base, why, context = derive_without("Qwen/QwQ-32B-AWQ", "QwQ")
    assert base == "Qwen/Qwen2.5-32B" and context == 40960 and why.startswith("QwQ-32B is a Qwen2.5-32B fine-tune")
    assert derive_without("Qwen/Qwen2.5-Math-7B", "Math")[2] == 4096
    assert derive_without("Qwen/Qwen2.5-Math-1.5B", "Math") is None  # untied head: the rule leaves 1.5B out
    m = resolved("acme/QwQ-32B-sft")  # the catalogued QwQ-32B itself wins over the rule
    assert m.name == "Qwen/QwQ-32B" and m.max_position_embeddings == 40960


def test_exact_catalog_entry_wins_over_a_rule():
    m = resolve_model("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", hf_home=NO_CACHE)
    assert m.name == "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B" and m.assumptions == [] and m.resolved_from == "catalog"


def test_distill_resolves_to_qwen25_when_not_catalogued():
    base, why, context = derive_without("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "Distill")
    # the rule explains more of the name than first-generation Qwen-7B's family word does
    assert base == "Qwen/Qwen2.5-7B" and context == 131072
    assert why.startswith("the R1 distills are fine-tunes of Qwen2.5-Math-7B")
    assert derive_without("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "Distill")[0] == L31_8B
    assert derive_without("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "Distill")[0] == \
        "meta-llama/Llama-3.3-70B-Instruct"
    assert derive_without("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", "Distill") is None  # untied head


def test_qwen2_folder_shares_qwen25_when_qwen2_is_not_catalogued():
    base, why, _ = derive_without("/models/Qwen2-7B-Instruct", "Qwen2-")
    assert base == Q25_7B and why.startswith("Qwen2 and Qwen2.5 share layers, widths, heads and vocabulary")


# --- local folders and Ollama-style tags --------------------------------------------------------------

@pytest.mark.parametrize("ref,base,why", [
    ("/models/Qwen2-7B-Instruct", "Qwen/Qwen2-7B-Instruct", "a local folder of that name"),
    ("/data/llama-3.1-8b-instruct", L31_8B, "a local folder of that name"),
    ("/data/qwen2_5-7b-instruct", Q25_7B, "a local folder named after it"),  # an underscore for the version's dot
    ("/data/Qwen2.5_7B_Instruct", Q25_7B, "a local folder named after it"),  # underscores for dashes
    ("./weights/ToolACE-2-Llama-3.1-8B/", L31_8B, "a local folder named after it; its name carries the base's "
     "family and size, llama3.1-8b; a fine-tune keeps its base's architecture"),
])
def test_local_folders_resolve_by_their_name(ref, base, why):
    m = resolved(ref)
    assert m.name == base
    what = "the same checkpoint" if why == "a local folder of that name" else "the same architecture"
    assert m.assumptions == [assumption(ref, base, why, what)]


def test_generic_path_components_fall_back_to_the_folder_above():
    snap = "/root/.cache/huggingface/hub/models--Qwen--Qwen2.5-7B-Instruct/snapshots/" + "0123456789abcdef" * 2 + "01234567"
    assert resolved(snap).name == Q25_7B
    m = resolved("/data/ToolACE-2-Llama-3.1-8B/final")
    assert m.name == L31_8B and m.assumptions[0].startswith(
        "resolved '/data/ToolACE-2-Llama-3.1-8B/final' to catalog entry 'meta-llama/Llama-3.1-8B-Instruct' by name "
        "(a local folder named after it; its name carries")
    assert names.split_ref("/data/checkpoints/run-12/final") == ("checkpoints", "run-12", True)


@pytest.mark.parametrize("ref", ["/models/qwen3", "model.gguf", "/models/model", "./llm", "/models/qwen3/hf",
                                 "/data/checkpoints/run-12/final"])
def test_folders_without_a_size_stay_unknown(ref):
    with pytest.raises(UsageError) as exc:
        resolve_model(ref, hf_home=NO_CACHE)
    assert str(exc.value).startswith(f"unknown model '{ref}'")


def test_ollama_tags_of_derivatives():
    m = resolved("dolphin-llama3:8b")
    assert m.name == "meta-llama/Meta-Llama-3-8B-Instruct"
    assert m.quantization == {"quant_method": "gguf", "type": "Q4_K_M", "bits": 4}
    assert m.assumptions[0].endswith("assumed Ollama's default GGUF Q4_K_M")
    c = resolved("acme-llama3.1:8b-instruct-q8_0")
    assert c.name == L31_8B and c.quantization == {"quant_method": "gguf", "type": "Q8_0", "bits": 8}


@pytest.mark.parametrize("ref", ["hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q8_0",
                                 "huggingface.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q8_0"])
def test_hf_co_tags(ref):
    m = resolved(ref)
    assert m.name == "meta-llama/Llama-3.2-3B-Instruct"
    assert m.quantization == {"quant_method": "gguf", "type": "Q8_0", "bits": 8}
    assert m.assumptions == [assumption(ref, m.name, "a GGUF Q8_0 repack by bartowski", "GGUF Q8_0")]


# --- near misses: never another size, never another architecture --------------------------------------

@pytest.mark.parametrize("ref,base", [
    ("acme/Qwen2.5-7B-chat-sft", Q25_7B),
    ("acme/Qwen2.5-72B-chat-sft", "Qwen/Qwen2.5-72B-Instruct"),
    ("acme/Llama-3.1-8B-sft", L31_8B),
    ("acme/Llama-3.2-1B-sft", "meta-llama/Llama-3.2-1B-Instruct"),
    ("acme/Llama-3.1-70B-sft", "meta-llama/Llama-3.1-70B-Instruct"),
    ("acme/Qwen3-30B-A3B-sft", "Qwen/Qwen3-30B-A3B"),
    ("acme/Qwen3-32B-sft", "Qwen/Qwen3-32B"),
    ("acme/Qwen2.5-Omni-7B-sft", "Qwen/Qwen2.5-Omni-7B"),  # the audio / vision model, never Qwen2.5-7B
])
def test_sizes_never_cross(ref, base):
    assert resolved(ref).name == base


@pytest.mark.parametrize("ref", [
    "acme/Qwen2.5-9B-sft",  # no Qwen2.5 at 9B
    "acme/Llama-3.1-1B-sft",  # Llama 3.1 has no 1B (3.2 does)
    "acme/Llama-3.2-8B",  # nor 3.2 an 8B
    "acme/Llama-3.1-8B-Vision-sft",
    "acme/llava-next-mistral-7b",
    "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3",  # a draft head, not the model
    "Qwen/Qwen3-Coder-480B-A35B-Instruct-X",  # the catalog has it: resolves (checked below)
])
def test_near_misses_stay_unknown(ref):
    if ref.endswith("-X"):
        assert resolved(ref).name == "Qwen/Qwen3-Coder-480B-A35B-Instruct"
        return
    with pytest.raises(UsageError):
        resolve_model(ref, hf_home=NO_CACHE)


def test_near_misses_against_a_catalog_without_the_sibling():
    # a vision tower: not Qwen2.5-7B; and no rule to Qwen2-VL (its encoder profiling differs; data/models/pending.md)
    assert derive_without("Qwen/Qwen2.5-VL-7B-Instruct", "Qwen2.5-VL") is None
    assert derive_without("Qwen/Qwen2.5-VL-7B-Instruct", "-VL-") is None
    assert derive_without("Qwen/Qwen2-57B-A14B-Instruct", "Qwen2-") is None  # Qwen2's MoE has no Qwen2.5 twin
    assert derive_without("microsoft/Phi-4-mini-instruct", "Phi-4-mini") is None  # not phi-4 (14B)
    assert derive_without("someone/phi-4-abliterated", "Phi-4-mini")[0] == "microsoft/phi-4"


def test_unknown_names_suggest_the_same_family_and_size():
    near = catalog.nearest("acme/Qwen2.5-9B-sft", 3)  # Qwen2.5 has no 9B: another Qwen's 9B, never another size
    assert near and all(n.startswith("Qwen/") and "9B" in n for n in near)
    assert catalog.nearest("acme/Llama-3.1-9B-Turbo", 3) == []  # no Llama of any release at 9B: none
    near = catalog.nearest("acme/Qwen2.5-Omni-7B-sft", 3)
    assert all(n.startswith("Qwen/") and "7B" in n for n in near)
    near = catalog.nearest("acme/Llama-3.1-1B-sft", 3)
    assert "1B" in near[0] and all("lama" in n for n in near)
    assert catalog.nearest("model.gguf", 3) == [] and catalog.nearest("/models/model", 3) == []
    with pytest.raises(UsageError) as exc:
        resolve_model("model.gguf", hf_home=NO_CACHE)
    assert "no catalogued model has a similar family and size" in str(exc.value)


def test_words_and_sizes():
    assert names.words("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf") == ["meta", "llama3.1", "8b", "instruct"]
    assert names.words("Qwen3-30B-A3B-UD-Q4_K_XL-00001-of-00002.gguf") == ["qwen3", "30b", "a3b"]
    assert names.words("llama3.1:8b-instruct-q8_0") == ["llama3.1", "8b", "instruct"]
    assert name_words.parse("meta-llama/Llama-4-Scout-17B-16E-Instruct") == Parsed(("llama4", "scout"), "17b-16e",
                                                                                    ("instruct",))
    assert name_words.parse("microsoft/Phi-3-mini-128k-instruct") == Parsed(("phi3",), "mini", ("128k", "instruct"))
    assert name_words.parse("mistralai/Mixtral-8x7B-v0.1").size == "8x7b"
    # release words and dates are not versions: Kimi-K2-Instruct-0905 is the kimi k2 family
    assert name_words.parse("moonshotai/Kimi-K2-Instruct-0905") == Parsed(("kimi", "k2"), None, ("instruct", "0905"))
    assert names.words("dolphin-2.9.4-llama3.1-8b") == ["dolphin2.9.4", "llama3.1", "8b"]


def test_release_words_never_make_a_family_for_suggestions():
    assert catalog.nearest("acme/FooLM2-135M-Instruct", 3) == []  # not every "...-Instruct" model
    # generic words (data/derivatives.yaml generic_words) are no family either
    for ref in ("checkpoints/QRM-Text-1B", "/models/minecraft-coder-q4km", "microsoft/wavlm-base-plus",
                "acme/Zephyrine-3.7-Flash-NVFP4"):  # plus, flash: no family
        assert catalog.nearest(ref, 3) == [], ref
    assert catalog.nearest("checkpoints/HRM-Text-1B", 3) == ["sapientinc/HRM-Text-1B"]  # catalogued since
    assert catalog.nearest("/models/AutoGLM-Phone-9B-Multilingual", 3)[0] == "zai-org/AutoGLM-Phone-9B-Multilingual"
    # Step is a family since Step-3.5-Flash is catalogued: its other releases get it as a suggestion
    # (Step-3.7-Flash is catalogued since; an uncatalogued release gets both)
    assert catalog.nearest("stepfun-ai/Step-3.8-Flash-NVFP4", 3) == ["stepfun-ai/Step-3.5-Flash", "stepfun-ai/Step-3.7-Flash"]


# --- the derivative table is data, validated by its schema ---------------------------------------------

def test_derivative_table_validates_and_names_catalogued_bases():
    jsonschema = pytest.importorskip("jsonschema")
    root = Path(names.__file__).resolve().parents[1]
    schema = json.loads((root / "schemas" / "derivatives.schema.json").read_text(encoding="utf-8"))
    table = yaml.safe_load((root / "data" / "derivatives.yaml").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(table, schema)
    idx = catalog._index().names
    families = {fam for fam, _ in idx.by_key}
    # every rule points at a family the catalog has
    missing = [r["from"] for r in table["same_architecture"] if tuple(r["to"]) not in families]
    assert missing == [], missing
    ids = {c[0] for c in catalog_entries._chunks()}
    assert set(table["implied_size"]) <= ids


def test_a_total_size_alone_resolves_only_to_a_single_moe():
    one = name_index.build_index([("x/Foo-30B-A3B", (), "")])
    d = names.derive("acme/Foo-30B-sft", one)
    assert d is not None and d.entry == 0
    two = name_index.build_index([("x/Foo-30B-A3B", (), ""), ("x/Foo-30B-A6B", (), "")])
    assert names.derive("acme/Foo-30B-sft", two) is None  # 3B or 6B active: not a guess to make
    assert names.derive("acme/Foo-30B-A6B-sft", two).entry == 1


@pytest.mark.parametrize("ref,base,tail", [
    ("Llama-3-Open-Ko-8B-Q8_0.gguf", "meta-llama/Meta-Llama-3-8B-Instruct",
     "its name carries the base's family and size, llama3-8b, with 'open-ko' between; a fine-tune keeps its "
     "base's architecture); assumed GGUF Q8_0"),
    ("akjindal53244/Llama-3.1-Storm-8B", L31_8B, "its name carries the base's family and size, llama3.1-8b, with "
     "'storm' between; a fine-tune keeps its base's architecture); assumed the same architecture"),
    ("huihui_ai/qwen2.5-coder-abliterate:7b", "Qwen/Qwen2.5-Coder-7B-Instruct", "its name carries the base's family "
     "and size, qwen2.5-coder-7b, with 'abliterate' between; a fine-tune keeps its base's architecture); assumed the "
     "same architecture"),
])
def test_fine_tune_words_between_family_and_size(ref, base, tail):
    m = resolved(ref)
    assert m.name == base and m.assumptions[0].endswith(tail)


@pytest.mark.parametrize("ref", [
    "tiiuae/falcon-rw-7b",  # another architecture (RefinedWeb, ALiBi); a bare family word never takes words between
    "acme/Llama-3.1-Nemotron-Nano-5B",  # Llama 3.1 has no 5B
    "acme/Llama-3.1-a-b-c-d-8B",  # more than three words between
])
def test_words_between_never_stretch_to_a_wrong_base(ref):
    with pytest.raises(UsageError):
        resolve_model(ref, hf_home=NO_CACHE)


def test_a_sibling_rule_governs_its_words_with_fine_tune_words_too():
    # the rule for Qwen2.5-Math leaves 1.5B out (untied head): no stretch to Qwen2.5-1.5B through 'math'
    assert derive_without("Qwen/Qwen2.5-Math-1.5B-abliterated", "Math") is None
    base, why, _ = derive_without("huihui_ai/qwen2.5-coder-abliterate:7b", "Coder")
    assert base == Q25_7B_BASE and why == f"{SIBLING}; 'abliterate' in the name is taken as a fine-tune of it"


def test_a_catalogued_sibling_with_fine_tune_words_wins_over_the_rule():
    chunks = [("Qwen/Qwen2.5-7B-Instruct", (), ""), ("Qwen/Qwen2.5-Coder-7B-Instruct", (), "")]
    idx = name_index.build_index(chunks)
    d = names.derive("huihui_ai/qwen2.5-coder-abliterate:7b", idx)
    assert d is not None and d.entry == 1
    assert d.why == ("its name carries the base's family and size, qwen2.5-coder-7b, with 'abliterate' between; "
                     "a fine-tune keeps its base's architecture")
    d = names.derive("Qwen/Qwen2.5-Coder-7B-Instruct-AWQ", idx)
    assert d is not None and d.entry == 1 and d.why == "its name is the base's family and size, qwen2.5-coder-7b"


# --- what the commands print -----------------------------------------------------------------------------

SCRIPT = """#!/bin/sh
# servefit: gpu=L40S
vllm serve {model} --max-model-len 8192 --host 127.0.0.1 --api-key "$KEY"
"""


def test_lint_reports_the_assumed_base_and_keeps_unknowns_sf002(tmp_path, capsys):
    from servefit.cli import main

    (tmp_path / "a.sh").write_text(SCRIPT.format(model="Team-ACE/ToolACE-2-Llama-3.1-8B"))
    (tmp_path / "b.sh").write_text(SCRIPT.format(model="acme/Llama-3.2-8B-sft"))  # Llama 3.2 has no 8B
    main(["lint", str(tmp_path), "--format", "json", "--exit-zero"])
    out = json.loads(capsys.readouterr().out)
    found = {(Path(f["location"]["file"]).name, f["code"]): f["message"] for f in out}
    assert found[("a.sh", "SF004")] == (
        "resolved 'Team-ACE/ToolACE-2-Llama-3.1-8B' to catalog entry 'meta-llama/Llama-3.1-8B-Instruct' by name "
        "(its name carries the base's family and size, llama3.1-8b; a fine-tune keeps its base's architecture); "
        "assumed the same architecture")
    assert ("a.sh", "SF002") not in found and ("b.sh", "SF004") not in found
    near = found[("b.sh", "SF002")].split("nearest: ")[1].split(". Pass")[0].split(", ")
    assert near[0] == L31_8B and all("Llama" in n and "8B" in n for n in near)


def test_estimate_prints_the_assumption(tmp_path, capsys):
    from servefit.cli import main

    (tmp_path / "a.sh").write_text(SCRIPT.format(model="/models/ToolACE-2-Llama-3.1-8B"))
    main(["estimate", str(tmp_path / "a.sh")])
    out = capsys.readouterr().out
    assert ("  - resolved '/models/ToolACE-2-Llama-3.1-8B' to catalog entry 'meta-llama/Llama-3.1-8B-Instruct' by name "
            "(a local folder named after it; its name carries the base's family and size, llama3.1-8b; a fine-tune "
            "keeps its base's architecture); assumed the same architecture") in out.splitlines()


def test_the_name_index_cached_on_disk_is_the_index(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("SERVEFIT_NO_CACHE", raising=False)
    catalog._index.cache_clear()
    try:
        built = catalog._index()
        assert len(list((tmp_path / "servefit" / "data").glob("catalog-index-*.marshal"))) == 1
        catalog._index.cache_clear()
        loaded = catalog._index()
        assert loaded is not built and loaded == built
    finally:
        catalog._index.cache_clear()


# --- a release the catalog lacks: the nearest catalogued release of its line, at its size ---------------

def release_why(word: str, size: str, base: str) -> str:
    return (f"the catalog has no {word} release at {size}; assumed the architecture of {base}, "
            f"the nearest catalogued release of the family at {size}")


@pytest.mark.parametrize("ref,base,word,size,what", [
    ("RadixArk/Qwen3.9-27B-NVFP4", "Qwen/Qwen3.8-27B", "qwen3.9", "27B", "NVFP4 4-bit, group 16"),
    ("acme/Qwen3.9-35B-A3B-Instruct", "Qwen/Qwen3.6-35B-A3B", "qwen3.9", "35B-A3B", "the same architecture"),
    ("acme/NVIDIA-Nemotron-3.7-Lightning-30B-A3B", "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16", "nemotron3.7",
     "30B-A3B", "the same architecture"),
    ("acme/NVIDIA-Nemotron-3.7-Flash-30B-A3B", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "nemotron3.7",
     "30B-A3B", "the same architecture"),  # Lightning is newer, but its word is not in the name
    ("acme/Llama-3.9-8B-Turbo", L31_8B, "llama3.9", "8B", "the same architecture"),
])
def test_an_uncatalogued_release_takes_the_nearest_release_of_its_line(ref, base, word, size, what):
    m = resolved(ref)
    assert m.name == base
    assert m.assumptions == [assumption(ref, base, release_why(word, size, base), what)]


def test_the_nearest_release_in_a_gguf_name_and_a_lint(tmp_path, capsys):
    from servefit.cli import main

    (tmp_path / "a.sh").write_text(SCRIPT.format(model="unsloth/Qwen3.9-27B-FP8"))
    main(["lint", str(tmp_path), "--format", "json", "--exit-zero"])
    found = {f["code"]: f["message"] for f in json.loads(capsys.readouterr().out)}
    assert "SF002" not in found
    assert found["SF004"] == assumption("unsloth/Qwen3.9-27B-FP8", "Qwen/Qwen3.8-27B",
                                        release_why("qwen3.9", "27B", "Qwen/Qwen3.8-27B"), "FP8 weights")


@pytest.mark.parametrize("ref", [
    "acme/Qwen3.8-14B",  # Qwen3 has a 14B, but Qwen3.5 changed the architecture (release_breaks)
    "acme/Qwen3.8-26B",  # no release of the line at 26B
    "acme/Llama-3.2-8B",  # the catalog holds Llama 3.2 (1B, 3B, 11B, 90B): a size it never had
    "acme/Qwen3.8-VL-27B",  # another architecture's word
    "acme/Qwen2.7-Math-1.5B",  # a sibling rule's sub-line (Qwen2.5-Math-1.5B is not Qwen2.5-1.5B)
    "mistralai/Mistral-Small-2.1-24B",  # Small-2 at 24B is Devstral's: a family word the name lacks
    "acme/Gemma-5-27B",  # another major version
])
def test_the_nearest_release_never_stretches(ref):
    with pytest.raises(UsageError) as exc:
        resolve_model(ref, hf_home=NO_CACHE)
    assert str(exc.value).startswith(f"unknown model '{ref}'")


def test_the_nearest_release_is_older_and_within_a_segment():
    chunks = [("x/Foo3-8B", (), ""), ("x/Foo3.2-8B", (), ""), ("x/Foo3.5-8B", (), ""), ("x/Foo3.5-8B-Instruct", (), "")]
    idx = name_index.build_index(chunks)
    assert names.derive("acme/Foo3.4-8B", idx).entry == 1  # the newest older release, not 3.5
    assert names.derive("acme/Foo3.1-8B", idx).entry == 0
    assert names.derive("acme/Foo3.7-8B-Instruct", idx).entry == 3  # release words pick among its entries
    assert names.derive("acme/Foo2.9-8B", idx) is None  # no older release of major 2
    assert names.derive("acme/Foo3.4-7B", idx) is None  # no 7B


@pytest.mark.parametrize("ref", [
    "microsoft/Phi-4-multimodal-instruct",  # not phi-4 (14B): a vision and audio model on Phi-4-mini
    "ibm-granite/granite-4.0-h-350m",  # the hybrid (Mamba) 350M, not the dense granite-4.0-350m
    "Alibaba-NLP/gte-modernbert-base",  # a ModernBERT encoder, not BERT's gte-base
    "nomic-ai/nomic-embed-text-v2-moe",  # a MoE encoder, not v1.5
    "Snowflake/snowflake-arctic-embed-l-v2.0",  # XLM-R large, not the BERT-large v1
    "BAAI/bge-reranker-base",  # XLM-R base, not bge-reranker-v2-m3
])
def test_other_architectures_and_releases_never_take_a_sizeless_base(ref):
    chunks = [c for c in catalog_entries._chunks() if c[0].lower() != ref.lower() and ref.lower() not in
              [a.lower() for a in c[1]]]
    assert names.derive(ref, name_index.build_index(chunks)) is None


def test_a_snapshot_folder_of_any_name_is_its_repository():
    assert names.split_ref("/hf/models--Qwen--Qwen2.5-7B-Instruct/snapshots/main-2") == (
        "hf", "models--Qwen--Qwen2.5-7B-Instruct", True)
    assert resolved("/hf/models--Qwen--Qwen2.5-7B-Instruct/snapshots/abc123").name == Q25_7B


@pytest.mark.parametrize("ref,base,quant", [
    ("/models/Qwen2.5-7B-Instruct_AWQ", Q25_7B, "awq"),  # an underscore before the quantization
    ("/models/qwen2.5_7b_instruct_gptq_int4", Q25_7B, "gptq"),
    ("/models/Llama-3.1-8B-Instruct.FP8", L31_8B, "fp8"),  # a dot before it
    ("/models/AWQ-Qwen2.5-7B-Instruct", Q25_7B, "awq"),  # the quantization first
    ("/models/qwen2.5-7b-instruct-int4-gptq", Q25_7B, "gptq"),  # its words in either order
    ("/models/models--meta-llama--Llama-3.1-8B-Instruct", L31_8B, None),  # an HF cache folder name
    ("models--Qwen--Qwen2.5-7B-Instruct-AWQ", Q25_7B, "awq"),
    ("/opt/llm/meta-llama_Llama-3.1-8B-Instruct", L31_8B, None),  # ORG_NAME folders
    ("/models/QWEN2.5-7B-INSTRUCT", Q25_7B, None),  # upper case
])
def test_naming_styles_of_local_folders(ref, base, quant):
    m = resolved(ref)
    assert m.name == base and (m.quantization or {}).get("quant_method") == quant


@pytest.mark.parametrize("ref,base,gtype", [
    ("bartowski_Meta-Llama-3.1-8B-Instruct-GGUF_Meta-Llama-3.1-8B-Instruct-Q5_K_M.gguf", L31_8B, "Q5_K_M"),
    ("/models/Qwen_Qwen3-8B-Q6_K.gguf", "Qwen/Qwen3-8B", "Q6_K"),  # bartowski's ORG_NAME file names
    ("/models/mistral-7b-instruct-v0.2.Q4_K_M.gguf", "mistralai/Mistral-7B-Instruct-v0.2", "Q4_K_M"),  # TheBloke's dot
    ("/models/Q4_K_M-Qwen2.5-7B-Instruct.gguf", Q25_7B, "Q4_K_M"),  # the file type first
    ("/models/Qwen2.5-7B-Instruct-Q4_K_M-00002-of-00002.gguf", Q25_7B, "Q4_K_M"),  # a later shard
])
def test_naming_styles_of_gguf_files(ref, base, gtype):
    from servefit.models.gguf_names import parse_ref, resolve_gguf_ref

    assert parse_ref(ref)[1] == gtype
    m = resolve_gguf_ref(ref)
    assert m.name == base and m.resolved_from == "derivative"
