"""Ollama through IPEX-LLM on Intel GPUs (intelanalytics/ipex-llm-inference-cpp-xpu): the image
runs Ollama when `start-ollama.sh` or `ollama serve` starts it; a container of it that starts
neither is said to be unread (SF116), never a silent "0 servers"."""

from __future__ import annotations

import json

import pytest

from servefit.cli import main
from servefit.sources import detect

IMAGE = "intelanalytics/ipex-llm-inference-cpp-xpu:2.2.0-SNAPSHOT"
ENV = "    environment:\n      - OLLAMA_NUM_GPU=999\n      - ZES_ENABLE_SYSMAN=1\n      - DEVICE=Arc\n"


def _lint(tmp_path, capsys, command: str | None, env: str = ENV) -> tuple[int, list[dict]]:
    f = tmp_path / "compose.yaml"
    cmd = f"    command: {command}\n" if command is not None else ""
    f.write_text(f"services:\n  ollama:\n    image: {IMAGE}\n    devices: [/dev/dri]\n{env}{cmd}", encoding="utf-8")
    rc = main(["lint", str(f), "--gpu", "Arc A770", "--format", "json"])
    return rc, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("command", [
    "bash start-ollama.sh",
    "bash -x /llm/scripts/start-ollama.sh",
    '''bash -c "cd /llm/scripts/ && source ipex-llm-init --gpu --device $$DEVICE && bash start-ollama.sh && tail -f /dev/null"''',
    "sh -c 'mkdir -p /llm/ollama && cd /llm/ollama && init-ollama && exec ./ollama serve'",
])
def test_ipex_ollama_is_an_ollama_server(tmp_path, capsys, command):
    rc, findings = _lint(tmp_path, capsys, command)
    codes = [f["code"] for f in findings]
    # one Ollama server, read: it loads models on request and this file names none
    assert (rc, codes) == (0, ["SF115"])


@pytest.mark.parametrize("command", [None, "tail -f /dev/null", "bash run.sh"])
def test_ipex_image_that_starts_no_server_says_so(tmp_path, capsys, command):
    rc, findings = _lint(tmp_path, capsys, command, env="")
    assert rc == 0
    assert [(f["code"], f["location"]["line"], f["location"]["column"]) for f in findings] == [("SF116", 3, 12)]
    assert findings[0]["message"] == (
        f"{IMAGE} runs Ollama only when a command starts it (`bash /llm/scripts/start-ollama.sh`, or "
        "`init-ollama` then `./ollama serve`); this container's command starts none that servefit can read, "
        "so no server was read here. Give the container that command, or lint the script it runs")


def test_recognition_data():
    assert detect.find_engine(["bash", "/llm/scripts/start-ollama.sh"]) == (1, "ollama", 1)
    assert detect.launcher_image(IMAGE) is not None and detect.launcher_image(IMAGE)[0] == "ollama"
    assert detect.launcher_image("ollama/ollama:0.12.3") is None
    assert detect.engine_of_image(IMAGE) is None  # the image alone is not taken as a running Ollama
