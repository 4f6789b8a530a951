"""`moondream` (Ollama's Moondream 2, 1.8b): the library name resolves to vikhyatk/moondream2, catalogued
from vikhyat/moondream's hf/configuration_moondream.py (Phi-1.5 text model) and hf/vision_encoder.py
(SigLIP encoder and projector); a Modelfile `FROM moondream` was "unknown model" before."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.cli import main
from servefit.engines.ollama.tags import lookup
from servefit.models import resolve_model


@pytest.mark.parametrize("ref, quant", [("moondream", "Q4_0"), ("moondream:latest", "Q4_0"),
                                        ("moondream:1.8b", "Q4_0"), ("moondream:1.8b-v2-fp16", "F16")])
def test_moondream_tags(ref: str, quant: str) -> None:
    t = lookup(ref)
    assert (t.model, t.quant, t.context) == ("vikhyatk/moondream2", quant, 2048)


def test_moondream2_layout() -> None:
    m = resolve_model("vikhyatk/moondream2")
    assert (m.model_type, m.hidden_size, m.num_hidden_layers, m.intermediate_size, m.vocab_size) == \
        ("phi", 2048, 24, 8192, 51200)
    # SigLIP 1152 x 27 with its 588 -> 1152 patch Linear and 729 positions (412,987,248), and the
    # projection 2304 -> 8192 -> 2048 (35,661,824), over phi-1_5's 1,418,270,720
    assert (m.vision_params, m.params) == (448_649_072, 1_866_919_792)


def test_a_modelfile_from_moondream_is_sized(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "Modelfile"
    f.write_text("FROM moondream\n")
    assert main(["estimate", str(f), "--gpu", "RTX4090"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ollama 0.32.15  ·  vikhyatk/moondream2\n")
    assert "  - model tag moondream:latest -> vikhyatk/moondream2 (Q4_0)\n" in out
    assert "KV cache: 196,608 bytes per token; 2,048 tokens\n" in out
