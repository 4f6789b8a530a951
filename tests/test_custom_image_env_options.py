"""Someone else's build of an engine image run without a command, configured by environment
variables named after the engine's options (a public Helm chart's substratusai/vllm: MODEL,
MAX_MODEL_LEN, GPU_MEMORY_UTILIZATION, PORT): lint said "no model given in the command" of a server
whose model the file names. They are taken as those options, and the plan says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

COMPOSE = """services:
  llm:
    image: {image}
    environment:
      MODEL: mistralai/Mistral-7B-Instruct-v0.3
      MAX_MODEL_LEN: "8192"
      GPU_MEMORY_UTILIZATION: "0.85"
      VLLM_LOGGING_LEVEL: DEBUG
"""


def test_a_rebuild_configured_by_option_named_variables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "compose.yaml"
    p.write_text(COMPOSE.format(image="substratusai/vllm:v0.5.4"))
    main(["lint", str(p), "--gpu", "L4", "--list-sites", "--output-format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert (site["model"], site["settings"]) == ("mistralai/Mistral-7B-Instruct-v0.3",
                                                 {"max_model_len": 8192, "gpu_memory_utilization": 0.85})
    loc = site["settings_raw"]["max_model_len"]["location"]
    assert (loc["line"], loc["col"]) == (6, 23)  # the variable's value: tune writes there
    main(["estimate", str(p), "--gpu", "L4", "--format", "json"])
    [plan] = json.loads(capsys.readouterr().out)
    assert plan["max_model_len"] == 8192
    assert ("substratusai/vllm:v0.5.4 is not vLLM's own image and its command is not in this file: its environment "
            "variables named after options (MODEL, MAX_MODEL_LEN, GPU_MEMORY_UTILIZATION) are taken as those options, "
            "as such images' entrypoints pass them on; lint the entrypoint script to be sure") in plan["assumptions"]


def test_the_official_image_reads_no_such_variables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """vllm/vllm-openai runs `vllm serve` with the arguments given: MODEL means nothing to it."""
    p = tmp_path / "compose.yaml"
    p.write_text(COMPOSE.format(image="vllm/vllm-openai:v0.10.2"))
    main(["lint", str(p), "--gpu", "L4", "--list-sites", "--output-format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert site["model"] is None and site["settings"] == {}
