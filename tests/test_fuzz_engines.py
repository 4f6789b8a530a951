"""Fuzzing what turns words into settings and settings into memory: the option-table argv parser
of every engine, each engine's `parse` on random command lines and environments, each engine's
memory plan on random values of its memory settings, servefit's unit parsers, the Modelfile
grammar and the config validator. Bad input may only ever be a finding or a UsageError (the
CLI's one-line exit 2); anything else is a crash.

Examples under the "ci" profile: 5 x 300 argv + 5 x 200 parse + 5 x 150 plan + 3 x 500 units
+ 400 + 200 Modelfile + 500 config + 200 overrides = 6,050 (tests/fuzzkit.py scales them)."""

from __future__ import annotations

import math

import pytest
from fuzzkit import SPECIALS, TEXT, corpus, fuzz, mutated
from hypothesis import given
from hypothesis import strategies as st

from servefit import config, engines
from servefit.core import Token, UsageError
from servefit.engines.ollama_modelfile import parse_modelfile
from servefit.engines.options import load_table, parse_argv
from servefit.hardware.spec import GpuSpec
from servefit.models.spec import ModelSpec
from servefit.pipeline import site_from_argv
from servefit.units import human_int, parse_size, parse_tokens

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
        assert isinstance(human_int(text), int)
    except ValueError:
        pass


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
    parse_modelfile(pf[1], pf[0])


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
    assert isinstance(errs, list) and all(isinstance(e, str) for e in errs)


@fuzz(200)
@given(text=st.one_of(TEXT, st.tuples(st.sampled_from(["gpu", "select", "fail-on", "targets", ""]), TEXT)
                      .map(lambda t: f"{t[0]}={t[1]}")))
def test_config_overrides(tmp_path_factory, text):
    try:
        config.load(str(tmp_path_factory.getbasetemp()), [text])
    except UsageError:
        pass
