"""VLLM024: the vLLM release in force loads the model's architecture (data/engines/
vllm_architectures.yaml, read from every release's model registry by
tools/extract_vllm_architectures.py), else it says which release added it or last had it."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import yaml

from servefit.config import Config
from servefit.linter.run import LintOptions, lint_paths

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "servefit" / "data" / "engines"
ARCHS = yaml.safe_load((DATA / "vllm_architectures.yaml").read_text())


def _lint(text: str, version: str | None = None, gpu: str = "H100") -> tuple[list[tuple[str, str]], list[str]]:
    """(code, message) of every finding and the first server's assumptions (its config's, then its plan's)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "serve.sh"
        path.write_text(text)
        res = lint_paths([str(path)], LintOptions(gpu=gpu, engine_version=version, config=Config(root=d), render=False))
        srv = res.sites[0] if res.sites else None
        notes = (list(srv.config.assumptions) if srv and srv.config else []) + \
            (list(srv.plan.assumptions) if srv and srv.plan else [])
        # the linter tags a planned server's findings with the GPU it assumed: not part of this rule's words
        return [(f.code, f.message.split(" [GPU: ")[0]) for f in res.findings], notes


def _arch(text: str, version: str | None) -> list[str]:
    return [m for c, m in _lint(text, version)[0] if c == "VLLM024"]


def test_data_file_matches_its_schema_and_reads_the_option_history_releases():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "src" / "servefit" / "schemas" / "engine_architectures.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(ARCHS)
    history = yaml.safe_load((DATA / "vllm_history.yaml").read_text())
    assert ARCHS["releases_read"] == history["releases_read"]
    # the registry grows: every release read has the core decoder, the newest has hundreds of names
    assert ARCHS["architectures"]["LlamaForCausalLM"]["in"] == [[None, None]]
    newest = ARCHS["releases_read"][-1]
    live = [a for a, e in ARCHS["architectures"].items() if any(b is None for _, b in e["in"])]
    assert len(live) > 300, newest


def test_schema_rejects_a_range_that_is_not_a_version():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "src" / "servefit" / "schemas" / "engine_architectures.schema.json").read_text())
    bad = json.loads(json.dumps(ARCHS))
    bad["architectures"]["LlamaForCausalLM"]["in"] = [["zero", None]]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(bad)


def test_removed_architecture_errors_late_and_passes_early():
    entry = ARCHS["architectures"]["MPTForCausalLM"]
    assert entry["in"] == [[None, "0.29.0"]] and entry["last_supported"] == "0.28.0"
    late = _arch("vllm serve mosaicml/mpt-7b\n", "0.33.0")
    assert late == ['vLLM 0.33.0 cannot load MPTForCausalLM (mosaicml/mpt-7b): removed in 0.29.0; the last release '
                    'with it is 0.28.0. vLLM says: "Model architecture MPTForCausalLM was supported in vLLM until '
                    'v0.28.0, and is not supported anymore. Please use an older version of vLLM if you want to use '
                    'this model architecture."']
    assert _arch("vllm serve mosaicml/mpt-7b\n", "0.6.3") == []
    assert _arch("vllm serve mosaicml/mpt-7b\n", "0.28.0") == []


def test_future_architecture_errors_at_an_early_release_in_that_releases_words():
    since = ARCHS["architectures"]["Gemma3ForCausalLM"]["in"][0][0]
    assert since is not None
    early = _arch("vllm serve google/gemma-3-1b-it\n", "0.6.3")
    assert early == [f"vLLM 0.6.3 cannot load Gemma3ForCausalLM (google/gemma-3-1b-it): added in {since}. vLLM says: "
                     "\"Model architectures ['Gemma3ForCausalLM'] are not supported for now. Supported architectures: "
                     "[...]\""]
    assert _arch("vllm serve google/gemma-3-1b-it\n", since) == []


def test_unpinned_version_models_the_newest_and_says_it_was_assumed():
    newest = ARCHS["releases_read"][-1]
    findings, notes = _lint("vllm serve mosaicml/mpt-7b\n")
    msgs = [m for c, m in findings if c == "VLLM024"]
    assert len(msgs) == 1 and msgs[0].startswith(f"vLLM {newest} cannot load MPTForCausalLM")
    assert msgs[0].endswith(f"(vLLM {newest} assumed: no version given; pin the image tag or pass --engine-version)")
    assert any(n.startswith(f"WARNING: vLLM {newest} assumed (no version given") for n in notes)


def test_transformers_fallback_loads_a_removed_architecture_without_an_error():
    """AyaVisionForConditionalGeneration left the registry after 0.24.0; from 0.7.2 a name the
    registry lacks goes to the Transformers backend when its transformers class passes the check
    that release makes (is_backend_compatible from transformers 4.53.2 on)."""
    entry = ARCHS["architectures"]["AyaVisionForConditionalGeneration"]
    assert entry["in"] == [["0.8.3", "0.25.1"]] and entry["transformers"]["backend"] == "4.53.2"
    findings, notes = _lint("vllm serve CohereLabs/aya-vision-8b --max-model-len 8192\n", "0.33.0")
    assert [m for c, m in findings if c == "VLLM024"] == []
    assert "AyaVisionForConditionalGeneration has no vLLM implementation in vLLM 0.33.0: vLLM hands it to its " \
           "Transformers backend instead of refusing (--model-impl auto falls back); some features and speed may " \
           "differ, and a model that backend cannot run fails while loading" in notes, notes
    # --model-impl vllm turns the fallback off: vLLM refuses, in the words of its _PREVIOUSLY_SUPPORTED_MODELS
    refused = _arch("vllm serve CohereLabs/aya-vision-8b --max-model-len 8192 --model-impl vllm\n", "0.33.0")
    assert len(refused) == 1 and "removed in 0.25.1; the last release with it is 0.24.0" in refused[0]
    assert "was supported in vLLM until v0.24.0, and is not supported anymore" in refused[0]


def test_names_no_release_registered_are_not_judged():
    from servefit.core import EngineConfig
    from servefit.engines.vllm.architectures import architecture_check
    from servefit.models.catalog import lookup

    model = lookup("mosaicml/mpt-7b")
    assert model is not None
    cfg = EngineConfig(engine="vllm", model_ref=model.name, settings={}, version="0.33.0")
    assert len(architecture_check(cfg, model, [])) == 1
    from dataclasses import replace

    assert architecture_check(cfg, replace(model, architecture="SomeRemoteCodeForCausalLM"), []) == []


def test_a_pooling_name_the_registry_dropped_loads_converted_where_the_release_normalizes():
    """Qwen3ForSequenceClassification left the tables in 0.10.0; from 0.11.0 registry.py::_normalize_arch
    loads it as Qwen3ForCausalLM converted (config _SUFFIX_TO_DEFAULTS), so only 0.10.x refuses it."""
    from dataclasses import replace

    from servefit.core import EngineConfig
    from servefit.engines.vllm.architectures import architecture_check
    from servefit.models.catalog import lookup

    assert ARCHS["architectures"]["Qwen3ForSequenceClassification"]["in"] == [["0.9.2", "0.10.0"]]
    base = lookup("Qwen/Qwen3-8B")
    assert base is not None
    model = replace(base, architecture="Qwen3ForSequenceClassification")

    def codes(version: str) -> list[str]:
        cfg = EngineConfig(engine="vllm", model_ref=model.name, settings={"model_impl": "vllm"}, version=version)
        return [f.message.split(":")[1].strip() for f in architecture_check(cfg, model, [])]

    assert codes("0.10.1") == ["removed in 0.10.0; the last release with it is 0.9.2. vLLM says"]
    assert codes("0.11.0") == [] and codes("0.33.0") == [] and codes("0.9.2") == []


def test_a_release_between_two_read_ones_is_judged_only_where_both_lack_the_name():
    """0.19.0 is not read: Gemma4ForConditionalGeneration is first in 0.19.1 (a public 0.19.0 start-up
    log serves Gemma 4), so 0.19.0 is not flagged; 0.18.2 sits between 0.18.1 and 0.19.1 (not
    judged either); 0.18.1 lacks it and has no transformers able to take it (it asks for 4.56.0)."""
    assert ARCHS["architectures"]["Gemma4ForConditionalGeneration"]["in"] == [["0.19.1", None]]
    text = "vllm serve google/gemma-4-26B-A4B --max-model-len 8192\n"
    assert _arch(text, "0.19.0") == [] and _arch(text, "0.18.2") == []
    one = _arch(text, "0.18.1")
    assert len(one) == 1 and one[0].startswith("vLLM 0.18.1 cannot load Gemma4ForConditionalGeneration"), one


# --- the extractor, on small sources written here -------------------------------------------------


def _extractor():
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    try:
        return __import__("extract_vllm_architectures")
    finally:
        sys.path.pop(0)


def _release(root: Path, version: str, registry: str, loader: str = "", requires: str = ">=4.40.0") -> Path:
    rel = root / version
    (rel / "vllm/model_executor/models").mkdir(parents=True)
    (rel / "vllm/model_executor/models/registry.py").write_text(registry)
    (rel / "vllm/model_executor/model_loader").mkdir(parents=True)
    (rel / "vllm/model_executor/model_loader/utils.py").write_text(loader)
    (rel / f"vllm-{version}.dist-info").mkdir()
    (rel / f"vllm-{version}.dist-info/METADATA").write_text(f"Name: vllm\nRequires-Dist: transformers{requires}\n")
    return rel


def test_extractor_reads_the_tables_the_registry_merges(tmp_path):
    tool = _extractor()
    old = _release(tmp_path, "0.1.0", '_TEXT_GENERATION_MODELS = {\n    "AForCausalLM": ("a", "A"),\n'
                   '    "GoneForCausalLM": ("g", "G"),\n}\n_EMBEDDING_MODELS = {"BModel": ("b", "B")}\n'
                   '_ROCM_PARTIALLY_SUPPORTED_MODELS = {"AForCausalLM": "why"}\n'
                   '_UNMERGED_MODELS = {"CForCausalLM": ("c", "C")}\n'
                   '_VLLM_MODELS = {**_TEXT_GENERATION_MODELS, **_EMBEDDING_MODELS}\n')
    new = _release(tmp_path, "0.2.0", '_TEXT_GENERATION_MODELS = {"AForCausalLM": ("a", "A"), "DForCausalLM": ("d", "D")}\n'
                   '_PREVIOUSLY_SUPPORTED_MODELS = {"GoneForCausalLM": "0.1.0"}\n'
                   '_VLLM_MODELS = {**_TEXT_GENERATION_MODELS}\n'
                   'def _try_resolve_transformers(): pass\n', requires="<5,>=4.56.0")
    per = {"0.1.0": tool.extract(old), "0.2.0": tool.extract(new)}
    assert per["0.1.0"]["archs"] == {"AForCausalLM": "_TEXT_GENERATION_MODELS", "GoneForCausalLM": "_TEXT_GENERATION_MODELS",
                                     "BModel": "_EMBEDDING_MODELS"}
    h = tool.history(per)
    assert h["architectures"] == {
        "AForCausalLM": {"in": [[None, None]], "table": "_TEXT_GENERATION_MODELS"},
        "BModel": {"in": [[None, "0.2.0"]], "table": "_EMBEDDING_MODELS"},
        "DForCausalLM": {"in": [["0.2.0", None]], "table": "_TEXT_GENERATION_MODELS"},
        "GoneForCausalLM": {"in": [[None, "0.2.0"]], "table": "_TEXT_GENERATION_MODELS", "last_supported": "0.1.0",
                            "listed_since": "0.2.0"}}
    assert h["eras"]["0.1.0"] == {"refusal": tool.UNSUPPORTED, "transformers_min": "4.40.0"}
    assert h["eras"]["0.2.0"]["transformers_fallback"] == "registry"
    assert h["eras"]["0.2.0"]["transformers_below"] == "5.0"
