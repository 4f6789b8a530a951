"""The write-back property (issue 15, done-when 1) over every file in examples/ and the source and
tune fixtures, on several GPUs: `tune --write` fixes what it set out to fix (every server whose
patch was applied now starts, with no memory error left in its plan) -> a second `tune --write`
changes nothing -> every byte outside the edited spans is identical -> the file still parses in
its format; and `tune --diff | git apply --check` succeeds on a copy."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import yaml

from servefit.cli import main

ROOT = Path(__file__).resolve().parents[1]
DIRS = [ROOT / "examples", ROOT / "tests" / "fixtures" / "sources", ROOT / "tests" / "fixtures" / "tune"]
SKIP_SUFFIX = {".md", ".toml", ".env", ".log", ".tpl", ".conf"}
GPUS = ["L4", "A100-40GB", "H100"]


def files() -> list[Path]:
    out = []
    for d in DIRS:
        for p in sorted(d.rglob("*")):
            if p.is_file() and p.suffix not in SKIP_SUFFIX and p.name != ".env" and "broken" not in p.parts \
                    and "templates" not in p.parts:
                out.append(p)
    return out


def cli(*args: str) -> tuple[int, str]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(list(args))
    return rc, buf.getvalue()


def snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file() and ".git" not in p.parts}


def parses(path: Path, text: str) -> None:
    """The file still reads in its format."""
    if path.suffix in (".yaml", ".yml") or path.name.endswith(".yaml"):
        list(yaml.safe_load_all(text))
    elif path.suffix == ".sh":
        subprocess.run(["bash", "-n", str(path)], check=True, capture_output=True)
    elif path.suffix == ".json":
        json.loads(text)


def outside_spans_identical(old: str, new: str, edits: list[dict[str, object]]) -> None:
    """Walk the old text: everything that is not an edited span appears unchanged in order."""
    lines = old.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))

    def off(line: int, col: int) -> int:
        return starts[line - 1] + col - 1

    spans = sorted((off(e["location"]["line"], e["location"]["col"]),  # type: ignore[index]
                    off(e["location"]["end_line"], e["location"]["end_col"]), i, str(e["text"]))  # type: ignore[index]
                   for i, e in enumerate(edits))
    rebuilt, pos = [], 0
    for s, e, _, t in spans:
        assert s >= pos
        rebuilt.append(old[pos:s] + t)
        pos = e
    rebuilt.append(old[pos:])
    assert "".join(rebuilt) == new


WROTE: list[str] = []  # servers a case fixed (the count is asserted below: the property is not vacuous)
CASES = [(f, g) for f in files() for g in GPUS]


@pytest.mark.parametrize("path,gpu", CASES, ids=[f"{f.relative_to(ROOT)}-{g}" for f, g in CASES])
def test_tune_write_is_a_fixed_point_that_lint_accepts(tmp_path: Path, path: Path, gpu: str) -> None:
    work = tmp_path / "repo"
    shutil.copytree(path.parent, work)
    (work / ".git").mkdir(exist_ok=True)
    target = work / path.name
    before = snapshot(work)
    rc, out = cli("tune", str(target), "--gpu", gpu, "--format", "json")
    if rc == 2:  # no server in this file (a Modelfile linked from a compose file, a side file)
        return
    report = json.loads(out)
    rc, out = cli("tune", str(target), "--gpu", gpu, "--format", "json", "--write")
    written = json.loads(out)
    after = snapshot(work)
    changed = {k for k in before if before[k] != after.get(k)}
    assert changed == {str(Path(f["path"]).relative_to(work)) for f in written["files"] if f["written"]}
    # every byte outside the edited spans is identical; the file still parses
    for name in changed:
        edits = [e for s in written["sites"] if s.get("fix", {}).get("applied")
                 for e in s["fix"]["edits"] if Path(e["location"]["file"]).resolve() == (work / name).resolve()]
        outside_spans_identical(before[name].decode(), after[name].decode(), edits)
        parses(work / name, after[name].decode())
    # the servers tune fixed now start with no memory error in their plan
    applied = {(s["file"], s["line"]) for s in written["sites"] if s.get("fix", {}).get("applied")
               and s["best"] and s["best"]["feasible"]}
    if applied:
        rc, out = cli("estimate", str(target), "--gpu", gpu, "--format", "json")
        if rc == 2:  # an option this engine version refuses (VLLM001): estimate will not size it
            return
        plans = json.loads(out)
        plans = plans if isinstance(plans, list) else [plans]
        by_name = {p["server"]["name"]: p for p in plans}
        for s in written["sites"]:
            if (s["file"], s["line"]) in applied:
                plan = by_name[s["site"]]
                assert plan["outcome"] == "started", (s["site"], plan["outcome"])
                assert not [f for f in plan["findings"] if f["severity"] == "error"], plan["findings"]
                WROTE.append(s["site"])
    # a second run changes nothing
    rc, out = cli("tune", str(target), "--gpu", gpu, "--format", "json", "--write")
    again = json.loads(out)
    assert not any(f["written"] for f in again["files"]), [f for f in again["files"] if f["written"]]
    assert snapshot(work) == after
    # the diff of the first run applies with git apply on a fresh copy
    if any(f["changed"] for f in report["files"]):
        fresh = tmp_path / "fresh"
        shutil.copytree(path.parent, fresh)
        subprocess.run(["git", "init", "-q", str(fresh)], check=True)
        rc, out = cli("tune", str(fresh / path.name), "--gpu", gpu, "--diff")
        diff = out[out.index("--- a/"):]
        diff = diff[:diff.rindex("\n") + 1]
        diff = diff.replace(f"a{fresh}/", "a/").replace(f"b{fresh}/", "b/")
        proc = subprocess.run(["git", "apply", "--check", "-"], cwd=fresh, input=diff, text=True,
                              capture_output=True)
        assert proc.returncode == 0, proc.stderr + diff


def test_the_property_ran_on_servers_that_were_fixed() -> None:
    """Runs after the cases (file order): enough of them wrote a fix for the property to mean something."""
    if len(WROTE) == 0:
        pytest.skip("run with the cases above")
    assert len(WROTE) >= 20
