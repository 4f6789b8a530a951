"""AWS's SageMaker container of TGI (huggingface-pytorch-tgi-inference): it was no TGI image to
servefit, so a compose file, a manifest or a Terraform SageMaker model running it held no server,
without a word. Its tag names PyTorch first (2.1.1-tgi1.4.0-gpu-...: TGI 1.4.0, not 2.1.1) and
its entrypoint (TGI's sagemaker-entrypoint.sh) exports HF_MODEL_ID as MODEL_ID, SM_NUM_GPUS as
NUM_SHARD, HF_MODEL_QUANTIZE as QUANTIZE."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main
from servefit.sources import detect, image_release

DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-tgi-inference"

COMPOSE = f"""services:
  llm:
    image: {DLC}:2.1.1-tgi1.4.0-gpu-py310-cu121-ubuntu20.04
    environment:
      HF_MODEL_ID: mistralai/Mistral-7B-Instruct-v0.2
      SM_NUM_GPUS: "2"
      MAX_INPUT_LENGTH: "2048"
      MAX_TOTAL_TOKENS: "4096"
"""

TERRAFORM = """resource "aws_sagemaker_model" "llm" {
  primary_container {
    image = "763104351884.dkr.ecr.${var.aws_region}.amazonaws.com/huggingface-pytorch-tgi-inference:2.1.1-tgi1.4.0-gpu-py310-cu121-ubuntu20.04"
    environment = {
      HF_MODEL_ID = "mistralai/Mistral-7B-Instruct-v0.2"
      SM_NUM_GPUS = "1"
    }
  }
}
"""


@pytest.mark.parametrize("tag, version", [
    ("2.1.1-tgi1.4.0-gpu-py310-cu121-ubuntu20.04", "1.4.0"),
    ("2.3.0-tgi2.2.0-gpu-py310-cu121-ubuntu22.04", "2.2.0"),
    ("2.4.0-gpu-py311-cu124-ubuntu22.04", None),  # no TGI version in the tag
])
def test_the_tgi_version_in_the_tag(tag: str, version: str | None) -> None:
    assert detect.engine_of_image(f"{DLC}:{tag}") == "tgi"
    assert image_release.version_of_image(f"{DLC}:{tag}") == version


def _estimate(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> dict:
    f = tmp_path / "compose.yaml"
    f.write_text(text)
    main(["estimate", str(f), "--gpu", "A10G", "--format", "json"])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return json.loads(out)[0]


def test_sagemaker_variables_are_the_launchers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    got = _estimate(tmp_path, capsys, COMPOSE)
    assert (got["engine"], got["engine_version"], got["server"]["name"]) == ("tgi", "1.4.0", "compose/llm")
    assert got["model"]["ref"] == "mistralai/Mistral-7B-Instruct-v0.2"
    assert (got["num_shard"], got["parallel"]["tensor"], got["max_total_tokens"]) == (2, 2, 4096)


def test_the_entrypoints_export_wins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """sagemaker-entrypoint.sh: `export NUM_SHARD="${SM_NUM_GPUS}"` when SM_NUM_GPUS is set."""
    got = _estimate(tmp_path, capsys, COMPOSE + '      NUM_SHARD: "1"\n')
    assert (got["num_shard"], got["parallel"]["tensor"]) == (2, 2)


def test_an_unset_sagemaker_variable_is_said_where_it_is_used(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "compose.yaml"
    f.write_text(COMPOSE.replace('SM_NUM_GPUS: "2"', "SM_NUM_GPUS: ${GPUS}"))
    main(["lint", str(f), "--gpu", "A10G"])
    out = capsys.readouterr().out
    assert (f"{f}:6:20: SF001 ${{GPUS}} is not set in this repository: the value it gives Text Generation "
            "Inference is not known, so it is not checked") in out
    assert "TGI002" not in out


def test_terraform_running_it_is_said_unchecked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "sagemaker.tf"
    f.write_text(TERRAFORM)
    main(["lint", str(f)])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{f}:3:14: SF108 servefit does not read Terraform, and this file starts Text "
                             "Generation Inference here")
