"""What the package promises about itself: one version, a licence, light core dependencies,
tune saying how to get optuna when it is missing, and no start-up cost from a dataclass without
a docstring."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import servefit

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_version_has_one_source():
    project = PYPROJECT["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "servefit.__version__"}
    assert servefit.__version__.count(".") == 2


def test_license_file_matches_the_metadata():
    assert PYPROJECT["project"]["license"] == {"text": "Apache-2.0"}
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "License :: OSI Approved :: Apache Software License" in PYPROJECT["project"]["classifiers"]


def test_core_install_is_what_lint_needs():
    deps = PYPROJECT["project"]["dependencies"]
    names = {d.split(">")[0].split("=")[0].split("[")[0].strip().lower() for d in deps}
    assert names == {"pyyaml"}
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert any(d.startswith("optuna") for d in extras["tune"])
    assert any(d.startswith("huggingface_hub") for d in extras["hub"])
    assert any(d.startswith("gguf") for d in extras["gguf"])


def test_sdist_manifest_carries_what_the_tests_need():
    manifest = (ROOT / "MANIFEST.in").read_text()
    for needed in ("recursive-include tests/fixtures *", "recursive-include examples *", "include LICENSE"):
        assert needed in manifest
    # the helpers the tests import live under tests/ and match the *.py pattern
    assert (ROOT / "tests" / "conftest.py").is_file() and (ROOT / "tests" / "fuzzkit.py").is_file()


def test_tune_without_optuna_says_how_to_get_it(tmp_path: Path):
    # a stand-in package named optuna that cannot be found: python -c runs with it hidden
    code = ("import importlib.util, sys\n"
            "real = importlib.util.find_spec\n"
            "importlib.util.find_spec = lambda n, *a: None if n == 'optuna' else real(n, *a)\n"
            "from servefit.cli import main\n"
            "sys.exit(main(['tune', '--gpu', 'L4', '--', 'vllm', 'serve', 'meta-llama/Llama-3.1-8B-Instruct']))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith("servefit tune needs optuna, which is not installed: "
                                        "pip install 'servefit[tune]'")
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("module", ["servefit.cli"])
def test_importing_the_cli_pulls_no_optional_dependency(module: str):
    code = (f"import sys, {module}\n"
            "print(' '.join(sorted(m for m in ('optuna', 'numpy', 'jsonschema', 'gguf', 'pydantic', "
            "'huggingface_hub', 'sqlalchemy') if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == ""


def _is_dataclass_decorator(dec: ast.expr) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    return (isinstance(target, ast.Name) and target.id == "dataclass") or \
        (isinstance(target, ast.Attribute) and target.attr == "dataclass")


def test_every_dataclass_has_a_docstring():
    # @dataclass writes a docstring from inspect.signature(cls) for a class without one, ~0.1 ms
    # each at import: a one-file lint would pay it for every such class on its path
    missing = []
    for path in sorted((ROOT / "src" / "servefit").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and any(_is_dataclass_decorator(d) for d in node.decorator_list) \
                    and ast.get_docstring(node) is None:
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not missing, "dataclasses without a docstring (say what each is for): " + ", ".join(missing)
