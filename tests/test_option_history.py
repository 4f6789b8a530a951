"""The vLLM option table agrees with each release's own parser.

tests/data/vllm_flags.yaml lists every flag `vllm serve` accepts in twelve releases (0.4.0 to
0.33.0), read from each wheel's arg_utils.py / cli_args.py by tools/extract_vllm_options.py. Each
flag of a release must parse at that release, and every flag some other release has but this one
lacks must be rejected there, the way argparse rejects it (a unique prefix of a flag the release
does have is an abbreviation argparse takes)."""

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
FLAGS = yaml.safe_load((ROOT / "tests" / "data" / "vllm_flags.yaml").read_text())
ALL = sorted({f for rel in FLAGS.values() for f in rel["flags"]})
TABLE = load_table("vllm")


def _codes(words: list[str], version: str | None) -> list[tuple[str, str]]:
    parsed = parse_argv(TABLE, [Token(w) for w in words], version)
    return [(f.code, f.message) for f in parsed.findings]


def _argparse_takes(flag: str, release: list[str]) -> bool:
    """argparse (allow_abbrev) takes an unknown long flag that prefixes exactly one it has."""
    if flag in release:
        return True
    return flag.startswith("--") and len([f for f in release if f.startswith(flag) and f.startswith("--")]) == 1


def test_walks_at_least_the_six_releases_the_issue_names():
    minors = {".".join(v.split(".")[:2]) for v in FLAGS}
    assert {"0.4", "0.6", "0.7", "0.11", "0.33"} <= minors
    assert any(m.startswith("0.2") and len(m) == 4 for m in minors)


@pytest.mark.parametrize("version", list(FLAGS))
def test_every_flag_of_the_release_parses_there(version):
    wrong = [(f, msg) for f in FLAGS[version]["flags"] for code, msg in _codes([f], version) if code == "VLLM001"]
    assert wrong == []


@pytest.mark.parametrize("version", list(FLAGS))
def test_flags_of_other_releases_are_rejected_there(version):
    release = FLAGS[version]["flags"]
    missed, kinds = [], set()
    for flag in ALL:
        if _argparse_takes(flag, release):
            continue
        errors = [msg for code, msg in _codes([flag], version) if code == "VLLM001"]
        if not errors:
            missed.append(flag)
        elif flag in TABLE.history:
            assert ("added in" in errors[0] or "removed in" in errors[0]) and version in errors[0], errors[0]
            kinds.add(errors[0].split("(")[1].split(" in ")[0])
    assert missed == []


def test_history_file_matches_its_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "src" / "servefit" / "schemas" / "option_history.schema.json").read_text())
    data = yaml.safe_load((ROOT / "src" / "servefit" / "data" / "engines" / "vllm_history.yaml").read_text())
    jsonschema.Draft202012Validator(schema).validate(data)
    assert set(FLAGS) <= set(data["releases_read"])


# --- the reproductions of issue 16 -------------------------------------------------------------

OLD_FLAGS_063 = ["--use-v2-block-manager", "--num-scheduler-steps", "4", "--speculative-model", "m",
                 "--num-speculative-tokens", "3", "--preemption-mode", "swap", "--worker-use-ray",
                 "--max-seq-len-to-capture", "8192", "--scheduler-delay-factor", "0.1",
                 "--tokenizer-pool-size", "2", "--disable-log-requests"]


def _lint(tmp_path: Path, name: str, text: str, *extra: str) -> list[dict]:
    p = tmp_path / name
    p.write_text(text)
    out = subprocess.run([sys.executable, "-m", "servefit", "lint", str(p), "--format", "json", "--exit-zero", *extra],
                         capture_output=True, text=True, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin",
                                                              "SERVEFIT_NO_CACHE": "1"})
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    return [f for f in doc["findings"] if f["code"].startswith("VLLM0")] if isinstance(doc, dict) else doc


def test_pinned_image_073_takes_disable_log_requests(tmp_path):
    found = _lint(tmp_path, "Dockerfile", "FROM vllm/vllm-openai:v0.7.3\n"
                  'CMD ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--disable-log-requests"]\n')
    assert [f for f in found if f["code"] in ("VLLM001", "VLLM023")] == []


def test_engine_version_063_takes_the_flags_of_its_era(tmp_path):
    script = "#!/bin/sh\nvllm serve meta-llama/Llama-3.1-8B-Instruct " + " ".join(OLD_FLAGS_063) + \
        " --speculative-config '{}' --enable-log-requests --engine-use-ray\n"
    found = _lint(tmp_path, "run.sh", script, "--engine-version", "0.6.3")
    errors = {f["message"].split(":")[1].split()[0]: f["message"] for f in found if f["code"] == "VLLM001"}
    # flags added later name the release that adds them; --engine-use-ray left in 0.6.2 (its parser
    # has no such flag: vllm 0.6.1 is the last release with it)
    assert set(errors) == {"--speculative-config", "--enable-log-requests", "--engine-use-ray"}
    assert "added in 0.8.2" in errors["--speculative-config"]
    assert "added in 0.10.1" in errors["--enable-log-requests"]
    assert "removed in 0.6.2" in errors["--engine-use-ray"]
    warned = [f["message"] for f in found if f["code"] == "VLLM023"]
    assert warned == ["--worker-use-ray is deprecated since 0.4.3; use --distributed-executor-backend=ray"]


def test_deprecated_flag_warns_with_its_replacement_then_errors_once_removed():
    assert _codes(["--disable-log-requests"], "0.11.0") == [
        ("VLLM023", "--disable-log-requests is deprecated since 0.10.1; use --enable-log-requests")]
    (code, msg), = _codes(["--disable-log-requests"], "0.33.0")
    assert code == "VLLM001" and "removed in 0.17.1" in msg and "--enable-log-requests" in msg
    assert _codes(["--disable-log-requests"], "0.7.3") == []


def test_underscores_need_the_flexible_parser():
    # FlexibleArgumentParser (`_` == `-`) first appears in 0.5.3 among the releases read
    assert [c for c, _ in _codes(["--max_model_len", "4096"], "0.5.0")] == ["VLLM001"]
    assert _codes(["--max_model_len", "4096"], "0.6.3") == []


def test_negated_switch_follows_its_release():
    # --no-enable-prefix-caching arrives with BooleanOptionalAction (0.6.5 among the releases read)
    assert [c for c, _ in _codes(["--no-enable-prefix-caching"], "0.6.3")] == ["VLLM001"]
    assert _codes(["--no-enable-prefix-caching"], "0.11.0") == []


def test_env_history_agrees_with_the_era_model():
    """vllm/envs.py's own VLLM_USE_V1 default flips to True in 0.8.0, the release era.py makes V1
    the default; the variable is gone once V0 is (era.py: V1 regardless from 0.11)."""
    from servefit.engines.vllm.era import era

    data = yaml.safe_load((ROOT / "src" / "servefit" / "data" / "engines" / "vllm_history.yaml").read_text())
    use_v1 = data["env"]["VLLM_USE_V1"]
    flip = next(v for v, d in use_v1["default"].items() if d is True)
    assert flip == "0.8.0" and era(flip).v1 and not era("0.7.3").v1
    removed = use_v1["in"][-1][1]
    assert removed is not None and era(removed, {"VLLM_USE_V1": "0"}).v1
