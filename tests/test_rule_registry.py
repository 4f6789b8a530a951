"""The rule registry (yamllint / hadolint shape): every catalogued code is emitted by exactly one
function, registered with `@rule("CODE")`, so `grep -rn '@rule(.*"CODE"'` finds where a rule is
decided. Read statically from the source (every `finding("CODE", ...)` and every call of a
finding constructor such as TGI's `_err("CODE", ...)` sits in a function registered for that
code), and at run time (importing the engines fills the registry with the same table)."""

from __future__ import annotations

import ast
import importlib
from collections import defaultdict
from pathlib import Path

import pytest

from servefit import data
from servefit.rules import registry
from servefit.rules.catalog import rules

SRC = Path(__file__).resolve().parents[1] / "src" / "servefit"


def _name(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _constructors(trees: dict[Path, ast.Module]) -> set[str]:
    """Helpers that pass their `code` parameter on to finding(): their callers emit the code."""
    out = set()
    for tree in trees.values():
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef):
                params = {a.arg for a in fn.args.args}
                for c in ast.walk(fn):
                    if (isinstance(c, ast.Call) and _name(c) == "finding" and c.args
                            and isinstance(c.args[0], ast.Name) and c.args[0].id in params):
                        out.add(fn.name)
    return out


def scan() -> tuple[dict[str, set[str]], dict[str, set[str]], list[str]]:
    """(code -> functions emitting it, code -> functions registered for it, problems)."""
    trees = {p: ast.parse(p.read_text(encoding="utf-8")) for p in SRC.rglob("*.py")}
    ctors = _constructors(trees) - {"finding"}
    emitted: dict[str, set[str]] = defaultdict(set)
    registered: dict[str, set[str]] = defaultdict(set)
    problems: list[str] = []

    def visit(node: ast.AST, where: Path, fn: ast.FunctionDef | None) -> None:
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{where.relative_to(SRC)}::{ch.name}"
                for d in ch.decorator_list:
                    if isinstance(d, ast.Call) and _name(d) == "rule":
                        for a in d.args:
                            registered[a.value].add(name)  # type: ignore[attr-defined]
                visit(ch, where, ch)  # type: ignore[arg-type]
                continue
            if isinstance(ch, ast.Call) and (_name(ch) == "finding" or _name(ch) in ctors) and ch.args:
                first = ch.args[0]
                here = f"{where.relative_to(SRC)}::{fn.name if fn else '<module>'}"
                if isinstance(first, ast.Constant):
                    emitted[first.value].add(here)
                    own = {a.value for d in (fn.decorator_list if fn else []) if isinstance(d, ast.Call)
                           and _name(d) == "rule" for a in d.args}  # type: ignore[attr-defined]
                    if first.value not in own:
                        problems.append(f"{here} emits {first.value} but is not registered for it")
                elif where.name != "argv.py" and not (fn and fn.name in ctors):
                    problems.append(f"{here}: a finding whose code is not written out")
            visit(ch, where, fn)

    for path, tree in trees.items():
        visit(tree, path, None)
    return emitted, registered, problems


def table_codes() -> set[str]:
    """Codes the generic option parser (engines/argv.py) raises from an engine's data table."""
    out = set()
    for path in sorted((data.DATA_DIR / "engines").glob("*.yaml")):
        codes = (data.load(f"engines/{path.name}") or {}).get("codes") or {}
        out.update(codes.values())
    return out


def test_every_emitted_code_is_registered_where_it_is_emitted() -> None:
    _, _, problems = scan()
    assert problems == []


def test_no_code_is_registered_by_two_functions() -> None:
    _, registered, _ = scan()
    twice = {code: sorted(fns) for code, fns in registered.items() if len(fns) > 1}
    assert twice == {}


def test_registry_and_catalogue_agree() -> None:
    """Every catalogued code has its function, or is one the option parser raises from an
    engine's data table (engines/argv.py: unknown / invalid / deprecated flags)."""
    emitted, registered, _ = scan()
    cat = set(rules())
    assert set(registered) - cat == set(), "registered codes missing from data/rules/*.yaml"
    assert cat - set(registered) - table_codes() == set(), "catalogued codes no function is registered for"
    assert set(emitted) == set(registered)


def test_option_table_codes_are_catalogued() -> None:
    """The codes engines/argv.py raises come from data/engines/*.yaml `codes:` and are rules."""
    assert table_codes() and table_codes() <= set(rules())
    assert {"VLLM001", "VLLM002", "VLLM023", "LCPP001", "TGI001", "SGL002", "OLLM013"} <= table_codes()


ENGINE_MODULES = ["servefit.engines.vllm", "servefit.engines.vllm.checks", "servefit.engines.vllm.plan",
                  "servefit.engines.vllm.cpu_build",
                  "servefit.engines.llamacpp.config", "servefit.engines.llamacpp.planner",
                  "servefit.engines.llamacpp.assemble", "servefit.engines.ollama.config",
                  "servefit.engines.ollama.report", "servefit.engines.ollama_modelfile", "servefit.engines.sglang",
                  "servefit.engines.sglang.plan", "servefit.engines.tgi", "servefit.engines.tgi.plan",
                  "servefit.linter.checks", "servefit.linter.exposure", "servefit.linter.secrets", "servefit.linter.together",
                  "servefit.sources", "servefit.sources.assemble", "servefit.sources.server_plan", "servefit.sources.problems",
                  "servefit.sources.dockerfile", "servefit.sources.launch", "servefit.sources.shell_run",
                  "servefit.suppressions"]


def test_imported_registry_is_the_static_one() -> None:
    for mod in ENGINE_MODULES:
        importlib.import_module(mod)
    _, registered, _ = scan()
    assert set(registry.REGISTRY) == set(registered)
    for code, fns in registered.items():
        (only,) = fns
        fn = registry.REGISTRY[code]
        assert only.endswith(f"::{fn.__name__}"), (code, only, fn)
        assert code in fn.rule_codes  # type: ignore[attr-defined]


def test_registering_a_code_twice_is_an_error() -> None:
    @registry.rule("ZZZ901")
    def first() -> None: ...

    with pytest.raises(ValueError, match="ZZZ901 is registered twice"):
        @registry.rule("ZZZ901")
        def second() -> None: ...
    registry.REGISTRY.pop("ZZZ901")


def test_option_reads_config_then_catalogue_default() -> None:
    assert registry.option("VLLM017", "max") == 0.95
    with registry.options({"VLLM017": {"max": 0.9}}):
        assert registry.option("VLLM017", "max") == 0.9
        assert registry.option("VLLM019", "min") == 2
    assert registry.option("VLLM017", "max") == 0.95
