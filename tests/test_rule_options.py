"""Rule options, kube-linter style: `[tool.servefit.rules.VLLM017] max = 0.9` moves the threshold
of the one check that emits VLLM017, per file (nearest configuration), validated by the config
schema and documented with the rule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from servefit import config as config_mod
from servefit.rules.catalog import rules
from servefit.rules.docs import markdown, render

SCRIPT = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --gpu-memory-utilization 0.92\n"
# on an H100: 0.92 is below the default 0.95; 451,408 KV tokens hold 55.10 requests of 8,192


def lint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "servefit", "lint", "--gpu", "H100", "--format", "json", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


def found(proc: subprocess.CompletedProcess) -> set[tuple[str, str, int, int]]:
    return {(Path(f["location"]["file"]).name, f["code"], f["location"]["line"], f["location"]["column"])
            for f in json.loads(proc.stdout)}


def test_defaults_do_not_fire(tmp_path: Path) -> None:
    (tmp_path / "serve.sh").write_text(SCRIPT)
    codes = {c for _, c, _, _ in found(lint("serve.sh", cwd=tmp_path))}
    assert "VLLM017" not in codes and "VLLM019" not in codes


def test_options_in_servefit_toml_move_the_thresholds(tmp_path: Path) -> None:
    (tmp_path / "serve.sh").write_text(SCRIPT)
    (tmp_path / "servefit.toml").write_text("[rules.VLLM017]\nmax = 0.9\n\n[rules.VLLM019]\nmin = 60\n")
    got = found(lint("serve.sh", cwd=tmp_path))
    assert ("serve.sh", "VLLM017", 1, 91) in got  # the 0.92
    assert ("serve.sh", "VLLM019", 1, 61) in got  # the 8192


def test_option_at_the_threshold_is_inclusive_for_max(tmp_path: Path) -> None:
    (tmp_path / "serve.sh").write_text(SCRIPT)
    hit = found(lint("serve.sh", "--config", "rules.VLLM017.max=0.92", cwd=tmp_path))
    miss = found(lint("serve.sh", "--config", "rules.VLLM017.max=0.93", cwd=tmp_path))
    assert ("serve.sh", "VLLM017", 1, 91) in hit and not any(c == "VLLM017" for _, c, _, _ in miss)


def test_option_can_silence_the_default(tmp_path: Path) -> None:
    (tmp_path / "serve.sh").write_text(SCRIPT.replace("0.92", "0.97"))
    assert any(c == "VLLM017" for _, c, _, _ in found(lint("serve.sh", cwd=tmp_path)))
    assert not any(c == "VLLM017" for _, c, _, _ in
                   found(lint("serve.sh", "--config", "rules.VLLM017.max=0.98", cwd=tmp_path)))


def test_options_follow_each_files_nearest_config(tmp_path: Path) -> None:
    for d in ("strict", "lax"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "serve.sh").write_text(SCRIPT)
    (tmp_path / "strict" / "servefit.toml").write_text("[rules.VLLM017]\nmax = 0.9\n")
    proc = lint("strict/serve.sh", "lax/serve.sh", cwd=tmp_path)
    files = {Path(f["location"]["file"]).parent.name for f in json.loads(proc.stdout) if f["code"] == "VLLM017"}
    assert files == {"strict"}


@pytest.mark.parametrize("toml, needle", [
    ("[rules.VLLM017]\nmax = 1.5\n", "tool.servefit.rules.VLLM017.max: must be at most 1"),
    ("[rules.VLLM017]\nmax = \"high\"\n", "tool.servefit.rules.VLLM017.max: expected number"),
    ("[rules.VLLM017]\nmaximum = 0.9\n", "tool.servefit.rules.VLLM017.maximum: unknown key"),
    ("[rules.VLLM999]\nmax = 0.9\n", "tool.servefit.rules.VLLM999: unknown key"),
    ("[rules.VLLM019]\nmin = -1\n", "tool.servefit.rules.VLLM019.min: must be at least 0"),
])
def test_bad_options_are_one_line_and_exit_2(tmp_path: Path, toml: str, needle: str) -> None:
    (tmp_path / "serve.sh").write_text(SCRIPT)
    (tmp_path / "servefit.toml").write_text(toml)
    proc = lint("serve.sh", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert needle in proc.stderr and "Traceback" not in proc.stderr
    # the schema says the same as the interpreter that lint uses
    import tomllib

    data = tomllib.loads(toml)
    assert config_mod.validate(data)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, config_mod.schema())


def test_config_schema_options_are_the_catalogues() -> None:
    """Every option a rule declares can be set, with the same bounds, and nothing else can."""
    props = config_mod.schema()["properties"]["rules"]["properties"]
    declared = {code: r["options"] for code, r in rules().items() if r.get("options")}
    assert set(props) == set(declared) == {"VLLM017", "VLLM019"}
    for code, opts in declared.items():
        assert set(props[code]["properties"]) == set(opts)
        for name, o in opts.items():
            sch = props[code]["properties"][name]
            assert sch["type"] == o["type"]
            assert all(sch.get(k) == o.get(k) for k in ("minimum", "maximum"))
            assert f"default {o['default']}" in sch["description"]
            assert not config_mod.validate({"rules": {code: {name: o["default"]}}})


def test_options_are_documented() -> None:
    text = render(rules()["VLLM017"])
    assert "## Options" in text and "- `max` (number, default 0.95, minimum 0, maximum 1)" in text
    assert "[tool.servefit.rules.VLLM017]" in text
    md = markdown(rules())
    assert "- `min` (number, default 2, minimum 0)" in md
