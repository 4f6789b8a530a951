"""GGUF headers: the gguf package and the header-only reader agree; truncated files still give
their metadata; names map to quants and catalog candidates."""

from __future__ import annotations

import os

import pytest

from servefit.core import UsageError
from servefit.models import gguf as G
from servefit.models import gguf_names as N

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")


def write_tiny(path: str, with_output: bool = True) -> None:
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(2)
    w.add_context_length(4096)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_file_type(1)
    w.add_token_list([f"t{i}" for i in range(5000)])  # longer than BIG_ARRAY: only its length is kept
    w.add_tensor("token_embd.weight", np.zeros((5000, 64), dtype=np.float16))
    for il in range(2):
        w.add_tensor(f"blk.{il}.attn_norm.weight", np.zeros(64, dtype=np.float32))
        w.add_tensor(f"blk.{il}.attn_q.weight", np.zeros((64, 64), dtype=np.float16))
        w.add_tensor(f"blk.{il}.attn_k.weight", np.zeros((32, 64), dtype=np.float16))
        w.add_tensor(f"blk.{il}.attn_v.weight", np.zeros((32, 64), dtype=np.float16))
        w.add_tensor(f"blk.{il}.ffn_down.weight", np.zeros((64, 128), dtype=np.float16))
    w.add_tensor("output_norm.weight", np.zeros(64, dtype=np.float32))
    if with_output:
        w.add_tensor("output.weight", np.zeros((5000, 64), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture()
def tiny(tmp_path):
    p = str(tmp_path / "tiny-llama-F16.gguf")
    write_tiny(p)
    return p


def test_header_reader_matches_gguf_package(tiny):
    own = G.read_header(tiny)
    import gguf  # the reference reader, in the test only (servefit reads headers itself)

    ref = gguf.GGUFReader(tiny, "r")
    pkg = G.GgufInfo(tiny, 3, {k: (f.contents() if len(f.data) <= G.BIG_ARRAY else G.ArrayLen(len(f.data)))
                               for k, f in ref.fields.items() if not k.startswith("GGUF.")},
                     [G.TensorInfo(t.name, tuple(int(d) for d in t.shape), t.tensor_type.name, int(t.n_bytes))
                      for t in ref.tensors])
    assert own.complete and not own.truncated
    assert own.arch == pkg.arch == "llama"
    assert [(t.name, t.type, t.nbytes) for t in own.tensors] == [(t.name, t.type, t.nbytes) for t in pkg.tensors]
    assert own.n_vocab == pkg.n_vocab == 5000
    assert own.get("block_count") == 2 and own.get("attention.head_count_kv") == 2


def test_weight_bytes_from_tensor_table(tiny):
    info = G.read_gguf(tiny)
    expected = 2 * (5000 * 64 * 2) + 2 * (64 * 4 + 64 * 64 * 2 + 2 * 32 * 64 * 2 + 64 * 128 * 2) + 64 * 4
    assert info.weight_bytes == expected
    assert info.reader == "header" and info.complete


def test_truncated_inside_tensor_data_keeps_the_whole_header(tiny, tmp_path):
    full = open(tiny, "rb").read()
    cut = str(tmp_path / "partial.gguf")
    with open(cut, "wb") as fh:
        fh.write(full[: len(full) - 1000])
    info = G.read_gguf(cut)
    assert info.reader == "header" and not info.complete and not info.truncated
    assert len(info.tensors) == 13


def test_truncated_inside_header_keeps_the_metadata(tiny, tmp_path):
    full = open(tiny, "rb").read()
    cut = str(tmp_path / "head.gguf")
    with open(cut, "wb") as fh:
        fh.write(full[:400])
    info = G.read_header(cut)
    assert info.truncated and info.arch == "llama" and info.get("block_count") == 2


def test_not_a_gguf_is_a_usage_error(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(b"NOPE" + b"\0" * 20)
    with pytest.raises(UsageError, match="not a GGUF"):
        G.read_header(str(p))


def test_spec_from_gguf(tiny):
    spec = N.resolve_gguf_ref(tiny)
    assert spec.resolved_from == "gguf"
    assert (spec.num_hidden_layers, spec.hidden_size, spec.num_attention_heads, spec.num_key_value_heads) == (2, 64, 4, 2)
    assert spec.head_dim == 16 and spec.max_position_embeddings == 4096 and not spec.tie_word_embeddings


def test_tied_embeddings_detected(tmp_path):
    p = str(tmp_path / "tied.gguf")
    write_tiny(p, with_output=False)
    assert N.resolve_gguf_ref(p).tie_word_embeddings


@pytest.mark.parametrize("name,base,quant", [
    ("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "Meta-Llama-3.1-8B-Instruct", "Q4_K_M"),
    ("qwen2.5-7b-instruct-q4_k_m.gguf", "qwen2.5-7b-instruct", "Q4_K_M"),
    ("mistral-7b-instruct-v0.2.Q4_K_M.gguf", "mistral-7b-instruct-v0.2", "Q4_K_M"),
    ("gpt-oss-20b-mxfp4.gguf", "gpt-oss-20b", "MXFP4_MOE"),
    ("Qwen3-30B-A3B-UD-Q4_K_XL-00001-of-00002.gguf", "Qwen3-30B-A3B", "Q4_K_M"),
    ("Llama-3.2-3B-Instruct-IQ2_XXS.gguf", "Llama-3.2-3B-Instruct", "IQ2_XXS"),
    ("model.gguf", "model", None),
    ("gemma4-26b-a4b-it-qat-q4.gguf", "gemma4-26b-a4b-it-qat", "Q4_0"),
    ("gemma-3-27b-it-qat-q4_0.gguf", "gemma-3-27b-it-qat", "Q4_0"),
])
def test_split_quant(name, base, quant):
    assert N.split_quant(name) == (base, quant)


def test_parse_ref_hf_repo():
    assert N.parse_ref("bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:Q8_0") == ("Meta-Llama-3.1-8B-Instruct", "Q8_0", False)
    assert N.parse_ref("ggml-org/gemma-3-12b-it-GGUF")[1] == "Q4_K_M"  # -hf default


def test_catalog_candidates():
    assert "meta-llama/Llama-3.1-8B-Instruct" in N.catalog_candidates("Meta-Llama-3.1-8B-Instruct")


def test_row_bytes_block_types():
    assert G.row_bytes("q8_0", 1024) == 1088 and G.row_bytes("q4_0", 1024) == 576
    assert G.row_bytes("q5_1", 128) == 96 and G.row_bytes("iq4_nl", 64) == 36 and G.row_bytes("f16", 10) == 20


def test_no_numpy_import_on_name_only_paths():
    import subprocess
    import sys

    code = ("import sys; from servefit.models.gguf_names import split_quant; split_quant('a-Q4_K_M.gguf'); "
            "print('numpy' in sys.modules, 'gguf' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}).stdout.strip()
    assert out == "False False"
