"""Found by running servefit as a new user on public deployment repositories (session 28): each
case is a minimal file written for the test, in the shape the repository had."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main


def _sweep(out: str) -> list[tuple[int, ...]]:
    """explain's "max users at each context" table as (context, users...) rows."""
    rows = out.split("max users at each context\n", 1)[1].splitlines()[2:]
    return [tuple(int(c.replace(",", "")) for c in r.replace("|", " ").split()) for r in rows if "|" in r]


# HouXianzhoua/llm-inference-platform's scripts/start-tgi-*.sh run TGI with the legacy --max-input-length:
# explain's sweep added --max-input-tokens beside it (the launcher refuses both), so every cell read 0 users
# while estimate and tune said 26 users at 4,096 tokens.
def test_explain_sweeps_a_tgi_server_that_writes_the_legacy_max_input_length(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "start.sh"
    f.write_text("docker run --gpus all ghcr.io/huggingface/text-generation-inference:3.3.4 \\\n"
                 "  --model-id meta-llama/Llama-3.1-8B-Instruct --quantize bitsandbytes-nf4 \\\n"
                 "  --max-input-length 1024 --max-total-tokens 4096\n")
    main(["explain", str(f), "--gpu", "L4"])
    got = _sweep(capsys.readouterr().out)
    main(["estimate", str(f), "--gpu", "L4"])
    est = capsys.readouterr().out
    # the sweep and estimate agree: 106,603 tokens hold 26 requests of 4,096 (106,803 before flashinfer's
    # 3 x 8 MiB wrapper int workspaces, 192 tokens of 128 KiB, and the warm-up KV tensors' 18 KiB segment tails)
    assert got[:3] == [(2048, 52, 104), (4096, 26, 52), (8192, 13, 26)]
    assert "KV cache: 131,072 bytes per token; 106,603 tokens\nmax concurrency at 4,096 tokens per request: 26.03x" in est


# awslabs/extending-the-context-length-of-open-source-llms builds its own TGI image beside the script that
# runs it (`docker build -t mistrallite:1.1.0 .` over a Dockerfile FROM TGI 1.1.0, then
# `docker run ... $docker_image_id --model-id ...`): the script was read as no server, nothing said.
def test_a_script_that_runs_the_image_a_script_beside_it_builds(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "Dockerfile").write_text("FROM ghcr.io/huggingface/text-generation-inference:1.1.0\n"
                                         "COPY patch.py /opt/patch.py\n")
    (tmp_path / "build.sh").write_text("docker build -t mytgi:1.1.0 .\n")
    run = tmp_path / "start.sh"
    run.write_text("export image=mytgi:1.1.0\n"
                   "docker run -d --gpus all --shm-size 1g -p 127.0.0.1:8080:80 $image \\\n"
                   "    --model-id mistralai/Mistral-7B-Instruct-v0.1 --max-input-length 8000 --max-total-tokens 8192\n")
    main(["models", str(tmp_path)])
    out = capsys.readouterr().out
    assert out.startswith(f"{run}:3  tgi  mistralai/Mistral-7B-Instruct-v0.1  -> ")
    main(["estimate", str(run), "--gpu", "A10G"])
    assert capsys.readouterr().out.startswith("tgi 1.1.0  ·  mistralai/Mistral-7B-Instruct-v0.1 (→ mistralai/Mistral-7B-v0.1)\n")
    # an image nothing here builds is still no server
    run.write_text("docker run --gpus all other/image:1 --model-id mistralai/Mistral-7B-Instruct-v0.1\n")
    main(["models", str(run)])
    assert capsys.readouterr().out == "no servers found\n"


# haskoe/beancount-ledger's start-llm.sh runs llama-server with --kv-unified --parallel 1: explain's
# sweep gave N slots one shared cache of C cells, so it read 256 users at every context up to 65,536
# beside estimate's 1 request; N requests of C tokens need C x N cells, unified or not.
def test_explain_sweeps_a_unified_llamacpp_cache_by_the_cells_its_requests_hold(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "start.sh"
    f.write_text("llama-server -hf bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:Q4_K_M -c 32768 -np 1 --kv-unified "
                 "--host 127.0.0.1\n")
    main(["explain", str(f), "--gpu", "L4"])
    rows = _sweep(capsys.readouterr().out)
    main(["estimate", str(f), "--gpu", "L4"])
    assert "KV cache: 131,072 bytes per token; 32,768 tokens\nmax concurrency at 32,768 tokens per request: 1.00x" \
        in capsys.readouterr().out
    # 4 x 32,768 = 131,072 cells of 128 KiB (16 GiB) fit the L4 beside the 4.6 GiB of weights; 8 do not. A slot
    # of a unified cache may grow to all of -c, past the model's 131,072 (so 128 x 2,048 is refused)
    assert [r[:2] for r in rows] == [(2048, 64), (4096, 32), (8192, 16), (16384, 8), (32768, 4), (65536, 2),
                                     (131072, 1)]


# neuralmagic/helm-charts' nm-vllm chart writes its command in the template and ends it with
# `{{- range .Values.apiServer.extraArgs }}` over `extraArgs: []` in values.yaml: tune had no word of
# the render's own values to insert after, so it showed `--max-model-len 32768` to make by hand ("the
# chart's template writes this command for every values file") and wrote nothing.
EMPTY_ARGS_TEMPLATE = """apiVersion: apps/v1
kind: Deployment
metadata: {name: llm}
spec:
  template:
    spec:
      containers:
        - command:
            [
              "python3", "-m", "vllm.entrypoints.openai.api_server",
              "--model",
              "{{ .Values.modelName }}",
              "--port",
              "{{ .Values.server.port }}",
              {{- range .Values.server.extraArgs }}
              {{ quote . }},
              {{- end }}
            ]
          image: "vllm/vllm-openai:v0.11.2"
          name: vllm
          resources:
            limits:
              nvidia.com/gpu: 1
"""


def _chart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, template: str, values: str) -> Path:
    """A chart in tmp_path (the working directory) with one template and its values.yaml."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: 0.1.0\n")
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "deployment.yaml").write_text(template)
    out = tmp_path / "values.yaml"
    out.write_text(values)
    return out


def test_tune_fills_the_empty_values_list_the_template_ranges_over(
        helm_on_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    values = _chart(tmp_path, monkeypatch, "llm", EMPTY_ARGS_TEMPLATE,
                    "server:\n  # extra flags\n  extraArgs: []\n  port: 8000\nmodelName: Qwen/Qwen2.5-7B-Instruct\n")
    tpl = str(tmp_path / "templates" / "deployment.yaml")
    main(["tune", tpl, "--gpu", "L4", "--write"])
    out = capsys.readouterr().out
    assert "  change  --max-num-seqs 32, --max-model-len 32768 [safe]\n" in out and "by hand" not in out
    assert values.read_text() == ('server:\n  # extra flags\n  extraArgs: ["--max-num-seqs", "32", "--max-model-len", '
                                  '"32768"]\n  port: 8000\nmodelName: Qwen/Qwen2.5-7B-Instruct\n')
    assert (tmp_path / "templates" / "deployment.yaml").read_text() == EMPTY_ARGS_TEMPLATE
    main(["tune", tpl, "--gpu", "L4", "--write"])
    assert "change  none: the config is already the best one" in capsys.readouterr().out
    main(["lint", str(tmp_path), "--gpu", "L4", "--select", "VLLM018"])
    assert capsys.readouterr().out.startswith("0 errors, 0 warnings, 0 info")
    # a range past the command (under another key) is no place for its flags: shown, not written
    (tmp_path / "templates" / "deployment.yaml").write_text(
        EMPTY_ARGS_TEMPLATE.replace("              {{- range .Values.server.extraArgs }}\n"
                                    "              {{ quote . }},\n              {{- end }}\n", "")
        .replace("          name: vllm\n", "          name: vllm\n          volumeMounts:\n"
                 "            {{- range .Values.server.extraArgs }}\n            - {{ quote . }}\n            {{- end }}\n"))
    values.write_text("server:\n  extraArgs: []\n  port: 8000\nmodelName: Qwen/Qwen2.5-7B-Instruct\n")
    main(["tune", tpl, "--gpu", "L4", "--write"])
    assert "by hand: --max-model-len 32768\n" in capsys.readouterr().out
    assert values.read_text() == "server:\n  extraArgs: []\n  port: 8000\nmodelName: Qwen/Qwen2.5-7B-Instruct\n"


# rrrepos/rx-labs's scripts/run-model.sh runs `docker run --env-file "docker.env" vllm/vllm-openai ...`:
# the --env-file was skipped, silently. Read, its variables reach the server (an -e over them); not there,
# it is said as compose's env_file is (SF113).
def test_docker_run_env_file_is_read_and_a_missing_one_said(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "llama.env").write_text("LLAMA_ARG_CTX_SIZE=65536\nLLAMA_ARG_N_PARALLEL=4\nLLAMA_ARG_BATCH=1024\n")
    run = tmp_path / "run.sh"
    run.write_text("docker run --gpus all --env-file llama.env -e LLAMA_ARG_N_PARALLEL=2 -p 127.0.0.1:8080:8080 \\\n"
                   "  ghcr.io/ggml-org/llama.cpp:server-cuda -hf bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:Q4_K_M\n")
    main(["lint", "--gpu", "L4", "--list-sites", "--format", "json", "."])
    [site] = json.loads(capsys.readouterr().out)
    assert {k: site["settings"][k] for k in ("ctx_size", "parallel", "batch_size")} == {
        "ctx_size": 65536, "parallel": 2, "batch_size": 1024}
    main(["tune", "run.sh", "--gpu", "L4", "--write"])
    assert "wrote llama.env" in capsys.readouterr().out and "-e LLAMA_ARG_N_PARALLEL=" in run.read_text()
    run.write_text(run.read_text().replace("llama.env", "gone.env"))
    main(["lint", "--gpu", "L4", "."])
    assert "run.sh:1:34: SF113 --env-file gone.env is not in the repository; the variables it sets are unknown\n" \
        in capsys.readouterr().out


# HouXianzhoua/llm-inference-platform's docker-compose.yml runs two servers on device_ids '0'. Beside the
# other's memory, tune searched only the memory fractions it tries for headroom (vLLM's 0.85 and up), so
# "nothing meets the needs" while a lower fraction (all that is left beside the other) was the answer.
SHARED_GPU = """services:
  vllm:
    image: vllm/vllm-openai:v0.11.2
    command: --model Qwen/Qwen2.5-3B-Instruct --max-model-len 8192 --host 127.0.0.1
    deploy:
      resources:
        reservations:
          devices: [{driver: nvidia, device_ids: ["0"], capabilities: [gpu]}]
  chat:
    image: ghcr.io/ggml-org/llama.cpp:server-cuda
    command: -hf bartowski/Qwen2.5-7B-Instruct-GGUF:Q4_K_M -c 8192 -ngl 99 --host 127.0.0.1
    deploy:
      resources:
        reservations:
          devices: [{driver: nvidia, device_ids: ["0"], capabilities: [gpu]}]
"""


def test_tune_lowers_the_memory_fraction_to_leave_room_for_a_server_on_the_same_gpu(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "compose.yaml"
    f.write_text(SHARED_GPU)
    main(["lint", ".", "--gpu", "L4", "--select", "SF117"])
    assert "'vllm' 20.40 GiB, 'chat' 4.84 GiB; 25.24 GiB together" in capsys.readouterr().out
    main(["tune", "compose.yaml", "--gpu", "L4", "--write"])
    out = capsys.readouterr().out
    # 0.75, not 0.77: vLLM started after llama.cpp finds 16.88 GiB free, below 0.77 x 22.03 = 16.97 GiB, and
    # refuses to start (v1/worker/utils.py::request_memory); 0.76 holds 17.32 GiB, past the 17.18 GiB left
    assert "  change  --max-num-seqs 64, --gpu-memory-utilization 0.75 [safe]\n" in out
    assert "--host 127.0.0.1 --max-num-seqs 64 --gpu-memory-utilization 0.75\n" in f.read_text()
    first = f.read_text()
    main(["tune", "compose.yaml", "--gpu", "L4", "--write"])
    assert capsys.readouterr().out.count("change  none: the config is already the best one") == 2
    assert f.read_text() == first
    main(["lint", ".", "--gpu", "L4", "--select", "SF117"])
    assert capsys.readouterr().out.startswith("0 errors, 0 warnings, 0 info")
    # TGI's --cuda-memory-fraction, the same way
    f.write_text(SHARED_GPU.replace(
        "image: vllm/vllm-openai:v0.11.2\n    command: --model Qwen/Qwen2.5-3B-Instruct --max-model-len 8192 --host 127.0.0.1",
        "image: ghcr.io/huggingface/text-generation-inference:3.3.4\n"
        "    command: --model-id Qwen/Qwen2.5-3B-Instruct --max-total-tokens 8192 --hostname 127.0.0.1"))
    main(["tune", "compose.yaml", "--gpu", "L4", "--write"])
    # 0.86: TGI 3.x sizes its KV cache so the device is cuda_memory_fraction x TGI_WIGGLE_ROOM full, 17.12 GiB
    # of the 17.18 GiB llama.cpp leaves (engines/tgi/memory.py::kv_blocks)
    assert "  change  --cuda-memory-fraction 0.86 [safe]\n" in capsys.readouterr().out
    main(["lint", ".", "--gpu", "L4", "--select", "SF117"])
    assert capsys.readouterr().out.startswith("0 errors, 0 warnings, 0 info")


# ItayPodhajcer/terraform-ollama-aks installs otwld's Ollama chart with a Terraform helm_release (values from a
# templatefile): "0 servers", nothing said. servefit reads no Terraform; it says so where the file installs an
# engine's own chart, as it does where a .tf file names an engine image.
def test_terraform_that_installs_an_engines_chart_is_said_not_read(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "main.tf").write_text(
        'resource "helm_release" "gpu" {\n  name = "nvidia-device-plugin"\n'
        '  repository = "https://nvidia.github.io/k8s-device-plugin"\n  chart = "nvidia-device-plugin"\n}\n\n'
        'resource "helm_release" "llm" {\n  name = "ollama"\n  repository = "https://helm.otwld.com/"\n'
        '  chart = "ollama"\n  values = [templatefile("${path.module}/values.tpl", {})]\n}\n')
    main(["lint", str(tmp_path)])
    assert capsys.readouterr().out == (
        f"{tmp_path}/main.tf:9:17: SF108 servefit does not read Terraform, and this file installs the Ollama Helm chart "
        "of https://helm.otwld.com/ here: its values were not checked. Lint the values file it passes (`servefit lint "
        "values.yaml`) or the manifests it applies\n0 errors, 0 warnings, 1 info in 1 file (0 servers)\n")
    # vLLM production-stack's chart, the same way
    (tmp_path / "main.tf").write_text('resource "helm_release" "vllm" {\n  name = "vllm"\n'
                                      '  repository = "https://vllm-project.github.io/production-stack"\n'
                                      '  chart = "vllm-stack"\n  values = [file(var.setup_yaml)]\n}\n')
    main(["lint", str(tmp_path)])
    assert "main.tf:3:17: SF108 servefit does not read Terraform, and this file installs the vLLM Helm chart of " \
        "https://vllm-project.github.io/production-stack here" in capsys.readouterr().out


# rockofox/helm-llama-cpp's template writes llama-server's flags from a values map
# (`{{- range $key, $value := .Values.llama.args }} - "--{{ $key }}" - "{{ $value }}"`): its words were not
# traced to the map (LCPP007 pointed at `{{ $value }}` in the template), so tune showed every change as by hand.
MAP_ARGS_TEMPLATE = """apiVersion: apps/v1
kind: Deployment
metadata: {name: llama}
spec:
  template:
    spec:
      containers:
        - name: llama
          image: "ghcr.io/ggml-org/llama.cpp:server-cuda-b6500"
          args:
            - "--host"
            - "127.0.0.1"
          {{- range $key, $value := .Values.llama.args }}
              {{- if $value }}
            - "--{{ $key }}"
            - "{{ $value }}"
              {{- else }}
            - "--{{ $key }}"
              {{- end }}
          {{- end }}
          resources:
            limits:
              nvidia.com/gpu: 1
"""


def test_a_values_map_of_flags_is_traced_and_tuned_in_place(
        helm_on_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    values = _chart(tmp_path, monkeypatch, "llama", MAP_ARGS_TEMPLATE,
                    'replicaCount: 2\nllama:\n  args:\n    hf-repo: "bartowski/Qwen2.5-7B-Instruct-GGUF:Q4_K_M"\n'
                    '    parallel: "2"\n    jinja: ""\n')
    main(["lint", ".", "--gpu", "L4", "--select", "LCPP007"])
    assert capsys.readouterr().out.startswith("values.yaml:5:16: LCPP007 no -c: the context (4096 tokens) is shared by "
                                              "2 slots")
    main(["tune", "templates/deployment.yaml", "--gpu", "L4", "--write"])
    out = capsys.readouterr().out
    assert "  change  --ctx-size 262144, --parallel 8 [safe]\n" in out and "by hand" not in out
    assert values.read_text() == ('replicaCount: 2\nllama:\n  args:\n    hf-repo: "bartowski/Qwen2.5-7B-Instruct-GGUF:Q4_K_M"\n'
                                  '    parallel: "8"\n    jinja: ""\n    ctx-size: 262144\n')
    main(["tune", "templates/deployment.yaml", "--gpu", "L4", "--write"])
    assert "change  none: the config is already the best one" in capsys.readouterr().out


# aminhaghii/Multi's scripts/start_llama_server.bat runs `start "llama-server" cmd /k ""%SERVER%" --model ..."`:
# the finding named it `cmd /c`, which the file does not write.
def test_a_batch_cmd_k_is_named_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "start.bat").write_text('@echo off\nstart "llama" cmd /k "llama-server.exe -m q.gguf -c 2048"\n'
                                        'cmd /c "ollama serve"\n')
    main(["lint", str(tmp_path)])
    out = capsys.readouterr().out
    assert "start.bat:2:1: SF108 `cmd /k`: servefit does not run it" in out
    assert "start.bat:3:1: SF108 `cmd /c`: servefit does not run it" in out


# zeuscsc/OpenReinforcedAgent's start_vllm.sh serves `--model /workspace/vllm-models/vllm-11`: the unknown-model
# message offered `--online to read it from the Hub`, which cannot read a local path.
def test_an_unknown_local_path_is_not_offered_the_hub(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--gpu", "L4", "--", "vllm", "serve", "/workspace/vllm-models/vllm-11"]) == 2
    assert capsys.readouterr().err == (
        "servefit: error: unknown model '/workspace/vllm-models/vllm-11'; no catalogued model has a similar family "
        "and size. Pass --model-config PATH/config.json or a local model directory\n")


# JaeikBae/ollama-on-docker builds `docker build -t ollama .` (a CUDA image that installs Ollama and runs
# `CMD ["bash", "serve.sh"]`) and runs `docker run --network host ollama`: servefit took the local image for
# ollama/ollama, with its OLLAMA_HOST=0.0.0.0, and reported an open server (SEC002, an error) that binds
# 127.0.0.1. The local build is what docker runs.
def test_a_local_build_named_like_an_engine_image_is_that_build(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "Dockerfile").write_text("FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
                                         "RUN curl -fsSL https://ollama.com/install.sh | sh\n"
                                         'RUN echo "ollama serve &" > serve.sh\nCMD ["bash", "serve.sh"]\n')
    (tmp_path / "run.sh").write_text("docker build -t ollama .\ndocker run -d --gpus=all --network host ollama\n")
    main(["lint", str(tmp_path)])
    assert capsys.readouterr().out == (
        f"{tmp_path}/run.sh:2:41: SF116 `ollama` is built here (docker build -t) from Dockerfile, not pulled as the "
        "engine's image, and its command starts no server servefit reads: this server was not checked\n"
        "0 errors, 1 warning, 0 info in 2 files (0 servers)\n")
    # a build FROM the engine's image is that image's server, with the build's release
    (tmp_path / "Dockerfile").write_text("FROM ollama/ollama:0.6.2\nENV OLLAMA_HOST=127.0.0.1\n")
    main(["lint", str(tmp_path), "--list-sites", "--format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert (site["engine"], site["engine_version"], site["env"].get("OLLAMA_HOST")) == ("ollama", "0.6.2", "127.0.0.1")
