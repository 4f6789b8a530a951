"""Names that carry their family and size out of a catalogued name's order (models/name_assume.py),
suggestions only of the name's family and size (models/names.py nearest), and GGUF files named by
an Ollama library family alone (models/gguf_names.py)."""

from __future__ import annotations

import pytest

from servefit.core import UsageError
from servefit.models import catalog, catalog_entries, name_assume
from servefit.models.gguf_names import resolve_gguf_ref

L31_8B = "meta-llama/Llama-3.1-8B-Instruct"


def test_size_before_the_family_word():
    m = catalog.lookup("ruliad/deepthought-8b-llama-v0.01-alpha")
    assert m is not None and m.name == L31_8B and m.resolved_from == "derivative"
    why = m.assumptions[0]
    assert why.startswith("resolved 'ruliad/deepthought-8b-llama-v0.01-alpha' to catalog entry "
                          f"'{L31_8B}' by name (its name carries the family word 'llama' and the size 8B")
    # which releases were weighed, which one was taken, and what may differ
    assert "meta-llama/Meta-Llama-3-8B-Instruct" in why and "the newest was taken" in why
    assert "context and vocabulary may differ" in why
    m = catalog.lookup("acme/foo-7b-qwen2.5")
    assert m is not None and m.name == "Qwen/Qwen2.5-7B-Instruct" and "family word 'qwen2.5'" in m.assumptions[0]
    m = catalog.lookup("acme/bar-13b-llama")  # LLaMA 13B and Llama 2 13B share the layout: the newer
    assert m is not None and m.name == "meta-llama/Llama-2-13b-hf"


@pytest.mark.parametrize("ref", [
    "acme/y-7b-falcon",  # Falcon 7B and Falcon3 7B differ (their KV caches too: tests/test_name_close.py)
    "openbmb/MiniCPM-2B-dpo-bf16",  # the catalog does not know MiniCPM's own sizes: not MiniCPM5-2B
    "ibm-granite/granite-speech-4.1-2b-plus",  # another versioned word: not Granite 3.3 2B
    "acme/x-8b-llama-vision",  # another architecture's word
    "wizardlm",  # no size: one of WizardLM's four sizes is catalogued
    "Qwen/Qwen3.8-Flash-Next",  # no size: the catalogued Qwen3.8-27B is another model
    "XiaomiMiMo/MiMo-V2.5",
])
def test_no_single_layout_stays_unknown(ref):
    assert catalog.lookup(ref) is None


def test_layout_lines_and_vocabularies():
    v01 = name_assume.shape(catalog_entries._text("models/mistral.yaml").split("- name: mistralai/Mistral-7B-v0.1")[1]
                            .split("\n- name:")[0])
    v03 = name_assume.shape(catalog_entries._text("models/mistral.yaml").split("- name: mistralai/Mistral-7B-Instruct-v0.3")[1]
                            .split("\n- name:")[0])
    assert v01[1] == 32000 and v03[1] == 32768 and v01[0] != v03[0]  # v0.1's sliding window is its layout
    assert "head_dim:128" in v01[0] and "head_dim:128" in v03[0]  # written or not, the same head size
    assert name_assume._one_layout([("a", 32000), ("a", 32768)])
    assert not name_assume._one_layout([("a", 32000), ("a", 128256)])
    assert not name_assume._one_layout([("a", 32000), ("b", 32000)])


def test_suggestions_are_of_the_family_and_size_or_none():
    assert catalog.nearest("/workspace/vllm-models/vllm-11", 3) == []  # an engine's name is no family
    near = catalog.nearest("jkeisling/laura-mistral", 3)  # no size: the family's own releases, no LLaVA
    assert len(near) == 3 and all(n.startswith("mistralai/Mistral-7B-") for n in near)
    near = catalog.nearest("/models/qwen2.5", 3)  # not Qwen2.5-Omni: another architecture the name lacks
    assert len(near) == 3 and all(n.startswith("Qwen/Qwen2.5-") and "Omni" not in n and "VL" not in n for n in near)
    near = catalog.nearest("ruliad/deepthought-9b-llama", 3)
    assert near == []  # no Llama at 9B: none rather than another size
    near = catalog.nearest("naver-hyperclovax/HyperCLOVAX-SEED-Think-32B", 3)
    assert near == []  # the catalog has the family at 14B only
    from servefit.models import resolve_model

    with pytest.raises(UsageError, match="no catalogued model has a similar family and size"):
        resolve_model("/workspace/vllm-models/vllm-11", hf_home="/nonexistent-hf-home")
    # the family at other sizes: said, smallest first, instead of suggesting another size
    with pytest.raises(UsageError) as exc:
        resolve_model("acme/Mixtral-8x3B-sft", hf_home="/nonexistent-hf-home")
    assert "; no catalogued model of its family at that size (the catalog has it at 8X7B, 8X22B). Pass" in str(exc.value)
    with pytest.raises(UsageError) as exc:
        resolve_model("naver-hyperclovax/HyperCLOVAX-SEED-Think-32B", hf_home="/nonexistent-hf-home")
    assert "(the catalog has it at 14B)" in str(exc.value)


def test_gguf_named_by_an_ollama_family():
    m = resolve_gguf_ref("/var/lib/mixtral.gguf")
    assert m.name == "mistralai/Mixtral-8x7B-Instruct-v0.1" and m.resolved_from == "derivative"
    assert m.assumptions[-1] == (
        "GGUF 'mixtral.gguf' taken as mistralai/Mixtral-8x7B-Instruct-v0.1: its name carries the family 'mixtral' "
        "and no size, so the size `ollama pull mixtral` downloads (8x7b) was assumed (no file to read; pass "
        "--model-config or name the size in the file name)")
    assert resolve_gguf_ref("./zephyr_zephyr_q4km.gguf").name == "HuggingFaceH4/zephyr-7b-beta"
    assert resolve_gguf_ref("/models/qwen3-instruct.gguf").name == "Qwen/Qwen3-8B"


@pytest.mark.parametrize("ref", ["my-solar-panel.gguf",  # a word that is no release word
                                 "mistral-llama3.gguf",  # two library names
                                 "model.gguf"])
def test_gguf_with_more_than_a_family_stays_unknown(ref):
    with pytest.raises(UsageError, match="cannot tell which model this GGUF is"):
        resolve_gguf_ref(ref)


def test_a_size_written_with_an_underscore():
    from servefit.models.name_words import words

    assert words("Qwen-1_8B-Chat") == ["qwen", "1.8b", "chat"]  # 1.8B, not a release "Qwen1" at 8B
    assert words("stablelm-2-1_6b") == ["stablelm2", "1.6b"]
    assert words("internlm2_5-1_8b-chat") == ["internlm2.5", "1.8b", "chat"]
    assert words("saiga_llama3_8b") == ["saiga", "llama3", "8b"]  # the version of the word before it
    assert words("deepseek-r1_8b-llama-distill") == ["deepseek", "r1", "8b", "llama", "distill"]
    assert words("Devstral-24B-AWQ-4bit-calibrated") == ["devstral", "24b"]  # a quantizer's word
    m = catalog.lookup("acme/Qwen-1_8B-Chat-sft")
    assert m is not None and m.name == "Qwen/Qwen-1_8B-Chat"


def test_family_word_without_its_version():
    # Qwen-1_8B is no Qwen release at 8B, so the catalogued Qwen releases at 8B (Qwen3-8B and its
    # base) leave one layout
    m = catalog.lookup("DragonLLM/Qwen-Open-Finance-R-8B")
    assert m is not None and m.name == "Qwen/Qwen3-8B" and m.resolved_from == "derivative"
    assert ("by name (its name carries the family word 'qwen' and the size 8B, though it has no version; the "
            "catalogued qwen releases at 8B have the same layers, widths and heads (the others: Qwen/Qwen3-8B-Base)"
            in m.assumptions[0])
    assert catalog.lookup("acme/Qwen-Finance-7B") is None  # Qwen, Qwen1.5, Qwen2 and Qwen2.5 7B differ


def test_checkpoints_of_another_kind_are_neither_assumed_nor_suggested():
    from servefit.models import name_index, names

    assert names.kinds(["qwen3guard", "gen"]) == {"guard"} and names.kinds(["embeddings"]) == {"embed"}
    assert names.kinds(["granite", "guardian3.1"]) == {"guard"} and names.kinds(["tts"]) == {"tts"}
    assert names.kinds(["neutts", "attstuff"]) == frozenset()  # a short kind word only as a word of its own
    near = catalog.nearest("acme/Qwen3-Open-Finance-8B", 5)
    assert near and not any("Embedding" in n or "Guard" in n for n in near)
    assert catalog.nearest("acme/Qwen3-Embedding-8B-ft", 1) == ["Qwen/Qwen3-Embedding-8B"]
    # an entry is of a kind only where every name of it says so (an alias granite-guardian-3.1-8b)
    idx = catalog._index().names
    i = idx.names.index("ibm-granite/granite-3.1-8b-instruct")
    assert not idx.foreign(i, frozenset()) and idx.foreign(idx.names.index("Qwen/Qwen3-Embedding-8B"), frozenset())
    # a catalog where the family's only other entry at that size is an embedding model of another
    # layout: the generating model is assumed, the embedding model is no candidate
    layers = "  model_type: foo\n  num_hidden_layers: {n}\n  hidden_size: 4096\n  num_attention_heads: 32\n"
    small = name_index.build_index([("acme/Foo-8B", (), layers.format(n=32)),
                               ("acme/Foo-8B-Embedding", (), layers.format(n=28)),
                               ("acme/Foo-3B", (), layers.format(n=20))])
    hit = name_assume.assume(small, ["bar", "foo", "8b"], names._other_words(), (), name_index._root, frozenset())
    assert hit is not None and small.names[hit[0]] == "acme/Foo-8B"
    assert name_assume.assume(small, ["bar", "foo", "8b", "embedding"], names._other_words(), (), name_index._root,
                              names.kinds(["embedding"])) is None  # both are its kind's candidates: two layouts


def test_unknown_family_with_a_version_and_an_moe_size():
    m = resolve_gguf_ref("${SCRIPT_DIR}/models/Qwopus3.6-Q4_K_M/Qwopus3.6-35B-A3B-Coder-MTP-Q4_K_M.gguf")
    assert m.name == "Qwen/Qwen3.6-35B-A3B" and m.resolved_from == "derivative"
    m = catalog.lookup("acme/Qwopus3.6-35B-A3B")
    assert m is not None and m.name == "Qwen/Qwen3.6-35B-A3B"
    assert m.assumptions[0] == (
        "resolved 'acme/Qwopus3.6-35B-A3B' to catalog entry 'Qwen/Qwen3.6-35B-A3B' by name ('qwopus3.6' is no "
        "catalogued family, but its version and its size 35B-A3B (total and active parameters) are those of "
        "Qwen/Qwen3.6-35B-A3B, so its architecture was assumed, as a fine-tune or distill keeps its base's (its "
        "context and vocabulary may differ: pass --model-config for the checkpoint's own)); assumed the same architecture")
    m = catalog.lookup("acme/Bar3.5-35B-A3B-Instruct")  # the version picks the release
    assert m is not None and m.name == "Qwen/Qwen3.5-35B-A3B"


@pytest.mark.parametrize("ref", [
    "acme/Qwopus2-35B-A3B",  # no catalogued model of version 2 at 35B-A3B
    "acme/Qwopus-35B-A3B",  # no version
    "acme/Qwopus3.6-27B",  # a dense size: many families share one
    "acme/Qwopus3.6-VL-35B-A3B",  # another architecture's word
    "acme/Llama3.6-35B-A3B",  # a catalogued family: not stretched to another family's release
    "acme/Qwopus3.6-Next3-35B-A3B",  # two versioned words
])
def test_unknown_family_and_moe_size_stays_unknown(ref):
    assert catalog.lookup(ref) is None


def test_moe_size_shared_by_several_layouts_stays_unknown_with_them_as_suggestions():
    assert catalog.lookup("acme/Qwopus3-30B-A3B-Coder") is None  # Qwen3 and Nemotron 3 Nano at 30B-A3B differ
    near = catalog.nearest("acme/Qwopus3-30B-A3B-Coder", 3)
    assert near[0].startswith("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B") and "Qwen/Qwen3-30B-A3B" in near
    assert catalog.nearest("acme/Qwopus2-30B-A3B", 3) == []  # of no catalogued model's version


def test_devstral_at_24b_is_two_layouts():
    # Devstral Small 1.x (2505, 2507) is text only, context 131072; Devstral Small 2 is Mistral 3 with a
    # Pixtral vision tower, context 393216: not one layout, so not this module's (a name with a quantization
    # word is models/name_close.py's, tests/test_name_close.py); without one both are suggested
    for ref in ("$MODELS_DIR/Devstral-24B", "acme/Devstral-24B-sft"):
        assert catalog.lookup(ref) is None
        assert sorted(catalog.nearest(ref, 3)) == ["mistralai/Devstral-Small-2-24B-Instruct-2512",
                                                   "mistralai/Devstral-Small-2505"]
    assert catalog.nearest("acme/Devstral-22B", 3) == []  # not 24B by a loose count
