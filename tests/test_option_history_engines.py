"""TGI, SGLang and llama.cpp option tables agree with each release's own parser.

tests/data/<engine>_flags.yaml lists every flag each release's parser has, read from the sources
at the release tags by tools/extract_<engine>_options.py (TGI: launcher/src/main.rs `struct Args`;
SGLang: server_args.py `add_cli_args`; llama.cpp: common/arg.cpp). Each flag of a release must
parse at that release, and every flag another release has but this one lacks must be rejected
there the way the engine's parser does (argparse takes a unique prefix; clap and llama.cpp's own
parser take whole words only)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from servefit.core import Token
from servefit.engines.argv import parse_argv
from servefit.engines.options import load_table

ROOT = Path(__file__).resolve().parents[1]
ENGINES = [e for e in ("tgi", "sglang", "llamacpp") if (ROOT / "tests" / "data" / f"{e}_flags.yaml").is_file()]
FLAGS = {e: yaml.safe_load((ROOT / "tests" / "data" / f"{e}_flags.yaml").read_text()) for e in ENGINES}
CASES = [(e, v) for e in ENGINES for v in FLAGS[e]]


def _codes(engine: str, words: list[str], version: str | None) -> list[tuple[str, str]]:
    parsed = parse_argv(load_table(engine), [Token(w) for w in words], version)
    return [(f.code, f.message) for f in parsed.findings]


def _engine_takes(engine: str, flag: str, release: list[str]) -> bool:
    if flag in release:
        return True
    if not load_table(engine).allow_abbrev:
        return False
    return flag.startswith("--") and len([f for f in release if f.startswith(flag) and f.startswith("--")]) == 1


@pytest.mark.parametrize("engine", ENGINES)
def test_walks_at_least_three_releases(engine):
    assert len(FLAGS[engine]) >= 3


@pytest.mark.parametrize(("engine", "version"), CASES)
def test_every_flag_of_the_release_parses_there(engine, version):
    table = load_table(engine)
    wrong = [(f, msg) for f in FLAGS[engine][version]["flags"]
             for code, msg in _codes(engine, [f], version) if code == table.unknown_code]
    assert wrong == []


@pytest.mark.parametrize(("engine", "version"), CASES)
def test_flags_of_other_releases_are_rejected_there(engine, version):
    table = load_table(engine)
    release = FLAGS[engine][version]["flags"]
    every = sorted({f for rel in FLAGS[engine].values() for f in rel["flags"]})
    missed = []
    for flag in every:
        if _engine_takes(engine, flag, release):
            continue
        errors = [msg for code, msg in _codes(engine, [flag], version) if code == table.unknown_code]
        if not errors:
            missed.append(flag)
        else:
            assert ("added in" in errors[0] or "removed in" in errors[0]) and version in errors[0], errors[0]
    assert missed == []


@pytest.mark.parametrize("engine", ENGINES)
def test_history_file_matches_its_schema(engine):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "src" / "servefit" / "schemas" / "option_history.schema.json").read_text())
    data = yaml.safe_load((ROOT / "src" / "servefit" / "data" / "engines" / f"{engine}_history.yaml").read_text())
    jsonschema.Draft202012Validator(schema).validate(data)
    assert data["engine"] == engine and set(FLAGS[engine]) <= set(data["releases_read"])


def _lint(tmp_path: Path, name: str, text: str, prefix: str, *extra: str) -> list[dict]:
    p = tmp_path / name
    p.write_text(text)
    out = subprocess.run([sys.executable, "-m", "servefit", "lint", str(p), "--format", "json", "--exit-zero", *extra],
                         capture_output=True, text=True, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin",
                                                              "SERVEFIT_NO_CACHE": "1"})
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    found = doc["findings"] if isinstance(doc, dict) else doc
    return [f for f in found if f["code"].startswith(prefix)]


# --- TGI ------------------------------------------------------------------------------------------


def test_tgi_removed_flag_errors_only_after_its_release():
    # --enable-cuda-graphs: Args has it from v1.4.1; v2.0.0 replaced it with --cuda-graphs
    assert _codes("tgi", ["--enable-cuda-graphs"], "1.4.5") == []
    (code, msg), = _codes("tgi", ["--enable-cuda-graphs"], "2.0.0")
    assert code == "TGI001" and "removed in 2.0.0" in msg and "this is 2.0.0" in msg


def test_tgi_added_flag_names_the_release_that_adds_it():
    (code, msg), = _codes("tgi", ["--kv-cache-dtype", "fp8_e5m2"], "2.3.1")
    assert code == "TGI001" and "added in 2.4.0" in msg
    assert _codes("tgi", ["--kv-cache-dtype", "fp8_e5m2"], "2.4.0") == []


def test_tgi_legacy_flag_warns_with_its_replacement():
    assert _codes("tgi", ["--max-input-length", "4000"], "1.4.5") == []
    assert _codes("tgi", ["--max-input-length", "4000"], "3.3.7") == [
        ("TGI021", "--max-input-length is deprecated since 2.0.0; use --max-input-tokens")]


def test_tgi_variable_of_a_later_release_has_no_effect():
    from servefit.engines.argv import parse_env

    table = load_table("tgi")
    for version, read in (("2.3.1", False), ("2.4.0", True)):
        parsed = parse_argv(table, [], version)
        parse_env(table, {"KV_CACHE_DTYPE": Token("fp8_e5m2")}, parsed, version=version)
        assert ("kv_cache_dtype" in parsed.values) is read
        assert [(f.code, f.message) for f in parsed.findings] == ([] if read else [
            ("TGI022", "KV_CACHE_DTYPE has no effect: this release does not read it (added in 2.4.0; this is 2.3.1)")])


def test_tgi_pinned_image_rejects_a_flag_of_a_later_release(tmp_path):
    text = ("FROM ghcr.io/huggingface/text-generation-inference:1.4.5\n"
            'CMD ["--model-id", "mistralai/Mistral-7B-Instruct-v0.2", "--cuda-graphs", "1,2,4"]\n')
    found = _lint(tmp_path, "Dockerfile", text, "TGI0")
    errors = [f["message"] for f in found if f["code"] == "TGI001"]
    assert len(errors) == 1 and "--cuda-graphs" in errors[0] and "added in 2.0.0" in errors[0]


# --- SGLang ---------------------------------------------------------------------------------------


def test_sglang_removed_flag_warns_then_errors_with_its_replacement():
    # --cuda-graph-max-bs: a plain flag to 0.5.12, a deprecated alias in 0.5.16, gone in 0.5.20
    assert _codes("sglang", ["--cuda-graph-max-bs", "8"], "0.5.8") == []
    assert _codes("sglang", ["--cuda-graph-max-bs", "8"], "0.5.16") == [
        ("SGL013", "--cuda-graph-max-bs is deprecated since 0.5.16; use --cuda-graph-max-bs-decode")]
    (code, msg), = _codes("sglang", ["--cuda-graph-max-bs", "8"], "0.5.20")
    assert code == "SGL001" and "removed in 0.5.20" in msg and msg.endswith("use --cuda-graph-max-bs-decode")


def test_sglang_added_flag_names_the_release_that_adds_it():
    (code, msg), = _codes("sglang", ["--page-size", "16"], "0.4.0")
    assert code == "SGL001" and "added in 0.4.6.post5" in msg and "this is 0.4.0" in msg
    assert _codes("sglang", ["--page-size", "16"], "0.4.10") == []


def test_sglang_rejected_deprecated_action_counts_as_removed():
    # 0.5.3 registers --enable-ep-moe with DeprecatedAction, whose __call__ raises: the engine rejects it
    assert _codes("sglang", ["--enable-ep-moe"], "0.5.1")[0][0] == "SGL013"
    (code, msg), = _codes("sglang", ["--enable-ep-moe"], "0.5.3")
    assert code == "SGL001" and "removed in 0.5.3" in msg


def test_sglang_abbreviation_follows_the_release():
    # argparse's unique prefix: --tp is --tp-size in every release read
    assert _codes("sglang", ["--tp", "2"], "0.3.0") == [] and _codes("sglang", ["--tp", "2"], "0.5.23") == []


# --- Ollama (environment variables: Ollama ignores one it does not read, so no error code) --------

OLLAMA_ENV = yaml.safe_load((ROOT / "tests" / "data" / "ollama_env.yaml").read_text())
OLLAMA_HIST = yaml.safe_load((ROOT / "src" / "servefit" / "data" / "engines" / "ollama_history.yaml").read_text())


def _env_present(var: str, version: str) -> bool:
    from servefit.engines.options import FlagHistory

    h = OLLAMA_HIST["env"].get(var)
    return h is not None and FlagHistory(ranges=tuple((a, b) for a, b in h["in"])).present(version)


@pytest.mark.parametrize("version", list(OLLAMA_ENV))
def test_ollama_env_history_agrees_with_each_release(version):
    every = {v for rel in OLLAMA_ENV.values() for v in rel["env"]}
    here = set(OLLAMA_ENV[version]["env"])
    assert {v for v in every if _env_present(v, version)} == here


def test_ollama_env_history_schema_and_the_eras_the_table_states():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "src" / "servefit" / "schemas" / "option_history.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(OLLAMA_HIST)
    env = OLLAMA_HIST["env"]
    # ollama.yaml's help texts: parallel 1 from 0.10.0; context 2048 -> 4096 (0.6.7) -> VRAM-based 0 (0.15.5)
    assert env["OLLAMA_NUM_PARALLEL"]["default"]["0.10.0"] == 1
    assert env["OLLAMA_CONTEXT_LENGTH"]["default"] == {"0.5.13": 2048, "0.6.7": 4096, "0.15.5": 0}
    table = yaml.safe_load((ROOT / "src" / "servefit" / "data" / "engines" / "ollama.yaml").read_text())
    for opt in table["options"]:
        for var in opt.get("env") or []:
            if opt.get("since") and var in env:
                assert env[var]["in"][0][0] == opt["since"], var


# --- llama.cpp ------------------------------------------------------------------------------------


def test_llamacpp_removed_flag_warns_then_errors_with_its_replacement():
    # --no-mmap: deprecated for --load-mode in b10298, gone from common/arg.cpp in b10901
    assert _codes("llamacpp", ["--no-mmap"], "b9093") == []
    assert _codes("llamacpp", ["--no-mmap"], "b10298") == [
        ("LCPP019", "--no-mmap is deprecated since b10298; use --load-mode")]
    (code, msg), = _codes("llamacpp", ["--no-mmap"], "b11434")
    assert code == "LCPP001" and "removed in b10901" in msg and msg.endswith("use --load-mode")


def test_llamacpp_added_flag_names_the_build_that_adds_it():
    (code, msg), = _codes("llamacpp", ["--load-mode", "mmap"], "b9093")
    assert code == "LCPP001" and "added in b10298" in msg and "this is b9093" in msg
    assert _codes("llamacpp", ["--load-mode", "mmap"], "b10298") == []


def test_llamacpp_hand_since_refines_the_gap_between_two_builds_read():
    # common/arg.cpp lacks --kv-unified at b5640 and has it at b6301; llamacpp.yaml's hand-written
    # `since: b5913` lies in that gap, so it is the build named
    (code, msg), = _codes("llamacpp", ["--kv-unified"], "b5000")
    assert code == "LCPP001" and "added in b5913" in msg
    (code, msg), = _codes("llamacpp", ["--kv-unified"], "b5900")
    assert code == "LCPP001" and "added in b5913" in msg
    assert _codes("llamacpp", ["--kv-unified"], "b5913") == []
    assert _codes("llamacpp", ["--kv-unified"], "b9093") == []


def test_llamacpp_builds_before_b9093_come_from_their_own_parser():
    # read at b3889 b4234 b4600 b4980 b5640 b6301 b7347 b8121 b8390 (node-llama-cpp's git bundles)
    assert {"b3889", "b4234", "b4980", "b5640", "b6301", "b7347", "b8121", "b8390"} <= set(FLAGS["llamacpp"])
    assert len(FLAGS["llamacpp"]["b3889"]["flags"]) == 174  # llama_arg / gpt_params, before the rename
    # --swa-full: first in b5640's parser (absent at b4980)
    (code, msg), = _codes("llamacpp", ["--swa-full"], "b4980")
    assert code == "LCPP001" and "added in b5640" in msg and "this is b4980" in msg
    assert _codes("llamacpp", ["--swa-full"], "b5640") == []
    # --binary-file: in b3889 / b4234, gone from b4600's parser
    assert _codes("llamacpp", ["--binary-file", "f.bin"], "b4234") == []
    (code, msg), = _codes("llamacpp", ["--binary-file", "f.bin"], "b4980")
    assert code == "LCPP001" and "removed in b4600" in msg
    # --fit: from b8121 (b7407 by the hand table, which lies between b7347 and b8121)
    (code, msg), = _codes("llamacpp", ["--fit", "on"], "b7347")
    assert code == "LCPP001" and "added in b7407" in msg


def test_llamacpp_lint_quotes_llama_servers_wording(tmp_path):
    found = _lint(tmp_path, "run.sh", "#!/bin/sh\nllama-server -m /models/q.gguf --no-mmap -c 4096\n", "LCPP0",
                  "--engine-version", "b11434")
    assert [f["message"] for f in found if f["code"] == "LCPP001"] == [
        "error: invalid argument: --no-mmap (removed in b10901; this is b11434); use --load-mode"]


# --- the extractors, on small sources written here ----------------------------------------------


def _tool(name: str):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        return __import__(name)
    finally:
        sys.path.pop(0)


def test_tgi_extractor_reads_clap_fields(tmp_path):
    src = tmp_path / "9.9.9" / "launcher" / "src"
    src.mkdir(parents=True)
    (src / "main.rs").write_text(
        "#[derive(Parser)]\nstruct Args {\n"
        "    /// Where to listen.\n    #[clap(default_value = \"3000\", long, short, env)]\n    port: u16,\n"
        "    /// Legacy version of [`Args::max_input_tokens`].\n    #[clap(long, env)]\n    max_input_length: Option<usize>,\n"
        "    #[clap(long, env)]\n    max_input_tokens: Option<usize>,\n"
        "    #[clap(long, env)]\n    trust_remote_code: bool,\n"
        "    #[clap(long, short, action)]\n    env: bool,\n"
        "    #[clap(long = \"renamed\", env = \"OTHER_NAME\")]\n    some_field: Option<String>,\n}\n")
    got = _tool("extract_tgi_options").extract(tmp_path / "9.9.9")
    assert got["flags"] == {
        "--port": {"arity": "1", "default": 3000}, "-p": {"arity": "1", "default": 3000},
        "--max-input-length": {"arity": "1", "deprecated": True, "replacement": "--max-input-tokens"},
        "--max-input-tokens": {"arity": "1"},
        "--trust-remote-code": {"arity": "0", "default": False},
        "--env": {"arity": "0", "default": False}, "-e": {"arity": "0", "default": False},
        "--renamed": {"arity": "1"}}
    assert set(got["env"]) == {"PORT", "MAX_INPUT_LENGTH", "MAX_INPUT_TOKENS", "TRUST_REMOTE_CODE", "OTHER_NAME"}


def test_llamacpp_extractor_keeps_llama_servers_options(tmp_path):
    src = tmp_path / "b1" / "common"
    src.mkdir(parents=True)
    (src / "arg.cpp").write_text(
        'add_opt(common_arg({"-c", "--ctx-size"}, "N", string_format("size (default: %d)", 0),\n'
        '    [](common_params & params, int value) { params.n_ctx = value; }).set_env("LLAMA_ARG_CTX_SIZE"));\n'
        'add_opt(common_arg({"--mmap"}, {"--no-mmap"}, "deprecated, use --load-mode",\n'
        '    [](common_params & params, bool value) { (void) value; }).set_examples({LLAMA_EXAMPLE_SERVER}));\n'
        'add_opt(common_arg({"--load-mode"}, "MODE", "how to load (a) or (b)",\n'
        '    [](common_params & params, const std::string & value) { }));\n'
        'add_opt(common_arg({"-gan"}, "N", "group attention",\n'
        '    [](common_params & params, int value) { }).set_examples({LLAMA_EXAMPLE_MAIN}));\n'
        'add_opt(common_arg({"--spec-replace"}, "T", "D", "replace",\n'
        '    [](common_params & params, const std::string & a, const std::string & b) { }));\n'
        'add_opt(common_arg({"--no-ctx"}, "skip (server excluded)",\n'
        '    [](common_params & params) { }).set_excludes({LLAMA_EXAMPLE_SERVER}));\n')
    got = _tool("extract_llamacpp_options").extract(tmp_path / "b1")
    assert got["flags"] == {
        "-c": {"arity": "1"}, "--ctx-size": {"arity": "1"},
        "--mmap": {"arity": "0", "deprecated": True, "replacement": "--load-mode"},
        "--no-mmap": {"arity": "0", "negates": "--mmap", "deprecated": True, "replacement": "--load-mode"},
        "--load-mode": {"arity": "1"}, "--spec-replace": {"arity": "2"}}
    assert got["env"] == {"LLAMA_ARG_CTX_SIZE": {}}
