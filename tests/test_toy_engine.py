"""An engine defined only in the test package (tests/toy_engine.py), installed the way a
third-party package installs one: a distribution on sys.path whose entry_points.txt registers
it under `servefit.engines`. It is found in files, linted, estimated and tuned."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from servefit import engines
from servefit.cli import main

HERE = Path(__file__).parent


@pytest.fixture()
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = tmp_path / "site-packages"
    dist = site / "servefit_toy-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: servefit-toy\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[servefit.engines]\ntoyllm = toy_engine:ENGINE\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(HERE))
    engines.reset()
    repo = tmp_path / "repo"
    repo.mkdir()
    yield repo
    engines.reset()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


SCRIPT = "#!/bin/sh\ntoyserve meta-llama/Llama-3.1-8B-Instruct --ctx 32768 --slots 8\n"


def test_toy_engine_is_found_linted_estimated_and_tuned(toy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = toy / "serve.sh"
    f.write_text(SCRIPT)
    assert "toyllm" in engines.available()
    rc, out, _ = run(capsys, "lint", str(f), "--gpu", "L4", "--list-sites", "--format", "json")
    [site] = json.loads(out)
    assert site["engine"] == "toyllm" and site["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert site["settings"] == {"ctx": 32768, "slots": 8} and site["verdict"] == "oom_at_load"
    rc, out, _ = run(capsys, "lint", str(f), "--gpu", "L4", "--format", "json")
    [toy001] = [d for d in json.loads(out) if d["code"] == "TOY001"]
    assert rc == 1 and (toy001["location"]["line"], toy001["location"]["column"]) == (2, 49)
    rc, out, err = run(capsys, "estimate", str(f), "--gpu", "L4", "--format", "json")
    [est] = json.loads(out)
    assert est["engine"] == "toyllm" and est["outcome"] == "oom_at_load"
    assert est["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2
    rc, out, err = run(capsys, "tune", str(f), "--gpu", "L4", "--diff")
    assert rc == 0, out + err
    assert "-toyserve meta-llama/Llama-3.1-8B-Instruct --ctx 32768 --slots 8" in out
    assert "+toyserve meta-llama/Llama-3.1-8B-Instruct --ctx " in out


LOG = """toyserve starting (v1.0)
toyserve config ctx=32768, slots=8
loading meta-llama/Llama-3.1-8B-Instruct
error: cannot allocate kv cache of 32.00 GiB
"""


def test_toy_engine_logs_are_diagnosed_with_its_own_fixes(toy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (toy / "serve.sh").write_text(SCRIPT)
    (toy / "server.log").write_text(LOG)
    rc, out, err = run(capsys, "diagnose", str(toy / "server.log"), "--config-file", str(toy / "serve.sh"),
                       "--format", "json")
    assert rc == 0, err
    d = json.loads(out)
    assert (d["engine"], d["root_cause"], d["stage"], d["signature"]) == ("toyllm", "kv_cache_overflow", "kv_alloc",
                                                                          "toyllm.kv_oom")
    assert [e["line"] for e in d["evidence"]] == [2, 4] and d["figures"]["kv_cache_needed"] == 32 * 2**30
    assert d["fix"][0] == f"{toy / 'serve.sh'}:2: Lower --ctx (now 32768) to 16384"
    assert d["setting"]["col"] == 49 and d["settings_in_log"] == {"ctx": 32768, "slots": 8}
    rc, out, _ = run(capsys, "diagnose", str(toy / "server.log"))
    assert "ToyLLM" in out and "Stage: allocating the KV cache (--ctx x --slots)" in out


def test_toy_engine_is_swept_in_its_own_terms(toy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (toy / "serve.sh").write_text(SCRIPT)
    rc, out, err = run(capsys, "explain", str(toy / "serve.sh"), "--gpu", "L4", "--format", "json")
    [obj] = json.loads(out)
    users = obj["max_users"]
    assert set(users) == {"as configured", "one slot"}
    by_ctx = dict(users["as configured"])
    # the toy's plan: 90% of the L4 for 16 GB of weights and --ctx x --slots x 128 KiB of KV cache
    assert obj["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2
    assert (by_ctx[2048], by_ctx[32768]) == (16, 1)  # slots the sweep cells asked for, planned by the toy
    assert users["one slot"] == users["as configured"]  # each cell sets the slots itself


def test_toy_engine_from_its_image(toy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (toy / "compose.yaml").write_text("services:\n  toy:\n    image: toyllm/server:1.0\n"
                                      "    entrypoint: [toyserve]\n    command: [Qwen/Qwen2.5-7B-Instruct, --ctx, '8192']\n")
    rc, out, _ = run(capsys, "lint", str(toy), "--gpu", "L4", "--list-sites", "--format", "json")
    [site] = json.loads(out)
    assert site["engine"] == "toyllm" and site["verdict"] == "started"


def test_without_the_plugin_nothing_is_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    engines.reset()
    (tmp_path / "serve.sh").write_text(SCRIPT)
    rc, out, _ = run(capsys, "lint", str(tmp_path / "serve.sh"), "--list-sites", "--format", "json")
    assert json.loads(out) == [] and "toyllm" not in engines.available()
