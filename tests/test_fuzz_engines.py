"""Fuzzing what turns words into settings and settings into memory: the option-table argv parser
of every engine, each engine's `parse` on random command lines and environments, each engine's
memory plan on random values of its memory settings, servefit's unit parsers, the Modelfile
grammar and the config validator. Bad input may only ever be a finding or a UsageError (the
CLI's one-line exit 2); anything else is a crash.

Examples under the "ci" profile: 5 x 300 argv + 5 x 200 parse + 5 x 150 plan + 3 x 500 units
+ 400 + 200 Modelfile + 500 config + 200 overrides = 6,050 (tests/fuzzkit.py scales them)."""

from __future__ import annotations

import json
import math
import re
import struct
import time

import jsonschema
import pytest
from fuzzkit import SPECIALS, TEXT, corpus, fuzz, mutated
from hypothesis import given
from hypothesis import strategies as st

from servefit import config, engines
from servefit.core import Token, UsageError
from servefit.engines.argv import parse_argv
from servefit.engines.ollama_modelfile import parse_modelfile
from servefit.engines.options import load_table
from servefit.hardware.spec import GpuSpec
from servefit.models.spec import ModelSpec
from servefit.pipeline import site_from_argv
from servefit.rules.catalog import lookup
from servefit.units import human_int, parse_size, parse_tokens

CONFIG_SCHEMA = jsonschema.Draft202012Validator(config.schema())
ENGINES = ["vllm", "llamacpp", "ollama", "tgi", "sglang"]
COMMANDS = {
    "vllm": ["vllm", "serve", "Qwen/Qwen3-8B"],
    "llamacpp": ["llama-server", "-m", "/models/llama-3.1-8b-instruct-q4_k_m.gguf"],
    "ollama": ["ollama", "run", "llama3.1:8b"],
    "tgi": ["text-generation-launcher", "--model-id", "meta-llama/Llama-3.1-8B-Instruct"],
    "sglang": ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"],
}
VALUES = ["0", "1", "-1", "2", "7", "8", "16", "64", "4096", "131072", "1000000000", "99999999999999999999", "0.0",
          "0.5", "0.95", "1.5", "-0.1", "nan", "inf", "-inf", "1e309", "auto", "true", "false", "fp8", "q4_0", "f16",
          "bfloat16", "half", "awq", "32k", "1.5K", "", " ", "=", "--", "-", "$(X)", "${Y}", "{}", "[1, 2]",
          '{"a": 1}', "null", "none", "0x10", "１２"]
MODEL = ModelSpec(name="meta-llama/Llama-3.1-8B-Instruct", architecture="LlamaForCausalLM", model_type="llama",
                  num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                  intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072)
MOE = ModelSpec(name="openai/gpt-oss-20b", architecture="GptOssForCausalLM", model_type="gpt_oss",
                num_hidden_layers=24, hidden_size=2880, num_attention_heads=64, num_key_value_heads=8, head_dim=64,
                intermediate_size=2880, vocab_size=201088, max_position_embeddings=131072, num_experts=32,
                num_experts_per_tok=4, moe_intermediate_size=2880, sliding_window=128,
                layer_types=["sliding" if i % 2 == 0 else "full" for i in range(24)])
GPU = GpuSpec(key="h100", name="NVIDIA H100 80GB HBM3", vendor="nvidia", memory_bytes=81559 * 2**20,
              compute_capability=90)
SMALL = GpuSpec(key="t4", name="Tesla T4", vendor="nvidia", memory_bytes=15360 * 2**20, compute_capability=75)


def flags(engine: str) -> list[str]:
    return sorted(f for o in load_table(engine).options for f in o.flags) or ["--verbose", "-v"]


def memory_flags(engine: str) -> list[str]:
    return sorted(o.flags[0] for o in load_table(engine).options if o.memory and o.flags) or flags(engine)


def env_names(engine: str) -> list[str]:
    return sorted(e for o in load_table(engine).options for e in o.env)


def argv_for(engine: str, memory_only: bool = False) -> st.SearchStrategy[list[str]]:
    names = memory_flags(engine) if memory_only else flags(engine)
    flag = st.sampled_from(names)
    value = st.one_of(st.sampled_from(VALUES), TEXT) if not memory_only else st.sampled_from(VALUES[:36])
    pair = st.one_of(st.tuples(flag, value).map(list), st.tuples(flag, value).map(lambda t: [f"{t[0]}={t[1]}"]),
                     flag.map(lambda f: [f]))
    if not memory_only:
        pair = st.one_of(pair, value.map(lambda v: [v]), st.sampled_from(SPECIALS).map(lambda v: [v]))
    return st.lists(pair, max_size=8).map(lambda ps: [w for p in ps for w in p])


@pytest.mark.parametrize("engine", ENGINES)
@fuzz(300)
@given(data=st.data())
def test_option_table_parser(engine, data):
    table = load_table(engine)
    words = data.draw(argv_for(engine))
    version = data.draw(st.sampled_from([None, "0.1.0", "0.11.0", "2.0.0", "99.0"]))
    parsed = parse_argv(table, [Token(w) for w in words], version)
    assert set(parsed.values) <= set(table.by_name)
    for f in parsed.findings:
        assert f.code in (table.unknown_code, table.invalid_code, table.deprecated_code) and f.message


@pytest.mark.parametrize("engine", ENGINES)
@fuzz(200)
@given(data=st.data())
def test_engine_parse_on_random_commands(engine, data):
    words = COMMANDS[engine] + data.draw(argv_for(engine))
    env = data.draw(st.dictionaries(st.sampled_from(env_names(engine) or ["X"]), st.sampled_from(VALUES), max_size=4))
    version = data.draw(st.sampled_from([None, "0.5.0", "0.11.0", "1.4.0", "3.0.0"]))
    site = site_from_argv(words, env)
    site.engine = engine
    try:
        cfg = engines.get(engine).parse(site, version)
    except UsageError:
        return
    assert cfg.engine == engine
    for f in cfg.findings:  # every finding is one of the catalogue's, with its own severity
        rule = lookup(f.code)
        assert rule is not None and f.severity in ("error", "warning", "info"), f.code
    for name, span in cfg.spans.items():  # a setting's span is where its value is written
        assert span is None or span.start <= span.end, (name, span)


@pytest.mark.parametrize("engine", ENGINES)
@fuzz(150)
@given(data=st.data())
def test_engine_plan_on_random_memory_settings(engine, data):
    words = COMMANDS[engine] + data.draw(argv_for(engine, memory_only=True))
    site = site_from_argv(words)
    site.engine = engine
    eng = engines.get(engine)
    try:
        cfg = eng.parse(site, data.draw(st.sampled_from([None, "0.8.0", "0.11.0", "2.4.0"])))
        plan = eng.plan(cfg, data.draw(st.sampled_from([MODEL, MOE])), data.draw(st.sampled_from([GPU, SMALL])),
                        data.draw(st.sampled_from([1, 2, 8])))
    except UsageError:
        return
    for v in plan.memory.as_dict().values():
        assert isinstance(v, int)
    assert plan.outcome and not math.isnan(plan.max_concurrency)


NUMBERISH = st.one_of(TEXT, st.lists(st.sampled_from(list("0123456789.kKmMgGtTiIbB -+e_")), max_size=12).map("".join))


@fuzz(500)
@given(text=NUMBERISH)
def test_human_int(text):
    try:
        n = human_int(text)
    except ValueError:
        return
    assert isinstance(n, int)
    if text.strip().isdigit() and text.strip().isascii():
        assert n == int(text.strip())


@fuzz(500)
@given(text=NUMBERISH)
def test_parse_size(text):
    try:
        assert parse_size(text) >= 0
    except UsageError:
        pass


@fuzz(500)
@given(text=NUMBERISH)
def test_parse_tokens(text):
    try:
        assert parse_tokens(text) >= 0
    except UsageError:
        pass


MODELFILES = [pf for pf in corpus() if "modelfile" in pf[0].lower()]
MODELFILE_TEXT = st.lists(st.sampled_from(["FROM ", "PARAMETER ", "num_ctx ", "TEMPLATE ", '"""', '"', "\n", " ",
                                           "ADAPTER ", "MESSAGE user ", "SYSTEM ", "# c", "stop ", "8192", "x",
                                           "\ufeff", "\r\n", "\t", "llama3.1:8b"]), max_size=60).map("".join)


@fuzz(400)
@given(text=st.one_of(TEXT, MODELFILE_TEXT))
def test_modelfile_grammar(text):
    doc = parse_modelfile(text, "Modelfile")
    for ins in doc.instructions:
        s = ins.value.span
        assert s is None or 0 <= s.start <= s.end <= len(text) + 1
    for f in doc.findings:
        assert f.code.startswith("OLLM") and f.span is not None


@fuzz(200)
@given(pf=mutated(MODELFILES))
def test_modelfile_mutations(pf):
    path, text = pf
    doc = parse_modelfile(text, path)
    for ins in doc.instructions:  # every value points inside the text, at what it says
        s = ins.value.span
        assert s is None or 0 <= s.start <= s.end <= len(text) + 1
    for f in doc.findings:
        assert f.code.startswith("OLLM") and lookup(f.code) is not None and f.span is not None


JSONISH = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), TEXT),
                       lambda inner: st.one_of(st.lists(inner, max_size=4),
                                               st.dictionaries(st.one_of(TEXT, st.sampled_from(
                                                   ["gpu", "gpus", "select", "severity", "targets", "paths",
                                                    "engine-versions", "vllm", "fail-on", "trusted-orgs", "count",
                                                    "per-file-ignores", "online"])), inner, max_size=4)),
                       max_leaves=12)


@fuzz(500)
@given(data=JSONISH)
def test_config_validate(data):
    errs = config.validate(data)
    assert all(isinstance(e, str) and e.startswith("tool.servefit") for e in errs), errs
    assert (errs == []) == CONFIG_SCHEMA.is_valid(data), (errs, data)  # the published schema agrees


@fuzz(200)
@given(text=st.one_of(TEXT, st.tuples(st.sampled_from(["gpu", "select", "fail-on", "targets", ""]), TEXT)
                      .map(lambda t: f"{t[0]}={t[1]}")))
def test_config_overrides(tmp_path_factory, text):
    try:
        cfg = config.load(str(tmp_path_factory.getbasetemp()), [text])
    except UsageError as exc:
        assert "\n" not in str(exc)  # one line
        return
    assert cfg.fail_on in ("error", "warning", "info", "never") and isinstance(cfg.select, list)


# ------------------------------------------------------------------ model files (issue 18)

LLAMA_CFG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
             "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
             "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
             "torch_dtype": "bfloat16"}
ODD = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True),
                TEXT, st.lists(st.integers(-5, 10), max_size=3), st.dictionaries(TEXT, st.integers(), max_size=2),
                st.sampled_from([0, 1, -1, 0.5, -0.5, 1e308, 2**63, 4096, 100_000_000]))


@fuzz(400)
@given(patch=st.dictionaries(st.sampled_from(sorted(__import__("servefit.models.config_json",
                                                               fromlist=["_COUNTS"])._COUNTS)), ODD,
                             min_size=1, max_size=4),
       nest=st.sampled_from([None, "text_config", "vision_config"]))
def test_config_json_bad_values_are_findings_naming_the_field(patch, nest):
    """Any value in any count field: a ModelSpec with every count inside the bounds, or a
    ValueError naming one of the fields that were changed; fast either way."""
    from servefit.budget import COUNT_LIMITS
    from servefit.models.config_json import from_config

    cfg = json.loads(json.dumps(LLAMA_CFG))
    if nest:
        cfg[nest] = dict(patch)
    else:
        cfg.update(patch)
    t0 = time.perf_counter()
    try:
        spec = from_config(cfg, "m")
    except ValueError as exc:
        assert any(k in str(exc) for k in patch) or "layer count" in str(exc), (str(exc), patch)
        return
    finally:
        assert time.perf_counter() - t0 < 2
    assert 0 < spec.num_hidden_layers <= COUNT_LIMITS["layers"] and 0 < spec.hidden_size <= COUNT_LIMITS["hidden"]
    assert spec.num_attention_heads >= 1 and 0 <= spec.num_experts <= COUNT_LIMITS["experts"]
    assert isinstance(spec.params, int) and spec.params >= 0


@pytest.mark.parametrize("nest,patch,said", [
    ("vision_config", {"intermediate_size": []}, "vision_config.intermediate_size is a list of 0, not a number"),
    ("vision_config", {"intermediate_size": [4096]}, "vision_config.intermediate_size is a list of 1, not a number"),
    (None, {"intermediate_size": []}, "intermediate_size is a list of 0, not a number"),
])
def test_config_json_lists_where_a_number_belongs(nest, patch, said):
    """Found by the fuzz test above under other seeds (a tower's MLP width given as a list crashed the
    vision count with a TypeError): a clear error naming the field."""
    from servefit.models.config_json import from_config

    cfg = json.loads(json.dumps(LLAMA_CFG))
    if nest:
        cfg[nest] = dict(patch)
    else:
        cfg.update(patch)
    with pytest.raises(ValueError, match=re.escape(said)):
        from_config(cfg, "m")


def test_per_layer_kv_heads_take_the_widest_layer():
    from servefit.models.config_json import from_config

    cfg = dict(LLAMA_CFG, num_key_value_heads=[2, 8, 4])
    assert from_config(cfg, "m").num_key_value_heads == 8


def _header(kvs: dict[str, tuple[int, bytes]], tensors: list[tuple[str, list[int], int, int]]) -> bytes:
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for k, (t, payload) in kvs.items():
        out += struct.pack("<Q", len(k)) + k.encode() + struct.pack("<I", t) + payload
    for name, shape, tid, off in tensors:
        out += struct.pack("<Q", len(name)) + name.encode() + struct.pack("<I", len(shape))
        out += struct.pack(f"<{len(shape)}Q", *shape) + struct.pack("<IQ", tid, off)
    return out


GOOD_GGUF = _header({"general.architecture": (8, struct.pack("<Q", 5) + b"llama"),
                     "llama.block_count": (4, struct.pack("<I", 2)),
                     "llama.embedding_length": (4, struct.pack("<I", 64)),
                     "tokenizer.ggml.tokens": (9, struct.pack("<IQ", 8, 3) + b"".join(
                         struct.pack("<Q", 1) + c for c in (b"a", b"b", b"c")))},
                    [("token_embd.weight", [64, 3], 1, 0), ("output.weight", [64, 3], 1, 384)])


@fuzz(400)
@given(data=st.data())
def test_gguf_header_mutations_are_bounded(tmp_path_factory, data):
    """Byte edits, truncations and huge integers anywhere in a GGUF header: a GgufInfo whose
    counts are inside the bounds, or one UsageError; fast, whatever the numbers say."""
    from servefit.core import UsageError
    from servefit.models import gguf as G

    raw = bytearray(GOOD_GGUF)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        op = data.draw(st.sampled_from(["byte", "u64", "cut"]))
        if op == "byte":
            raw[i] = data.draw(st.integers(0, 255))
        elif op == "u64":
            raw[i:i + 8] = struct.pack("<Q", data.draw(st.sampled_from([0, 1, 2**32, 2**40, 2**63, 2**64 - 1])))
        else:
            del raw[i:]
            if not raw:
                raw = bytearray(b"G")
    p = tmp_path_factory.mktemp("gguf") / "m.gguf"
    p.write_bytes(bytes(raw))
    t0 = time.perf_counter()
    try:
        info = G.read_header(str(p))
    except UsageError as exc:
        assert "\n" not in str(exc)
        return
    finally:
        assert time.perf_counter() - t0 < 2
    assert len(info.tensors) <= G.MAX_TENSORS and len(info.kv) <= G.MAX_KV
    for t in info.tensors:
        assert len(t.shape) <= G.MAX_DIMS and all(d <= G.MAX_DIM for d in t.shape)
    n = info.kv.get("llama.block_count")
    assert n is None or isinstance(n, (int, float, str, list, G.ArrayLen))


@fuzz(500)
@given(text=st.text(max_size=60))
def test_terminal_escaping(text):
    from servefit.termsafe import one_line, stream_safe

    one = one_line(text)
    assert "\n" not in one and not any(ord(c) < 32 or 0x7f <= ord(c) <= 0x9f for c in one)
    safe = stream_safe(text)
    assert safe.count("\n") == text.count("\n")
    assert not any((ord(c) < 32 and c not in "\n\t\r") or 0x7f <= ord(c) <= 0x9f for c in safe)
    assert all(safe[i + 1] == "\n" for i, c in enumerate(safe) if c == "\r")
    if text.isprintable():
        assert one == text and safe == text
