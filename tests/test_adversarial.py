"""A repository of hostile files, built at run time (nothing large or binary is committed):
a 50 MB file, a billion-laughs alias bomb, YAML nested 10,000 deep, a binary file, Latin-1 and
UTF-16 files, a templated Helm file, a symlink loop, a FIFO and an unreadable file. `servefit
lint` on it finishes in bounded time and memory, exits 0 or 1 with no traceback, and reports
exactly one clear finding per hostile file. A file with a UTF-8 BOM and CRLF line ends still
parses, with columns as an editor shows them and offsets into the bytes as written."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from servefit.sources import scan_file

BOUND_S = 20
MB = 1 << 20


def build(root: Path) -> dict[str, tuple[str, str]]:
    """Write the hostile files; returns {relative path: (expected code, a word the message has)}."""
    expect: dict[str, tuple[str, str]] = {}
    line = b"# vllm serve filler line to make this file large enough to be refused...........\n"
    with open(root / "huge.yaml", "wb") as fh:
        block = line * (MB // len(line))
        for _ in range(50):
            fh.write(block)
    expect["huge.yaml"] = ("SF108", "MiB")
    laughs = ["# vllm", 'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    laughs += [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]" for i in range(9)]
    (root / "bomb.yaml").write_text("\n".join(laughs) + "\n")
    expect["bomb.yaml"] = ("SF105", "alias bomb")
    (root / "deep.yaml").write_text("# vllm\nargs: " + "[" * 10_000 + "]" * 10_000 + "\n")
    expect["deep.yaml"] = ("SF105", "nested")
    (root / "deep-map.yaml").write_text("# vllm\nargs: " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\n")
    expect["deep-map.yaml"] = ("SF105", "nested")
    (root / "binary.yaml").write_bytes(b"vllm\x00\x01\x02" + os.urandom(4096))
    expect["binary.yaml"] = ("SF108", "binary")
    (root / "weights.Dockerfile").write_bytes(b"GGUF\x03\x00\x00\x00" + os.urandom(1024))
    expect["weights.Dockerfile"] = ("SF108", "GGUF")
    (root / "latin1.yaml").write_bytes("# Déploiement vllm — équipe\nimage: vllm/vllm-openai\n"
                                       .replace("—", "-").encode("latin-1"))
    expect["latin1.yaml"] = ("SF108", "Latin-1")
    (root / "utf16.yaml").write_bytes("image: vllm/vllm-openai\nargs: [x]\n".encode("utf-16"))
    expect["utf16.yaml"] = ("SF108", "UTF-16")
    (root / "chart" / "templates").mkdir(parents=True)
    (root / "chart" / "templates" / "deployment.yaml").write_text(
        "kind: Deployment\nspec:\n  containers:\n    - image: vllm/vllm-openai\n"
        "      args: [--max-model-len, {{ .Values.maxModelLen | quote }}]\n")
    expect["chart/templates/deployment.yaml"] = ("SF104", "template")
    os.symlink("loop.yaml", root / "loop.yaml")
    expect["loop.yaml"] = ("SF108", "loops")
    os.symlink("missing.yaml", root / "dangling.yaml")
    expect["dangling.yaml"] = ("SF108", "points nowhere")
    (root / "sub").mkdir()
    os.symlink("..", root / "sub" / "up")  # a directory loop: never followed, never reported
    if hasattr(os, "mkfifo"):
        os.mkfifo(root / "pipe.yaml")
        expect["pipe.yaml"] = ("SF108", "FIFO")
    locked = root / "locked.yaml"
    locked.write_text("image: vllm/vllm-openai\n")
    locked.chmod(0)
    if os.geteuid() != 0:  # root reads it anyway
        expect["locked.yaml"] = ("SF108", "cannot be read")
    return expect


BOM_CRLF = "\ufeffvllm serve Qwen/Qwen3-8B --max-model-len 200000\r\n"


def test_hostile_repo_lints_in_bounded_time_with_one_finding_each(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    expect = build(repo)
    (repo / "serve.sh").write_bytes(BOM_CRLF.encode("utf-8"))
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "servefit", "lint", ".", "--format", "json", "--gpu", "L4"],
                         cwd=repo, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    (repo / "locked.yaml").chmod(0o600)
    assert out.returncode in (0, 1), out.stderr
    assert "Traceback" not in out.stderr and not out.stderr.strip(), out.stderr
    assert elapsed < BOUND_S, f"{elapsed:.1f}s"
    assert peak_mb < 1024, f"{peak_mb:.0f} MB"
    by_file: dict[str, list[dict]] = {}
    for f in json.loads(out.stdout):
        by_file.setdefault(f["location"]["file"], []).append(f)
    for rel, (code, word) in expect.items():
        got = by_file.pop(rel, [])
        assert [f["code"] for f in got] == [code], (rel, got)
        assert word in got[0]["message"], (rel, got[0]["message"])
    assert not any(k.startswith("sub/") for k in by_file)
    if os.geteuid() == 0:
        by_file.pop("locked.yaml", None)
    # the BOM + CRLF script parses; its finding points at the value as an editor shows it
    script = by_file.pop("serve.sh")
    assert not {"SF105", "SF108"} & {f["code"] for f in script}
    on_value = [f for f in script if f["code"].startswith("VLLM") and f.get("setting") == "max_model_len"]
    assert on_value and all((f["location"]["line"], f["location"]["column"]) == (1, BOM_CRLF.index("200000"))
                            for f in on_value), script
    assert not by_file, by_file


def test_bom_and_crlf_keep_offsets_and_columns(tmp_path):
    text = ("\ufeffapiVersion: apps/v1\r\nkind: Deployment\r\nmetadata: {name: x}\r\nspec:\r\n  template:\r\n"
            "    spec:\r\n      containers:\r\n      - name: v\r\n        image: vllm/vllm-openai:v0.11.0\r\n"
            "        args: [\"--model\", \"Qwen/Qwen3-8B\", \"--max-model-len\", \"4096\"]\r\n")
    p = tmp_path / "bom.yaml"
    p.write_bytes(text.encode("utf-8"))
    r = scan_file(str(p))
    assert r.text == text and not r.findings  # kept as read: BOM and CRLF
    [site] = r.sites
    for tok in site.argv:
        if tok.span is not None:
            assert text[tok.span.start:tok.span.end] == tok.text
    value = next(t for t in site.argv if t.text == "4096")
    assert (value.span.line, value.span.col) == (10, 64)
    sh = tmp_path / "serve.sh"
    sh.write_bytes(BOM_CRLF.encode("utf-8"))
    [site] = scan_file(str(sh)).sites
    vllm = site.argv[0]
    assert (vllm.span.line, vllm.span.col, vllm.span.start) == (1, 1, 1)  # the BOM is not a column


@pytest.mark.parametrize("data, word", [
    ("x: caf\xe9 vllm\n".encode("latin-1"), "Latin-1"),
    (b"vllm \x93quoted\x94\n", "Windows-1252"),
    ("vllm: 1\n".encode("utf-16-be"), "UTF-16 text without a byte-order mark"),
    ("vllm: 1\n".encode("utf-32"), "UTF-32"),
    (b"\x7fELF\x02\x01\x01\x00vllm", "ELF"),
])
def test_encodings_are_named(tmp_path, data, word):
    p = tmp_path / "x.yaml"
    p.write_bytes(data)
    [f] = scan_file(str(p)).findings
    assert f.code == "SF108" and word in f.message and f.span is not None


def test_non_utf8_without_an_engine_is_skipped_quietly(tmp_path):
    p = tmp_path / "other.yaml"
    p.write_bytes("name: caf\xe9\n".encode("latin-1"))
    assert scan_file(str(p)).findings == []


def test_nothing_in_a_config_is_run_or_imported(tmp_path):
    sentinel = tmp_path / "pwned"
    p = tmp_path / "evil.yaml"
    p.write_text("# vllm\nimage: vllm/vllm-openai\n"
                 f"x: !!python/object/apply:os.system [\"touch {sentinel}\"]\n"
                 "y: !!python/name:os.system\nz: !!python/module:this\n"
                 "args: [--model, Qwen/Qwen3-8B, --trust-remote-code]\n")
    before = set(sys.modules)
    scan_file(str(p))
    out = subprocess.run([sys.executable, "-m", "servefit", "lint", str(p)], capture_output=True, text=True, timeout=60)
    assert out.returncode in (0, 1) and not out.stderr
    assert not sentinel.exists() and "this" not in set(sys.modules) - before
