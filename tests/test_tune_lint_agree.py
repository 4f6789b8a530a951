"""tune and lint agree: tune reads the files it is given together, through the same assembly as
lint and estimate, and never writes a configuration that lint then flags."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from servefit.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# the shape of a public Ollama compose file: the model is pulled at start, the context and the
# parallel count are set in the environment (tune raised them to 32768 x 4 here, and lint then
# warned OLLM007 "each of the 4 slots gets the full num_ctx" although everything fits)
OLLAMA_ENV = """services:
  ollama:
    image: ollama/ollama:0.12.3
    environment:
      - OLLAMA_CONTEXT_LENGTH=8192
      - OLLAMA_NUM_PARALLEL=1
    entrypoint: ["/bin/sh", "-c", "ollama serve & sleep 5 && ollama pull qwen2.5:7b && wait"]
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu]
"""


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    rc = main(list(argv))
    return rc, capsys.readouterr().out


def _flagged(capsys: pytest.CaptureFixture[str], d: Path) -> set[tuple[str, str]]:
    rc, out = _run(capsys, "lint", str(d), "--format", "json", "--fail-on", "never")
    assert rc == 0
    return {(f["code"], str(Path(f["location"]["file"]).resolve().relative_to(d.resolve())))
            for f in json.loads(out) if f["severity"] in ("error", "warning")}


def test_tune_takes_the_named_files_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`tune compose.yaml Modelfile` assembled each file alone: the Modelfile's server was linked
    from both sides and tuned twice. Now it is one server, with the settings lint reads
    (num_ctx 131072 from the Modelfile, 4 slots from compose.yaml), named files or directory."""
    d = tmp_path / "ollama"
    shutil.copytree(EXAMPLES / "ollama", d)
    rc, out = _run(capsys, "lint", str(d), "--gpu", "RTX4090", "--format", "json", "--fail-on", "never")
    assert "131072 x 4" in next(f["message"] for f in json.loads(out) if f["code"] == "OLLM007")
    for argv in ([str(d / "compose.yaml"), str(d / "Modelfile")], [str(d)]):
        rc, out = _run(capsys, "tune", *argv, "--gpu", "RTX4090", "--format", "json")
        sites = json.loads(out)["sites"]
        assert rc == 0 and [s["site"] for s in sites] == ["compose/ollama"], argv
        now = sites[0]["current"]["settings"]
        assert (now["num_ctx"], now["OLLAMA_NUM_PARALLEL"]) == (131072, 4)


def _cases() -> list[str]:
    return sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()) + ["ollama-env"]


@pytest.mark.parametrize("case", _cases())
def test_lint_does_not_flag_what_tune_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    """The property, over every example: after `tune DIR --write`, lint reports no warning or
    error it did not report before (tune may fix findings, never add one)."""
    d = tmp_path / case
    if case == "ollama-env":
        d.mkdir()
        (d / "docker-compose.yml").write_text(OLLAMA_ENV)
        (tmp_path / "servefit.toml").write_text('gpu = "L4"\n')
    else:
        shutil.copytree(EXAMPLES / case, d)
        shutil.copy(EXAMPLES / "servefit.toml", tmp_path / "servefit.toml")
    before = _flagged(capsys, d)
    main(["tune", str(d), "--write"])
    capsys.readouterr()
    assert _flagged(capsys, d) - before == set()
    if case == "ollama-env":  # tune did raise both, within the GPU
        text = (d / "docker-compose.yml").read_text()
        assert "OLLAMA_NUM_PARALLEL=4" in text and "OLLAMA_CONTEXT_LENGTH=32768" in text


# the shape of a SkyPilot SGLang task: a 70B model over the node's GPUs, mem_fraction_static left
# to SGLang. tune raised it to 0.9, leaving 8 GiB outside the static pool where SGLang needs 15 GiB
# for the prefill activations and CUDA graphs; lint then warned SGL011 (an OOM under load).
SKY_SGLANG = """resources:
  accelerators: {H100: 8}
envs:
  MODEL_NAME: deepseek-ai/DeepSeek-R1-Distill-Llama-70B
run: |
  python -m sglang.launch_server \\
    --model-path $MODEL_NAME \\
    --tp $SKYPILOT_NUM_GPUS_PER_NODE \\
    --context-length 32768 \\
    --port 30000
"""


def test_tune_never_writes_an_sglang_fraction_lint_warns_about(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "sglang.yaml"
    f.write_text(SKY_SGLANG)
    assert _flagged(capsys, tmp_path) == set()
    rc, out = _run(capsys, "tune", str(f), "--format", "json")
    site = json.loads(out)["sites"][0]
    assert rc == 0 and site["gpu"]["count"] == 8
    front = site["pareto"]
    assert front and all(c["headroom"] >= 0 for c in front)  # no candidate short of SGLang's reserve
    main(["tune", str(f), "--write"])
    capsys.readouterr()
    assert _flagged(capsys, tmp_path) == set()
    # with the fraction forced up, the current config is the one short of the reserve, and says so
    f.write_text(SKY_SGLANG.replace("--port 30000", "--port 30000 --mem-fraction-static 0.95"))
    assert ("SGL011", "sglang.yaml") in _flagged(capsys, tmp_path)
    rc, out = _run(capsys, "tune", str(f), "--format", "json")
    site = json.loads(out)["sites"][0]
    assert site["current"]["outcome"] == "oom_under_load"
    assert site["current"]["feasible"] is False
    assert site["best"]["settings"]["mem_fraction_static"] < 0.95
