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
import stat
import struct
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


# ------------------------------------------------------------------ issue 18: bounds everywhere

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import hostile  # noqa: E402  (benchmarks/hostile.py: the case builders)

HEAVY = {"diagnose-gz-bomb-4GiB", "gguf-4M-empty-tokens", "safetensors-2M-shape"}  # run below, cheaper


@pytest.mark.parametrize("name", [n for n, _, _ in hostile.CASES if n not in HEAVY])
def test_hostile_case_is_bounded_and_reported(tmp_path, name):
    """Every attack of the issue (the benchmark's cases): no hang, no traceback, the expected
    finding or line, in bounded time and memory (CI machines are slower: 20 s, 300 MB)."""
    build, check = next((b, c) for n, b, c in hostile.CASES if n == name)
    res = hostile._isolated(name, tmp_path / "case", 60)
    assert not res["timed_out"], name
    assert res["wall_s"] < BOUND_S and res["rss_mb"] < 300, (res["wall_s"], res["rss_mb"])
    assert check(res["rc"], res["out"], res["err"]), (res["rc"], res["out"][-2000:], res["err"][-2000:])


def test_expansion_budget_names_the_file_and_the_other_files_still_lint(tmp_path):
    from servefit.budget import EXPANSION_PER_VALUE

    (tmp_path / "bomb.sh").write_text("#!/bin/sh\nA=x\n" + 'A="$A$A"\n' * 40 + "vllm serve $A\n")
    (tmp_path / "ok.sh").write_text("#!/bin/sh\nLEN=4096\nvllm serve Qwen/Qwen3-8B --max-model-len $LEN\n")
    t0 = time.perf_counter()
    r = scan_file(str(tmp_path / "bomb.sh"))
    assert time.perf_counter() - t0 < 2
    [f] = r.findings
    assert f.code == "SF108" and f"{EXPANSION_PER_VALUE >> 10} KiB" in f.message and f.span.file.endswith("bomb.sh")
    assert r.sites == []
    [site] = scan_file(str(tmp_path / "ok.sh")).sites
    assert site.argv[-1].text == "4096"
    out = subprocess.run([sys.executable, "-m", "servefit", "lint", "--gpu", "H100", "--format", "json", "."],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode in (0, 1) and not out.stderr
    files = {f["location"]["file"] for f in json.loads(out.stdout)}
    assert {"bomb.sh", "ok.sh"} <= files  # the run went on


@pytest.mark.parametrize("body, word", [
    ('A=x\n' + 'A="$A$A$A$A"\n' * 12, "KiB"),  # one value past 64 KiB
    ('A=' + 'x' * 60000 + '\n' + 'B="$A"\n' * 40, "MiB"),  # many small expansions past the file bound
])
def test_expansion_bounds_per_value_and_per_file(tmp_path, body, word):
    p = tmp_path / "run.sh"
    p.write_text("#!/bin/sh\n" + body + "vllm serve m\n")
    [f] = scan_file(str(p)).findings
    assert f.code == "SF108" and word in f.message and "bound" in f.message


def test_llama_swap_macro_doubling_is_bounded(tmp_path):
    names = [f"m{i}" for i in range(30)]
    macros = [f'  {names[0]}: "x"'] + [f'  {names[i]}: "${{{names[i - 1]}}}${{{names[i - 1]}}}"' for i in range(1, 30)]
    p = tmp_path / "llama-swap.yaml"
    p.write_text("macros:\n" + "\n".join(macros) + "\nmodels:\n  q:\n    cmd: llama-server -m x.gguf --alias ${m29}\n")
    [f] = scan_file(str(p)).findings
    assert f.code == "SF108" and "bound" in f.message


LLAMA_CFG = dict(hostile.LLAMA)


@pytest.mark.parametrize("patch, field", [
    ({"num_hidden_layers": 100_000_000}, "num_hidden_layers"),
    ({"num_hidden_layers": float("inf")}, "num_hidden_layers"),
    ({"num_hidden_layers": float("nan")}, "num_hidden_layers"),
    ({"num_hidden_layers": 2 ** 63}, "num_hidden_layers"),
    ({"num_attention_heads": "32"}, "num_attention_heads"),
    ({"num_attention_heads": 0}, "num_attention_heads"),
    ({"vocab_size": [1, 2]}, "vocab_size"),
    ({"num_key_value_heads": True}, "num_key_value_heads"),
    ({"num_experts": 10 ** 9}, "num_experts"),
    ({"torch_dtype": ["bfloat16"]}, "torch_dtype"),
    ({"attn_layer_period": -0.5, "mamba_d_state": 16}, "attn_layer_period"),
    ({"vision_config": {"patch_size": 0, "hidden_size": 1024}}, "vision_config.patch_size"),
    ({"text_config": {"hidden_size": -1}}, "text_config.hidden_size"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": float("inf")}}, "rope_scaling.factor"),
    ({"quantization_config": {"quant_method": 4}}, "quantization_config.quant_method"),
    ({"layer_types": "sliding"}, "layer_types"),
    ({"x": json.loads("[" * 80 + "]" * 80)}, "nested"),
])
def test_config_json_fields_are_checked_by_type_and_range(patch, field):
    from servefit.models.config_json import from_config

    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        from_config(dict(LLAMA_CFG, **patch), "m")
    assert time.perf_counter() - t0 < 1


def test_real_model_extremes_stay_inside_the_bounds():
    """Kimi K2 (384 experts, 61 layers), Gemma 3 (262k vocab), Llama 4 Scout (10M context),
    Llama 3.1 405B (126 layers, hidden 16384) from the catalog all pass the checks."""
    from servefit.models.config_json import from_config

    big = dict(LLAMA_CFG, num_hidden_layers=126, hidden_size=16384, num_attention_heads=128, intermediate_size=53248,
               vocab_size=262208, max_position_embeddings=10485760, num_experts=384, num_experts_per_tok=8,
               moe_intermediate_size=2048, n_shared_experts=1, kv_lora_rank=512, qk_rope_head_dim=64,
               qk_nope_head_dim=128)
    spec = from_config(big, "big")
    assert spec.num_hidden_layers == 126 and spec.num_experts == 384 and spec.vocab_size == 262208


def _gguf_file(tmp_path, kvs, tensors=0, tail=b""):
    p = tmp_path / "m.gguf"
    p.write_bytes(hostile.gguf(kvs, tensors) + tail)
    return str(p)


@pytest.mark.parametrize("kv, word", [
    (hostile.u32("llama.block_count", 10_000_000), "llama.block_count"),
    (hostile.f32("llama.block_count", float("inf")), "llama.block_count"),
    (hostile.gstr("llama.block_count", "32"), "llama.block_count"),
    (hostile.u64("llama.block_count", 2 ** 63), "llama.block_count"),
    (hostile.f32("general.alignment", float("nan")), "general.alignment"),
    (hostile.u32("general.alignment", 24), "power of two"),
    (hostile.gguf_kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 4, 1 << 40)), "over the bound"),
    (hostile.gguf_kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, (1 << 22) + 1)), "strings"),
    (hostile.gguf_kv("general.name", 8, struct.pack("<Q", 1 << 40)), "bound on one string"),
])
def test_gguf_header_fields_are_bounded_and_named(tmp_path, kv, word):
    from servefit.core import UsageError
    from servefit.models.gguf import read_header

    kvs = [k for k in hostile.llama_kvs() if b"block_count" not in k or b"block_count" not in kv] + [kv]
    with pytest.raises(UsageError, match=word):
        read_header(_gguf_file(tmp_path, kvs))


def test_gguf_with_4m_empty_tokens_is_read_in_bounded_memory(tmp_path):
    from servefit.models.gguf import ArrayLen, read_header

    n = 4_000_000
    arr = hostile.gguf_kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, n) + b"\0" * (8 * n))
    path = _gguf_file(tmp_path, hostile.llama_kvs() + [arr, hostile.u32("general.alignment", 32)])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    info = read_header(path)
    assert time.perf_counter() - t0 < 5
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 100  # MB over the baseline
    assert info.kv["tokenizer.ggml.tokens"] == ArrayLen(n, 8) and info.n_vocab == n
    assert info.get("block_count") == 2 and info.kv["general.alignment"] == 32 and not info.truncated


def test_safetensors_huge_shape_is_linear_and_named(tmp_path):
    from servefit.models.checkpoint_files import params_from_safetensors
    from servefit.models.config_json import from_config

    head = json.dumps({"w": {"dtype": "BF16", "shape": [2] * 2_000_000, "data_offsets": [0, 0]}}).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(head)) + head)
    spec = from_config(LLAMA_CFG, "m")
    t0 = time.perf_counter()
    assert params_from_safetensors(str(tmp_path), spec) is None
    assert time.perf_counter() - t0 < 3
    assert any("model.safetensors" in a and "'w'" in a and "dimensions" in a for a in spec.assumptions)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifos_devices_and_sockets_are_refused_wherever_reached(tmp_path):
    import socket

    from servefit import safe_io

    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(safe_io.NotRegularFile, match="FIFO"):
        safe_io.open_regular(str(tmp_path / "fifo"))
    with pytest.raises(safe_io.NotRegularFile, match="device"):
        safe_io.open_regular("/dev/null")
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(tmp_path / "sock"))
    with pytest.raises(safe_io.NotRegularFile, match="socket"):
        safe_io.open_regular(str(tmp_path / "sock"))
    s.close()
    with pytest.raises(safe_io.TooLarge):
        (tmp_path / "big").write_bytes(b"x" * 2000)
        safe_io.read_bytes(str(tmp_path / "big"), 1000)


def test_gz_decompression_is_bounded_by_ratio(tmp_path, monkeypatch, capsys):
    import gzip as gz

    from servefit.diagnose import diagnose_path, reader

    monkeypatch.setattr(reader, "GZ_FREE_BYTES", 1 << 20)
    line = b"INFO 11-25 12:00:00 [engine.py:1] Avg prompt throughput: 0.0 tokens/s\n"
    with gz.open(tmp_path / "bomb.log.gz", "wb", compresslevel=9) as fh:
        for _ in range(400):
            fh.write(line * 2000)  # ~56 MB of text, ~100 KB compressed (ratio ~500)
    diag = diagnose_path(str(tmp_path / "bomb.log.gz"), progress=False)
    err = capsys.readouterr().err
    assert "100x" in err and "zcat" in err
    assert diag.lines_read < 400 * 2000 // 4  # stopped well before the end
    with gz.open(tmp_path / "real.log.gz", "wb") as fh:  # an ordinary log (ratio < 100) is read whole
        fh.write(os.urandom(30000).hex().encode() + b"\n" + line * 10)
    assert diagnose_path(str(tmp_path / "real.log.gz"), progress=False).lines_read == 11


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_diagnose_streams_pipes_fifos_and_process_substitution(tmp_path):
    log = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    cmd = [sys.executable, "-m", "servefit", "diagnose", "--format", "json"]
    piped = subprocess.run(cmd + ["-"], input=log, capture_output=True, timeout=60)
    assert piped.returncode == 0 and json.loads(piped.stdout)["root_cause"] == "model_too_large"
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen(cmd + [str(fifo)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with open(fifo, "wb") as w:
        w.write(log)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out)["root_cause"] == "model_too_large"
    # process substitution: bash hands over /dev/fd/N, a pipe
    r, w = os.pipe()
    proc = subprocess.Popen(cmd + [f"/dev/fd/{r}"], pass_fds=(r,), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(r)
    os.write(w, gz_bytes(log))
    os.close(w)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out)["root_cause"] == "model_too_large"  # gzip through a pipe too


def gz_bytes(data: bytes) -> bytes:
    import gzip as gz

    return gz.compress(data)


CONTROL = "m\x1b]0;title\x07\x1b[2J\x1b]8;;http://x\x1b\\\u202e\n::set-output name=x::1\rZ"


@pytest.mark.parametrize("fmt", ["text", "github", "json", "sarif"])
def test_control_characters_never_reach_the_terminal(tmp_path, fmt):
    (tmp_path / "run.sh").write_text(f"#!/bin/sh\nvllm serve '{CONTROL}' --max-model-len 4096\n")
    bad = tmp_path / "x\x1b[2J\n::error::y.sh"
    bad.write_text(f"#!/bin/sh\nvllm serve '{CONTROL}'\n")
    out = subprocess.run([sys.executable, "-m", "servefit", "lint", "--gpu", "H100", "--format", fmt, "."],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode in (0, 1), out.stderr
    for stream in (out.stdout, out.stderr):
        assert not set(stream) & {"\x1b", "\x07", "\r", "\u202e"}
        assert not any(ln.startswith("::set-output") or ln.startswith("::error::y") for ln in stream.splitlines())
    if fmt == "github":
        assert all(ln.startswith(("::error ", "::warning ", "::notice ")) for ln in out.stdout.splitlines())
    if fmt == "text":
        assert "\\u001b]0;title" in out.stdout
    if fmt in ("json", "sarif"):
        json.loads(out.stdout)
    listed = subprocess.run([sys.executable, "-m", "servefit", "lint", "--list-sites", "."], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert not set(listed.stdout) & {"\x1b", "\x07", "\r"}
    assert not any(ln.startswith("::") for ln in listed.stdout.splitlines())


def test_error_lines_escape_control_characters(tmp_path):
    out = subprocess.run([sys.executable, "-m", "servefit", "lint", str(tmp_path / "no\x1b[2J\nsuch")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "\x1b" not in out.stderr


# ------------------------------------------------------------------ issue 18: writes

TUNE_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tune"


def _repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    (r / ".git").mkdir()
    return r


def _tune(cwd: Path, *args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "servefit", "tune", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(extra or {})})


def test_environment_file_outside_the_repo_is_never_read_or_written(tmp_path):
    r = _repo(tmp_path)
    outside = tmp_path / "etc"
    outside.mkdir()
    (outside / "vllm.env").write_text("LEN=200000\n")
    (tmp_path / "vllm.env").write_text("LEN=300000\n")  # same name, the repo's parent: never taken
    (r / "vllm.service").write_text(f"[Service]\nEnvironmentFile={outside / 'vllm.env'}\nEnvironmentFile=/nope/vllm.env\n"
                                    "ExecStart=/usr/bin/vllm serve Qwen/Qwen3-8B --max-model-len $LEN\n")
    before = ((outside / "vllm.env").read_bytes(), (tmp_path / "vllm.env").read_bytes())
    [site] = scan_file(str(r / "vllm.service")).sites
    assert site.argv[-1].text == "$LEN"  # neither file was read
    _tune(r, "vllm.service", "--gpu", "L4", "--min-context", "32k", "--write")
    assert ((outside / "vllm.env").read_bytes(), (tmp_path / "vllm.env").read_bytes()) == before
    (r / "vllm.env").write_text("LEN=200000\n")  # the repository's own copy, by name beside the unit: read
    (r / "vllm.service").write_text("[Service]\nEnvironmentFile=/etc/default/vllm.env\n"
                                    "ExecStart=/usr/bin/vllm serve Qwen/Qwen3-8B --max-model-len $LEN\n")
    [site] = scan_file(str(r / "vllm.service")).sites
    assert site.argv[-1].text == "200000" and site.argv[-1].span.file == str(r / "vllm.env")


def test_write_refuses_outside_paths_unless_the_user_named_them(tmp_path):
    from servefit.tune.write import WriteRefused, atomic_write

    r = _repo(tmp_path)
    out = tmp_path / "out.yaml"
    out.write_text("x: 1\n")
    with pytest.raises(WriteRefused, match="outside"):
        atomic_write(str(out), "x: 2\n", "x: 1\n", root=str(r))
    assert out.read_text() == "x: 1\n"
    atomic_write(str(out), "x: 2\n", "x: 1\n", root=str(r), named=(str(out),))
    assert out.read_text() == "x: 2\n"


def test_write_refuses_read_only_files_and_non_regular_files(tmp_path):
    from servefit.tune.write import WriteRefused, atomic_write

    r = _repo(tmp_path)
    f = r / "ro.yaml"
    f.write_text("x: 1\n")
    f.chmod(0o444)
    with pytest.raises(WriteRefused, match="read-only"):
        atomic_write(str(f), "x: 2\n", "x: 1\n", root=str(r))
    assert f.read_text() == "x: 1\n" and stat.S_IMODE(f.stat().st_mode) == 0o444
    os.mkfifo(r / "fifo.yaml")
    with pytest.raises(WriteRefused, match="regular"):
        atomic_write(str(r / "fifo.yaml"), "x\n", "", root=str(r))


def test_write_keeps_hard_links(tmp_path):
    from servefit.tune.write import atomic_write

    r = _repo(tmp_path)
    f = r / "a.yaml"
    f.write_text("x: 1\n")
    os.link(f, r / "b.yaml")
    ino = f.stat().st_ino
    atomic_write(str(f), "x: 22\n", "x: 1\n", root=str(r))
    assert (r / "b.yaml").read_text() == "x: 22\n" and f.stat().st_ino == ino and f.stat().st_nlink == 2
    assert not [p for p in r.iterdir() if p.name.endswith(".servefit-tmp")]


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_signals_during_a_write_leave_the_old_file_and_no_temporary(tmp_path, sig):
    import signal as sg

    r = _repo(tmp_path)
    shutil_copy(TUNE_FIXTURES / "k8s-vllm-l4.yaml", r / "k8s.yaml")
    before = (r / "k8s.yaml").read_bytes()
    proc = subprocess.Popen([sys.executable, "-m", "servefit", "tune", "k8s.yaml", "--min-context", "32k", "--write"],
                            cwd=r, env={**os.environ, "SERVEFIT_TUNE_WRITE_PAUSE": "60"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and not [p for p in r.iterdir() if p.name.endswith(".servefit-tmp")]:
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(getattr(sg, sig))
    proc.wait(timeout=30)
    assert proc.returncode != 0
    assert (r / "k8s.yaml").read_bytes() == before
    assert [p.name for p in r.iterdir() if p.name.endswith(".servefit-tmp")] == []


def shutil_copy(a: Path, b: Path) -> None:
    b.write_bytes(a.read_bytes())


def test_stale_temporary_of_a_killed_writer_is_removed(tmp_path):
    from servefit.tune.write import atomic_write

    r = _repo(tmp_path)
    f = r / "x.yaml"
    f.write_text("x: 1\n")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = r / f".x.yaml.{dead.pid}.abcd.servefit-tmp"
    stale.write_text("x: 99\n")
    live = r / f".x.yaml.{os.getppid()}.efgh.servefit-tmp"  # a writer that still runs: left alone
    live.write_text("x: 98\n")
    atomic_write(str(f), "x: 2\n", "x: 1\n", root=str(r))
    assert not stale.exists() and live.exists() and f.read_text() == "x: 2\n"
    assert scan_file(str(live)).sites == []  # never linted as a config


def test_several_files_all_or_none_and_partial_writes_listed(tmp_path, monkeypatch):
    from servefit.tune import write as w

    r = _repo(tmp_path)
    a, b = r / "a.yaml", r / "b.yaml"
    a.write_text("a: 1\n")
    b.write_text("b: 1\n")
    b.chmod(0o444)
    written, refused = w.write_all([(str(a), "a: 2\n", "a: 1\n"), (str(b), "b: 2\n", "b: 1\n")], str(r))
    assert written == [] and set(refused) == {str(a), str(b)} and "read-only" in refused[str(b)]
    assert a.read_text() == "a: 1\n"
    b.chmod(0o644)
    real = w.atomic_write
    calls = []

    def flaky(path, *args, **kw):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(path, *args, **kw)

    monkeypatch.setattr(w, "atomic_write", flaky)
    written, refused = w.write_all([(str(a), "a: 2\n", "a: 1\n"), (str(b), "b: 2\n", "b: 1\n")], str(r))
    assert written == [str(a)] and list(refused) == [str(b)] and "No space" in refused[str(b)]
    assert a.read_text() == "a: 2\n" and b.read_text() == "b: 1\n"


def test_tune_two_files_one_read_only_writes_neither(tmp_path):
    r = _repo(tmp_path)
    for n in ("serve.sh", "k8s-crlf.yaml"):
        shutil_copy(TUNE_FIXTURES / n, r / n)
    (r / "k8s-crlf.yaml").chmod(0o444)
    before = {n: (r / n).read_bytes() for n in ("serve.sh", "k8s-crlf.yaml")}
    out = _tune(r, "serve.sh", "k8s-crlf.yaml", "--gpu", "L4", "--min-context", "32k", "--write")
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    assert not any(ln.startswith("wrote ") for ln in lines), out.stdout
    assert sum(ln.startswith("not written: ") for ln in lines) == 2, out.stdout
    assert any("serve.sh" in ln and "another file" in ln for ln in lines)
    assert {n: (r / n).read_bytes() for n in before} == before


def test_formatters_escape_controls_themselves():
    """Without the stdout net (cli.main), the text and github renderers alone keep every
    control character of a file name or message out of the output."""
    from servefit.core import Span
    from servefit.report import lint_text
    from servefit.report.formats import to_github
    from servefit.rules.catalog import finding

    f = finding("SF002", "unknown model 'a\x1b[2J\n::set-output name=x::1\rb'",
                span=Span("d\x1b]0;t\x07\n::x.sh", 1, 1, 1, 2, 0, 1))
    for out in (lint_text.render([f]), to_github([f])):
        assert not set(out) & {"\x1b", "\x07", "\r"}, out
        assert not any(ln.startswith(("::set-output", "::x.sh")) for ln in out.splitlines()), out
    assert "\\u001b[2J\\u000a::set-output" in lint_text.render([f])
    assert to_github([f]).count("\n") == 1


def test_servers_per_file_and_variable_copies_are_bounded(tmp_path):
    from servefit.budget import ENV_ENTRIES_PER_FILE, SERVERS_PER_FILE

    p = tmp_path / "run.sh"
    p.write_text("#!/bin/sh\n" + "vllm serve Qwen/Qwen3-8B\n" * (SERVERS_PER_FILE + 50))
    r = scan_file(str(p))
    assert len(r.sites) == SERVERS_PER_FILE
    [f] = [f for f in r.findings if f.code == "SF108"]
    assert f"{SERVERS_PER_FILE:,}" in f.message
    p.write_text("#!/bin/sh\n" + "".join(f"V{i}=x\n" for i in range(3000)) + "vllm serve m\n" * 200)
    r = scan_file(str(p))  # 3,000 variables copied for each of 200 commands: past the bound at once
    [f] = r.findings
    assert f.code == "SF108" and f"{ENV_ENTRIES_PER_FILE:,}" in f.message and r.sites == []


def test_env_file_shared_by_many_services_is_parsed_once(tmp_path, monkeypatch):
    from servefit.sources import envfile

    (tmp_path / "app.env").write_text("LEN=4096\n")
    svcs = "".join(f"  s{i}:\n    image: vllm/vllm-openai\n    env_file: app.env\n"
                   f"    command: Qwen/Qwen3-8B --max-model-len ${{LEN}}\n" for i in range(30))
    (tmp_path / "compose.yaml").write_text("services:\n" + svcs)
    calls = []
    real = envfile.parse_env_text
    monkeypatch.setattr(envfile, "parse_env_text", lambda t, p: calls.append(p) or real(t, p))
    envfile._load.cache_clear()
    r = scan_file(str(tmp_path / "compose.yaml"))
    assert len(r.sites) == 30 and len(calls) == 1
    assert all(s.env["LEN"].text == "4096" for s in r.sites)


@pytest.mark.parametrize("command", ["estimate", "explain", "tune"])
def test_no_input_starts_an_output_line_in_estimate_explain_tune(tmp_path, command):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(LLAMA_CFG))
    evil = "evil\x1b]0;t\x07\n::set-output name=x::1"
    out = subprocess.run([sys.executable, "-m", "servefit", command, "--gpu", "H100", "--model-config", "m", "--",
                          "vllm", "serve", evil, "--max-model-len", "4096"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode in (0, 1), out.stderr
    assert "evil" in out.stdout
    for stream in (out.stdout, out.stderr):
        assert not any(ln.startswith("::") for ln in stream.splitlines()), stream
        assert "\x1b" not in stream and "\x07" not in stream


def test_no_input_starts_an_output_line_in_diagnose(tmp_path):
    name = tmp_path / "x\n::set-output y"
    name.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB \x1b[2J\n")
    out = subprocess.run([sys.executable, "-m", "servefit", "diagnose", str(name)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "model_too_large" in out.stdout
    assert not any(ln.startswith("::") for ln in out.stdout.splitlines()) and "\x1b" not in out.stdout
