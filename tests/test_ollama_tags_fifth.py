"""Ollama library names of issue 13's fifth round (data/ollama_tags.yaml, last block; their tags are
checked with the others in test_ollama_tags_added.py): the two Nemotron 3 Nano sizes have layouts of
their own."""

from __future__ import annotations

from servefit.engines.ollama.tags import lookup
from servefit.models import resolve_model


def test_nemotron_3_nano_sizes_resolve_to_their_own_layouts():
    small, large = resolve_model(lookup("nemotron-3-nano:4b").model), resolve_model(lookup("nemotron-3-nano").model)
    assert (small.hidden_size, small.num_hidden_layers) == (3136, 42)
    assert (large.hidden_size, large.num_hidden_layers) == (2688, 52)
    assert lookup("nemotron-3-nano:30b-cloud").cloud
