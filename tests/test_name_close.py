"""A family word whose catalogued releases at the name's size differ in layers but not in memory, and a family
word without a size that Ollama's library lists at one size (models/name_close.py): sized as the release that
needs the most memory, the assumption said, or left unknown with the candidates as suggestions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.core import UsageError
from servefit.models import catalog, catalog_entries, name_close, resolve_model

D2512 = "mistralai/Devstral-Small-2-24B-Instruct-2512"
D2505 = "mistralai/Devstral-Small-2505"
PIN = "`# servefit: model=ORG/NAME` beside the server or map the name in [tool.servefit.models]"
DEVSTRAL_WHY = (
    "its name carries the family word 'devstral' and the size 24B, which 2 catalogued releases share, whose memory "
    f"plans lie within 10% of each other, so the one that needs the most memory was sized: {D2512}, weights 15.1 GB, "
    f"context 393216 (the others: {D2505}: 14.2 GB, context 131072), the same KV cache per token (160 KiB at 16 "
    f"bits); to size another, write {PIN}")
MISTRAL_WHY = (
    "its name carries the family word 'mistral' and no size; Ollama's library has mistral at 7B only, and the catalog "
    "has 4 releases of it at 7B, whose memory plans lie within 10% of each other, so the one that needs the most "
    "memory was sized: mistralai/Mistral-7B-Instruct-v0.3, weights 14.5 GB, context 32768 (the others: "
    "mistral-community/Mistral-7B-v0.2: 14.5 GB; mistralai/Mistral-7B-Instruct-v0.2: 14.5 GB; "
    "mistralai/Mistral-7B-v0.1: 14.5 GB), the same KV cache per token (128 KiB at 16 bits); to size another, write "
    f"{PIN}")


@pytest.mark.parametrize("ref,where", [
    ("$MODELS_DIR/Devstral-24B-AWQ-Marlin", ""),  # as calibration-4's SGLang script writes it
    ("/models/Devstral-24B-AWQ-4bit-calibrated", "a local folder named after it; "),
    ("acme/Devstral-24B-AWQ", ""),
])
def test_devstral_at_24b_with_a_quantization_sizes_the_larger_plan(ref, where):
    m = catalog.lookup(ref)
    assert m is not None and m.name == D2512 and m.resolved_from == "derivative"
    assert m.quantization == {"quant_method": "awq", "bits": 4, "group_size": 128}
    assert m.assumptions == [f"resolved '{ref}' to catalog entry '{D2512}' by name ({where}{DEVSTRAL_WHY}); "
                             "assumed AWQ 4-bit, group 128"]


def test_devstral_without_a_quantization_word_stays_unknown_with_both():
    # 2505 is a bf16 checkpoint (47.1 GB), 2512 ships FP8 (25.8 GB): a name that says neither is no plan
    with pytest.raises(UsageError) as exc:
        resolve_model("acme/Devstral-24B-sft", hf_home="/nonexistent-hf-home")
    near = str(exc.value).split("; nearest: ")[1].split(". Pass")[0].split(", ")
    assert sorted(near) == [D2512, D2505]


def test_the_plans_must_agree_within_the_tolerance(monkeypatch):
    idx = catalog._index().names
    pool = [idx.names.index(D2505), idx.names.index(D2512)]
    awq = {"quant_method": "awq", "bits": 4, "group_size": 128}

    def spec_of(i):
        return catalog.spec_from_entry(catalog_entries._entry(i))

    best, plans = name_close.pick(pool, spec_of, awq, idx.names)
    assert idx.names[best] == D2512 and plans.startswith("weights 15.1 GB, context 393216")
    assert name_close.pick(pool, spec_of, None, idx.names) is None  # bf16 and FP8: 45% apart
    monkeypatch.setattr(name_close, "TOLERANCE", 0.05)  # the AWQ plans are 5.8% apart
    assert name_close.pick(pool, spec_of, awq, idx.names) is None


def test_a_family_word_alone_that_the_library_has_at_one_size():
    m = catalog.lookup("jkeisling/laura-mistral")  # calibration-3's TGI reference
    assert m is not None and m.name == "mistralai/Mistral-7B-Instruct-v0.3" and m.quantization is None
    assert m.assumptions == [f"resolved 'jkeisling/laura-mistral' to catalog entry 'mistralai/Mistral-7B-Instruct-v0.3' "
                             f"by name ({MISTRAL_WHY}); assumed the same architecture"]
    m = catalog.lookup("acme/codestral-rust-v2")  # one catalogued release: named, no plans to compare
    assert m is not None and m.name == "mistralai/Codestral-22B-v0.1"
    assert m.assumptions == [
        "resolved 'acme/codestral-rust-v2' to catalog entry 'mistralai/Codestral-22B-v0.1' by name (its name carries "
        "the family word 'codestral' and no size; Ollama's library has codestral at 22B only, catalogued as "
        f"mistralai/Codestral-22B-v0.1, so that was sized; to size another model, write {PIN}); assumed the same "
        "architecture"]


def test_a_dated_release_the_name_leaves_out():
    m = catalog.lookup("TheBloke/OLMo-2-13B-bnb-4bit")
    assert m is not None and m.name == "allenai/OLMo-2-1124-13B-Instruct"
    assert m.assumptions == [
        "resolved 'TheBloke/OLMo-2-13B-bnb-4bit' to catalog entry 'allenai/OLMo-2-1124-13B-Instruct' by name (its name "
        "carries the family word 'olmo2' and the size 13B, and the catalog has one release of that family at that "
        "size, allenai/OLMo-2-1124-13B-Instruct; a fine-tune or repack keeps its base's architecture (to size another "
        f"model, write {PIN})); assumed bitsandbytes 4-bit"]


def test_llama_at_70b_is_the_llama_3_plan_with_llama_2_said():
    # Llama 2 70B and Llama 3.x 70B: weights 2% apart, the same KV cache per token; contexts differ and are said
    m = catalog.lookup("acme/x-70b-llama")
    assert m is not None and m.name == "meta-llama/Llama-3.1-70B-Instruct"
    assert "(the others: meta-llama/Llama-2-70b-hf: 138.0 GB, context 4096; " in m.assumptions[0]
    assert "DeepSeek" not in m.assumptions[0]  # a distill whose name carries Llama is not a Llama release


@pytest.mark.parametrize("ref", [
    "/models/qwen3",  # the library has Qwen3 at eight sizes
    "acme/zephyr-sft",  # the library has 7b and 141b (the table leaves 141b out: `uncatalogued`)
    "acme/my-solar-panel",  # two words of its own beside the family: a phrase, not a fine-tune's name
    "acme/y-7b-falcon",  # Falcon-7B's multi-query KV cache is 1/28 of Falcon3-7B's
    "acme/Qwen-Finance-7B",  # Qwen and Qwen1.5 7B cache 9x the KV per token of Qwen2 and Qwen2.5 7B
    "openbmb/MiniCPM-2B-dpo-bf16",  # MiniCPM's first release's sizes are not catalogued: not MiniCPM5-2B
    "acme/laura-mistral-vision",  # another architecture's word
])
def test_stays_unknown(ref):
    assert catalog.lookup(ref) is None


def test_an_ollama_tag_of_a_size_the_library_lacks_stays_an_error():
    from servefit.engines.ollama.tags import lookup

    tag = lookup("llama3:2b")
    assert tag.model is None and tag.note == "llama3:2b: the library has no 2b size (it has 8b, 70b)"


SCRIPT = """#!/bin/sh
# servefit: gpu=L40S
text-generation-launcher --model-id {model} --max-total-tokens 8192 --hostname 127.0.0.1
"""


def test_lint_estimate_and_models_say_the_same_assumption(tmp_path, capsys):
    from servefit.cli import main

    f = tmp_path / "tgi.sh"
    f.write_text(SCRIPT.format(model="jkeisling/laura-mistral"))
    said = (f"resolved 'jkeisling/laura-mistral' to catalog entry 'mistralai/Mistral-7B-Instruct-v0.3' by name "
            f"({MISTRAL_WHY}); assumed the same architecture")
    main(["lint", str(f), "--format", "json", "--exit-zero"])
    found = {(Path(x["location"]["file"]).name, x["code"]): x["message"] for x in json.loads(capsys.readouterr().out)}
    assert found[("tgi.sh", "SF004")] == said and ("tgi.sh", "SF002") not in found
    main(["estimate", str(f)])
    assert f"  - {said}" in capsys.readouterr().out.splitlines()
    main(["models", str(f)])
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("tgi  jkeisling/laura-mistral  -> mistralai/Mistral-7B-Instruct-v0.3 (7.25B) from "
                           "assumed base")  # the pin hint is no [tool.servefit.models] mapping
    assert f"    assumed: {said}" in out


def test_the_library_sizes_the_tag_table_leaves_out_count():
    # zephyr: 7b and 141b (Mixtral-8x22B ORPO, not catalogued); stablelm2: 1.6b and 12b; mistral: 7b only
    assert [name_close._library_size(n) for n in ("zephyr", "stablelm2", "opencoder", "mistral", "codestral")] == [
        None, None, None, "7b", "22b"]


def test_a_fine_tune_series_word_of_no_catalogued_family_does_not_block_its_base():
    # DeepHermes-3 is Nous Research's series on Mistral Small 24B (calibration-5's SGLang script)
    ref = "NousResearch/DeepHermes-3-Mistral-24B-Preview"
    m = catalog.lookup(ref)
    assert m is not None and m.name == "mistralai/Mistral-Small-3.1-24B-Instruct-2503"
    assert "its name carries the family word 'mistral' and the size 24B, which 3 catalogued releases share" \
        in m.assumptions[0]


@pytest.mark.parametrize("ref", [
    "mistralai/Mistral-Small-2.1-24B",  # `small2.1` is a catalogued name's word: Small 2 at 24B is Devstral's
    "acme/Qwen3-Devstral-24B-AWQ",  # another catalogued family's versioned word
])
def test_a_versioned_word_the_catalog_knows_still_blocks(ref):
    with pytest.raises(UsageError):
        resolve_model(ref, hf_home="/nonexistent-hf-home")


@pytest.mark.parametrize("ref,base", [
    ("mistral-small-24b-finetune", "mistralai/Mistral-Small-24B-Instruct-2501"),  # the number, not `small` (22B)
    ("acme/Mistral-Small-24B-ft", "mistralai/Mistral-Small-24B-Instruct-2501"),
    ("acme/mistral-small-ft", "mistralai/Mistral-Small-Instruct-2409"),  # `small` alone is the 2409 entry's size
])
def test_a_number_size_wins_over_a_size_word(ref, base):
    m = catalog.lookup(ref)
    assert m is not None and m.name == base
