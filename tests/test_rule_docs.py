"""The rule docs: `servefit rule CODE` and docs/rules.md come from the catalogue; the examples in
them run through the linter in tests/test_rule_examples.py."""

from __future__ import annotations

import pytest

from servefit.rules.catalog import rules
from servefit.rules.docs import markdown, render

VLLM_RULES = sorted(code for code in rules() if code.startswith("VLLM"))


@pytest.mark.parametrize("code", VLLM_RULES)
def test_vllm_rules_are_documented(code):
    """What / why / fix, and an example with its passing twin (tests/test_rule_examples.py runs them)."""
    entry = rules()[code]
    assert entry.get("what") and entry.get("why") and entry.get("fix"), code
    assert isinstance(entry.get("example"), dict) and isinstance(entry.get("passing"), dict), code


def test_rule_docs_render_and_markdown_lists_every_rule():
    text = render(rules()["VLLM003"])
    assert text.startswith("max-model-len-exceeds-kv-cache (VLLM003)")
    for head in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix"):
        assert head in text
    md = markdown(rules())
    assert all(f"## {code}" in md for code in rules())


def test_docs_rules_md_is_generated_from_the_catalogue():
    from pathlib import Path

    doc = Path(__file__).resolve().parents[1] / "docs" / "rules.md"
    assert doc.read_text(encoding="utf-8") == markdown(rules()), \
        "docs/rules.md is stale: run `servefit rules --format markdown > docs/rules.md`"
