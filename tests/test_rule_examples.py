"""Every rule's docs carry a failing and a passing example (data/rules/*.yaml `example` and
`passing`: a file with its name and the target it needs), and both run through the linter as
`servefit lint` would: the failing one reports its rule exactly once, at the documented
line:column; the passing one does not report it."""

from __future__ import annotations

import pytest
from rule_examples import lint_example

from servefit.rules.catalog import rules

EXECUTABLE = sorted(code for code, r in rules().items() if isinstance(r.get("example"), dict))

# Rules whose example is still prose, and why. The set is exact, so it only shrinks: a rule given an
# executable example must leave it, and no new rule may join it.
TODO = "not written yet: the example needs a case found by hand"
PROSE = {
    "SF108": "a file over the size or nesting limits (tens of MB): too large for the docs",
    "SF109": "an engine whose servefit plugin is not installed: not a property of a file",
    "SF112": "a plugin that raises: a bug, not a property of a file",
    "SF111": "a fallback for a failed start-up that no engine rule reports: every bundled engine reports its own",
    "LCPP004": TODO, "LCPP015": TODO, "LCPP018": TODO, "OLLM006": TODO, "OLLM007": TODO, "OLLM010": TODO,
    "OLLM011": TODO, "SF101": TODO, "TGI009": TODO,
    "SF130": "needs the repository's own servefit.toml (online = true) beside the file; the harness sets the "
             "configuration itself",
}


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
    unless the rule is about the GPU; then it must name another one."""
    for code in EXECUTABLE:
        r = rules()[code]
        ex, ok = r["example"], r["passing"]
        assert ex["text"] != ok["text"] or ex.get("gpu") != ok.get("gpu") or ex.get("gpus") != ok.get("gpus"), code


def test_every_rule_has_an_executable_example_or_is_listed_as_prose() -> None:
    prose = {code for code, r in rules().items() if not isinstance(r.get("example"), dict)}
    assert prose == set(PROSE), (f"new executable examples: drop {sorted(set(PROSE) - prose)} from PROSE; "
                                 f"rules without one: {sorted(prose - set(PROSE))}")
    assert len(EXECUTABLE) + len(PROSE) == len(rules())
