"""A command built in a string and run later (`CMD="vllm serve ... '$N'"`, then `$CMD` or
`eval $CMD`): eval reads quotes again, and a value computed when the script runs (`$(nvidia-smi
...)`) carried through the string is unknown, not wrong; lint, estimate and explain agree. Shapes
from a public Hugging Face Inference Endpoints entrypoint script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main
from servefit.sources import scan_file

HEAD = 'N=${N:-$(nvidia-smi --list-gpus | wc -l)}\n'


def _lint(capsys: pytest.CaptureFixture[str], path: Path) -> list[str]:
    main(["lint", str(path), "--gpu", "L4", "--output-format", "json"])
    return sorted(f["code"] for f in json.loads(capsys.readouterr().out))


@pytest.mark.parametrize("run", ["$CMD", "eval $CMD"])
def test_a_runtime_value_carried_through_a_string_is_unknown_not_invalid(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], run: str) -> None:
    quote = "'" if run.startswith("eval") else ""
    p = tmp_path / "entrypoint.sh"
    p.write_text(HEAD + f'CMD="vllm serve Qwen/Qwen2.5-7B-Instruct --tensor-parallel-size {quote}$N{quote}"\n{run}\n')
    [site] = scan_file(str(p)).sites
    assert [t.text for t in site.argv] == ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size",
                                           "$(nvidia-smi --list-gpus | wc -l)"]
    assert _lint(capsys, p) == ["SEC003", "SF001", "VLLM018"]  # no VLLM002 "invalid int value"
    main(["estimate", str(p), "--gpu", "L4", "--format", "json"])
    [plan] = json.loads(capsys.readouterr().out)
    assert plan["outcome"] == "started" and plan["parallel"]["tensor"] == 1
    assert any(a.startswith("--tensor-parallel-size is $(nvidia-smi --list-gpus | wc -l), which is not set here")
               for a in plan["assumptions"])


def test_a_wrong_value_in_the_same_string_is_still_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "entrypoint.sh"
    p.write_text(HEAD + 'CMD="vllm serve Qwen/Qwen2.5-7B-Instruct --tensor-parallel-size $N --max-num-seqs lots"\n$CMD\n')
    assert "VLLM002" in _lint(capsys, p)


def test_eval_reads_the_quotes_inside_the_string(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "entrypoint.sh"
    p.write_text("MODEL=${MODEL:-Qwen/Qwen2.5-7B-Instruct}\n"
                 "CMD=\"vllm serve $MODEL --host '0.0.0.0' --port 80 --max-model-len '8192'\"\neval $CMD\n")
    [site] = scan_file(str(p)).sites
    assert [t.text for t in site.argv] == ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--host", "0.0.0.0", "--port",
                                           "80", "--max-model-len", "8192"]
    assert _lint(capsys, p) == ["SEC003"]  # 0.0.0.0, not "'0.0.0.0'": every interface


@pytest.mark.parametrize("name, text, where", [
    ("compose.yaml", 'services:\n  llm:\n    image: vllm/vllm-openai:v0.10.2\n    entrypoint: ["/bin/sh", "-c"]\n'
                     '    command: ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"]\n', (5, 16)),
    ("Dockerfile", 'FROM vllm/vllm-openai:v0.10.2\nENTRYPOINT ["/bin/bash", "-c", "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"]\n',
     (2, 33)),
])
def test_sh_c_given_the_command_as_separate_words(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                                  text: str, where: tuple[int, int]) -> None:
    """SF119 (a public DynamoGraphDeployment's shape): the shell runs only `vllm`; no server starts."""
    p = tmp_path / name
    p.write_text(text)
    main(["lint", str(p), "--gpu", "L4", "--output-format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert [(f["code"], f["location"]["line"], f["location"]["column"]) for f in out] == [("SF119", *where)]
    assert scan_file(str(p)).sites == []


def test_sh_c_with_the_command_as_one_string_and_positional_parameters(tmp_path: Path) -> None:
    p = tmp_path / "serve.sh"
    p.write_text("sh -c 'exec vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192' worker\n"
                 "bash -c ./run.sh --flag\n")
    r = scan_file(str(p))
    assert [f.code for f in r.findings] == [] and len(r.sites) == 1


POD = """apiVersion: v1
kind: Pod
metadata:
  name: llm
spec:
  containers:
  - name: main
    image: vllm/vllm-openai:v0.10.2
    command: ["/bin/bash", "-c", "nvidia-smi; exec vllm serve \\"$@\\"", "--"]
    args: ["Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "131072"]
    resources:
      limits:
        nvidia.com/gpu: 1
"""


def test_sh_c_passes_the_words_after_its_name_as_dollar_at(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`bash -c 'exec vllm serve "$@"' -- ARGS`: the words after `--` ($0) are "$@". The model and
    --max-model-len were unread (SF002 "no model given", SF001 "$@ not known")."""
    p = tmp_path / "pod.yaml"
    p.write_text(POD)
    [site] = scan_file(str(p)).sites
    assert [t.text for t in site.argv] == ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "131072"]
    assert _lint(capsys, p) == ["SEC004", "VLLM006"]
    main(["tune", str(p), "--gpu", "L4", "--write"])
    capsys.readouterr()
    assert p.read_text() == POD.replace('"--max-model-len", "131072"]', '"--max-model-len", "32768", "--max-num-seqs", "32"]')
