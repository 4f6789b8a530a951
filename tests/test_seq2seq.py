"""Encoder-decoder models (models/seq2seq.py): one clear line that their memory is not checked,
by name after a catalog miss and from a config.json, never a decoder-only size or a nearest-name list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.core import UsageError
from servefit.models import resolve_model
from servefit.models.seq2seq import name_family
from servefit.sources.assemble import assemble
from servefit.sources.target import Flags

T5_XXL = {"architectures": ["T5ForConditionalGeneration"], "model_type": "t5", "d_model": 4096, "d_ff": 10240,
          "d_kv": 64, "num_heads": 64, "num_layers": 24, "num_decoder_layers": 24, "vocab_size": 32128,
          "is_encoder_decoder": True, "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}


@pytest.mark.parametrize(("ref", "family"), [
    ("google/flan-t5-xxl", "T5"), ("google/flan-ul2", "UL2"), ("google/t5-v1_1-xl", "T5"),
    ("google/mt5-large", "T5"), ("facebook/bart-large-cnn", "BART"), ("openai/whisper-large-v3", "Whisper"),
    ("Helsinki-NLP/opus-mt-en-de", "Marian"), ("/models/flan-t5-base", "T5"),
])
def test_encoder_decoder_names(ref, family):
    assert name_family(ref) == family


@pytest.mark.parametrize("ref", ["bartowski/Qwen2.5-7B-Instruct-GGUF", "google/gemma-2-9b", "acme/st5x-7b",
                                 "mistralai/Mistral-7B-v0.1", "BAAI/bge-m3"])
def test_other_names_are_not_encoder_decoders(ref):
    assert name_family(ref) is None


def test_flan_t5_by_name_is_one_clear_line():
    with pytest.raises(UsageError) as exc:
        resolve_model("google/flan-t5-xxl", hf_home="/nonexistent-hf-home")
    assert str(exc.value) == ("google/flan-t5-xxl is an encoder-decoder model (T5): servefit sizes decoder-only and "
                              "encoder-only models, so this server's memory is not checked")


def test_t5_config_is_not_sized_as_a_decoder(tmp_path: Path):
    (tmp_path / "config.json").write_text(json.dumps(T5_XXL))
    with pytest.raises(UsageError) as exc:
        resolve_model("", config_path=str(tmp_path))
    assert "is an encoder-decoder model (t5)" in str(exc.value) and "\n" not in str(exc.value)


def test_tgi_flan_t5_server_gets_the_line_as_sf002(tmp_path: Path):
    f = tmp_path / "start.sh"
    f.write_text("text-generation-launcher --model-id google/flan-ul2 --max-total-tokens 2048\n")
    (srv,) = assemble([str(f)], Flags(gpu="A100")).servers
    assert srv.evaluation is None
    (sf,) = [x for x in srv.findings if x.code == "SF002"]
    assert sf.message.startswith("google/flan-ul2 is an encoder-decoder model (UL2)")


def test_t5_gguf_gets_the_line(tmp_path: Path):
    f = tmp_path / "run.sh"
    f.write_text("llama-server -m /models/flan-t5-large-Q4_K_M.gguf -c 2048\n")
    (srv,) = assemble([str(f)], Flags(gpu="L4")).servers
    (sf,) = [x for x in srv.findings if x.code == "SF002"]
    assert sf.message == ("/models/flan-t5-large-Q4_K_M.gguf: flan-t5-large is an encoder-decoder model (T5): servefit "
                          "sizes decoder-only and encoder-only models, so this server's memory is not checked")
