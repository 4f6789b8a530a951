"""What identifies each engine in a file is data (issue 14 item 2): the `recognise` key of
data/engines/<name>.yaml, validated by its schema, and what sources/detect.py answers from it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from servefit.sources import detect, image_release

SRC = Path(__file__).resolve().parent.parent / "src" / "servefit"
ENGINES = ("vllm", "llamacpp", "ollama", "tgi", "sglang")


@pytest.mark.parametrize("name", ENGINES)
def test_recognition_data_is_valid(name: str) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((SRC / "schemas" / "engine_recognition.schema.json").read_text())
    table = yaml.safe_load((SRC / "data" / "engines" / f"{name}.yaml").read_text())["recognise"]
    jsonschema.validate(table, schema)
    for pattern in table.get("images", []) + table["markers"]:
        re.compile(pattern)
    listen = yaml.safe_load((SRC / "data" / "engines" / f"{name}.yaml").read_text())["listen"]
    jsonschema.validate(listen, json.loads((SRC / "schemas" / "engine_listen.schema.json").read_text()))
    par = yaml.safe_load((SRC / "data" / "engines" / f"{name}.yaml").read_text()).get("parallel")
    if par is not None:
        jsonschema.validate(par, json.loads((SRC / "schemas" / "engine_parallel.schema.json").read_text()))


@pytest.mark.parametrize("name", ENGINES)
def test_log_and_sweep_data_is_valid(name: str) -> None:
    """What diagnose reads in each engine's logs and how sweeps set its context: data, schema-checked."""
    jsonschema = pytest.importorskip("jsonschema")
    doc = yaml.safe_load((SRC / "data" / "engines" / f"{name}.yaml").read_text())
    jsonschema.validate(doc["logs"], json.loads((SRC / "schemas" / "engine_logs.schema.json").read_text()))
    jsonschema.validate(doc["sweep"], json.loads((SRC / "schemas" / "engine_sweep.schema.json").read_text()))
    for pat in doc["logs"]["patterns"]:
        re.compile(pat["regex"].replace("%SIZE%", "x"))
    names = [p["name"] for p in doc["logs"]["patterns"]]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("words, expected", [
    (["vllm", "serve", "m"], ("vllm", 2)),
    (["vllm", "bench"], None),
    (["/usr/bin/python3", "-u", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], ("vllm", 4)),
    (["python", "-m", "vllm.entrypoints.cli.main", "serve", "m"], ("vllm", 4)),
    (["python", "-m", "vllm.entrypoints.cli.main", "bench"], None),
    (["/app/llama-server", "-m", "x.gguf"], ("llamacpp", 1)),
    (["./llama.cpp/build/bin/server", "-m", "x.gguf"], ("llamacpp", 1)),
    (["./server", "-m", "x.gguf"], None),
    (["ollama", "serve"], ("ollama", 2)),
    (["ollama", "run", "llama3"], None),
    (["text-generation-launcher", "--model-id", "m"], ("tgi", 1)),
    (["python3", "-m", "sglang.launch_server", "--model-path", "m"], ("sglang", 3)),
    (["sglang", "serve"], ("sglang", 2)),
])
def test_commands(words: list[str], expected: tuple[str, int] | None) -> None:
    assert detect.recognise(words) == expected


@pytest.mark.parametrize("image, engine, version", [
    ("vllm/vllm-openai:v0.11.0", "vllm", "0.11.0"),
    ("lmsysorg/sglang:v0.5.5-cu126", "sglang", "0.5.5"),
    ("ghcr.io/huggingface/text-generation-inference:3.3.4", "tgi", "3.3.4"),
    ("registry.local/tgi-custom:2.0", "tgi", None),  # someone's own image: its tag is not TGI's release
    ("myorg/sglang-srv:1.0", "sglang", None),
    ("ollama/ollama:0.12.3", "ollama", "0.12.3"),
    ("ghcr.io/ggml-org/llama.cpp:server-cuda-b6700", "llamacpp", "b6700"),
    ("ghcr.io/ggml-org/llama.cpp:full-cuda", None, None),  # not the server build
    ("myorg/llama-cpp-python:latest", None, None),
    ("vllm/vllm-router:latest", None, None),
])
def test_images(image: str, engine: str | None, version: str | None) -> None:
    assert detect.engine_of_image(image) == engine
    assert image_release.version_of_image(image) == version


def test_image_entrypoints() -> None:
    assert image_release.image_entrypoint("vllm/vllm-openai:v0.8.5") == (
        ["python3", "-m", "vllm.entrypoints.openai.api_server"], [], True)
    assert image_release.image_entrypoint("vllm/vllm-openai:v0.11.0") == (["vllm", "serve"], [], True)
    assert image_release.image_entrypoint("myorg/vllm:latest") == (["vllm", "serve"], [], False)
    assert image_release.image_entrypoint("ollama/ollama:0.12.3") == (["/bin/ollama"], ["serve"], True)
    assert image_release.image_entrypoint("lmsysorg/sglang:latest") == (["python3", "-m", "sglang.launch_server"], [], False)
    assert image_release.image_entrypoint("busybox") is None


def test_markers_and_model_commands() -> None:
    m = detect.markers()
    for text in ("vllm serve", "llama-server -m", "ollama serve", "text-generation-launcher", "sglang", "llama-swap",
                 "--max-model-len 8192"):
        assert m.search(text), text
    assert not m.search("nginx -g daemon off")
    assert detect.mentions_ollama_model(["ollama", "pull", "llama3.2:3b"]) == "llama3.2:3b"
    assert detect.mentions_ollama_model(["ollama", "create", "x", "-f", "Modelfile"]) is None


@pytest.mark.parametrize("argv, engine, env, model", [
    (["vllm", "serve", "m1", "--port", "1"], "vllm", {}, "m1"),
    (["llama-server", "-hf", "org/r:Q4_K_M"], "llamacpp", {}, "org/r:Q4_K_M"),
    (["llama-server", "--port", "1"], "llamacpp", {"LLAMA_ARG_MODEL": "/m.gguf"}, "/m.gguf"),
    (["text-generation-launcher", "--model-id=x/y"], "tgi", {}, "x/y"),
    (["python3", "-m", "sglang.launch_server", "--model-path", "q"], "sglang", {}, "q"),
    (["python3", "-m", "sglang.launch_server", "q"], "sglang", {}, None),  # SGLang takes no positional model
])
def test_model_as_written_without_the_plugin(argv: list[str], engine: str, env: dict[str, str],
                                             model: str | None) -> None:
    from servefit.pipeline import site_from_argv
    from servefit.report.sites import raw_model

    site = site_from_argv(argv, env)
    site.engine = engine
    assert raw_model(site) == model
