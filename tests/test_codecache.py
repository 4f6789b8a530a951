"""The start-up compile cache (servefit/codecache.py): a dataclass defined with the cache behaves
as without it, a pattern compiled through it is the one `re` compiles, the second run compiles
nothing, and a broken cache file is ignored."""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

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
        f"compiled-{sys.implementation.cache_tag}-O{sys.flags.optimize}.marshal"]


def test_a_broken_cache_file_is_ignored_and_replaced(tmp_path):
    _run("on", str(tmp_path))
    (path,) = (tmp_path / "servefit").iterdir()
    path.write_bytes(b"\x00not marshal")
    again = _run("on", str(tmp_path))
    assert again["cached"] == 0 and again["compiled"] == 13 and again["frozen"] == "frozen"
    assert _run("on", str(tmp_path))["cached"] == 13
    path.write_bytes(marshal.dumps(({"x": 1}, {("a", 0): (1, 2)})))  # readable, but not what it keeps
    assert _run("on", str(tmp_path))["compiled"] == 13


def test_no_cache_leaves_dataclasses_alone(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path), SERVEFIT_NO_CACHE="1")
    out = subprocess.run([sys.executable, "-c", SCRIPT, "on"], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["frozen"] == "frozen" and not (tmp_path / "servefit").exists()


PATTERNS = r"""
import json, re, sys
from servefit import codecache
if sys.argv[1] == "on":
    codecache.install()
cases = [(r"(?P<key>[a-z_]+)\s*=\s*(?P<value>.*)$", re.M), (r"^\s*(\d{1,4})\s*[x×*]\s*(.+?)\s*$", re.I | re.M),
         (r"(?<![a-z0-9])(\d+)\s*(?:gib|gb|g)(?![a-z0-9])", 0), (rb"\x00+(?P<tail>.)", 0),
         (r"(?x) a  # a comment\n  b+", 0), (r"[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010ffff]", 0),
         (r"(?i)VLLM_[A-Z_]+|(?m)^x", 0), (r"(a)|(b)(?(2)c|d)", re.M | re.S)]
out = []
for p, f in cases:
    try:
        c = re.compile(p, f)
    except re.error as exc:
        out.append(["error", str(exc)])
        continue
    s = "key_a = 1\n8 x H100\n80GB\nab\nvllm_x\nbc" if isinstance(p, str) else b"\x00\x00z"
    out.append([c.flags, c.groups, sorted(c.groupindex.items()), [[*m.span(), m.lastgroup] for m in c.finditer(s)]])
print(json.dumps({"out": out, "compiled": codecache._compiled, "cached": codecache._loaded}))
"""


def _patterns(mode: str, cache: str) -> dict:
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    env.pop("SERVEFIT_NO_CACHE", None)
    out = subprocess.run([sys.executable, "-c", PATTERNS, mode], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_patterns_through_the_cache_are_the_ones_re_compiles(tmp_path):
    plain = _patterns("off", str(tmp_path / "off"))
    first = _patterns("on", str(tmp_path / "on"))
    second = _patterns("on", str(tmp_path / "on"))
    assert first["out"] == plain["out"] and second["out"] == plain["out"]
    assert plain["out"][0] == [40, 2, [["key", 1], ["value", 2]], [[0, 9, "value"]]]
    assert plain["out"][1][3] == [[10, 18, None]] and plain["out"][3] == [0, 1, [["tail", 1]], [[0, 3, "tail"]]]
    assert plain["out"][7][3] == [[4, 5, None], [24, 25, None], [34, 36, None]]
    assert plain["out"][6] == ["error", "global flags not at the start of the expression at position 17"]
    assert first["compiled"] >= 7 and second["compiled"] == 0 and second["cached"] == first["compiled"]


def test_every_pattern_of_a_lint_run_compiles_to_the_same_program(tmp_path):
    """Pattern equality compares the compiled program: each pattern servefit and its libraries
    compile in a lint run, through the cache, equals the stdlib's own compile of it."""
    script = r"""
import io, contextlib, re, sys, json
from servefit import codecache
codecache.install()
seen = []
inner = re._compiler.compile
def spy(p, flags=0):
    seen.append((p, flags))
    return inner(p, flags)
re._compiler.compile = spy
from servefit.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(["lint", sys.argv[1], "--gpu", "L4", "--exit-zero"])
re._compiler.compile = codecache._re_compile
same = [codecache._compile_regex(p, f) == codecache._re_compile(p, f) for p, f in seen if isinstance(p, (str, bytes))]
print(json.dumps([len(same), all(same)]))
"""
    target = ROOT / "examples" / "k8s"
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    env.pop("SERVEFIT_NO_CACHE", None)
    for _ in range(2):  # compiled, then read back
        out = subprocess.run([sys.executable, "-c", script, str(target)], env=env, capture_output=True, text=True,
                             check=True)
        n, same = json.loads(out.stdout)
        assert n > 30 and same


def test_a_damaged_entry_is_compiled_afresh(tmp_path):
    name = f"compiled-{sys.implementation.cache_tag}-O{sys.flags.optimize}.marshal"
    (tmp_path / "servefit").mkdir()
    bad = {("ab+c", 0): (32, [999, 1, 2], 0, {}, ()),  # not a program _sre accepts
           ("x(y)", 0): b"\x00garbage", ("z", 0): ("not", "arguments")}
    (tmp_path / "servefit" / name).write_bytes(marshal.dumps(({"def f(): pass": b"junk"}, bad)))
    script = ("import re, json; from servefit import codecache; codecache.install(); "
              "c = [re.compile(p) for p in ('ab+c', 'x(y)', 'z')]; "
              "print(json.dumps([[x.pattern, x.groups, bool(x.search('xxabbbc xy z'))] for x in c]))")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    env.pop("SERVEFIT_NO_CACHE", None)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [["ab+c", 0, True], ["x(y)", 1, True], ["z", 0, True]]
