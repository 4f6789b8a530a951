"""Problems found by running every command on public deployment repositories (session 25 trial);
each test carries a small synthetic file with the shape that broke, never the fetched file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from servefit.cli import main


def _sites(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict]:
    rc = main(["lint", *args, "--list-sites", "--output-format", "json"])
    assert rc == 0
    return json.loads(capsys.readouterr().out)


def test_a_for_loops_word_list_is_not_a_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`for d in "$(VOLUME_DIR)" ...` over folders named after llama-server was read as a server
    (with LCPP001 on the folder path); the server the loop body starts is still read."""
    (tmp_path / "Makefile").write_text(
        "VOLUME_DIR := $(HOME)/docker-volumes/llama-server\n"
        "dirs:\n"
        "\t@for d in \"$(VOLUME_DIR)\" \"$(VOLUME_DIR)/models\"; do \\\n"
        "\t\tmkdir -p \"$$d\"; \\\n"
        "\tdone\n")
    (tmp_path / "run.sh").write_text(
        "#!/bin/sh\n"
        "select m in /opt/vllm /opt/llama-server; do break; done\n"
        "for m in a.gguf b.gguf; do llama-server -m \"/models/$m\" -c 4096; done\n")
    sites = _sites(capsys, str(tmp_path))
    assert [(Path(s["file"]).name, s["line"], s["engine"]) for s in sites] == [("run.sh", 3, "llamacpp")]
    assert sites[0]["settings"] == {"ctx_size": 4096}
    assert sites[0]["settings_raw"]["ctx_size"]["location"] == {"file": str(tmp_path / "run.sh"), "line": 3, "col": 60,
                                                               "end_line": 3, "end_col": 64}


GUARDED = """#!/usr/bin/env bash
MODEL="${MODEL:-Qwen/Qwen2.5-0.5B-Instruct}"
UTIL="${UTIL:-}"
LEN="${LEN:-}"
SEQS="${SEQS:-64}"
cmd=(vllm serve "${MODEL}" --host 127.0.0.1)
if [[ -n "${UTIL}" ]]; then
  cmd+=(--gpu-memory-utilization "${UTIL}")
elif [ -z "$LEN" ]; then
  cmd+=(--max-model-len 4096)
else
  cmd+=(--max-model-len "$LEN")
fi
[[ -n "${SEQS}" ]] && cmd+=(--max-num-seqs "${SEQS}")
[ -z "$LEN" ] || cmd+=(--max-model-len "$LEN")
if [ -n "$UTIL" ] || [ -n "$SEQS" ]; then cmd+=(--enforce-eager); fi
if [ -n "$UTIL" ]; then cmd+=(--dtype bfloat16); else cmd+=(--dtype half); fi
if ! test -z "$MODEL"; then cmd+=(--seed 1); else cmd+=(--seed 2); fi
exec "${cmd[@]}"
"""


def test_an_argument_added_under_a_known_false_string_test_is_not_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`if [[ -n "${UTIL}" ]]; then cmd+=(--gpu-memory-utilization "${UTIL}")` with UTIL empty by
    default was read as `--gpu-memory-utilization ''` (VLLM002, an error); bash skips that branch
    and takes the one whose test holds."""
    f = tmp_path / "start.sh"
    f.write_text(GUARDED)
    [site] = _sites(capsys, str(f), "--gpu", "L4")
    assert site["settings"] == {"host": "127.0.0.1", "max_model_len": 4096, "max_num_seqs": 64, "enforce_eager": True,
                                "dtype": "half", "seed": "1"}
    assert site["settings_raw"]["max_model_len"]["location"]["line"] == 10
    assert site["settings_raw"]["max_num_seqs"]["location"]["line"] == 5
    rc = main(["lint", str(f), "--gpu", "L4", "--select", "VLLM002"])
    assert rc == 0 and "0 errors" in capsys.readouterr().out


SH_TEMPLATE = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  template:
    spec:
      containers:
      - name: vllm
        command: ["/bin/sh", "-c"]
        {{- if .Values.hfToken }}
        env:
        - name: HF_TOKEN
          value: {{ .Values.hfToken | quote }}
        {{- end }}
        image: "vllm/vllm-openai:v0.8.5"
        args: ["vllm serve {{ .Values.model.name }} --temperature {{ .Values.model.temperature }} --max-model-len {{ .Values.model.contextLength }}{{ range .Values.args }} {{ . }}{{ end }}"]
        resources:
          limits:
            nvidia.com/gpu: "1"
"""


def test_a_rendered_line_with_two_adjacent_actions_maps_to_its_template_line(
        helm_on_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--max-model-len {{ .Values.len }}{{ range .Values.args }} {{ . }}{{ end }}`: the shortest
    match gave the first action no text, the line was taken for another, and the VLLM001 on
    `--temperature` pointed at the container's `command:` line (1st column)."""
    d = tmp_path / "vllm"
    (d / "templates").mkdir(parents=True)
    (d / "Chart.yaml").write_text("apiVersion: v2\nname: vllm\nversion: 0.1.0\n")
    (d / "templates" / "deployment.yaml").write_text(SH_TEMPLATE)
    (d / "values.yaml").write_text('model:\n  name: "Qwen/Qwen2.5-0.5B-Instruct"\n  temperature: "0.95"\n'
                                   '  contextLength: "8192"\nhfToken: ""\nargs: ["--load-format auto"]\n')
    main(["lint", str(d), "--gpu", "L4", "--format", "json", "--fail-on", "never"])
    found = [(f["code"], os.path.basename(f["location"]["file"]), f["location"]["line"], f["location"]["column"],
              f["end_location"]["column"]) for f in json.loads(capsys.readouterr().out) if f["code"] == "VLLM001"]
    col = SH_TEMPLATE.splitlines()[16].index("--temperature") + 1
    assert found == [("VLLM001", "deployment.yaml", 17, col, col + len("--temperature"))]
    [site] = _sites(capsys, str(d), "--gpu", "L4")
    ctx = site["settings_raw"]["max_model_len"]["location"]
    assert (os.path.basename(ctx["file"]), ctx["line"], ctx["col"], ctx["end_col"]) == ("values.yaml", 4, 19, 23)


CHART_TEMPLATE = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.11.2
        args:
          - "{{ .Values.modelName }}"
          {{- range .Values.extraArgs }}
          - "{{ . }}"
          {{- end }}
        resources:
          limits:
            nvidia.com/gpu: "1"
"""


def _model_chart(root: Path) -> Path:
    d = root / "chart"
    (d / "templates").mkdir(parents=True)
    (d / "Chart.yaml").write_text("apiVersion: v2\nname: chart\nversion: 0.1.0\n")
    (d / "templates" / "deployment.yaml").write_text(CHART_TEMPLATE)
    (d / "values.yaml").write_text('modelName: Qwen/Qwen2.5-0.5B-Instruct\nextraArgs:\n  - "--max-model-len"\n  - "4096"\n')
    (d / "values-prod.yaml").write_text('extraArgs:\n  - "--max-model-len"\n  - "999999"\n')
    return d


def test_a_file_named_inside_a_chart_is_read_through_the_chart(
        helm_on_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`servefit lint values.yaml` (as a pre-commit hook runs it) read the values file alone: the
    model, which the template writes from `modelName`, was missing (SF002 "no model given in the
    command"); `servefit estimate templates/deployment.yaml` said "no serving engine found". A
    named file of a chart renders the chart; a named values file is the values set it renders with."""
    d = _model_chart(tmp_path)
    main(["lint", str(d / "values-prod.yaml"), "--gpu", "L4", "--format", "json", "--fail-on", "never"])
    found = [(f["code"], os.path.basename(f["location"]["file"]), f["location"]["line"], f["location"]["column"])
             for f in json.loads(capsys.readouterr().out) if f["severity"] in ("error", "warning")]
    assert found == [("VLLM006", "values-prod.yaml", 3, 6)]
    [site] = _sites(capsys, str(d / "values.yaml"), "--gpu", "L4")
    assert (site["model"], site["settings"]) == ("Qwen/Qwen2.5-0.5B-Instruct", {"max_model_len": 4096})
    assert (os.path.basename(site["file"]), site["line"]) == ("values.yaml", 1)
    rc = main(["estimate", str(d / "values.yaml"), "--gpu", "L4", "--format", "json"])
    [plan] = json.loads(capsys.readouterr().out)
    assert (rc, plan["model"]["ref"], plan["max_model_len"]) == (0, "Qwen/Qwen2.5-0.5B-Instruct", 4096)
    main(["estimate", str(d / "templates" / "deployment.yaml"), "--gpu", "L4", "--format", "json"])
    [plan] = json.loads(capsys.readouterr().out)  # the template renders with the chart's paired values-prod.yaml
    assert (plan["model"]["ref"], plan["max_model_len"]) == ("Qwen/Qwen2.5-0.5B-Instruct", 999999)


def test_a_compose_service_built_from_the_repositorys_dockerfile_runs_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`build: .` beside a Dockerfile whose ENTRYPOINT is llama-server, configured by the service's
    `environment`: the Dockerfile alone was the only server found (no model: LCPP015), the service's
    settings were never read, and estimate/tune could not size it."""
    (tmp_path / "Dockerfile").write_text('FROM ghcr.io/ggml-org/llama.cpp:server-cuda-b4500\n'
                                         'ENV LLAMA_ARG_N_GPU_LAYERS=99\nENTRYPOINT ["/app/llama-server"]\n')
    (tmp_path / "compose.yaml").write_text(
        "services:\n  llm:\n    build: .\n    environment:\n"
        "      - LLAMA_ARG_MODEL=/models/Meta-Llama-3.1-8B-Instruct-Q5_K_M.gguf\n"
        "      - LLAMA_ARG_CTX_SIZE=4096\n"
        "  web:\n    build:\n      context: https://github.com/o/r.git\n")
    [site] = _sites(capsys, str(tmp_path), "--gpu", "L4")
    assert (os.path.basename(site["file"]), site["line"], site["engine"], site["engine_version"]) == (
        "compose.yaml", 3, "llamacpp", "b4500")
    assert (site["model"], site["model_ref"]["written"]) == ("meta-llama/Llama-3.1-8B-Instruct",
                                                            "/models/Meta-Llama-3.1-8B-Instruct-Q5_K_M.gguf")
    assert site["settings"] == {"ctx_size": 4096, "n_gpu_layers": 99}
    ctx = site["settings_raw"]["ctx_size"]["location"]
    assert (os.path.basename(ctx["file"]), ctx["line"], ctx["col"], ctx["end_col"]) == ("compose.yaml", 6, 28, 32)
    ngl = site["settings_raw"]["n_gpu_layers"]["location"]
    assert (os.path.basename(ngl["file"]), ngl["line"], ngl["col"]) == ("Dockerfile", 2, 28)


def test_a_built_service_with_a_target_stage_and_its_own_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`build: {context, dockerfile, target}`: the target stage's base image supplies the engine's
    entrypoint; the service's `command` replaces the stage's CMD."""
    (tmp_path / "docker").mkdir()
    (tmp_path / "docker" / "Dockerfile.gpu").write_text(
        "FROM vllm/vllm-openai:v0.8.5 AS serve\nCMD [\"--model\", \"Qwen/Qwen2.5-7B-Instruct\"]\n"
        "FROM python:3.12 AS tools\nCMD [\"python\", \"-m\", \"http.server\"]\n")
    (tmp_path / "docker-compose.yml").write_text(
        "services:\n  api:\n    build:\n      context: ./docker\n      dockerfile: Dockerfile.gpu\n"
        "      target: serve\n    command: [\"--model\", \"Qwen/Qwen2.5-0.5B-Instruct\", \"--max-model-len\", \"4096\"]\n")
    [site] = _sites(capsys, str(tmp_path), "--gpu", "L4")
    assert (os.path.basename(site["file"]), site["line"], site["engine_version"], site["model"]) == (
        "docker-compose.yml", 3, "0.8.5", "Qwen/Qwen2.5-0.5B-Instruct")
    assert site["settings"] == {"max_model_len": 4096}


ENV_COMPOSE = """services:
  llm:
    image: ghcr.io/ggml-org/llama.cpp:server-cuda
    environment:
      - LLAMA_ARG_MODEL=/models/Meta-Llama-3.1-8B-Instruct-Q5_K_M.gguf
      - LLAMA_ARG_CTX_SIZE=4096
"""


def test_tune_adds_a_setting_to_a_server_the_environment_configures(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The image's own command, configured by `environment`: a new setting (--parallel) had no
    command words to go after, so the whole change was display-only; it is a new entry of the
    service's environment, beside the ones there."""
    f = tmp_path / "compose.yaml"
    f.write_text(ENV_COMPOSE)
    assert main(["tune", str(f), "--gpu", "L4", "--write"]) == 0
    assert f.read_text() == ENV_COMPOSE.replace("LLAMA_ARG_CTX_SIZE=4096\n",
                                                "LLAMA_ARG_CTX_SIZE=65536\n      - LLAMA_ARG_N_PARALLEL=8\n")
    capsys.readouterr()
    written = f.read_text()
    main(["tune", str(f), "--gpu", "L4", "--write"])
    assert f.read_text() == written and "change  none: the config is already the best one" in capsys.readouterr().out


def test_an_engine_image_in_a_yaml_that_is_no_helm_values_is_said_once_as_info(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A benchmark harness's config (`runtime: {image: vllm/..., max_num_seqs: 4}`) in 40 files gave 40
    warnings that a Helm chart's templates write the command; no chart is there: the harness does."""
    conf = tmp_path / "bench" / "max-num-seqs.yaml"
    conf.parent.mkdir()
    conf.write_text("model:\n  id: Qwen/Qwen2.5-0.5B-Instruct\nruntime:\n  image: vllm/vllm-openai:v0.8.5\n"
                    "  max_num_seqs: 4\n")
    (tmp_path / "prod-values.yaml").write_text("engine:\n  image: vllm/vllm-openai:v0.8.5\n")
    main(["lint", str(tmp_path), "--format", "json", "--fail-on", "never"])
    found = sorted((os.path.relpath(f["location"]["file"], tmp_path), f["location"]["line"], f["severity"],
                    f["message"].split(", but ")[1][:40]) for f in json.loads(capsys.readouterr().out) if f["code"] == "SF116")
    assert found == [("bench/max-num-seqs.yaml", 4, "info", "this file is not a manifest, compose fil"),
                     ("prod-values.yaml", 2, "warning", "the command it runs comes from the templ")]


def test_a_compose_image_that_a_makefile_or_script_beside_it_builds_runs_that_dockerfile(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`image: llama-cpp-docker` with `make build` running `docker build --target env-deploy .
    --tag $(DIRNAME)` (the folder's name): the service's environment configures the Dockerfile's
    llama-server, which was read alone with no model; a script's `docker build -t NAME:TAG -f FILE`
    likewise (with the build context as its folder)."""
    d = tmp_path / "llama-cpp-docker"
    d.mkdir()
    (d / "Makefile").write_text("DOCKER := docker\nDIRNAME := $(notdir $(CURDIR))\n\nbuild:\n"
                                "\t$(DOCKER) build --target env-build . --tag $(DIRNAME)-build\n"
                                "\t$(DOCKER) build --target env-deploy . --tag $(notdir $(CURDIR))\n")
    (d / "Dockerfile").write_text("FROM ubuntu:24.04 AS env-build\nRUN make\n"
                                  "FROM ubuntu:24.04 AS env-deploy\nENTRYPOINT [\"llama-server\"]\n"
                                  "FROM env-build AS test\nCMD [\"make\", \"test\"]\n")
    (d / "docker-compose.yml").write_text(
        "services:\n  llama:\n    image: llama-cpp-docker\n    environment:\n"
        "      - LLAMA_ARG_CTX_SIZE=2048\n      - LLAMA_ARG_MODEL=/models/Meta-Llama-3.1-8B-Instruct-Q5_K_M.gguf\n")
    v = tmp_path / "vllm"
    (v / "docker").mkdir(parents=True)
    (v / "build.sh").write_text("#!/bin/sh\ndocker build --build-arg CUDA=12.4 -t myorg/chat-api:1.0 "
                                "docker\n")
    (v / "docker" / "Dockerfile").write_text("FROM vllm/vllm-openai:v0.8.5\nCMD [\"--model\", \"Qwen/Qwen2.5-0.5B-Instruct\"]\n")
    (v / "compose.yaml").write_text("services:\n  api:\n    image: myorg/chat-api:1.0\n"
                                    "    command: [\"--model\", \"Qwen/Qwen2.5-0.5B-Instruct\", \"--max-model-len\", \"4096\"]\n"
                                    "  other:\n    image: myorg/chat-api:2.0\n")
    sites = _sites(capsys, str(tmp_path), "--gpu", "L4")
    got = [(os.path.relpath(s["file"], tmp_path), s["line"], s["engine"], s["model_ref"]["written"], s["settings"])
           for s in sites]
    assert got == [("llama-cpp-docker/docker-compose.yml", 3, "llamacpp",
                    "/models/Meta-Llama-3.1-8B-Instruct-Q5_K_M.gguf", {"ctx_size": 2048}),
                   ("vllm/compose.yaml", 3, "vllm", "Qwen/Qwen2.5-0.5B-Instruct", {"max_model_len": 4096})]
    monkeypatch.chdir(tmp_path)  # named relatively: the Dockerfile read alone still gives way
    assert [(s["file"], s["line"]) for s in _sites(capsys, ".")] == [
        ("llama-cpp-docker/docker-compose.yml", 3), ("vllm/compose.yaml", 3)]


def test_an_applications_own_compose_build_is_not_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A web application's compose file (`build: .` of a Python image) names no engine: it is not
    read at all, so its missing env_file is none of servefit's business (no SF113)."""
    (tmp_path / "Dockerfile").write_text('FROM python:3.12\nCMD ["python", "app.py"]\n')
    (tmp_path / "compose.yaml").write_text("services:\n  web:\n    build: .\n    env_file: .env\n")
    assert main(["lint", str(tmp_path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_a_compose_file_naming_no_engine_is_read_for_the_dockerfile_it_builds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "docker").mkdir()
    (tmp_path / "docker" / "Dockerfile.llm").write_text('FROM ghcr.io/ggml-org/llama.cpp:server-cuda-b4500\n')
    (tmp_path / "compose.yaml").write_text("services:\n  chat:\n    build:\n      context: ./docker\n"
                                           "      dockerfile: Dockerfile.llm\n    environment:\n"
                                           "      LLAMA_ARG_MODEL: /models/Qwen2.5-7B-Instruct-Q4_K_M.gguf\n")
    [site] = _sites(capsys, str(tmp_path))
    assert (os.path.basename(site["file"]), site["line"], site["engine"], site["model_ref"]["written"]) == (
        "compose.yaml", 3, "llamacpp", "/models/Qwen2.5-7B-Instruct-Q4_K_M.gguf")


PULL_JOB = """apiVersion: batch/v1
kind: Job
metadata:
  name: model-bootstrap
spec:
  template:
    spec:
      containers:
        - name: bootstrap
          image: ollama/ollama:0.6.2
          command:
            - /bin/sh
            - -c
            - |
              /bin/ollama serve >/tmp/bootstrap.log 2>&1 &
              ollama_pid=$!
              trap 'kill $ollama_pid' EXIT
              while ! /bin/ollama ps > /dev/null 2>&1; do sleep 5; done
              /bin/ollama pull llama3.2:3b
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ollama
spec:
  template:
    spec:
      containers:
        - name: ollama
          image: ollama/ollama:0.6.2
          command: ["/bin/sh", "-c", "ollama serve & sleep 5; ollama pull llama3.2:3b; wait"]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.8.5
          command: ["/bin/sh", "-c", "python3 /metrics.py & m=$!; trap 'kill $m' EXIT; vllm serve Qwen/Qwen2.5-0.5B-Instruct"]
"""


def test_a_server_a_script_starts_for_itself_and_stops_on_exit_is_no_server(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """otwld/ollama-helm's model Job starts `ollama serve &` to pull models and kills it on exit
    (`trap 'kill $pid' EXIT`): it was a second server beside the chart's own, sized and tuned; a
    container that keeps the backgrounded server (`wait`) is one."""
    f = tmp_path / "ollama.yaml"
    f.write_text(PULL_JOB)
    sites = _sites(capsys, str(f))
    assert [(s["line"], s["name"], s["model"]) for s in sites] == [
        (31, "Deployment/ollama/ollama", "meta-llama/Llama-3.2-3B-Instruct"),
        (43, "Deployment/vllm/vllm", "Qwen/Qwen2.5-0.5B-Instruct")]


def test_a_custom_llama_cpp_build_given_server_arguments_runs_llama_server(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A compose file of six services on a custom llama.cpp build (`quay.io/.../llama.cpp-mma:v8`:
    neither name nor tag says "server") with llama-server's arguments only: no server was read, and
    nothing said so. Arguments without a server-only flag (a CLI run) stay unread."""
    (tmp_path / "compose.yaml").write_text(
        "services:\n  llm:\n    image: quay.io/acme/llama.cpp-mma:v8\n"
        '    command: ["--host", "0.0.0.0", "--port", "8080", "-m", "/models/Mistral-7B-Instruct-v0.3-Q4_K_S.gguf", "-c", "4096"]\n'
        "  cli:\n    image: quay.io/acme/llama.cpp-mma:v8\n"
        '    command: ["-m", "/models/Mistral-7B-Instruct-v0.3-Q4_K_S.gguf", "-p", "hi"]\n')
    [site] = _sites(capsys, str(tmp_path), "--gpu", "L4")
    assert (site["name"], site["engine"], site["model"]) == ("compose/llm", "llamacpp", "mistralai/Mistral-7B-Instruct-v0.3")
    assert site["settings"] == {"ctx_size": 4096, "host": "0.0.0.0", "port": "8080"}


def test_compose_device_ids_written_as_one_comma_separated_entry(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`device_ids: ['0,1,2,3,4,5,6,7']` (a public compose file): Docker joins the ids with commas into
    NVIDIA_VISIBLE_DEVICES, so that is eight GPUs; it was counted as one, and TP 2 was VLLM008 "World
    size (2) is larger than the number of available GPUs (1)". Two services reserving '0,1' and '1'
    share GPU 1 (SF117)."""
    svc = ("  {name}:\n    image: vllm/vllm-openai:v0.10.2\n    command: --model Qwen/Qwen2.5-7B-Instruct --tensor-parallel-size 2"
           " --max-model-len 8192 --host 127.0.0.1\n    deploy:\n      resources:\n        reservations:\n          devices:\n"
           "            - capabilities: [gpu]\n              device_ids: [{ids}]\n")
    (tmp_path / "compose.yaml").write_text("services:\n" + svc.format(name="a", ids="'0,1,2,3,4,5,6,7'"))
    [site] = _sites(capsys, str(tmp_path), "--gpu", "H100")
    assert site["gpu"]["count"] == 8
    (tmp_path / "compose.yaml").write_text("services:\n" + svc.format(name="a", ids="'0,1'") + svc.format(name="b", ids="'1', '2'"))
    main(["lint", str(tmp_path), "--gpu", "H100", "--output-format", "json"])
    assert [f["code"] for f in json.loads(capsys.readouterr().out) if f["code"] in ("SF117", "VLLM008")] == ["SF117"]


def test_a_windows_script_that_starts_an_engine_is_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A public repository's `run.ps1` (`docker run ... vllm/vllm-openai ...`) gave "0 servers" and exit 0,
    then SF108 (not read): it is read now, as the server it starts (sources/powershell.py)."""
    (tmp_path / "run.ps1").write_text("docker run --gpus all -p 8000:8000 vllm/vllm-openai:v0.6.6.post1 "
                                      "--model deepseek-ai/DeepSeek-V3 --trust-remote-code\n")
    (tmp_path / "notes.bat").write_text("echo hello\n")
    [site] = _sites(capsys, str(tmp_path))
    assert (os.path.basename(site["file"]), site["engine"], site["image"]) == (
        "run.ps1", "vllm", "vllm/vllm-openai:v0.6.6.post1")


def test_a_build_argument_with_no_default_says_where_its_value_comes_from(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`ARG model` / `ENV model=$model` / `CMD python -m vllm... --model $model` (a public Dockerfile): SF001
    said "not set in this repository"; the value comes from `docker build --build-arg`."""
    (tmp_path / "Dockerfile").write_text("FROM python:3.10-slim\nRUN pip install vllm\nARG model\nENV model=$model\n"
                                         "CMD python -m vllm.entrypoints.api_server --model $model\n")
    main(["lint", str(tmp_path), "--output-format", "json"])
    [sf001] = [f for f in json.loads(capsys.readouterr().out) if f["code"] == "SF001"]
    assert sf001["message"].startswith("${model} is a build argument with no default "
                                       "(`docker build --build-arg model=...` sets it)")
