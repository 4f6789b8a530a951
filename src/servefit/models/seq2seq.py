"""Encoder-decoder models (T5 / Flan-T5 / UL2, mT5, BART, Pegasus, Marian, NLLB, Whisper): servefit
plans decoder-only and encoder-only models only. An encoder-decoder's weights (encoder, decoder and
cross-attention) and caches (TGI 1.x-2.x serve T5 through server/text_generation_server/models/
seq2seq_lm.py, whose transformers past_key_values grow per batch; vLLM serves Whisper with a
cross-attention cache) are not modelled, so such a model gets one clear line, never a size guessed
from a decoder-only layout. Standard library only: this runs after a catalog miss, not per name."""

from __future__ import annotations

import re
from typing import Any

# config.json model_type values of encoder-decoder models (transformers' *ForConditionalGeneration)
MODEL_TYPES = frozenset({
    "t5", "mt5", "umt5", "longt5", "switch_transformers", "t5gemma", "t5gemma2", "bart", "mbart", "plbart",
    "pegasus", "pegasus_x", "bigbird_pegasus", "marian", "m2m_100", "nllb_moe", "fsmt", "led", "prophetnet",
    "blenderbot", "blenderbot-small", "whisper", "speech_to_text", "seamless_m4t", "seamless_m4t_v2",
    "encoder-decoder", "florence2",
})
# name words of those families, each a word of its own (bartowski is not BART)
_NAME = re.compile(r"(?:^|[/_.-])(flan-t5|flan-ul2|ul2|t5gemma|t5|mt5|umt5|byt5|long-?t5|t0pp|codet5p?|bart|mbart|"
                   r"pegasus|opus-mt|nllb|m2m100|madlad400|whisper)(?=$|[/_.-]|\d)", re.I)
_FAMILY = {"flan-ul2": "UL2", "ul2": "UL2", "bart": "BART", "mbart": "mBART", "pegasus": "Pegasus",
           "opus-mt": "Marian", "nllb": "NLLB", "m2m100": "M2M100", "whisper": "Whisper", "t5gemma": "T5Gemma"}


def _line(name: str, family: str) -> str:
    return (f"{name} is an encoder-decoder model ({family}): servefit sizes decoder-only and encoder-only models, "
            "so this server's memory is not checked")


def name_family(ref: str) -> str | None:
    """The encoder-decoder family a model name names (`google/flan-t5-xxl`: T5), or None."""
    m = _NAME.search(ref)
    if m is None:
        return None
    word = m.group(1).lower()
    return _FAMILY.get(word, "T5")


def name_line(ref: str) -> str | None:
    """The one line for a name of an encoder-decoder family, or None."""
    family = name_family(ref)
    return _line(ref, family) if family else None


def config_line(cfg: dict[str, Any], name: str) -> str | None:
    """The one line for a config.json of an encoder-decoder model, or None."""
    model_type = str(cfg.get("model_type") or "")
    if model_type in MODEL_TYPES or cfg.get("is_encoder_decoder") is True:
        return _line(name, model_type or "is_encoder_decoder")
    return None
