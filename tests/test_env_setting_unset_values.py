"""An engine setting given through its environment variable (TGI's MODEL_ID and NUM_SHARD) whose
value is written with a variable the repository leaves unset (SageMaker's HF_MODEL_ID and
SM_NUM_GPUS): the value is unknown, said once as SF001 where the variable is used, never read as
the literal text `${SM_NUM_GPUS}` (which TGI002 called an invalid int), and a model given that way
is not silently left unchecked by lint."""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.cli import main
from servefit.sources import detect

# the shape of TGI's own sagemaker-entrypoint.sh: SageMaker's variables renamed to TGI's
SAGEMAKER = """#!/bin/bash
export MODEL_ID="${HF_MODEL_ID}"
if [[ -n "${SM_NUM_GPUS}" ]]; then
  export NUM_SHARD="${SM_NUM_GPUS}"
fi
export HF_HUB_ENABLE_HF_TRANSFER="${TRANSFER}"
text-generation-launcher --port 8080
"""

COMPOSE = """services:
  tgi:
    image: ghcr.io/huggingface/text-generation-inference:3.0.1
    environment:
      MODEL_ID: ${HF_MODEL_ID}
      NUM_SHARD: ${SM_NUM_GPUS}
    command: --port 8080
"""

DOCKER_RUN = ("docker run --gpus all -e MODEL_ID=$HF_MODEL_ID -e NUM_SHARD=$SM_NUM_GPUS "
              "ghcr.io/huggingface/text-generation-inference:3.0.1 --port 8080\n")


def _lint(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str) -> list[str]:
    f = tmp_path / name
    f.write_text(text)
    main(["lint", str(f), "--gpu", "A10G"])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return [line[len(str(f)) + 1:] for line in out.splitlines() if line.startswith(str(f))]


def _unset(var: str) -> str:
    return (f"SF001 ${{{var}}} is not set in this repository: the value it gives Text Generation Inference is "
            "not known, so it is not checked")


def test_a_script_exporting_unset_sagemaker_variables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    got = _lint(tmp_path, capsys, "sagemaker-entrypoint.sh", SAGEMAKER)
    # at the `$` of each use; TRANSFER feeds a variable TGI takes no setting from: not reported
    assert got[:2] == [f"2:18: {_unset('HF_MODEL_ID')}", f"4:21: {_unset('SM_NUM_GPUS')}"]
    assert not any("TGI002" in g or "TRANSFER" in g for g in got)
    assert len(got) == 3 and got[2].startswith("7:1: SEC003 ")


@pytest.mark.parametrize("name, text, spans", [
    ("compose.yaml", COMPOSE, ("5:17", "6:18")),
    ("run.sh", DOCKER_RUN, ("1:35", "1:61")),
])
def test_compose_and_docker_run_environment(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                            text: str, spans: tuple[str, str]) -> None:
    got = _lint(tmp_path, capsys, name, text)
    assert got[:2] == [f"{spans[0]}: {_unset('HF_MODEL_ID')}", f"{spans[1]}: {_unset('SM_NUM_GPUS')}"]
    assert not any("TGI002" in g for g in got)


def test_a_known_value_is_still_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    got = _lint(tmp_path, capsys, "bad.sh", SAGEMAKER.replace('NUM_SHARD="${SM_NUM_GPUS}"', "NUM_SHARD=two").replace(
        '"${HF_MODEL_ID}"', "Qwen/Qwen2.5-7B-Instruct"))
    assert "4:20: TGI002 NUM_SHARD: invalid int value: 'two' [GPU: A10G ×1 from --gpu]" in got
    assert not any("SF001" in g for g in got)


@pytest.mark.parametrize("engine, name, reads", [
    ("tgi", "MODEL_ID", True), ("tgi", "NUM_SHARD", True), ("tgi", "HF_HUB_ENABLE_HF_TRANSFER", False),
    ("llamacpp", "LLAMA_ARG_CTX_SIZE", True), ("vllm", "HF_TOKEN", False), ("no-such-engine", "X", False),
])
def test_which_variables_carry_a_setting(engine: str, name: str, reads: bool) -> None:
    assert detect.reads_setting_env(engine, name) is reads


def test_the_server_keeps_its_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The variables' loop once reused the name of the server's name in to_site: the compose
    service was called after the last variable it read (HF_MODEL_ID / NUM_SHARD)."""
    f = tmp_path / "compose.yaml"
    f.write_text(COMPOSE)
    main(["models", str(f), "--format", "json"])
    assert '"server": "compose/tgi"' in capsys.readouterr().out
