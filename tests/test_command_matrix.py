"""Every command on every file (issue 14, Done-when 1): lint, lint --list-sites, estimate,
explain, tune --diff and diagnose --config-file on each file under examples/ and the test
fixtures agree on the servers, the GPU, the model and the verdict, and none prints a traceback.

They agree because they share one assembly; this test is what keeps it so."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from servefit.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIX = Path(__file__).parent / "fixtures"
FILES = sorted(p for base in (ROOT / "examples", FIX / "sources", FIX / "tune") for p in base.rglob("*")
               if p.is_file())
LOGS = {"vllm": "vllm_kv_refusal.log", "llamacpp": "llamacpp_kv_oom.log", "ollama": "ollama_runner_oom.log",
        "tgi": "tgi_prefill.log", "sglang": "sglang_mem_fraction.log"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in err, (argv, err)
    assert rc in (0, 1, 2), argv
    return rc, out, err


def _list(out: str) -> list[dict[str, Any]]:
    doc = json.loads(out)
    return doc if isinstance(doc, list) else [doc]


def _key(d: dict[str, Any]) -> tuple[str, int, str]:
    return (str(Path(d["file"]).resolve()), d["line"], d["name"])


def test_the_matrix_covers_many_files() -> None:
    assert len(FILES) >= 40


CASES = [(p, []) for p in FILES] + [(p, ["--gpu", "H100"]) for p in FILES if p.is_relative_to(ROOT / "examples")]


@pytest.mark.parametrize("path, gpu", CASES,
                         ids=[f"{p.relative_to(ROOT).as_posix()}{'-gpu-flag' if g else ''}" for p, g in CASES])
def test_commands_agree(capsys: pytest.CaptureFixture[str], path: Path, gpu: list[str]) -> None:
    f = str(path)
    rc, out, _ = run(capsys, "lint", f, *gpu, "--list-sites", "--format", "json")
    sites = json.loads(out)
    planned = {_key(s): s for s in sites if s["verdict"] is not None}
    rc, out, _ = run(capsys, "lint", f, *gpu, "--format", "json")
    findings = json.loads(out)
    rc_est, out, err = run(capsys, "estimate", f, *gpu, "--format", "json")
    if not sites:
        assert rc_est == 2 and "no serving engine" in err
        return
    if not planned:  # nothing can be planned: estimate says why, one line for each server (the last the error)
        lines = err.splitlines()
        assert rc_est == 2 and lines[-1].startswith("servefit: error:")
        assert all(" not estimated: " in line for line in lines[:-1]), err
    elif rc_est == 2:  # a flag or value the engine refuses: estimate stops, lint has it as an error
        code = err.rsplit("[", 1)[1].split("]")[0]
        assert any(d["code"] == code and d["severity"] == "error" for d in findings), err
    else:
        est = {(str(Path(d["server"]["file"]).resolve()), d["server"]["line"], d["server"]["name"]): d
               for d in _list(out)}
        assert set(est) == set(planned)  # the same servers
        for k, s in planned.items():
            e = est[k]
            assert e["gpu"]["name"] == s["gpu"]["resolved"] and e["gpu"]["count"] == s["gpu"]["count"]
            assert e["model"]["resolved"] == s["model_ref"]["resolved"]
            assert e["outcome"] == s["verdict"]
            if s["verdict"] != "started":  # lint says so as an error on that server's file
                assert any(d["severity"] == "error" and Path(d["location"]["file"]).resolve() == Path(k[0])
                           for d in findings), (k, s["verdict"])
        rc, out, _ = run(capsys, "explain", f, *gpu, "--format", "json")
        exp = {(str(Path(d["server"]["file"]).resolve()), d["server"]["line"], d["server"]["name"]): d
               for d in _list(out)}
        assert {k: (d["gpu"]["name"], d["model"]["resolved"], d["outcome"]) for k, d in exp.items()} == \
            {k: (d["gpu"]["name"], d["model"]["resolved"], d["outcome"]) for k, d in est.items()}
    rc, out, _ = run(capsys, "tune", f, *gpu, "--diff", "--format", "json")
    tuned = {_key({"file": t["file"], "line": t["line"], "name": t["site"]}): t for t in json.loads(out)["sites"]}
    assert set(tuned) == {_key(s) for s in sites}  # the same servers, planned or not
    for k, t in tuned.items():
        if k in planned:
            assert "error" not in t, t.get("error")
            assert t["gpu"]["name"] == planned[k]["gpu"]["resolved"]
            # tune names Ollama / llama.cpp layers left on the CPU `offloaded`, and an SGLang static
            # pool that leaves too little for activations (SGL011) `oom_under_load`; the engine starts
            now = "started" if t["current"]["outcome"] in ("offloaded", "oom_under_load") else t["current"]["outcome"]
            assert now == planned[k]["verdict"]
        else:
            assert "error" in t
    if gpu:
        return  # diagnose takes the GPU from the repo (it has no --gpu)
    for engine in sorted({s["engine"] for s in sites if s["engine"] in LOGS}):
        rc, out, _ = run(capsys, "diagnose", str(FIX / "logs" / LOGS[engine]), "--config-file", f, "--format", "json")
        diag = json.loads(out)
        if diag.get("tune") and "--gpu" in diag["tune"]:
            words = shlex.split(diag["tune"])
            gpu = words[words.index("--gpu") + 1]
            same = [s for s in sites if s["engine"] == engine]
            if all(s["target"]["gpu"] for s in same):  # else the log's own GPU may be named
                assert gpu in {s["target"]["gpu"]["value"] for s in same}, gpu


DIRS = sorted({p.parent for p in FILES})


@pytest.mark.parametrize("folder", DIRS, ids=[str(d.relative_to(ROOT)) for d in DIRS])
def test_diagnose_repo_attaches_a_log_to_a_server_of_its_engine(capsys: pytest.CaptureFixture[str],
                                                                 folder: Path) -> None:
    """`diagnose LOG --repo DIR` on every folder of the matrix: the server it attaches the log to
    is one lint finds in that folder, of the log's engine, and the `servefit tune` it proposes
    names that server's GPU where the repository gives one; never a traceback."""
    rc, out, _ = run(capsys, "lint", str(folder), "--list-sites", "--format", "json")
    sites = json.loads(out)
    for engine in sorted({s["engine"] for s in sites if s["engine"] in LOGS}):
        rc, out, _ = run(capsys, "diagnose", str(FIX / "logs" / LOGS[engine]), "--repo", str(folder),
                         "--format", "json")
        diag = json.loads(out)
        srv = diag.get("server")
        if srv is None:  # no server matched the log: a note says so, no fixes for another server's flags
            assert "setting" not in diag and diag.get("notes"), (engine, diag.get("notes"))
            continue
        mine = [s for s in sites if _key(s) == _key(srv)]
        assert len(mine) == 1 and mine[0]["engine"] == engine == srv["engine"], (engine, srv)
        if diag.get("tune") and "--gpu" in diag["tune"] and mine[0]["target"]["gpu"]:
            words = shlex.split(diag["tune"])
            assert words[words.index("--gpu") + 1] == mine[0]["target"]["gpu"]["value"], (srv, diag["tune"])
