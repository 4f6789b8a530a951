"""vLLM reads one key of a JSON option from a dotted flag (`--compilation-config.cudagraph_mode
NONE`, `-O.level=3`), documented from 0.10.1; older releases and other engines reject the word."""

from __future__ import annotations

from servefit.core import Span, Token
from servefit.engines.argv import parse_argv
from servefit.engines.options import load_table

VLLM = load_table("vllm")


def _parse(words: list[str], version: str | None, table=VLLM):  # type: ignore[no-untyped-def]
    return parse_argv(table, [Token(w) for w in words], version)


def test_dotted_keys_merge_into_one_json_value() -> None:
    p = _parse(["--compilation-config.cudagraph_mode", "NONE", "-O.level=3",
                "--compilation-config.pass_config.enable_noop", "true",
                "--compilation-config.cudagraph_capture_sizes+", "1,2", "--compilation-config.cudagraph_capture_sizes+=8"],
               "0.11.0")
    assert p.findings == []
    assert p.unknown == []
    assert p.values["compilation_config"] == {"cudagraph_mode": "NONE", "level": 3,
                                              "pass_config": {"enable_noop": True},
                                              "cudagraph_capture_sizes": [1, 2, 8]}
    assert "--compilation-config" in p.used


def test_short_alias_of_the_json_flag_takes_keys_where_the_release_has_it() -> None:
    assert _parse(["-cc.mode", "3"], "0.12.0").values["compilation_config"] == {"mode": 3}
    old = _parse(["-cc.mode", "3"], "0.11.0")  # -cc arrived in 0.12.0: the glued word is no flag of 0.11
    assert "compilation_config" not in old.values
    assert old.findings[0].code == "VLLM001"
    assert old.findings[0].message.startswith("unrecognized argument: -cc (added in 0.12.0")


def test_before_dotted_keys_the_word_is_unrecognized() -> None:
    p = _parse(["--compilation-config.cudagraph_mode", "NONE"], "0.10.0")
    assert [(f.code, f.message) for f in p.findings] == [
        ("VLLM001", "unrecognized argument: --compilation-config.cudagraph_mode (did you mean --compilation-config?)")]
    assert "compilation_config" not in p.values


def test_dotted_key_without_a_value_is_the_engine_error() -> None:
    p = _parse(["--compilation-config.mode", "--enforce-eager"], "0.11.0")
    assert [(f.code, f.message) for f in p.findings] == [
        ("VLLM002", "argument --compilation-config.mode: expected one argument")]
    assert p.values["enforce_eager"] is True


def test_a_non_json_option_takes_no_dotted_key() -> None:
    p = _parse(["--max-model-len.x", "3"], "0.11.0")
    assert [f.code for f in p.findings] == ["VLLM001"]


def test_spans_point_at_the_flag_and_its_value() -> None:
    flag = Token("-O.cudagraph_mode=NONE", Span("f.sh", 3, 5, 3, 27, 40, 62))
    p = parse_argv(VLLM, [flag], "0.11.0")
    assert p.values["compilation_config"] == {"cudagraph_mode": "NONE"}
    assert p.flag_spans["compilation_config"] == flag.span
    assert p.spans["compilation_config"] == Span("f.sh", 3, 23, 3, 27, 58, 62)


def test_other_engines_read_no_dotted_keys() -> None:
    sgl = load_table("sglang")
    assert sgl.dotted_json_since is None
    p = _parse(["--json-model-override-args.rope_theta", "1"], None, sgl)
    assert [f.code for f in p.findings] == ["SGL001"]
