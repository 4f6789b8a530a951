"""The docs are executable: each vLLM rule's documented example, run through the engine, fires
that rule, so the documentation cannot drift from the behaviour. Examples are one command with
an optional trailing comment naming the GPU (`# on an L4`), the version (`# vLLM 0.11`) or the
GPU count (`# pod requests nvidia.com/gpu: 2`)."""

from __future__ import annotations

import re
import shlex

import pytest

from servefit.core import UsageError
from servefit.pipeline import Target, evaluate, site_from_argv
from servefit.rules.catalog import rules
from servefit.rules.docs import markdown, render

VLLM_RULES = sorted(code for code in rules() if code.startswith("VLLM"))


def run_example(example: str):
    cmd, _, comment = example.partition("#")
    gpu = "H100"
    m = re.search(r"on an? ([0-9]+ GB )?([A-Za-z0-9 -]+?)(:|$| GPU)", comment)
    if m:
        gpu = m.group(2).strip()
        if m.group(1):
            gpu = f"{gpu} {m.group(1).strip()}"
    count = int(c.group(1)) if (c := re.search(r"nvidia.com/gpu: (\d+)", comment)) else None
    version = v.group(1) if (v := re.search(r"vLLM (\d+\.\d+(?:\.\d+)?)", comment)) else None
    target = Target(gpu=gpu.replace("one 80 ", "").replace("one ", ""), gpus=count, engine_version=version)
    return evaluate(site_from_argv(shlex.split(cmd)), target)


@pytest.mark.parametrize("code", VLLM_RULES)
def test_documented_example_fires_its_rule(code):
    entry = rules()[code]
    assert entry.get("example") and entry.get("what") and entry.get("why") and entry.get("fix"), code
    try:
        ev = run_example(entry["example"])
    except UsageError as exc:  # a documented input error is one
        assert entry.get("input_error"), f"{code}: {exc}"
        return
    codes = [f.code for f in ev.config.findings + ev.plan.findings]
    assert code in codes, f"{code}: {entry['example']!r} gave {codes}"


def test_rule_docs_render_and_markdown_lists_every_rule():
    text = render(rules()["VLLM003"])
    assert text.startswith("max-model-len-exceeds-kv-cache (VLLM003)")
    for head in ("## What it does", "## Why is this bad?", "## Example", "## Fix"):
        assert head in text
    md = markdown(rules())
    assert all(f"## {code}" in md for code in rules())


def test_docs_rules_md_is_generated_from_the_catalogue():
    from pathlib import Path

    doc = Path(__file__).resolve().parents[1] / "docs" / "rules.md"
    assert doc.read_text(encoding="utf-8") == markdown(rules()), \
        "docs/rules.md is stale: run `servefit rules --format markdown > docs/rules.md`"
