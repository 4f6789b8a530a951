"""Unsloth Dynamic (`UD-*`) and unknown GGUF quant names: sized as their base type with the
assumption said, or one clear error; never a KeyError (issue 16's Qwen3.6-27B UD-Q8_K_XL case)."""

from __future__ import annotations

import json
import shlex

import pytest

from servefit.cli import main
from servefit.models.gguf_names import dynamic_quant, parse_ref
from servefit.pipeline import Target, evaluate, site_from_argv

GPU = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


@pytest.mark.parametrize("ref,want", [
    ("unsloth/Qwen3.6-27B-GGUF:UD-Q8_K_XL", "UD-Q8_K_XL"),
    ("Qwen3.6-35B-A3B-UD-Q6_K_XL.gguf", "UD-Q6_K_XL"),
    ("x/DeepSeek-R1-UD-IQ1_M-00001-of-00003.gguf", "UD-IQ1_M"),
    ("qwen3_ud_q4_k_xl.gguf", "UD-Q4_K_XL"),
    ("unsloth/Qwen3-8B-GGUF:Q4_K_M", None),
    ("CLOUD-Q4_K_M.gguf", None),  # `UD` inside a word is no Unsloth tag
])
def test_dynamic_quant_names(ref, want):
    assert dynamic_quant(ref) == want


@pytest.mark.parametrize("ref,quant", [
    ("unsloth/Qwen3.6-27B-GGUF:UD-Q8_K_XL", "Q8_0"),  # Q8_K is no file type: Q8_0 is the base
    ("unsloth/Qwen3.6-35B-A3B-GGUF:UD-Q6_K_XL", "Q6_K"),
    ("unsloth/Qwen3-8B-GGUF:UD-Q4_K_XL", "Q4_K_M"),
    ("unsloth/gemma-4-26B-A4B-it-GGUF:UD-IQ4_NL", "IQ4_NL"),
])
def test_dynamic_quant_base_type(ref, quant):
    assert parse_ref(ref)[1] == quant


def _plan(cmd: str):
    return evaluate(site_from_argv(shlex.split(cmd)), Target(gpu=GPU, engine_version="b8836")).plan


def test_ud_q8_k_xl_is_sized_as_q8_0_and_says_so():
    ud = _plan("llama-server -hf unsloth/Qwen3.6-27B-GGUF:UD-Q8_K_XL -c 8192 -ngl 999")
    plain = _plan("llama-server -hf unsloth/Qwen3.6-27B-GGUF:Q8_0 -c 8192 -ngl 999")
    assert ud.memory.weights == plain.memory.weights > 0
    said = [a for a in ud.assumptions if "Unsloth Dynamic" in a]
    assert len(said) == 1 and said[0].startswith("UD-Q8_K_XL is an Unsloth Dynamic quant")
    assert "sized as plain Q8_0" in said[0]
    assert not any("Unsloth Dynamic" in a for a in plain.assumptions)


def test_estimate_on_a_ud_quant_runs(capsys):
    rc = main(["estimate", "--gpu", GPU, "--", "llama-server", "-hf", "unsloth/Qwen3.6-27B-GGUF:UD-Q8_K_XL",
               "-c", "262144", "-ngl", "999", "-fa", "1"])
    out = capsys.readouterr()
    assert rc == 0 and "KeyError" not in out.out + out.err
    assert "UD-Q8_K_XL is an Unsloth Dynamic quant" in out.out


def test_unknown_quant_is_one_clear_line(capsys):
    rc = main(["estimate", "--gpu", GPU, "--", "llama-server", "-hf", "unsloth/Qwen3.6-27B-GGUF:FOO_BAR"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert err.startswith("servefit: error: the GGUF quantization 'FOO_BAR' is not a llama.cpp file type")


def test_lint_reports_an_unknown_quant_as_a_finding(tmp_path, capsys):
    f = tmp_path / "compose.yaml"
    f.write_text("services:\n  llm:\n    image: ghcr.io/ggml-org/llama.cpp:server-cuda-b8836\n"
                 "    command: -hf unsloth/Qwen3.6-27B-GGUF:FOO_BAR -c 8192 -ngl 999\n")
    main(["lint", str(f), "--gpu", GPU, "--format", "json"])
    found = json.loads(capsys.readouterr().out)
    codes = {x["code"]: x["message"] for x in found}
    assert "SF002" in codes and "'FOO_BAR' is not a llama.cpp file type" in codes["SF002"]
    assert not any("KeyError" in x["message"] for x in found)


def test_lint_says_the_ud_quant_was_sized_as_its_base_type(tmp_path, capsys):
    f = tmp_path / "compose.yaml"
    f.write_text("services:\n  llm:\n    image: ghcr.io/ggml-org/llama.cpp:server-cuda-b8836\n"
                 "    command: -hf unsloth/Qwen3.6-27B-GGUF:UD-Q8_K_XL -c 8192 -ngl 999\n")
    main(["lint", str(f), "--gpu", GPU, "--format", "json"])
    found = {x["code"]: x["message"] for x in json.loads(capsys.readouterr().out)}
    assert found["SF004"] == ("GGUF 'Qwen3.6-27B-GGUF:UD-Q8_K_XL' taken as Qwen/Qwen3.6-27B (by its name, quant "
                              "UD-Q8_K_XL, an Unsloth Dynamic mix sized as plain Q8_0; no file to read)")
