"""Shapes that start vLLM through a shell or with the image's entrypoint cleared: an exec-form
ENTRYPOINT that runs `/bin/bash -c "... $MODEL_NAME ..."` (bash expands the ENV values; SF107 said
the exec form passes them literally), and `ENTRYPOINT []` / compose `entrypoint: []` or `""` with
a command (the image's `vllm serve` is dropped; SF106 said the container ran `vllm serve vllm
serve ...`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main
from servefit.sources import scan_file

BASH_C = """FROM vllm/vllm-openai:v0.9.2
ENV MODEL_NAME=Qwen/Qwen2.5-7B-Instruct \\
    MAX_LEN=8192
ENTRYPOINT ["/bin/bash", "-c", "python3 -m vllm.entrypoints.openai.api_server --model $MODEL_NAME --max-model-len ${MAX_LEN:-4096}"]
"""
CLEARED = """FROM vllm/vllm-openai:v0.9.2
ENTRYPOINT []
CMD vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000 --max-model-len 16384
"""
DIRECT = """FROM python:3.12
ENV MODEL_NAME=Qwen/Qwen2.5-7B-Instruct
ENTRYPOINT ["vllm", "serve", "$MODEL_NAME"]
"""


def _codes(text: str) -> tuple[list[str], list[str]]:
    res = scan_file("Dockerfile", text)
    return [f.code for f in res.findings], [t.text for t in res.sites[0].argv]


def test_a_shell_in_exec_form_expands_env() -> None:
    codes, argv = _codes(BASH_C)
    assert codes == []
    assert argv == ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen2.5-7B-Instruct",
                    "--max-model-len", "8192"]


def test_the_exec_form_without_a_shell_still_says_literal() -> None:
    codes, argv = _codes(DIRECT)
    assert codes == ["SF107"] and argv == ["vllm", "serve", "$MODEL_NAME"]


def test_an_empty_entrypoint_clears_the_images() -> None:
    codes, argv = _codes(CLEARED)
    assert codes == []
    assert argv == ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--port", "8000", "--max-model-len", "16384"]


@pytest.mark.parametrize("text", [BASH_C, CLEARED])
def test_tune_writes_the_dockerfile_once(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> None:
    f = tmp_path / "Dockerfile"
    f.write_text(text)
    main(["tune", str(f), "--gpu", "L4", "--write"])
    written = f.read_text()
    assert written != text and "--max-num-seqs" in written
    line = next(ln for ln in written.splitlines() if ln.startswith(("ENTRYPOINT [\"", "CMD ")))
    if line.startswith("ENTRYPOINT"):
        json.loads(line.removeprefix("ENTRYPOINT "))  # still an exec form
    main(["tune", str(f), "--gpu", "L4", "--write"])
    assert f.read_text() == written
    assert "Traceback" not in capsys.readouterr().err


COMPOSE = """services:
  listed:
    image: vllm/vllm-openai:v0.9.2
    entrypoint: []
    command: ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"]
  blank:
    image: vllm/vllm-openai:v0.9.2
    entrypoint: ""
    command: vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192
  kept:
    image: vllm/vllm-openai:v0.9.2
    entrypoint: null
    command: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"]
"""


def test_compose_empty_entrypoints_clear_the_images() -> None:
    res = scan_file("compose.yaml", COMPOSE)
    assert [f.code for f in res.findings] == []
    assert [[t.text for t in s.argv][:3] for s in res.sites] == [
        ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"], ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"],
        ["vllm", "serve", "--model"]]


@pytest.mark.parametrize("cmd", ['["/usr/bin/supervisord"]', '["supervisord", "-n"]', '["/start.sh"]',
                                 '["/opt/app/entrypoint.sh", "--x"]'])
def test_a_program_as_cmd_under_an_engine_entrypoint_is_sf106_not_a_model(cmd: str) -> None:
    # a vLLM image with supervisord as CMD (Hiroaki-Masuzawa/llm_vlm_memo): read as `vllm serve /usr/bin/supervisord`,
    # an unknown model, where the container runs a program the engine's entrypoint takes for its model
    res = scan_file("Dockerfile", f"FROM vllm/vllm-openai:v0.9.2\nRUN pip install supervisor\nCMD {cmd}\n")
    assert res.sites == [] and [(f.code, f.span.line, f.span.col) for f in res.findings] == [("SF106", 3, 7)]
    first = json.loads(cmd)[0]
    assert f"the container runs `vllm serve {first}" in res.findings[0].message
    assert "Set the entrypoint (Dockerfile `ENTRYPOINT`, k8s `command`" in res.findings[0].message


def test_a_model_path_as_cmd_is_still_the_engine_argument() -> None:
    res = scan_file("Dockerfile", 'FROM vllm/vllm-openai:v0.9.2\nCMD ["/models/Qwen2.5-7B-Instruct", "--max-model-len", "8192"]\n')
    assert [t.text for t in res.sites[0].argv][:3] == ["vllm", "serve", "/models/Qwen2.5-7B-Instruct"]
    assert res.findings == []
