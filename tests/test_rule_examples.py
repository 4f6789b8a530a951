"""Every rule's docs carry a failing and a passing example (data/rules/*.yaml `example` and
`passing`: a file with its name and the target it needs), and both run through the linter as
`servefit lint` would: the failing one reports its rule exactly once, at the documented
line:column; the passing one does not report it."""

from __future__ import annotations

import pytest
from rule_examples import lint_example

from servefit.rules.catalog import rules

EXECUTABLE = sorted(rules())


@pytest.mark.parametrize("code", EXECUTABLE)
def test_failing_example_reports_its_rule_at_the_documented_place(code: str) -> None:
    ex = rules()[code]["example"]
    got = lint_example(ex)
    where = [(line, col) for c, line, col in got if c == code]
    assert where == [(ex["line"], ex["column"])], f"{code}: {ex['text']!r} gave {got}"


@pytest.mark.parametrize("code", EXECUTABLE)
def test_passing_example_does_not_report_its_rule(code: str) -> None:
    entry = rules()[code]
    assert isinstance(entry.get("passing"), dict), f"{code} has a failing example but no passing one"
    got = lint_example(entry["passing"])
    assert code not in {c for c, _, _ in got}, f"{code}: passing example {entry['passing']['text']!r} gave {got}"
    errors = {c for c, _, _ in got if rules()[c]["severity"] == "error"}
    assert not errors, f"{code}: the passing example has other errors {errors}"


def test_passing_examples_change_the_file_not_only_the_target() -> None:
    """A passing example that differs only in the GPU would document nothing about the file...
    unless the rule is about the GPU (then it names another one) or about the installation (a
    plugin that is missing or fails: the same file with the plugin working)."""
    setting = ("text", "also", "encoding", "plugins", "linted")
    for code in EXECUTABLE:
        r = rules()[code]
        ex, ok = r["example"], r["passing"]
        assert any(ex.get(k) != ok.get(k) for k in setting) or ex.get("gpu") != ok.get("gpu") \
            or ex.get("gpus") != ok.get("gpus"), code


def test_every_rule_has_an_executable_example() -> None:
    """No rule is documented by prose only: the ones about a file's encoding, the repository's
    configuration, a missing or failing engine plugin run through the linter like the others."""
    prose = sorted(code for code, r in rules().items() if not isinstance(r.get("example"), dict))
    assert prose == []
