"""The dataclass code cache (servefit/codecache.py): a class defined with the cache behaves as
without it, the second run compiles nothing, and a broken cache file is ignored."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = r"""
import dataclasses, json, sys
from servefit import codecache
if sys.argv[1] == "on":
    codecache.install()

@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int = 2
    tags: tuple = ()

@dataclasses.dataclass(order=True)
class Box:
    name: str
    items: list = dataclasses.field(default_factory=list)

p, b = Point(1), Box("a")
b.items.append(1)
try:
    p.x = 5
    frozen = "assigned"
except dataclasses.FrozenInstanceError:
    frozen = "frozen"
print(json.dumps({"repr": [repr(p), repr(b), repr(Box("b"))], "eq": [p == Point(1, 2), p == Point(1, 3)],
                  "hash": hash(p) == hash(Point(1)), "order": Box("a") < Box("b"), "frozen": frozen,
                  "doc": Point.__doc__, "fresh_default": Box("c").items,
                  "annotations": {k: repr(v) for k, v in Point.__init__.__annotations__.items()},
                  "compiled": codecache._compiled, "cached": codecache._loaded}))
"""


def _run(mode: str, cache: str) -> dict:
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    env.pop("SERVEFIT_NO_CACHE", None)
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def _same(a: dict, b: dict) -> bool:
    keys = ("repr", "eq", "hash", "order", "frozen", "doc", "fresh_default", "annotations")
    return all(a[k] == b[k] for k in keys)


def test_cached_dataclasses_behave_as_compiled_ones_and_second_run_compiles_nothing(tmp_path):
    plain = _run("off", str(tmp_path / "off"))
    first = _run("on", str(tmp_path / "on"))
    second = _run("on", str(tmp_path / "on"))
    assert plain["repr"] == ["Point(x=1, y=2, tags=())", "Box(name='a', items=[1])", "Box(name='b', items=[])"]
    assert plain["annotations"] == {"x": "<class 'int'>", "y": "<class 'int'>", "tags": "<class 'tuple'>",
                                    "return": "None"}
    assert plain["eq"] == [True, False] and plain["frozen"] == "frozen" and plain["order"] is True
    assert _same(first, plain) and _same(second, plain)
    # Point: __init__, __repr__, __eq__, __setattr__, __delattr__, __hash__; Box: __init__,
    # __repr__, __eq__ and four comparisons
    assert first["compiled"] == 13 and first["cached"] == 0
    assert second["compiled"] == 0 and second["cached"] == 13
    assert os.listdir(tmp_path / "on" / "servefit") == [
        f"dataclass-code-{sys.implementation.cache_tag}-O{sys.flags.optimize}.marshal"]


def test_a_broken_cache_file_is_ignored_and_replaced(tmp_path):
    _run("on", str(tmp_path))
    (path,) = (tmp_path / "servefit").iterdir()
    path.write_bytes(b"\x00not marshal")
    again = _run("on", str(tmp_path))
    assert again["cached"] == 0 and again["compiled"] == 13 and again["frozen"] == "frozen"
    assert _run("on", str(tmp_path))["cached"] == 13


def test_no_cache_leaves_dataclasses_alone(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path), SERVEFIT_NO_CACHE="1")
    out = subprocess.run([sys.executable, "-c", SCRIPT, "on"], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["frozen"] == "frozen" and not (tmp_path / "servefit").exists()
