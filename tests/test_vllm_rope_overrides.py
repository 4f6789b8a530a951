"""`--rope-scaling` and `--hf-overrides` change the length vLLM derives from the model config
(engines/vllm/overrides.py), release by release: the flag up to 0.11.0, dict overrides set after
loading from 0.11.1, `rope_parameters` read from 0.12 (transformers 4 leaves it stale when only
`rope_scaling` is overridden, up to 0.19). Lengths by hand from config.py::_get_and_verify_max_len:
YaRN derives original_max_position_embeddings x factor, linear / dynamic max_position_embeddings x
factor, llama3 / longrope keep max_position_embeddings."""

from __future__ import annotations

import json

import pytest

from servefit.engines.vllm import ENGINE
from servefit.engines.vllm.era import era
from servefit.engines.vllm.overrides import as_loaded
from servefit.engines.vllm.plan import resolve
from servefit.hardware.spec import GpuSpec
from servefit.models.spec import ModelSpec
from servefit.pipeline import site_from_argv

# Qwen3-32B's shapes with a small layer count: max_position_embeddings 40960, no rope scaling
QWEN = ModelSpec(name="Qwen/Qwen3-32B", architecture="Qwen3ForCausalLM", model_type="qwen3", num_hidden_layers=4,
                 hidden_size=5120, num_attention_heads=64, num_key_value_heads=8, head_dim=128,
                 intermediate_size=25600, vocab_size=151936, max_position_embeddings=40960, params=2_000_000_000)
H100 = GpuSpec(key="h100-sxm", name="NVIDIA H100 80GB HBM3", vendor="nvidia", memory_bytes=85_520_809_984,
               compute_capability=90, fp8=True)
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}


def derived(version: str, *flags: str) -> tuple[int, list[str], list[str]]:
    """(derived max_model_len, finding codes, assumptions) for `vllm serve Qwen/Qwen3-32B flags...`."""
    cfg = ENGINE.parse(site_from_argv(["vllm", "serve", "Qwen/Qwen3-32B", *flags]), version)
    plan = ENGINE.plan(cfg, QWEN, H100, 1)
    r = resolve(cfg, as_loaded(cfg, QWEN), H100, era(cfg.version))
    return r.derived_len, [f.code for f in cfg.findings + plan.findings], cfg.assumptions


def test_rope_scaling_flag_on_010_allows_131k():
    # the Qwen3 YaRN recipe: 32768 x 4 = 131072
    n, codes, _ = derived("0.10.0", "--rope-scaling", json.dumps(YARN), "--max-model-len", "131072")
    assert n == 131072 and "VLLM006" not in codes
    n, codes, _ = derived("0.10.0", "--max-model-len", "131072")
    assert n == 40960 and "VLLM006" in codes


def test_legacy_type_key_and_linear_factor():
    legacy = {"type": "yarn", "factor": 2.0, "original_max_position_embeddings": 32768}
    assert derived("0.10.0", "--rope-scaling", json.dumps(legacy))[0] == 65536
    # dynamic scales max_position_embeddings: 40960 x 2; llama3 leaves it
    assert derived("0.10.0", "--rope-scaling", '{"rope_type": "dynamic", "factor": 2.0}')[0] == 81920
    llama3 = {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}
    assert derived("0.10.0", "--rope-scaling", json.dumps(llama3))[0] == 40960


def test_flag_wins_over_hf_overrides_of_the_same_key_on_010():
    other = {"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}
    n, _, _ = derived("0.10.0", "--hf-overrides", json.dumps(other), "--rope-scaling", json.dumps(YARN))
    assert n == 131072


def test_rope_scaling_flag_is_gone_from_0111():
    n, codes, _ = derived("0.21.0", "--rope-scaling", json.dumps(YARN), "--max-model-len", "131072")
    assert "VLLM001" in codes and n == 40960 and "VLLM006" in codes


@pytest.mark.parametrize("version,applied", [
    ("0.10.0", True), ("0.11.0", True), ("0.11.2", True),  # config.update / set after loading, read as rope_scaling
    ("0.12.0", False), ("0.19.0", False),  # rope_parameters stays as loaded (transformers 4)
    ("0.20.0", True), ("0.21.0", True),  # transformers 5: rope_scaling sets rope_parameters
])
def test_hf_overrides_rope_scaling_by_release(version, applied):
    n, codes, notes = derived(version, "--hf-overrides", json.dumps({"rope_scaling": YARN}),
                              "--max-model-len", "131072")
    assert n == (131072 if applied else 40960)
    assert ("VLLM006" in codes) is not applied
    assert any("pass the same dict as rope_parameters" in a for a in notes) is not applied


@pytest.mark.parametrize("version,applied", [("0.11.2", False), ("0.12.0", True), ("0.21.0", True)])
def test_hf_overrides_rope_parameters_by_release(version, applied):
    n, _, notes = derived(version, "--hf-overrides", json.dumps({"rope_parameters": YARN}))
    assert n == (131072 if applied else 40960)
    assert any("rope_parameters is not read" in a for a in notes) is not applied


def test_hf_overrides_nested_text_config_and_max_position_embeddings():
    n, _, _ = derived("0.21.0", "--hf-overrides", json.dumps({"text_config": {"rope_parameters": YARN}}))
    assert n == 131072
    # a flat integer goes through config.update in every release
    for version in ("0.10.0", "0.21.0"):
        assert derived(version, "--hf-overrides", '{"max_position_embeddings": 65536}')[0] == 65536


def test_the_catalog_spec_is_left_alone():
    cfg = ENGINE.parse(site_from_argv(["vllm", "serve", "Qwen/Qwen3-32B", "--rope-scaling", json.dumps(YARN)]),
                       "0.10.0")
    loaded = as_loaded(cfg, QWEN)
    assert loaded.rope_scaling == YARN and loaded.original_max_position_embeddings == 32768
    assert QWEN.rope_scaling is None and QWEN.original_max_position_embeddings == 0
    plain = ENGINE.parse(site_from_argv(["vllm", "serve", "Qwen/Qwen3-32B"]), "0.10.0")
    assert as_loaded(plain, QWEN) is QWEN
