"""CLI conventions users know from ruff: `-` for stdin with --stdin-filename, NO_COLOR /
FORCE_COLOR / --color, --quiet, --statistics, --show-source, --output-format (and --format),
shell completion, a --help that speaks to users."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from servefit.cli import build_parser, main

SCRIPT = ("#!/bin/sh\n# servefit: gpu=L4\n"
          "vllm serve meta-llama/Llama-3.1-8B-Instruct --host 127.0.0.1 --max-model-len 131072\n")
ERR = ("max-model-len 131,072 needs 16.00 GiB of KV cache per GPU, 4.22 GiB is left on the NVIDIA L4; the largest "
       "that fits is 34,576 [GPU: L4 ×1 from servefit directive (line 2)]")


@pytest.fixture
def stdin(monkeypatch):
    def feed(text: str) -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode()), encoding="utf-8"))
    return feed


@pytest.fixture(autouse=True)
def plain_env(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)


@pytest.fixture
def script(tmp_path):
    p = tmp_path / "serve.sh"
    p.write_text(SCRIPT, encoding="utf-8")
    return str(p)


def test_lint_stdin_with_a_file_name(stdin, capsys):
    stdin(SCRIPT)
    assert main(["lint", "-", "--stdin-filename", "deploy/serve.sh"]) == 1
    assert capsys.readouterr().out == (f"deploy/serve.sh:3:78: VLLM003 {ERR}\n"
                                       "1 error, 0 warnings, 0 info in 1 file (1 server)\n")


def test_lint_stdin_without_a_name_is_read_by_its_look(stdin, capsys):
    stdin(SCRIPT)
    assert main(["lint", "-", "--format", "json"]) == 1
    [f] = json.loads(capsys.readouterr().out)
    assert f["location"] == {"file": "<stdin>.sh", "line": 3, "column": 78}
    stdin("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: v\n"
          "      image: vllm/vllm-openai:v0.11.0\n      args: [--model, Qwen/Qwen2.5-7B-Instruct]\n")
    assert main(["lint", "-", "--list-sites", "--format", "json"]) == 0
    [site] = json.loads(capsys.readouterr().out)
    assert site["file"] == "<stdin>.yaml" and site["model"] == "Qwen/Qwen2.5-7B-Instruct"


def test_estimate_and_explain_read_stdin(stdin, capsys):
    stdin(SCRIPT.replace("131072", "8192"))
    assert main(["estimate", "-", "--format", "json"]) == 0
    [plan] = json.loads(capsys.readouterr().out)  # standard input is a file: a list of servers
    assert plan["gpu"]["name"] == "NVIDIA L4" and plan["max_model_len"] == 8192
    stdin(SCRIPT.replace("131072", "8192"))
    assert main(["explain", "-", "--gpu", "L4"]) == 0
    assert "1 × NVIDIA L4 (22.03 GiB" in capsys.readouterr().out
    stdin("just some text\n")
    assert main(["estimate", "-"]) == 2
    assert capsys.readouterr().err == "servefit: error: <stdin>.yaml: no serving engine found in standard input\n"


@pytest.mark.parametrize(("env", "flag", "colored"), [
    ({}, None, False),  # not a terminal
    ({"FORCE_COLOR": "1"}, None, True),
    ({"FORCE_COLOR": "0"}, None, False),
    ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, None, False),  # NO_COLOR wins over FORCE_COLOR
    ({"NO_COLOR": "1"}, "always", True),  # the flag wins over both
    ({"FORCE_COLOR": "1"}, "never", False),
    ({}, "always", True),
])
def test_color(monkeypatch, capsys, script, env, flag, colored):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    extra = ["--color", flag] if flag else []
    main(["lint", script, *extra])
    main(["estimate", script, *extra])
    main(["explain", script, *extra])
    out = capsys.readouterr().out
    assert out.count("\x1b[") > 0 if colored else "\x1b[" not in out
    if colored:  # all three colour
        lint_part, rest = out.split("1 error", 1)
        assert "\x1b[31mVLLM003\x1b[0m" in lint_part and rest.count("\x1b[") > 2


def test_quiet_statistics_show_source(capsys, script, tmp_path):
    assert main(["lint", script, "-q"]) == 1
    assert capsys.readouterr().out == f"{script}:3:78: VLLM003 {ERR}\n"
    assert main(["lint", script, "-q", "--format", "json", "-o", str(tmp_path / "r.json")]) == 1
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err == ""  # quiet: not even the summary of what -o wrote
    assert main(["lint", script, "--statistics"]) == 1
    assert capsys.readouterr().out == "1\tVLLM003\tmax-model-len-exceeds-kv-cache\n"
    assert main(["lint", script, "--show-source"]) == 1
    assert capsys.readouterr().out.splitlines()[1:4] == [
        "  |",
        "3 | vllm serve meta-llama/Llama-3.1-8B-Instruct --host 127.0.0.1 --max-model-len 131072",
        "  |                                                                              ^^^^^^",
    ]


def test_statistics_count_per_rule_most_frequent_first(capsys):
    from servefit.core import Finding
    from servefit.report.lint_text import statistics

    fs = [Finding("B2", "bee", "warning", "m"), Finding("A1", "ay", "error", "m"), Finding("B2", "bee", "warning", "n")]
    assert statistics(fs) == "2\tB2\tbee\n1\tA1\tay\n"
    assert statistics([]) == ""


def test_output_format_is_format(capsys, script):
    assert main(["lint", script, "--output-format", "json"]) == 1
    a = capsys.readouterr().out
    assert main(["lint", script, "--format", "json"]) == 1
    assert a == capsys.readouterr().out and json.loads(a)[0]["code"] == "VLLM003"
    assert main(["estimate", script, "--output-format", "json"]) == 1  # the script refuses its max-model-len on the L4: exit 1, as lint
    assert json.loads(capsys.readouterr().out)[0]["engine"] == "vllm"


def test_help_speaks_to_users(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "Lint and tune LLM serving configs" in out
    assert "servefit/commands" not in out and "add_parser" not in out and "subcommand lives" not in out


def test_no_internal_vocabulary_in_help_rule_docs_and_messages(capsys):
    import re

    from servefit.rules.catalog import rules

    texts = []
    parser = build_parser()
    texts.append(parser.format_help())
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    texts += [p.format_help() for p in sub.choices.values()]
    for code, rule in rules().items():
        texts.append(json.dumps(rule))
        main(["rule", code])
        texts.append(capsys.readouterr().out)
    from pathlib import Path

    texts.append((Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8"))
    bad = [m.group(0) for t in texts for m in re.finditer(r"(?i)\bseed[- ]?(?:0\d\d|root cause|\d)\b[^\n]{0,40}", t)]
    assert bad == []


def test_completion_scripts(tmp_path):
    out = subprocess.run([sys.executable, "-m", "servefit", "completion", "bash"], capture_output=True, text=True,
                         check=True).stdout
    (tmp_path / "c.bash").write_text(out)

    def complete(*words: str) -> list[str]:
        line = " ".join(["servefit", *words])
        code = (f"source {tmp_path / 'c.bash'}; COMP_WORDS=({line}); COMP_CWORD={len(words)}; "
                "_servefit; printf '%s\\n' \"${COMPREPLY[@]}\"")
        return subprocess.run(["bash", "-c", code], capture_output=True, text=True, check=True).stdout.split()

    assert complete("li") == ["lint"] and complete("comp") == ["completion"]
    assert complete("lint", "--show-s") == ["--show-source"]
    assert complete("lint", "--color", "") == ["auto", "always", "never"]
    assert complete("lint", "--output-format", "s") == ["sarif"]
    assert complete("estimate", "--gpu-m") == ["--gpu-memory"]
    for shell, marker in (("zsh", "#compdef servefit"), ("fish", "complete -c servefit")):
        text = subprocess.run([sys.executable, "-m", "servefit", "completion", shell], capture_output=True,
                              text=True, check=True).stdout
        assert text.startswith(marker) if shell == "zsh" else marker in text
        assert "--show-source" in text or "-l show-source" in text
        exe = __import__("shutil").which(shell)
        if exe:  # a syntax check where the shell is installed
            subprocess.run([exe, "-n", "-c" if shell == "fish" else "-n", text] if shell == "fish" else
                           [exe, "-n", "-c", text], check=True)


def test_the_readme_opening_example_is_what_servefit_prints(capsys):
    """The first console block of the README is a real run: the command, then its output verbatim."""
    import shlex
    from pathlib import Path

    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    block = readme.split("```console\n", 1)[1].split("```", 1)[0]
    command, shown = block.split("\n", 1)
    argv = shlex.split(command.removeprefix("$ "))
    assert argv[0] == "servefit"
    assert main(argv[1:]) == 1  # it refuses to start: exit 1, as lint would
    assert capsys.readouterr().out == shown


def test_stdin_uses_the_configuration_of_the_file_it_stands_for(stdin, capsys, tmp_path, monkeypatch):
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "servefit.toml").write_text('gpu = "H100"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    stdin("vllm serve meta-llama/Llama-3.1-8B-Instruct --host 127.0.0.1 --max-model-len 131072\n")
    assert main(["lint", "-", "--stdin-filename", "team/serve.sh", "--format", "json"]) == 0  # fits an H100
    stdin("vllm serve meta-llama/Llama-3.1-8B-Instruct --host 127.0.0.1 --max-model-len 131072\n")
    assert main(["lint", "-", "--stdin-filename", "serve.sh", "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert '"SF110"' in out.split("]\n", 1)[1]  # without the team's config no GPU is known


def test_output_file_prints_a_summary_and_dash_is_stdout(capsys, script, tmp_path, monkeypatch):
    """`lint -o FILE` used to print nothing yet exit 1: a failing CI step showed no reason."""
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "r.sarif"
    assert main(["lint", script, "--format", "sarif", "-o", str(report)]) == 1
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err == f"servefit: 1 error, 0 warnings, 0 info in 1 file (1 server); wrote {report}\n"
    assert '"ruleId": "VLLM003"' in report.read_text()
    # `-o -` is standard output, beside a file for the second format; no file named "-" appears
    assert main(["lint", script, "--format", "github", "--format", "sarif", "-o", "-", "-o", str(report)]) == 1
    cap = capsys.readouterr()
    assert cap.out.startswith("::error file=") and cap.err == ""
    assert not (tmp_path / "-").exists()
