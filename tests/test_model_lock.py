"""The model lock against a local Hub stand-in (tests/hubstub.py) that the real huggingface_hub
client talks to through HF_ENDPOINT: `servefit models lock` -> lint / estimate offline with
sockets disabled -> the same numbers as `--online`; gated and missing repositories; GGUF headers
read with range requests; `[tool.servefit.models]`; `servefit models`."""

from __future__ import annotations

import json
import math
import os
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("huggingface_hub")

from hubstub import HubStub, Repo  # noqa: E402

from servefit.cli import main  # noqa: E402

# ----------------------------------------------------------------------------- checkpoints

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
          "intermediate_size": 128, "vocab_size": 5000, "max_position_embeddings": 4096,
          "tie_word_embeddings": False, "torch_dtype": "bfloat16", "rms_norm_eps": 1e-5}


def llama_tensors(extra: bool = True) -> dict[str, tuple[str, tuple[int, ...]]]:
    t: dict[str, tuple[str, tuple[int, ...]]] = {"model.embed_tokens.weight": ("BF16", (5000, 64))}
    for i in range(2):
        p = f"model.layers.{i}."
        t.update({p + "input_layernorm.weight": ("BF16", (64,)), p + "self_attn.q_proj.weight": ("BF16", (64, 64)),
                  p + "self_attn.k_proj.weight": ("BF16", (32, 64)), p + "self_attn.v_proj.weight": ("BF16", (32, 64)),
                  p + "self_attn.o_proj.weight": ("BF16", (64, 64)),
                  p + "post_attention_layernorm.weight": ("BF16", (64,)),
                  p + "mlp.gate_proj.weight": ("BF16", (128, 64)), p + "mlp.up_proj.weight": ("BF16", (128, 64)),
                  p + "mlp.down_proj.weight": ("BF16", (64, 128))})
    t["model.norm.weight"] = ("BF16", (64,))
    t["lm_head.weight"] = ("BF16", (5000, 64))
    if extra:
        t["model.layers.0.mlp.gate_proj.bias"] = ("F32", (128,))  # counted: the engine loads it
        t["mtp.layers.0.proj.weight"] = ("BF16", (64, 64))  # skipped: multi-token prediction
    return t


def safetensors(tensors: dict[str, tuple[str, tuple[int, ...]]]) -> bytes:
    width = {"BF16": 2, "F16": 2, "F32": 4}
    header: dict = {"__metadata__": {"format": "pt"}}
    off = 0
    for name, (dt, shape) in tensors.items():
        n = math.prod(shape) * width[dt]
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + bytes(off)


def count(tensors, skip=("mtp.",)) -> int:
    return sum(math.prod(s) for n, (_, s) in tensors.items() if not n.startswith(skip))


def sharded_repo() -> Repo:
    t = llama_tensors()
    names = list(t)
    first, second = {n: t[n] for n in names[:10]}, {n: t[n] for n in names[10:]}
    s1, s2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    index = {"metadata": {"total_size": 0}, "weight_map": {**{n: s1 for n in first}, **{n: s2 for n in second}}}
    dtypes: dict[str, int] = {}
    for dt, shape in t.values():
        dtypes[dt] = dtypes.get(dt, 0) + math.prod(shape)
    return Repo(files={"config.json": json.dumps(CONFIG).encode(), "generation_config.json": b"{}",
                       "model.safetensors.index.json": json.dumps(index).encode(),
                       s1: safetensors(first), s2: safetensors(second)},
                lfs={s1, s2}, safetensors={"parameters": dtypes, "total": sum(dtypes.values())})


def tiny_gguf(path: Path, ftype_q8: bool = True) -> bytes:
    gguf = pytest.importorskip("gguf")
    import numpy as np
    from gguf import quants

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("Tiny Llama")
    w.add_block_count(2)
    w.add_context_length(4096)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(7)  # MOSTLY_Q8_0
    w.add_tokenizer_model("llama")
    w.add_token_list([f"t{i}" for i in range(5000)])
    rng = np.random.default_rng(0)

    def q8(name: str, rows: int, cols: int) -> None:
        data = rng.standard_normal((rows, cols)).astype(np.float32)
        w.add_tensor(name, quants.quantize(data, gguf.GGMLQuantizationType.Q8_0),
                     raw_dtype=gguf.GGMLQuantizationType.Q8_0)

    q8("token_embd.weight", 5000, 64)
    for i in range(2):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(64, dtype=np.float32))
        q8(f"blk.{i}.attn_q.weight", 64, 64)
        q8(f"blk.{i}.attn_k.weight", 32, 64)
        q8(f"blk.{i}.attn_v.weight", 32, 64)
        q8(f"blk.{i}.attn_output.weight", 64, 64)
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(64, dtype=np.float32))
        q8(f"blk.{i}.ffn_gate.weight", 128, 64)
        q8(f"blk.{i}.ffn_up.weight", 128, 64)
        q8(f"blk.{i}.ffn_down.weight", 64, 128)
    w.add_tensor("output_norm.weight", np.ones(64, dtype=np.float32))
    # an F16 output head in a Q8_0 file, as llama-quantize's mixes keep some tensors wider: a
    # locked header must size from its tensor table, not from the quant in the name
    w.add_tensor("output.weight", rng.standard_normal((5000, 64)).astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


GGUF_NAME = "tiny-llama-Q8_0.gguf"

# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def gguf_bytes(tmp_path_factory) -> bytes:
    return tiny_gguf(tmp_path_factory.mktemp("gguf") / GGUF_NAME)


@pytest.fixture
def hub(tmp_path, monkeypatch, gguf_bytes):
    stub = HubStub()
    (tmp_path / GGUF_NAME).write_bytes(gguf_bytes)
    stub.add("acme/tiny-llama", sharded_repo())
    stub.add("acme/tiny-llama-GGUF", Repo(files={GGUF_NAME: gguf_bytes, "tiny-llama-F16.gguf": b"GGUF",
                                                 "mmproj-Q8_0.gguf": b"GGUF", "README.md": b"# tiny"},
                                          lfs={GGUF_NAME, "tiny-llama-F16.gguf", "mmproj-Q8_0.gguf"}))
    gated = sharded_repo()
    gated.gated, gated.tokens = True, {"hf_good"}
    gated.sha = "b" * 40
    stub.add("acme/gated-llama", gated)
    monkeypatch.setenv("HF_ENDPOINT", stub.endpoint)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-online"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr("servefit.models.hub.GGUF_FIRST_CHUNK", 4096)  # the header takes several reads
    stub.gguf_size = len(gguf_bytes)
    yield stub
    stub.close()


class NetworkUsed(AssertionError):
    pass


def sockets_off(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise NetworkUsed(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


SERVERS = {
    "vllm.sh": "# servefit: gpu=L4\nvllm serve acme/tiny-llama --max-model-len 4096 --gpu-memory-utilization 0.5\n",
    "llama.sh": "# servefit: gpu=L4\nllama-server -hf acme/tiny-llama-GGUF:Q8_0 -c 4096 -ngl 99\n",
    "hffile.sh": "# servefit: gpu=L4\nllama-server --hf-repo acme/tiny-llama-GGUF --hf-file tiny-llama-Q8_0.gguf "
                 "-c 2048\n",
    "Modelfile": "# servefit: gpu=L4\nFROM hf.co/acme/tiny-llama-GGUF:Q8_0\nPARAMETER num_ctx 4096\n",
}


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "deploy").mkdir()
    for name, text in SERVERS.items():
        (root / "deploy" / name).write_text(text)
    return root


def run(capsys, *args) -> tuple[int, str, str]:
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def estimate(capsys, path) -> dict:
    rc, out, err = run(capsys, "estimate", "--gpu", "L4", "--format", "json", path)
    assert rc == 0, err
    [plan] = json.loads(out)  # a file gives a list of its servers
    return plan


NUMBERS = ("memory", "kv_bytes_per_token", "kv_cache_tokens", "max_model_len", "max_concurrency", "outcome",
           "parallel")

# ----------------------------------------------------------------------------- the round trip


def test_lock_then_offline_gives_the_numbers_online_gives(hub, repo, capsys, monkeypatch, tmp_path):
    online = {}
    for name in SERVERS:
        rc, out, err = run(capsys, "estimate", "--gpu", "L4", "--online", "--format", "json", repo / "deploy" / name)
        assert rc == 0, err
        [doc] = json.loads(out)
        assert doc["model"]["resolved_from"] == ("hf-cache" if name == "Modelfile" else "hub"), name  # -hf cached it
        online[name] = doc
    rc, out, err = run(capsys, "models", "lock", repo)
    assert rc == 0, err
    lock = repo / "servefit.lock"
    rel = os.path.relpath(lock)
    assert out.strip() == f"wrote {lock if rel.startswith('..') else rel} (3 models)"
    assert f"locked  acme/tiny-llama  (revision {hub.repos['acme/tiny-llama'].sha[:12]}, 0.7M parameters)" in err
    first = lock.read_bytes()
    assert first.decode() == json.dumps(json.loads(first), sort_keys=True, indent=2) + "\n"
    rc, out, _ = run(capsys, "models", "lock", repo)
    assert rc == 0 and "unchanged:" in out and lock.read_bytes() == first  # stable bytes

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-empty"))  # only the lock can size these models
    sockets_off(monkeypatch)
    for name in SERVERS:
        doc = estimate(capsys, repo / "deploy" / name)
        assert doc["model"]["resolved_from"] == "lock", (name, doc["model"])
        assert doc["model"]["params"] == online[name]["model"]["params"]
        assert not [a for a in doc["assumptions"] if "by its name" in a or "llama-quantize makes" in a], name
        for key in NUMBERS:
            assert doc[key] == online[name][key], (name, key)
    rc, out, err = run(capsys, "lint", "--gpu", "L4", "--format", "json", repo)
    findings = json.loads(out)["findings"] if isinstance(json.loads(out), dict) else json.loads(out)
    assert not [f for f in findings if f["code"] in ("SF002", "SF112")], findings
    assert "network access attempted" not in err


def test_lock_records_exact_safetensors_counts_and_the_gguf_header(hub, repo, capsys):
    rc, _, err = run(capsys, "models", "lock", repo)
    assert rc == 0, err
    doc = json.loads((repo / "servefit.lock").read_text())
    assert doc["version"] == 1 and doc["unresolved"] == {}
    assert sorted(doc["models"]) == ["acme/tiny-llama", "acme/tiny-llama-GGUF/tiny-llama-Q8_0.gguf",
                                     "acme/tiny-llama-GGUF:Q8_0"]
    st = doc["models"]["acme/tiny-llama"]
    tensors = llama_tensors()
    assert st["revision"] == hub.repos["acme/tiny-llama"].sha
    assert st["params"] == count(tensors)  # the MTP tensor is not loaded, the extra bias is
    assert st["parameters"] == {"dtypes": {"BF16": count(tensors, skip=("model.layers.0.mlp.gate_proj.bias",)),
                                           "F32": 128},
                                "source": "safetensors headers", "total": count(tensors, skip=())}
    assert st["config"] == CONFIG and st["quantization_config"] is None
    g = doc["models"]["acme/tiny-llama-GGUF:Q8_0"]
    assert g["files"] == [GGUF_NAME] and g["kind"] == "gguf"
    assert g["gguf"]["kv"]["llama.block_count"] == 2 and g["gguf"]["kv"]["general.file_type"] == 7
    assert g["gguf"]["kv"]["tokenizer.ggml.tokens"] == {"array_len": 5000, "item_type": 8}
    assert "output.weight F16 64x5000" in g["gguf"]["tensors"] and len(g["gguf"]["tensors"]) == 21
    assert doc["models"]["acme/tiny-llama-GGUF/tiny-llama-Q8_0.gguf"]["gguf"] == g["gguf"]
    # headers only: range requests, far less than the file
    ranged = [h for h in hub.hits if h.path.startswith("/cdn/") and h.method == "GET"]
    assert ranged and all(h.range and h.range.startswith("bytes=") for h in ranged)
    assert 0 < hub.bytes_sent(GGUF_NAME) + sum(h.sent for h in ranged) < hub.gguf_size
    # the header of the split-free file was read in growing chunks (4 KiB first)
    assert any(h.range == "bytes=0-4095" for h in ranged)


def test_locked_gguf_sizes_from_its_tensors(hub, repo, capsys, monkeypatch, tmp_path):
    from servefit.models.gguf import read_gguf

    assert run(capsys, "models", "lock", repo)[0] == 0
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-empty"))
    sockets_off(monkeypatch)
    doc = estimate(capsys, repo / "deploy" / "llama.sh")
    assert doc["model"]["params"] == sum(t.n_elements for t in read_gguf(str(tmp_path / GGUF_NAME)).tensors)
    local = repo / "deploy" / "local.sh"
    local.write_text(f"# servefit: gpu=L4\nllama-server -m {tmp_path / GGUF_NAME} -c 4096 -ngl 99\n")
    same = estimate(capsys, local)
    assert same["model"]["resolved_from"] == "gguf"
    for key in NUMBERS:
        assert doc[key] == same[key], key  # the locked header sizes like the file itself


def test_online_caches_what_it_fetched(hub, repo, capsys, monkeypatch):
    rc, out, err = run(capsys, "estimate", "--gpu", "L4", "--online", "--format", "json", repo / "deploy" / "vllm.sh")
    assert rc == 0, err
    [online] = json.loads(out)
    sockets_off(monkeypatch)  # same HF cache, no lock, no network
    doc = estimate(capsys, repo / "deploy" / "vllm.sh")
    assert doc["model"]["resolved_from"] == "hf-cache"
    assert doc["model"]["params"] == online["model"]["params"] == count(llama_tensors())
    assert doc["memory"] == online["memory"]


def test_gated_repository_needs_a_token_with_access(hub, repo, capsys, monkeypatch):
    (repo / "deploy" / "gated.sh").write_text("vllm serve acme/gated-llama\n")
    rc, out, err = run(capsys, "models", "lock", repo)
    assert rc == 1
    assert "failed  acme/gated-llama: gated repository: accept its terms on the Hub and set HF_TOKEN" in err
    doc = json.loads((repo / "servefit.lock").read_text())
    assert "acme/gated-llama" not in doc["models"] and doc["unresolved"]["acme/gated-llama"].startswith("gated")
    assert "3 models, 1 not resolved" in out
    gated = [h for h in hub.hits if h.path.startswith("/acme/gated-llama/resolve/")]
    assert gated and gated[0].auth is None
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    rc, _, err = run(capsys, "models", "lock", repo)
    assert rc == 1 and "gated repository: HF_TOKEN has no access to it" in err
    monkeypatch.setenv("HF_TOKEN", "hf_good")
    hub.hits.clear()
    rc, _, err = run(capsys, "models", "lock", repo)
    assert rc == 0, err
    doc = json.loads((repo / "servefit.lock").read_text())
    assert doc["unresolved"] == {} and doc["models"]["acme/gated-llama"]["revision"] == "b" * 40
    assert all(h.auth == "Bearer hf_good" for h in hub.hits if not h.path.startswith("/cdn/"))
    assert all(h.auth is None for h in hub.hits if h.path.startswith("/cdn/"))  # never sent off the Hub


def test_unresolvable_refs_are_listed_with_the_reason(hub, repo, capsys, monkeypatch):
    (repo / "deploy" / "bad.sh").write_text(
        "vllm serve acme/nope\nllama-server -hf acme/tiny-llama-GGUF:IQ2_XXS\nvllm serve /models/private-ft\n"
        "vllm serve acme/tiny-llama-GGUF\n")
    rc, out, err = run(capsys, "models", "lock", repo)
    assert rc == 1
    assert "failed  acme/nope: no such repository on the Hub (or it is private: set HF_TOKEN)" in err
    assert "failed  acme/tiny-llama-GGUF:IQ2_XXS: no GGUF file for IQ2_XXS in the repository (it has F16, Q8_0)" \
        in err
    assert "failed  acme/tiny-llama-GGUF: no config.json in the repository (a GGUF repository" in err
    assert "failed  /models/private-ft: not a Hub repository id; map it to a Hub id or a config.json in " \
           "[tool.servefit.models]" in err
    doc = json.loads((repo / "servefit.lock").read_text())
    assert sorted(doc["unresolved"]) == ["/models/private-ft", "acme/nope", "acme/tiny-llama-GGUF",
                                         "acme/tiny-llama-GGUF:IQ2_XXS"]
    # lint says why, offline
    sockets_off(monkeypatch)
    rc, out, _ = run(capsys, "lint", "--gpu", "L4", "--format", "json", repo / "deploy" / "bad.sh")
    doc = json.loads(out)
    sf002 = {f["message"].split("'")[1]: f["message"] for f in (doc["findings"] if isinstance(doc, dict) else doc)
             if f["code"] == "SF002" and f["message"].startswith("unknown model")}
    assert "`servefit models lock` could not read it: no such repository on the Hub" in sf002["acme/nope"]


def test_a_failed_refresh_keeps_the_locked_entry(hub, repo, capsys):
    assert run(capsys, "models", "lock", repo)[0] == 0
    before = json.loads((repo / "servefit.lock").read_text())["models"]["acme/tiny-llama"]
    del hub.repos["acme/tiny-llama"]
    rc, _, err = run(capsys, "models", "lock", repo)
    assert rc == 1 and "kept the entry locked before" in err
    assert json.loads((repo / "servefit.lock").read_text())["models"]["acme/tiny-llama"] == before


def test_locking_a_subdirectory_keeps_the_rest_of_the_lock(hub, repo, capsys):
    assert run(capsys, "models", "lock", repo)[0] == 0
    (repo / "other").mkdir()
    (repo / "other" / "a.sh").write_text("vllm serve acme/tiny-llama\n")
    rc, out, _ = run(capsys, "models", "lock", repo / "other")
    assert rc == 0 and "unchanged:" in out
    assert len(json.loads((repo / "servefit.lock").read_text())["models"]) == 3


def test_models_lock_usage_errors(capsys, tmp_path):
    assert run(capsys, "models", "lock", tmp_path / "missing")[0] == 2


# ----------------------------------------------------------------------------- mapping + listing


def test_config_mapping_and_the_models_listing(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-empty"))
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "cfg").mkdir()
    (root / "cfg" / "config.json").write_text(json.dumps(CONFIG))
    (root / "servefit.toml").write_text('[models]\n"/models/qwen3" = "Qwen/Qwen3-8B"\n'
                                        '"my-private-ft" = "cfg/config.json"\n')
    (root / "a.sh").write_text("# servefit: gpu=L4\nvllm serve /models/qwen3 --max-model-len 8192\n"
                               "vllm serve my-private-ft --max-model-len 4096\n"
                               "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192\n"
                               "vllm serve /models/unknown\n")
    sockets_off(monkeypatch)
    rc, out, _ = run(capsys, "models", "--format", "json", root)
    rows = json.loads(out)
    assert rc == 1  # /models/unknown resolves to nothing
    got = {r["ref"]: (r["model"], r["source"]) for r in rows}
    assert got["/models/qwen3"] == ("Qwen/Qwen3-8B", "catalog via config mapping")
    assert got["my-private-ft"] == ("my-private-ft", "config mapping")
    assert got["meta-llama/Llama-3.1-8B-Instruct"] == ("meta-llama/Llama-3.1-8B-Instruct", "catalog")
    assert got["/models/unknown"] == (None, None)
    mapped = next(r for r in rows if r["ref"] == "my-private-ft")
    assert mapped["params"] == count(llama_tensors(extra=False))
    rc, out, _ = run(capsys, "models", root)
    assert "a.sh:2  vllm  /models/qwen3  -> Qwen/Qwen3-8B (8.19B) from catalog via config mapping" in out
    assert "a.sh:5  vllm  /models/unknown  -> not resolved: unknown model '/models/unknown'" in out
    # lint and estimate resolve through the mapping too
    rc, out, _ = run(capsys, "lint", "--format", "json", root)
    doc = json.loads(out)
    findings = doc["findings"] if isinstance(doc, dict) else doc
    sf002 = [f for f in findings if f["code"] == "SF002"]
    assert len(sf002) == 1 and "/models/unknown" in sf002[0]["message"]
    rc, out, err = run(capsys, "estimate", "--format", "json", root / "a.sh")
    assert rc == 1 and "/models/unknown" in err  # one server could not be sized: named, exit 1


def test_mapping_schema_rejects_non_strings(tmp_path, capsys):
    (tmp_path / ".git").mkdir()
    (tmp_path / "servefit.toml").write_text("[models]\n\"/models/x\" = 3\n")
    (tmp_path / "a.sh").write_text("vllm serve /models/x\n")
    rc, _, err = run(capsys, "lint", tmp_path)
    assert rc == 2 and "tool.servefit.models./models/x: expected string, got int" in err


def test_lint_with_a_lock_never_imports_huggingface_hub(tmp_path):
    from servefit.models.lock import dumps

    (tmp_path / ".git").mkdir()
    entry = {"kind": "safetensors", "repo": "acme/tiny-llama", "revision": "a" * 40, "config": CONFIG,
             "params": 123456, "parameters": None, "quantization_config": None}
    (tmp_path / "servefit.lock").write_text(dumps({"acme/tiny-llama": entry}, {}))
    (tmp_path / "a.sh").write_text("# servefit: gpu=L4\nvllm serve acme/tiny-llama\n")
    code = ("import sys, json; from servefit.cli import main; import io, contextlib; buf = io.StringIO()\n"
            "with contextlib.redirect_stdout(buf): rc = main(['estimate', '--format', 'json', sys.argv[1]])\n"
            "print(json.loads(buf.getvalue())[0]['model'], 'huggingface_hub' in sys.modules, rc)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a.sh")], capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.strip().endswith("False 0"), out.stderr
    assert "'resolved_from': 'lock', 'params': 123456" in out.stdout


def test_a_mapped_local_gguf_is_locked_and_sized_from_the_lock(hub, repo, capsys, monkeypatch, tmp_path):
    (repo / "servefit.toml").write_text('[models]\n"/data/llama.gguf" = "acme/tiny-llama-GGUF:Q8_0"\n')
    (repo / "deploy" / "mapped.sh").write_text("llama-server -m /data/llama.gguf -c 4096 -ngl 99\n")
    rc, _, err = run(capsys, "models", "lock", repo / "deploy" / "mapped.sh")
    assert rc == 0, err
    assert list(json.loads((repo / "servefit.lock").read_text())["models"]) == ["acme/tiny-llama-GGUF:Q8_0"]
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-empty"))
    sockets_off(monkeypatch)
    doc = estimate(capsys, repo / "deploy" / "mapped.sh")
    assert doc["model"]["resolved_from"] == "lock"
    rc, out, _ = run(capsys, "models", repo / "deploy" / "mapped.sh")
    assert rc == 0 and "mapped.sh:1  llamacpp  /data/llama.gguf  -> Tiny Llama (0.7M) from lock" in out


def test_an_unreachable_hub_is_a_reason_not_a_traceback(repo, capsys, monkeypatch, tmp_path):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    rc, out, err = run(capsys, "models", "lock", repo / "deploy" / "vllm.sh")
    assert rc == 1
    assert "failed  acme/tiny-llama: cannot reach the Hub (ConnectError" in err
    assert json.loads((repo / "servefit.lock").read_text())["unresolved"]["acme/tiny-llama"].startswith(
        "cannot reach the Hub")


def test_counts_from_model_info_and_none_for_packed_quantized_weights(hub, repo, capsys):
    t = llama_tensors(extra=False)
    hub.add("acme/consolidated", Repo(files={"config.json": json.dumps(CONFIG).encode(),
                                             "consolidated.safetensors": safetensors(t)},
                                      lfs={"consolidated.safetensors"},
                                      safetensors={"parameters": {"BF16": count(t) + 7}, "total": count(t) + 7}))
    awq = dict(CONFIG, quantization_config={"quant_method": "awq", "bits": 4, "group_size": 128})
    hub.add("acme/tiny-llama-AWQ", Repo(files={"config.json": json.dumps(awq).encode(),
                                               "model.safetensors": safetensors(t)}, lfs={"model.safetensors"}))
    (repo / "deploy" / "more.sh").write_text("vllm serve acme/consolidated\nvllm serve acme/tiny-llama-AWQ\n")
    rc, _, err = run(capsys, "models", "lock", repo / "deploy" / "more.sh")
    assert rc == 0, err
    models = json.loads((repo / "servefit.lock").read_text())["models"]
    # no model.safetensors / index: the Hub's own count (here deliberately off by 7 to tell them apart)
    assert models["acme/consolidated"]["parameters"] == {"dtypes": {"BF16": count(t) + 7}, "source": "model info",
                                                         "total": count(t) + 7}
    assert models["acme/consolidated"]["params"] == count(t) + 7
    awq_entry = models["acme/tiny-llama-AWQ"]
    assert awq_entry["params"] is None and awq_entry["quantization_config"]["quant_method"] == "awq"
    assert awq_entry["parameters"]["total"] == count(t)  # element counts are kept, not used as parameters
    from servefit.models.lock import read_lock, spec_from_entry

    spec = spec_from_entry(read_lock(str(repo / "servefit.lock")).entry("ACME/Tiny-Llama-awq"), "x")
    assert spec.resolved_from == "lock" and spec.quantization["bits"] == 4
    assert any("counted from the architecture" in a for a in spec.assumptions)


def test_a_lock_of_another_format_version_is_a_usage_error(tmp_path, capsys):
    (tmp_path / ".git").mkdir()
    (tmp_path / "servefit.lock").write_text('{"models": {}, "version": 99}\n')
    (tmp_path / "a.sh").write_text("vllm serve Qwen/Qwen3-8B\n")
    rc, _, err = run(capsys, "estimate", "--gpu", "L4", tmp_path / "a.sh")
    assert rc == 2 and "model lock format 99 is not supported" in err
    (tmp_path / "servefit.lock").write_text("{not json")
    rc, _, err = run(capsys, "estimate", "--gpu", "L4", tmp_path / "a.sh")
    assert rc == 2 and "not a servefit model lock" in err


def test_pick_gguf_follows_llama_cpp():
    from servefit.models.hub import pick_gguf, split_gguf_key
    from servefit.models.lock import gguf_key

    files = ["README.md", "mmproj-model-Q4_K_M.gguf", "m-IQ4_XS.gguf", "m-Q4_K_M.gguf", "m-UD-Q4_K_XL.gguf",
             "Q8_0/m-Q8_0-00001-of-00002.gguf", "Q8_0/m-Q8_0-00002-of-00002.gguf"]
    assert pick_gguf(files, None) == "m-Q4_K_M.gguf"  # no tag: Q4_K_M, never the projector
    assert pick_gguf(files, "q8_0") == "Q8_0/m-Q8_0-00001-of-00002.gguf"  # the first shard
    assert pick_gguf(files, "UD-Q4_K_XL") == "m-UD-Q4_K_XL.gguf"
    assert pick_gguf(files, "IQ4_XS") == "m-IQ4_XS.gguf"
    assert pick_gguf(files, "Q5_K_M") is None
    assert pick_gguf(["b-Q6_K.gguf", "a-Q5_K_M.gguf"], None) == "a-Q5_K_M.gguf"  # no Q4_K_M: the first file
    assert gguf_key("hf.co/Org/Repo-GGUF:q4_k_m") == "Org/Repo-GGUF:Q4_K_M"
    assert gguf_key("Org/Repo-GGUF") == "Org/Repo-GGUF:Q4_K_M"
    assert gguf_key("Org/Repo-GGUF", "sub/m.gguf") == "Org/Repo-GGUF/sub/m.gguf"
    assert split_gguf_key("Org/Repo-GGUF/sub/m.gguf") == ("Org/Repo-GGUF", None, "sub/m.gguf")
    assert split_gguf_key("Org/Repo-GGUF:Q8_0") == ("Org/Repo-GGUF", "Q8_0", None)


def _gguf_shard(path: Path, names: list[str], first: bool, shard: int) -> bytes:
    gguf = pytest.importorskip("gguf")
    import numpy as np

    w = gguf.GGUFWriter(str(path), "llama")
    if first:
        w.add_name("Split Llama")
        w.add_block_count(1)
        w.add_context_length(2048)
        w.add_embedding_length(64)
        w.add_feed_forward_length(128)
        w.add_head_count(4)
        w.add_head_count_kv(2)
        w.add_token_list([f"t{i}" for i in range(300)])
    w.add_uint16("split.no", shard)
    w.add_uint16("split.count", 2)
    for n in names:
        w.add_tensor(n, np.ones((32, 64), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


def test_a_split_gguf_is_locked_from_every_shard(hub, repo, capsys, tmp_path):
    a = _gguf_shard(tmp_path / "s1.gguf", ["token_embd.weight", "blk.0.attn_q.weight"], True, 0)
    b = _gguf_shard(tmp_path / "s2.gguf", ["blk.0.attn_k.weight", "output.weight"], False, 1)
    s1, s2 = "Q8_0/split-Q8_0-00001-of-00002.gguf", "Q8_0/split-Q8_0-00002-of-00002.gguf"
    hub.add("acme/split-GGUF", Repo(files={s1: a, s2: b}, lfs={s1, s2}))
    (repo / "deploy" / "split.sh").write_text("llama-server -hf acme/split-GGUF:Q8_0\n")
    rc, _, err = run(capsys, "models", "lock", repo / "deploy" / "split.sh")
    assert rc == 0, err
    entry = json.loads((repo / "servefit.lock").read_text())["models"]["acme/split-GGUF:Q8_0"]
    assert entry["files"] == [s1, s2]
    assert [t.split(" ")[0] for t in entry["gguf"]["tensors"]] == ["token_embd.weight", "blk.0.attn_q.weight",
                                                                    "blk.0.attn_k.weight", "output.weight"]
    assert entry["gguf"]["kv"]["general.name"] == "Split Llama" and entry["gguf"]["kv"]["llama.block_count"] == 1
    del hub.repos["acme/split-GGUF"].files[s2]  # a missing shard is a reason, not a guess
    rc, _, err = run(capsys, "models", "lock", repo / "deploy" / "split.sh")
    assert rc == 1 and f"shard '{s2}' is not in the repository" in err
