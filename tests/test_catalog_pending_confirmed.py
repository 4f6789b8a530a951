"""Checkpoints held in pending.md for want of a read document, catalogued once one was found (helper models2):
each resolves to its own entry, not to the sibling it used to be assumed as, and differs from it where its
document says so (context length, KV groups, a vision tower)."""

from __future__ import annotations

import pytest

from servefit.memory.kv import full_kv_bytes_per_token
from servefit.models import count_params, resolve_model
from servefit.models.catalog import lookup


@pytest.mark.parametrize(("name", "params", "max_len", "sibling"), [
    ("01-ai/Yi-1.5-9B-Chat-16K", 8_829_407_232, 16384, "01-ai/Yi-1.5-9B-Chat"),
    ("01-ai/Yi-1.5-34B-Chat-16K", 34_388_917_248, 16384, "01-ai/Yi-1.5-34B-Chat"),
    ("01-ai/Yi-9B-200K", 8_829_407_232, 262144, "01-ai/Yi-9B"),
    ("01-ai/Yi-6B-200K", 6_061_035_520, 200000, "01-ai/Yi-6B"),
    ("microsoft/phi-1", 1_418_270_720, 2048, "microsoft/phi-1_5"),
    ("bigscience/bloom-7b1", 7_069_016_064, 2048, None),
    ("THUDM/glm-4-9b-chat-1m", 9_483_857_920, 1_048_576, "THUDM/glm-4-9b-chat"),
    ("google/medgemma-27b-it", 27_432_406_640, 131072, "google/gemma-3-27b-it"),
])
def test_entry_is_its_own_and_counts_exactly(name, params, max_len, sibling):
    m = resolve_model(name)
    assert (m.name, m.params, count_params(m), m.max_position_embeddings) == (name, params, params, max_len)
    assert m.resolved_from != "derivative"
    if sibling:
        base = lookup(sibling)
        assert base is not None and base.name == sibling
        assert (base.num_hidden_layers, base.hidden_size) == (m.num_hidden_layers, m.hidden_size)


def test_what_each_document_changes_against_the_old_assumption():
    # Yi-6B-200K's record is 2048 above the layout: one 64-value rotary inv_freq buffer in each of 32 layers
    assert 6_061_037_568 - resolve_model("01-ai/Yi-6B-200K").params == 32 * 128 // 2
    # glm-4-9b-chat-1m: four KV groups where glm-4-9b-chat has two, twice the KV cache per token
    one_m, chat = lookup("THUDM/glm-4-9b-chat-1m"), lookup("THUDM/glm-4-9b-chat")
    assert one_m is not None and chat is not None
    assert full_kv_bytes_per_token(one_m, 2, 1) == 2 * full_kv_bytes_per_token(chat, 2, 1) == 40 * 2 * 4 * 128 * 2
    assert one_m.params - count_params(chat) == 40 * 2 * (4096 * 256 + 256)  # the extra k/v weights and biases
    # medgemma-27b-it keeps gemma-3-27b-it's SigLIP tower (medgemma-27b-text-it has none)
    med, text = resolve_model("google/medgemma-27b-it"), resolve_model("google/medgemma-27b-text-it")
    assert med.multimodal and not text.multimodal and med.vision_params > 0
    assert 28_842_036_848 - med.params == 262208 * 5376  # the tied embedding stored a second time
