"""Found by running every command on llama.cpp / Ollama / TGI / SGLang deployment files from public
repositories (session 24, trial 2). Each test writes a small file with the shape that went wrong,
never the fetched file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main
from servefit.sources import scan_file


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in err
    return rc, out, err


# Someone's own llama-server image with the model baked in (its Containerfile sets
# ENV LLAMA_ARG_MODEL): compose names only the image. LCPP015 said the server "runs as a router and
# loads the models requests name", which this image does not.
BAKED_IMAGE = """services:
  small:
    image: ghcr.io/someone/llama-server:qwen2.5-1.5b-instruct
    ports:
      - "127.0.0.1:8002:8080"
"""


def test_a_rebuilt_llama_server_image_is_not_called_a_router(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "docker-compose.yml"
    f.write_text(BAKED_IMAGE)
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "L4", "--format", "json")
    found = [(d["code"], d["location"]["line"], d["location"]["column"]) for d in json.loads(out)
             if not d["code"].startswith("SEC")]
    assert found == [("SF115", 3, 12)]
    [msg] = [d["message"] for d in json.loads(out) if d["code"] == "SF115"]
    assert msg.startswith("the image ghcr.io/someone/llama-server:qwen2.5-1.5b-instruct is not the llama.cpp "
                          "project's own: the model it serves (its ENV or CMD) is not known here")
    # the official image with no model is the router, said once in its own words
    f.write_text(BAKED_IMAGE.replace("someone/llama-server:qwen2.5-1.5b-instruct", "ggml-org/llama.cpp:server-cuda"))
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "L4", "--format", "json")
    assert [d["code"] for d in json.loads(out) if not d["code"].startswith("SEC")] == ["LCPP015"]
    # a model in the environment is read as before
    f.write_text(BAKED_IMAGE + "    environment:\n      - LLAMA_ARG_MODEL=/m/qwen2.5-1.5b-instruct-q4_k_m.gguf\n")
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "L4", "--format", "json")
    assert not [d for d in json.loads(out) if d["code"] in ("SF115", "LCPP015")]
    # estimate gives the same reason, not the router's
    f.write_text(BAKED_IMAGE)
    rc, out, err = _run(capsys, "estimate", str(f), "--gpu", "L4")
    assert rc == 2 and "llama-server:qwen2.5-1.5b-instruct is not the llama.cpp project's own" in err
    assert "loads the models requests name" not in err



# `docker run --name ollama ollama/ollama` then `docker exec -it ollama ollama run gemma2:2b`: the
# script names the model the server loads, but the exec was not read and SF115 said none was named.
@pytest.mark.parametrize("exec_line,col", [
    ("docker exec -it ollama ollama run gemma2:2b", 35),
    ("docker exec -e OLLAMA_DEBUG=1 -u root ollama ollama pull gemma2:2b", 58),
    ("podman container exec ollama ollama pull gemma2:2b", 42),
])
def test_a_model_pulled_through_docker_exec_is_the_servers(exec_line: str, col: int, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "run.sh"
    f.write_text("#!/bin/bash\ndocker run -d --name ollama --gpus all -p 127.0.0.1:11434:11434 ollama/ollama:0.5.7\n"
                 f"{exec_line}\n")
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "RTX4090", "--format", "json")
    found = [(d["code"], d["location"]["line"], d["location"]["column"]) for d in json.loads(out)
             if not d["code"].startswith("SEC")]
    assert found == [("OLLM008", 3, col)]
    rc, out, _ = _run(capsys, "models", str(f))
    assert "gemma2:2b" in out
    # `docker compose run` starts a one-off container, not an exec into the server: nothing is read
    f.write_text("#!/bin/bash\ndocker run -d --name ollama --gpus all ollama/ollama:0.5.7\n"
                 "docker compose run ollama ollama pull gemma2:2b\n")
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "RTX4090", "--format", "json")
    assert [d["code"] for d in json.loads(out) if not d["code"].startswith("SEC")] == ["SF115"]


def _at(tok) -> tuple[int, int, str]:
    s = tok.span
    with open(s.file, encoding="utf-8", newline="") as fh:
        return s.line, s.col, fh.read()[s.start:s.end]


# llama-swap's own example config: a model's `macros:` override the global ones (and a global macro
# that uses one expands with the model's value), and the server is a copy kept per build
# (`llama-server-ec9e0301`). The model-level macro was ignored (context read as the global 4096,
# tune wrote the global macro, which this model does not use) and the build copy was no server.
LLAMA_SWAP_MODEL_MACROS = """macros:
  "server": /opt/llama/llama-server-b5000 --port ${PORT}
  "ctx": 4096
  "args": "--ctx-size ${ctx} -ngl 99"
models:
  "big":
    macros:
      "ctx": 16384
      "tail": "--jinja"
    cmd: |
      ${server}
      -m /m/Qwen2.5-7B-Instruct-Q4_K_M.gguf
      ${args} ${tail}
  "small":
    cmd: ${server} -m /m/Qwen2.5-0.5B-Instruct-Q4_K_M.gguf ${args}
  "third":
    macros:
      "m3": /m/Qwen2.5-1.5B-Instruct-Q4_K_M.gguf
    cmd: ${server} -m ${m3}
"""


def test_llama_swap_model_macros_override_the_global_ones(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "config.yaml"
    f.write_text(LLAMA_SWAP_MODEL_MACROS)
    big, small, third = scan_file(str(f)).sites
    assert (big.engine, small.engine) == ("llamacpp", "llamacpp")
    assert [t.text for t in big.argv] == ["/opt/llama/llama-server-b5000", "--port", "5800", "-m",
                                          "/m/Qwen2.5-7B-Instruct-Q4_K_M.gguf", "--ctx-size", "16384", "-ngl", "99",
                                          "--jinja"]
    assert _at(big.argv[6]) == (8, 14, "16384") and _at(big.argv[9]) == (9, 16, "--jinja")
    assert _at(small.argv[6]) == (3, 10, "4096")
    rc, out, _ = _run(capsys, "tune", str(f), "--gpu", "RTX4090", "--min-context", "32k", "--write")
    # each model's context where that model reads it (big: its own macro), and --parallel in the
    # model's cmd after the GGUF: never between -m and its value, never in a macro other models use
    assert f.read_text() == LLAMA_SWAP_MODEL_MACROS.replace('  "ctx": 4096', '  "ctx": 262144').replace(
        '      "ctx": 16384', '      "ctx": 262144').replace(
        "Qwen2.5-7B-Instruct-Q4_K_M.gguf\n", "Qwen2.5-7B-Instruct-Q4_K_M.gguf\n      --parallel 8\n").replace(
        "0.5B-Instruct-Q4_K_M.gguf ${args}", "0.5B-Instruct-Q4_K_M.gguf --parallel 8 ${args}")
    # third's cmd holds no word after which to add flags (only macros): by hand, and the server
    # macro the other models share stays as it was
    assert out.count("by hand: --parallel 8") == 1
    written = f.read_text()
    rc, out, _ = _run(capsys, "tune", str(f), "--gpu", "RTX4090", "--min-context", "32k", "--write")
    assert f.read_text() == written and "wrote" not in out


@pytest.mark.parametrize("prog,engine", [
    ("/opt/llama/llama-server-b5000", "llamacpp"), ("llama-server-ec9e0301", "llamacpp"),
    ("llama-server-wrapper", None), ("llama-server-b", None), ("llama-server-b5000.sh", None),
])
def test_a_llama_server_copy_kept_per_build_is_the_server(prog: str, engine: str | None, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "run.sh"
    f.write_text(f"#!/bin/sh\n{prog} -m /m/Qwen2.5-0.5B-Instruct-Q4_K_M.gguf -c 8192 --host 127.0.0.1\n")
    assert [s.engine for s in scan_file(str(f)).sites] == ([engine] if engine else [])
    if engine:
        rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "RTX4090", "--format", "json")
        assert [d["code"] for d in json.loads(out)] == ["SF004"]  # the program is not taken for an argument


# A user told "add `# servefit: model=REF` above it" wrote it inside the compose service, under
# `environment:`, or at the end of the image line: each was ignored without a word, and SF115
# said again that no model was named.
OLLAMA_SERVICE = """services:
  ollama:
    image: ollama/ollama:0.6.2{trailing}
    environment:{inside}
      - OLLAMA_KEEP_ALIVE=24h
"""


@pytest.mark.parametrize("trailing,inside,found", [
    ("  # servefit: model=qwen2.5:7b", "", [("OLLM008", 3, 1)]),
    ("", "\n      # servefit: model=qwen2.5:7b", [("SF115", 3, 1), ("SF012", 5, 25)]),
])
def test_a_model_directive_on_the_servers_line_applies_and_one_that_applies_nowhere_is_said(
        trailing: str, inside: str, found: list[tuple[str, int, int]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "compose.yaml"
    f.write_text(OLLAMA_SERVICE.format(trailing=trailing, inside=inside))
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "L4", "--format", "json")
    got = [(d["code"], d["location"]["line"], d["location"]["column"]) for d in json.loads(out)
           if not d["code"].startswith("SEC")]
    assert sorted(got) == sorted(found)
    if inside:
        [msg] = [d["message"] for d in json.loads(out) if d["code"] == "SF012"]
        assert msg.startswith("model=qwen2.5:7b applies to no server, so it is ignored: a model directive names "
                              "the model of the server that starts on its line or the first one below it")


def test_an_overridden_model_directive_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "serve.sh"
    f.write_text("# servefit: model=Qwen/Qwen3-8B\n# servefit: model=Qwen/Qwen3-4B\nvllm serve /models/m --host 127.0.0.1\n")
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "L4", "--format", "json")
    [d] = [d for d in json.loads(out) if d["code"] == "SF012"]
    assert (d["location"]["line"], d["location"]["column"]) == (1, 19)
    assert d["message"] == ("model=Qwen/Qwen3-8B applies to no server, so it is ignored: a nearer one (line 2) names "
                            "the model of the server below it")
    rc, out, _ = _run(capsys, "models", str(f))
    assert "Qwen/Qwen3-4B" in out and "Qwen3-8B" not in out


def test_tune_writes_a_new_llama_cpp_setting_beside_the_compose_services_llama_arg_variables(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`image: llama-cpp-docker`, built by the Makefile beside it from a Dockerfile whose ENTRYPOINT
    is a bare llama-server, configured by LLAMA_ARG_* in the compose service (jspaulsen/llama-cpp-docker):
    tune wrote `--parallel 8` into the image's ENTRYPOINT, away from every other setting. A new setting
    goes into the service's environment beside the others, as LLAMA_ARG_N_PARALLEL (common/arg.cpp:
    `{"-np", "--parallel"}` ... `.set_env("LLAMA_ARG_N_PARALLEL")`), and the Dockerfile is left alone."""
    (tmp_path / ".git").mkdir()
    d = tmp_path / "llama-cpp-docker"
    d.mkdir()
    (d / "Makefile").write_text("DIRNAME := $(notdir $(CURDIR))\n\nbuild:\n"
                                "\tdocker build --target env-deploy . --tag $(DIRNAME)\n")
    dockerfile = "FROM ubuntu:24.04 AS env-deploy\nENTRYPOINT [\"llama-server\"]\n"
    (d / "Dockerfile").write_text(dockerfile)
    compose = ("services:\n  llama:\n    image: llama-cpp-docker\n    environment:\n"
               "      - LLAMA_ARG_CTX_SIZE=2048\n      - LLAMA_ARG_MODEL=/models/Meta-Llama-3.1-8B-Instruct-Q5_K_M.gguf\n"
               "      - LLAMA_ARG_N_GPU_LAYERS=99\n")
    (d / "docker-compose.yml").write_text(compose)
    f = d / "docker-compose.yml"
    rc, out, _ = _run(capsys, "tune", str(f), "--gpu", "L4", "--engine-version", "b7327", "--write")
    assert rc == 0, out
    assert (d / "Dockerfile").read_text() == dockerfile
    assert f.read_text() == compose.replace("CTX_SIZE=2048", "CTX_SIZE=65536") + "      - LLAMA_ARG_N_PARALLEL=8\n"
    rc, out, _ = _run(capsys, "tune", str(f), "--gpu", "L4", "--engine-version", "b7327", "--diff")
    assert rc == 0 and "--- a/" not in out  # a second run changes nothing
    rc, out, _ = _run(capsys, "lint", str(d), "--gpu", "L4", "--engine-version", "b7327", "--list-sites", "--format", "json")
    [site] = json.loads(out)
    assert site["settings"] == {"ctx_size": 65536, "n_gpu_layers": 99, "parallel": 8}
    # a command written in the file itself keeps taking new settings as flags, beside the variable it uses
    sh = tmp_path / "serve.sh"
    sh.write_text("#!/bin/sh\nexport LLAMA_ARG_CTX_SIZE=2048\n"
                  "llama-server -m /models/Meta-Llama-3.1-8B-Instruct-Q5_K_M.gguf -ngl 99\n")
    rc, out, _ = _run(capsys, "tune", str(sh), "--gpu", "L4", "--engine-version", "b7327", "--write")
    assert rc == 0, out
    assert sh.read_text() == ("#!/bin/sh\nexport LLAMA_ARG_CTX_SIZE=65536\n"
                              "llama-server -m /models/Meta-Llama-3.1-8B-Instruct-Q5_K_M.gguf -ngl 99 --parallel 8\n")


def test_the_other_models_an_ollama_chart_pulls_are_named_as_not_sized(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """otwld ollama-helm values pulling three models (ignaciylipm/ollama-helm): the first is sized, and
    the other two were never mentioned, as if the server ran one model. Ollama loads each model a
    request names, so each is a plan of its own: the assumptions name those not sized and how to size one."""
    f = tmp_path / "values.yaml"
    f.write_text("ollama:\n  gpu:\n    enabled: true\n    number: 1\n  models:\n    pull:\n"
                 "      - qwen2.5:14b\n      - mistral\n      - llama2\n")
    for cmd in ("estimate", "explain"):
        rc, out, _ = _run(capsys, cmd, str(f), "--gpu", "L4", "--engine-version", "0.11.10", "--format", "json")
        [plan] = json.loads(out)
        assert plan["model"]["resolved"] == "Qwen/Qwen2.5-14B-Instruct"
        assert ("the server also has mistral and llama2 (pulled or created beside it), not sized here: Ollama loads "
                "each model a request names, "
                "on its own plan; `--model NAME` (or `# servefit: model=NAME` above the server) sizes one of them"
                ) in plan["assumptions"]
    rc, out, _ = _run(capsys, "estimate", str(f), "--gpu", "L4", "--engine-version", "0.11.10", "--model", "mistral",
                      "--format", "json")
    [plan] = json.loads(out)  # the model named is the one sized: nothing more to say
    assert plan["model"]["resolved"] == "mistralai/Mistral-7B-Instruct-v0.3"
    assert not [a for a in plan["assumptions"] if "also has" in a]
    f.write_text(f.read_text().replace("      - mistral\n      - llama2\n", ""))
    rc, out, _ = _run(capsys, "estimate", str(f), "--gpu", "L4", "--engine-version", "0.11.10", "--format", "json")
    [plan] = json.loads(out)
    assert not [a for a in plan["assumptions"] if "also has" in a]


@pytest.mark.parametrize("service,found", [
    ("service:\n  type: LoadBalancer\n", [("SEC002", 7, 9)]),
    ("service:\n  type: NodePort\n  port: 11434\n", [("SEC002", 7, 9)]),
    ("service:\n  type: ClusterIP\n", [("SEC004", 2, 1)]),
    ("", [("SEC004", 2, 1)]),
])
def test_an_ollama_chart_values_service_of_type_loadbalancer_publishes_the_server(
        service: str, found: list[tuple[str, int, int]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """otwld ollama-helm values with `service.type: LoadBalancer` (ignaciylipm/ollama-helm): the chart's
    Service (templates/service.yaml, `type: {{ .Values.service.type }}`) publishes Ollama, which has no
    authentication at all, beyond the cluster; lint said only that it listens on the pod network (SEC004)."""
    f = tmp_path / "values.yaml"
    f.write_text("ollama:\n  models:\n    pull:\n      - qwen2.5:14b\n\n" + service)
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "L4", "--format", "json")
    got = [(d["code"], d["location"]["line"], d["location"]["column"]) for d in json.loads(out) if d["code"].startswith("SEC")]
    assert got == found
    if found[0][0] == "SEC002":
        [msg] = [d["message"] for d in json.loads(out) if d["code"] == "SEC002"]
        assert "the chart's Service of type " in msg


@pytest.mark.parametrize("image, command, title, current", [
    ("lmsysorg/sglang:latest", "python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct", "SGLang", None),
    ("ghcr.io/huggingface/text-generation-inference", "--model-id Qwen/Qwen2.5-7B-Instruct",
     "TGI", None),
    ("ollama/ollama:latest", "", "Ollama", None),
])
def test_the_engines_image_by_a_moving_tag_is_not_called_no_version_given(
        image: str, command: str, title: str, current: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`docker run ... lmsysorg/sglang:latest python3 -m sglang.launch_server ...` (marieai/marie-ai): the
    assumptions said "WARNING: SGLang 0.5.23 assumed (no version given ...; pass --engine-version or pin the
    image tag)", while the README (and the findings: "the image tag latest runs the newest release") count
    the engine's own image by a tag that moves with its releases as a version given."""
    f = tmp_path / "run.sh"
    f.write_text(f"docker run --gpus all -p 127.0.0.1:8000:8000 {image} {command}\n"
                 + ("docker exec ollama ollama pull qwen2.5:7b\n" if "ollama" in image else ""))
    rc, out, _ = _run(capsys, "estimate", str(f), "--gpu", "H100", "--format", "json")
    [plan] = json.loads(out)
    assert not [a for a in plan["assumptions"] if "no version given" in a]
    tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else "latest"
    [said] = [a for a in plan["assumptions"] if "runs the newest release" in a]
    assert said == (f"{title} {plan['engine_version']} assumed: the image tag {tag} runs the newest release, the "
                    "newest servefit models (pass --engine-version to check another)")


TGIS_RUNTIME = """apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata:
  name: tgis-runtime
spec:
  containers:
    - name: kserve-container
      image: quay.io/opendatahub/text-generation-inference:stable
      command: ["text-generation-launcher"]
      args:
        - "--model-name=/mnt/models/"
        - "--grpc-port=8033"
"""
TGIS_COMPOSE = """services:
  tgis:
    image: quay.io/opendatahub/text-generation-inference:stable
    command: ["text-generation-launcher", "--model-name=/mnt/models/artifacts/", "--max-batch-size=256"]
"""


@pytest.mark.parametrize("name, text, line, col", [("runtime.yaml", TGIS_RUNTIME, 9, 18),
                                                   ("docker-compose.yml", TGIS_COMPOSE, 4, 16)])
def test_ibms_tgis_fork_is_named_as_not_modelled_not_linted_as_hugging_faces_tgi(
        name: str, text: str, line: int, col: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """quay.io/opendatahub/text-generation-inference is IBM's TGIS (github.com/IBM/text-generation-inference),
    a fork of TGI whose launcher takes --model-name, --grpc-port, --max-batch-size and whose image runs
    `CMD text-generation-launcher` (its Dockerfile, no ENTRYPOINT) (opendatahub-io/caikit-tgis-serving).
    It was taken for Hugging Face's image (the last part of its name matched): TGI001 errors on every one of its
    own options, SF002, and SF106 for a command that image runs as it is. It is one SF109 finding: listed, not checked."""
    f = tmp_path / name
    f.write_text(text)
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "A100", "--format", "json")
    got = [(d["code"], d["location"]["line"], d["location"]["column"]) for d in json.loads(out)
           if not d["code"].startswith("SEC")]
    assert got == [("SF109", line, col)]
    [msg] = [d["message"] for d in json.loads(out) if d["code"] == "SF109"]
    assert msg == ("quay.io/opendatahub/text-generation-inference:stable runs IBM's TGIS (github.com/IBM/"
                   "text-generation-inference), a fork of Text Generation Inference with its own options and memory "
                   "planning that servefit does not model: this server is listed but its settings are not checked")
    rc, out, err = _run(capsys, "estimate", str(f), "--gpu", "A100")
    assert rc == 2 and "IBM's TGIS" in err  # as for every server that cannot be sized alone (SF115, SF109)
    # Hugging Face's own image, and a mirror of it, are still TGI
    f.write_text(text.replace("quay.io/opendatahub/text-generation-inference:stable",
                              "harbor.corp.example/huggingface/text-generation-inference:2.4.1"))
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "A100", "--format", "json")
    assert "TGI001" in {d["code"] for d in json.loads(out)}


OLLAMA_STAGES = """FROM ollama/ollama:0.11.10 AS base_stage
COPY ./models ./models
RUN ollama serve \\
    & sleep 5 \\
    && {made}

FROM ollama/ollama:0.11.10 AS run_stage
COPY --from=base_stage /root/.ollama /root/.ollama
ENTRYPOINT ["ollama", "serve"]
"""


@pytest.mark.parametrize("made, model", [
    ("ollama pull qwen3:4b", "Qwen/Qwen3-4B"),
    # a created model whose Modelfile is not in the repository is named as not checked, not guessed from its
    # name (test_trial_s27.py::test_a_created_models_missing_modelfile_is_named)
])
def test_ollama_models_made_in_a_build_stage_whose_store_the_image_copies_are_the_servers(
        made: str, model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Dockerfile that pulls (or creates) a model in one stage and copies that stage's /root/.ollama into
    the stage that runs `ollama serve` (xiz2002/Practice_NestedCompose): lint said the file names no model."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "models").mkdir()
    f = tmp_path / "Dockerfile"
    f.write_text(OLLAMA_STAGES.format(made=made))
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "L4", "--list-sites", "--format", "json")
    [site] = json.loads(out)
    assert site["model_ref"]["resolved"] == model, site
    rc, out, _ = _run(capsys, "estimate", str(f), "--gpu", "L4", "--format", "json")
    assert json.loads(out)[0]["model"]["resolved"] == model
    # a stage that copies something else from the build stage has none of its models
    f.write_text(OLLAMA_STAGES.format(made=made).replace("/root/.ollama /root/.ollama", "/app/bin /app/bin"))
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "L4", "--format", "json")
    assert "SF115" in {d["code"] for d in json.loads(out)}


def test_the_plan_says_its_token_figures_are_per_data_parallel_replica(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`--dp-size 4 --tp 2` on 8 GPUs (marieai/marie-ai): the header said "TP 2 PP 1" and the KV tokens and
    max concurrency were one replica's (SGLang logs max_total_num_tokens per DP rank), with nothing saying so;
    a reader took 7.78x for the whole server's."""
    f = tmp_path / "run.sh"
    f.write_text("docker run --gpus '\"device=0,1,2,3,4,5,6,7\"' -p 127.0.0.1:8000:8000 lmsysorg/sglang:v0.5.3 \\\n"
                 "  python3 -m sglang.launch_server --model-path Qwen/QwQ-32B --quantization fp8 --dp-size 4 --tp 2 \\\n"
                 "  --mem-fraction-static 0.7\n")
    rc, out, _ = _run(capsys, "estimate", str(f), "--gpu", "H100")
    lines = out.splitlines()
    assert lines[1].endswith("  ·  TP 2 PP 1 DP 4")
    [kv] = [x for x in lines if x.startswith("KV cache: ")]
    [mc] = [x for x in lines if x.startswith("max concurrency at ")]
    assert kv.endswith(" tokens in each of the 4 data-parallel ranks")
    assert mc.endswith("x in each of the 4 data-parallel ranks")
    f.write_text(f.read_text().replace("--dp-size 4 ", ""))
    rc, out, _ = _run(capsys, "estimate", str(f), "--gpu", "H100")
    assert out.splitlines()[1].endswith("  ·  TP 2 PP 1") and "data-parallel" not in out


LLAMA_FROM_SOURCE = """ARG CUDA_VERSION=12.8.0
FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu22.04 AS build
ARG LLAMA_CPP_TAG="b7327"
RUN git clone --branch ${LLAMA_CPP_TAG} https://github.com/ggerganov/llama.cpp.git && \\
    cd llama.cpp && cmake -B build -DGGML_CUDA=ON && cmake --build build -j
FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu22.04 AS env-deploy
COPY --from=build /llama.cpp/build/bin/llama-server /usr/local/bin/llama-server
ENV LLAMA_ARG_MODEL=/models/Meta-Llama-3.1-8B-Instruct-Q5_K_M.gguf
ENTRYPOINT ["llama-server"]
"""


def test_a_dockerfile_that_builds_llama_cpp_at_a_release_tag_runs_that_release(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`git clone --branch ${LLAMA_CPP_TAG}` with `ARG LLAMA_CPP_TAG="b7327"` (jspaulsen/llama-cpp-docker): the
    image runs llama.cpp b7327, but every command said "llama.cpp b10309 assumed (no version given ...)"."""
    f = tmp_path / "Dockerfile"
    f.write_text(LLAMA_FROM_SOURCE)
    rc, out, _ = _run(capsys, "estimate", str(f), "--gpu", "L4", "--format", "json")
    [plan] = json.loads(out)
    assert plan["engine_version"] == "b7327"
    assert not [a for a in plan["assumptions"] if "no version given" in a]
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "L4", "--list-sites", "--format", "json")
    [site] = json.loads(out)
    assert site["engine_version"] == "b7327"
    rc, out, _ = _run(capsys, "lint", str(f), "--gpu", "L4", "--list-sites")
    assert "b7327 (the release the file builds from source)" in out
    # a clone of another repository, or of a branch that is no release, dates nothing
    for other in ("--branch ${LLAMA_CPP_TAG} https://github.com/someone/other.git",
                  "--branch master https://github.com/ggml-org/llama.cpp"):
        f.write_text(LLAMA_FROM_SOURCE.replace("--branch ${LLAMA_CPP_TAG} https://github.com/ggerganov/llama.cpp.git",
                                               other))
        rc, out, _ = _run(capsys, "estimate", str(f), "--gpu", "L4", "--format", "json")
        assert json.loads(out)[0]["engine_version"] != "b7327"


def test_explains_sweep_shows_the_kv_cache_llama_cpp_allocates_for_a_sliding_window_model() -> None:
    """Gemma 4 31B (sliding-window layers) on llama-server (thr3a/llama-cpp-docker-compose): explain's sweep
    replanned each cell but printed bytes-per-token x context x users as its KV cache (29.22 GiB for 8 users
    of 8,192 tokens, "OOM") beside a plan that allocates a few GiB, since the SWA layers keep only their window.
    llama.cpp and Ollama allocate the KV cache the command asks for, so the cell shows that allocation."""
    from servefit.pipeline import Target, evaluate, site_from_argv
    from servefit.sweep import cell, cell_settings, replan

    argv = ("llama-server -m /models/gemma-4-31B-it-Q4_K_M.gguf -ngl 99 -c 40000 -fa on "
            "--cache-type-k q8_0 --cache-type-v q8_0").split()
    ev = evaluate(site_from_argv(argv), Target(gpu="RTX 4090", engine_version="b7327"))
    for context, users in [(8192, 4), (2048, 8), (32768, 1)]:
        settings, env = cell_settings(ev, context, users)
        at = replan(ev, env, **settings)
        row = cell(ev, context, users)
        assert row.kv_bytes == at.plan.memory.kv_cache
        m = at.plan.memory
        assert row.total_bytes == m.weights + m.activation_peak + m.non_torch + m.cuda_graphs + m.kv_cache
        assert row.kv_bytes < ev.plan.kv_bytes_per_token * context * users  # the window, not every token, per SWA layer
    # a pool engine's cell still shows what its requests need of the pool the engine fills
    ev = evaluate(site_from_argv("vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192".split()),
                  Target(gpu="L40S", engine_version="0.11.0"))
    row = cell(ev, 8192, 4)
    assert row.kv_bytes == ev.plan.kv_bytes_per_token * 8192 * 4


def test_sglang_lora_buffers_are_said_not_to_be_in_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    """`--lora-paths lora0=/adapter/... --max-loras-per-batch 1` (marieai/marie-ai): SGLang reserves GPU buffers
    for the adapters (python/sglang/srt/lora/mem_pool.py LoRAMemoryPool: max_loras_per_batch adapters of
    max_lora_rank, for every target module of every layer); the plan has no term for them and said nothing."""
    base = ["estimate", "--gpu", "RTX A6000", "--engine-version", "0.5.3", "--format", "json", "--",
            "python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen2.5-7B-Instruct"]
    said = ("LoRA adapters (--lora-paths, --enable-lora): the GPU buffers SGLang reserves for them (LoRAMemoryPool, "
            "max_loras_per_batch adapters of max_lora_rank) are not in this plan")
    for lora in (["--lora-paths", "lora0=/adapter/x"], ["--enable-lora", "--max-loras-per-batch", "2"]):
        rc, out, _ = _run(capsys, *base, *lora)
        assert said in json.loads(out)["assumptions"]
    rc, out, _ = _run(capsys, *base)
    assert not [a for a in json.loads(out)["assumptions"] if "LoRA" in a]


def test_llama_cpp_kv_line_says_the_sliding_window_layers_keep_fewer_cells(capsys: pytest.CaptureFixture[str]) -> None:
    """Gemma 4 31B on llama-server (thr3a/llama-cpp-docker-compose) printed "KV cache: 478,720 bytes per token;
    40,192 tokens" beside a 3.50 GiB cache: the product is 17.9 GiB, since the sliding-window layers keep only
    their window (llama_kv_cache_iswa: "creating SWA KV cache, size = 4608 cells"). The line says so."""
    rc, out, _ = _run(capsys, "estimate", "--gpu", "RTX 4090", "--engine-version", "b7327", "--",
                      "llama-server", "-m", "/models/gemma-4-31B-it-Q4_K_M.gguf", "-ngl", "99", "-c", "40000",
                      "-fa", "on", "--cache-type-k", "q8_0", "--cache-type-v", "q8_0")
    [kv] = [x for x in out.splitlines() if x.startswith("KV cache: ")]
    assert kv.endswith(" tokens; the sliding-window layers keep 4,608 of them (their window), so the cache is "
                       "smaller than bytes per token x tokens"), kv
    rc, out, _ = _run(capsys, "estimate", "--gpu", "RTX 4090", "--engine-version", "b7327", "--",
                      "llama-server", "-m", "/models/Qwen2.5-7B-Instruct-Q4_K_M.gguf", "-c", "8192")
    [kv] = [x for x in out.splitlines() if x.startswith("KV cache: ")]
    assert kv == "KV cache: 57,344 bytes per token; 8,192 tokens"


@pytest.mark.parametrize("values, found", [
    ("model: Open-Orca/Mistral-7B-OpenOrca\nimage:\n  repository: ghcr.io/huggingface/text-generation-inference\n"
     "  tag: \"\"\n", []),
    # settings the values do give the image are a server, as before
    ("image:\n  repository: ghcr.io/huggingface/text-generation-inference\n  tag: \"2.4.1\"\n"
     "env:\n  - name: MODEL_ID\n    value: Qwen/Qwen2.5-7B-Instruct\n", ["helm"]),
])
def test_a_tgi_image_in_chart_values_is_no_server_the_values_configure(
        values: str, found: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """substratusai/helm's text-generation-inference chart: values.yaml names the image and `model:`, and the
    chart's templates turn `model` into MODEL_ID. Without helm, the values alone were read as a TGI server with
    no model: "SF002 no model given in the command (pass --model REF)". The chart is said once (SF104)."""
    chart = tmp_path / "tgi"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: tgi\nversion: 0.1.0\nappVersion: 2.4.1\n")
    (chart / "templates" / "deployment.yaml").write_text("kind: Deployment\n# {{ .Values.model }}\n")
    (chart / "values.yaml").write_text(values)
    rc, out, _ = _run(capsys, "lint", str(chart), "--gpu", "L4", "--no-render", "--format", "json")
    assert "SF002" not in {d["code"] for d in json.loads(out)}
    rc, out, _ = _run(capsys, "lint", str(chart), "--gpu", "L4", "--no-render", "--list-sites", "--format", "json")
    assert [s["name"] for s in json.loads(out)] == found


def test_vllm_kv_line_says_when_windows_hold_less_than_bytes_per_token_x_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    """gpt-oss-20b on vLLM: "KV cache: 49,152 bytes per token; 2,131,422 tokens" is 97.6 GiB beside a 54.94 GiB
    cache (0.33; before 0.21 it logged a count per group). vLLM counts tokens as full-attention context; the sliding-window layers hold only their window of
    them (a hybrid's state layers one state per request), so the line says the cache is smaller."""
    rc, out, _ = _run(capsys, "estimate", "--gpu", "H100", "--engine-version", "0.33.0", "--",
                      "vllm", "serve", "openai/gpt-oss-20b", "--max-model-len", "131072")
    [kv] = [x for x in out.splitlines() if x.startswith("KV cache: ")]
    assert kv.startswith("KV cache: 49,152 bytes per token; ") and kv.endswith(
        " tokens; layers with a sliding window or a state hold less than every token, so the cache is smaller "
        "than bytes per token x tokens"), kv
    rc, out, _ = _run(capsys, "estimate", "--gpu", "H100", "--engine-version", "0.33.0", "--",
                      "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192")
    [kv] = [x for x in out.splitlines() if x.startswith("KV cache: ")]
    assert kv.startswith("KV cache: 57,344 bytes per token; ") and kv.endswith(" tokens"), kv
