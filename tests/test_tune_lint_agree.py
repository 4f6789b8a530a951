"""tune and lint agree: tune reads the files it is given together, through the same assembly as
lint and estimate, and never writes a configuration that lint then flags."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

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


# the shape of the llama.cpp server compose files users publish (the ggml-org image, the command
# folded over lines). tune raised --parallel to 8 and -c to 8 x the context, as llama.cpp splits
# -c over the slots; lint then warned LCPP007 "-c 131072 is shared by 8 slots" about the very
# split tune had chosen.
LLAMACPP_COMPOSE = """# llama.cpp server, as the ggml-org image's README runs it
services:
  llamacpp-server:
    image: ghcr.io/ggml-org/llama.cpp:server-cuda-b6800
    ports:
      - "127.0.0.1:8080:8080"
    volumes:
      - ./models:/models
    command: >
      -m /models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf
      --ctx-size 8192 --n-gpu-layers 99
      --host 0.0.0.0 --port 8080{extra}
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: all
              capabilities: [gpu]
"""
# the shape of a llama-swap config: a macro for the server, one model, no -np (so the current
# build's automatic 4 slots with a unified cache); tune's explicit --parallel splits -c
LLAMA_SWAP = """healthCheckTimeout: 500
startPort: 10001
macros:
  "llama-server": >
    /app/llama-server
    --host 127.0.0.1 --port ${PORT}
    --flash-attn on -ngl 99
models:
  "qwen2.5-7b":
    cmd: |
      ${llama-server}
      --model /models/Qwen2.5-7B-Instruct-Q4_K_M.gguf
      --ctx-size 16384
      --jinja
    aliases:
      - gpt-4o-mini
    ttl: 300
"""
# the shape of an Ollama compose file behind Open WebUI: a chat model and an embedding model
# meant to stay loaded together. tune raised the context and the slots to 32768 x 4, and lint
# then warned OLLM010: a second model of that size no longer fits beside it.
OLLAMA_TWO_MODELS = """# Ollama for Open WebUI: a chat model and an embedding model stay loaded
services:
  ollama:
    image: ollama/ollama:0.12.3
    volumes:
      - ollama:/root/.ollama
    environment:
      - OLLAMA_KEEP_ALIVE=24h
      - OLLAMA_MAX_LOADED_MODELS=2
      - OLLAMA_NUM_PARALLEL={np}
      - OLLAMA_CONTEXT_LENGTH={ctx}
    entrypoint: ["/bin/sh", "-c", "ollama serve & sleep 5 && ollama pull qwen2.5:7b && ollama pull nomic-embed-text && wait"]
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu]
volumes:
  ollama:
"""
# SGLang with its KV pool capped at two requests of 8k, and TGI with a lowered memory fraction and
# admission limit: tune never moved either (the cap and the fraction were out of its space)
SGLANG_CAP = """services:
  sglang:
    image: lmsysorg/sglang:v0.5.3-cu126
    command: python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-3B-Instruct --context-length 8192 --max-total-tokens 16384
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu]
"""
TGI_FRACTION = """services:
  tgi:
    image: ghcr.io/huggingface/text-generation-inference:3.3.4
    command: --model-id Qwen/Qwen2.5-3B-Instruct --max-total-tokens 8192
    environment:
      - CUDA_MEMORY_FRACTION=0.5
      - MAX_CONCURRENT_REQUESTS=4
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu]
"""
# (file name, text, tune's extra arguments) of the cases written here; all on an L4
SHAPES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "ollama-env": ("docker-compose.yml", OLLAMA_ENV, ()),
    "llamacpp-compose": ("docker-compose.yml", LLAMACPP_COMPOSE.format(extra=""), ()),
    # -n 40000: a request may generate 40000 tokens; 4 slots of 32768 would stop it early
    "llamacpp-n-predict": ("docker-compose.yml", LLAMACPP_COMPOSE.format(extra=" -n 40000").replace(
        "--ctx-size 8192", "--ctx-size 65536"), ("--min-concurrency", "4")),
    "llama-swap-macros": ("config.yaml", LLAMA_SWAP, ()),
    "ollama-two-models": ("docker-compose.yml", OLLAMA_TWO_MODELS.format(np=1, ctx=8192), ()),
    "sglang-pool-cap": ("docker-compose.yml", SGLANG_CAP, ()),
    "tgi-fraction": ("docker-compose.yml", TGI_FRACTION, ()),
}


def _cases() -> list[str]:
    return sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()) + list(SHAPES)


def _shape(tmp_path: Path, case: str) -> tuple[Path, tuple[str, ...]]:
    d = tmp_path / case
    name, text, extra = SHAPES[case]
    d.mkdir()
    (d / name).write_text(text)
    (tmp_path / "servefit.toml").write_text('gpu = "L4"\n')
    return d, extra


@pytest.mark.parametrize("case", _cases())
def test_lint_does_not_flag_what_tune_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    """The property, over every example and the shapes above: after `tune DIR --write`, lint
    reports no warning or error it did not report before (tune may fix findings, never add one),
    and a second `tune DIR --write` changes no byte."""
    extra: tuple[str, ...] = ()
    if case in SHAPES:
        d, extra = _shape(tmp_path, case)
    else:
        d = tmp_path / case
        shutil.copytree(EXAMPLES / case, d)
        shutil.copy(EXAMPLES / "servefit.toml", tmp_path / "servefit.toml")
    before = _flagged(capsys, d)
    main(["tune", str(d), "--write", *extra])
    capsys.readouterr()
    assert _flagged(capsys, d) - before == set()
    written = {p: p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}
    main(["tune", str(d), "--write", *extra])
    capsys.readouterr()
    assert {p: p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()} == written
    text = (d / SHAPES[case][0]).read_text() if case in SHAPES else ""
    if case == "ollama-env":  # tune did raise both, within the GPU
        assert "OLLAMA_NUM_PARALLEL=4" in text and "OLLAMA_CONTEXT_LENGTH=32768" in text
    if case in ("llamacpp-compose", "llama-swap-macros"):  # tune did split -c over more slots
        assert "--parallel 8" in text
    if case == "ollama-two-models":  # more slots, in what leaves a second model room
        assert "OLLAMA_NUM_PARALLEL=4" in text and "OLLAMA_CONTEXT_LENGTH=8192" in text
    if case == "sglang-pool-cap":  # the cap raised to the pool the memory holds at the fraction tune chose
        _, out = _run(capsys, "estimate", "--gpu", "L4", "--engine-version", "0.5.3", "--format", "json", "--", "python3",
                      "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen2.5-3B-Instruct", "--context-length", "8192",
                      "--mem-fraction-static", "0.9")
        pool = json.loads(out)["kv_cache_tokens"]
        assert text == SGLANG_CAP.replace("--max-total-tokens 16384", f"--max-total-tokens {pool} --mem-fraction-static 0.9")
    if case == "tgi-fraction":  # the fraction raised to TGI's default, the admission limit above the users
        assert "CUDA_MEMORY_FRACTION=1.0" in text and "MAX_CONCURRENT_REQUESTS=64" in text


def _lint(capsys: pytest.CaptureFixture[str], d: Path) -> list[dict[str, Any]]:
    rc, out = _run(capsys, "lint", str(d), "--format", "json", "--fail-on", "never")
    return list(json.loads(out))


@pytest.mark.parametrize("case", ["llamacpp-compose", "llama-swap-macros"])
def test_lint_reports_the_split_tune_chose_as_tune_claims_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              case: str) -> None:
    """tune writes `-c C x N --parallel N` for N requests of C tokens; lint says the same split,
    as information, with the same numbers: each request up to C tokens, N slots."""
    d, _ = _shape(tmp_path, case)
    rc, out = _run(capsys, "tune", str(d), "--format", "json")
    best = json.loads(out)["sites"][0]["best"]
    context, users = best["context"], best["users"]
    assert (context, users) == ({"llamacpp-compose": 16384, "llama-swap-macros": 32768}[case], 8)
    main(["tune", str(d), "--write"])
    capsys.readouterr()
    split = [f for f in _lint(capsys, d) if f["code"] == "LCPP007"]
    assert [(f["severity"], f["message"].split(" [GPU:")[0]) for f in split] == [
        ("info", f"-c {context * users} is shared by {users} slots: each request can use at most {context} tokens "
                 "(n_ctx_seq)")]


def test_tune_keeps_every_slot_as_long_as_n_predict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With -n 40000, 4 slots of 32768 tokens would stop a request early (LCPP007 warns): tune
    finds no 4-slot config and writes nothing; 2 slots of 65536 hold it and are written."""
    d, extra = _shape(tmp_path, "llamacpp-n-predict")
    f = d / "docker-compose.yml"
    old = f.read_text()
    rc, out = _run(capsys, "tune", str(d), "--write", *extra)
    assert rc == 1 and "nothing meets the needs" in out and f.read_text() == old
    rc, out = _run(capsys, "tune", str(d), "--write", "--min-concurrency", "2")
    assert rc == 0 and "--ctx-size 131072 --n-gpu-layers 99" in f.read_text() and "--parallel 2" in f.read_text()
    assert [x["severity"] for x in _lint(capsys, d) if x["code"] == "LCPP007"] == ["info"]


def test_tune_leaves_a_second_ollama_model_no_less_room(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """OLLAMA_MAX_LOADED_MODELS=2 where a second model of this size already does not fit (16384 x
    4): tune gives this model no more memory than it takes (the scheduler loads the others in
    what it leaves), and says what would free it: OLLAMA_MAX_LOADED_MODELS=1, by hand."""
    d = tmp_path / "ollama"
    d.mkdir()
    (d / "docker-compose.yml").write_text(OLLAMA_TWO_MODELS.format(np=4, ctx=16384))
    (tmp_path / "servefit.toml").write_text('gpu = "L4"\n')
    assert ("OLLM010", "docker-compose.yml") in _flagged(capsys, d)
    rc, out = _run(capsys, "tune", str(d), "--format", "json")
    site = json.loads(out)["sites"][0]
    assert site["by_hand"] and site["by_hand"][0].startswith("OLLAMA_MAX_LOADED_MODELS=1 if this server runs")
    # the step names the size tune kept the model within: Ollama's own size of it (sched.go), not
    # the plan's GPU total
    assert re.search(r"kept this one within the 11\.\d\d GiB Ollama sizes it at now", site["by_hand"][0])
    assert site["best"]["memory_bytes"] <= site["current"]["memory_bytes"]
    over = [r for r in site["pareto"] if r["memory_bytes"] > site["current"]["memory_bytes"]]
    assert over == []
    rc, out = _run(capsys, "tune", str(d))
    assert "  by hand OLLAMA_MAX_LOADED_MODELS=1" in out
    # with one model loaded at a time, the whole GPU is this model's: tune takes more of it
    f = d / "docker-compose.yml"
    f.write_text(f.read_text().replace("OLLAMA_MAX_LOADED_MODELS=2", "OLLAMA_MAX_LOADED_MODELS=1"))
    rc, out = _run(capsys, "tune", str(d), "--format", "json")
    site = json.loads(out)["sites"][0]
    assert site["by_hand"] == [] and site["best"]["memory_bytes"] > site["current"]["memory_bytes"]


# the shape of a SkyPilot SGLang task: a 70B model over the node's GPUs, mem_fraction_static left
# to SGLang. tune once raised it to a fraction lint then warned SGL011 about (an OOM under load).
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
    f.write_text(SKY_SGLANG.replace("--port 30000", "--port 30000 --mem-fraction-static 0.995"))
    assert ("SGL011", "sglang.yaml") in _flagged(capsys, tmp_path)
    rc, out = _run(capsys, "tune", str(f), "--format", "json")
    site = json.loads(out)["sites"][0]
    assert site["current"]["outcome"] == "oom_under_load"
    assert site["current"]["feasible"] is False
    assert site["best"]["settings"]["mem_fraction_static"] < 0.95
