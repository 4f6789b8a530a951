"""Found by running servefit as a new platform engineer on deployment files from public repositories it had
not been tried on (session 30 trial): each case is a minimal file written for the test, in the shape the
repository had.

Repositories tried (owner/name@commit):
  agents-x-project/PyVision-RL@62ca599d05ba81854afa39b435780785bcdf1b1a (srun / sbatch scripts)
  neuralmagic/helm-charts@e0c03d093474ad5bcde94fa5ae5644642e9c5fa6 (Helm charts with subchart dependencies)
  Lintasarta/vllm-helm@1a4ef6c5b766f3b593ebc5f9f424a64b914b4388 (Helm chart)
  canstralian/DeepSeek-Coder-V2@f628e256070a85977bf15269c7e3733f3c6b972d (SGLang launch script)
  lahlfors/cybernetic-governance-engine@2bcc2f2e64f749a27aad59a5ebb0033106c61656 (envsubst manifests, Cloud Build)
  xiz2002/Practice_NestedCompose@3d41c232491d0b20150cb93b88012c555b00e78a (compose + override, Ollama Dockerfile)
  sachinsshetty/warehouse@f04f627ffeabd79de4ee1c6c0011e6d1e41d828f (compose files for vLLM and Ollama)
  ECMWFCode4Earth/EarthReach@bef0daf9617f98443ba4cc39d113915ef099f377 (compose over a uv-built vLLM image, .env.example)
  paul-heyse/Medical_KG_rev@1011ba2fdb9f8d82ca5938acdafdabdd1a2d9688 (kustomize base and overlays, compose, Dockerfiles)
  abhishek9sharma/scratchpad@699e6767972a370fd91942fa19c9fd33e24e2e55 (TGI docker run scripts)
  open-thought/arc-agi-2@2d4e09315a57735a594933aa0a5548e968379f72 (TGI launch scripts)
  satheshshiva/gpt_practice@7de7a18ef86177f59ff08d51f5d283dbfa27cf90 (Makefile targets running vllm serve)
  SEPIA-Framework/sepia-llm-experiments@aa6a6d68a71267231ee8549a49bca92cb8b0c8b5 (llama-server script)
  tomasruizt/lewidi2025@41a06bd4988237e182fd3c0618fc80266cd53706 (Makefile, Slurm sbatch templates)
  jspaulsen/llama-cpp-docker@a69f8c994d99acd193b95f83c40de00f3d8322fc (llama.cpp built from a tag, compose, entrypoint script)
  anon-kunn/glm47flash@92356a9c0ce1bf6eaafbfe087374db349b3263d9 (Dockerfile over a local llama.cpp image, run script)
  MooseStack/containerized_llama.cpp_serving@be26b98207f84c6e8608f5701c73bc2c51fa0df6 (KServe ServingRuntimes, Containerfile)
  ParisNeo/vllm_deployer@b8d9b67d1b3e043545ac6ccb018709985b42acd3 (install / systemd scripts: a Python launcher, 0 servers)
  phil65/ollama-github-action@4d8d7fb6828be65668d91c1a2d261c80c00cfbe2 (composite action, compose, entrypoint script)
  teddylee777/langserve_ollama@8b0a1f0d914e2bc4f62fc5677c73eca8b996543e (Modelfiles over local GGUFs)
  devopsrustem/slurmv4@3e72c525e42396bc3352c8f20b886b804516b058 (multi-node SGLang launch notes)
  trackit/eks-auto-mode-gpu@e04a0fc6b760161f6521cc353fabe6e64f633901 (Terraform helm_release over a local chart)
  jhlu2019/GustoBot@12e2411c7afc99203c72356508aa0547b593d673 (vllm serve from conda environments named per release)
  arkady-emelyanov/vllm-sglang-demo@8ae6dc3f705fa0a0864883cf25ae5a3bed24b215 (compose x- anchors, build args, mounted scripts)
  freechat-fun/freechat-vllm@6bf5f7ba02c9d21d90ac5a61ff1b318a0ee58980 (Helm values for a remote chart, helm scripts)
  louis030195/text-generation-inference-helm@f4f30d8e66d23301abdf1fe9c9f787ee5bff683f (TGI chart, values beside it)
  inf-monkeys/helm-charts@6e6787b2a043d78d152051ab8b346c0ab0b8d87d (vLLM chart, GPTQ Mixtral on vLLM 0.4.2)
  JaeikBae/ollama-on-docker@16db006f2f63f2abaa9fb47911221fd7394ab04b (Dockerfile writing its serve script with RUN echo)
  stur86/tinyfacts-gen@9a798ccbf4be5c151df01797b2129dffcb4e8eb7 (Ollama client scripts: 0 servers, right)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main

# lahlfors/cybernetic-governance-engine's deployment/k8s/vllm-streaming.yaml is filled in by its deploy script
# before `kubectl apply` (`image: ${IMAGE_NAME}`): the container's env does not set MODEL_PATH, so SF107's advice
# "write $(MODEL_PATH)" would hand vLLM the literal `$(MODEL_PATH)` too. A name the container does not set is a
# value not known here (SF001); SF107 stays for a name its env sets.
ENVSUBST_MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-inference-streaming
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: ${IMAGE_NAME}
          resources:
            limits:
              nvidia.com/gpu: "1"
          env:
            - name: HUGGING_FACE_HUB_TOKEN
              valueFrom:
                secretKeyRef: {name: hf-token-secret, key: token}
          command:
            - "vllm"
            - "serve"
            - "${MODEL_PATH}"
            - "--port"
            - "8000"
      nodeSelector:
        cloud.google.com/gke-accelerator: nvidia-l4
"""


def test_envsubst_variable_the_container_does_not_set_is_unknown_not_literal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "vllm-streaming.yaml"
    f.write_text(ENVSUBST_MANIFEST)
    main(["lint", str(f), "--format", "json"])
    found = [(d["code"], d["location"]["line"], d["location"]["column"], d["message"])
             for d in json.loads(capsys.readouterr().out) if d["code"] in ("SF001", "SF107")]
    assert found == [("SF001", 21, 16, "${MODEL_PATH} is not set in this repository: the value it gives vLLM is "
                                       "not known, so it is not checked")]
    # the container's env sets it (from a Secret): $(MODEL_PATH) is what Kubernetes expands
    f.write_text(ENVSUBST_MANIFEST.replace("HUGGING_FACE_HUB_TOKEN", "MODEL_PATH"))
    main(["lint", str(f), "--format", "json"])
    found = [(d["code"], d["location"]["line"]) for d in json.loads(capsys.readouterr().out)
             if d["code"] in ("SF001", "SF107")]
    assert found == [("SF107", 21)]


# sachinsshetty/warehouse's foodguardian-compose.yml runs ollama/ollama through `./entrypoint.sh`, bind-mounted at
# /entrypoint.sh, a file the repository does not have: SF116 called the service "container 'container'" and sent the
# reader to "a ConfigMap or volume elsewhere", Kubernetes words for a compose file.
MOUNTED_SCRIPT_COMPOSE = """services:
  ollama:
    image: ollama/ollama:latest
    volumes:
      - ./entrypoint.sh:/entrypoint.sh
    entrypoint: ["/usr/bin/bash", "/entrypoint.sh"]
"""


def test_compose_script_not_in_repository_is_said_in_compose_words(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "foodguardian-compose.yml"
    f.write_text(MOUNTED_SCRIPT_COMPOSE)
    assert main(["lint", str(f), "--gpu", "L4"]) == 0
    assert capsys.readouterr().out == (
        f"{f}:6:36: SF116 service 'ollama' of ollama/ollama:latest runs Ollama through the script /entrypoint.sh, "
        "and the file it is copied or mounted from is not in the repository: no server was read here, so its "
        "settings and memory are not checked. Lint the script itself, or start the engine in the container's "
        "command\n0 errors, 1 warning, 0 info in 1 file (0 servers)\n")
    # a Dockerfile that COPYs a script it does not have says so of its stage
    d = tmp_path / "Dockerfile"
    d.write_text("FROM ollama/ollama:0.6.0 AS serve\nCOPY start.sh /start.sh\nENTRYPOINT [\"/bin/bash\", \"/start.sh\"]\n")
    main(["lint", str(d), "--gpu", "L4"])
    assert capsys.readouterr().out.startswith(
        f"{d}:3:27: SF116 stage 'serve' (FROM ollama/ollama:0.6.0) runs Ollama through the script /start.sh, and the "
        "file it is copied or mounted from is not in the repository: ")


# ECMWFCode4Earth/EarthReach's vllm/.env.example leaves MODEL_DIR_PATH empty (`MODEL_DIR_PATH=`), a blank for the
# reader: SF001 and estimate said ".env.example sets it ... copy it to .env to use its values", which would hand
# `vllm serve` no model at all. A value it does give (VLLM_PORT=8000) keeps the old words.
EARTHREACH_COMPOSE = """services:
  vllm-server:
    image: vllm/vllm-openai:v0.9.0
    command: --model ${MODEL_DIR_PATH} --port ${VLLM_PORT}
"""


def test_sample_env_file_that_leaves_the_variable_empty_says_fill_it_in(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "docker-compose.yaml").write_text(EARTHREACH_COMPOSE)
    (tmp_path / ".env.example").write_text('MODEL_NAME="google/gemma-3-4b-it"\nMODEL_DIR_PATH=\nVLLM_PORT=8000\n')
    main(["lint", str(tmp_path), "--gpu", "L4", "--format", "json"])
    assert [d["message"] for d in json.loads(capsys.readouterr().out) if d["code"] == "SF001"] == [
        "${MODEL_DIR_PATH} is not set in this repository (.env.example leaves it empty, to be filled in: set it in "
        ".env, the file docker compose reads): the value it gives vLLM is not known, so it is not checked",
        "${VLLM_PORT} is not set in this repository (.env.example sets it, but docker compose reads only .env: copy "
        "it to .env to use its values): the value it gives vLLM is not known, so it is not checked"]
    assert main(["estimate", str(tmp_path), "--gpu", "L4"]) == 2
    assert capsys.readouterr().err == (
        "servefit: error: the model is a variable (${MODEL_DIR_PATH}) (.env.example leaves it empty, to be filled "
        "in: set it in .env, the file docker compose reads): its value is not known here (pass --model REF)\n")


# paul-heyse/Medical_KG_rev's ops/vllm/Dockerfile.qwen3-embedding-8b writes its CMD's JSON array over several lines
# with no `\\`: Docker reads `"python",` as an instruction and the build stops. servefit read `CMD [` as a shell
# form and said SF106 "the container runs `vllm serve /bin/sh -c [ ...`", an image that is never built.
UNCLOSED_CMD = """ARG VLLM_BASE_IMAGE=vllm/vllm-openai:v0.11.0
FROM ${VLLM_BASE_IMAGE}
ENV MODEL_PATH=/models/qwen3-embedding-8b
CMD [
  "python",
  "-m",
  "vllm.entrypoints.openai.api_server",
  "--config",
  "/config/vllm.yaml"
]
"""


def test_dockerfile_exec_form_over_lines_without_backslash_does_not_build(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "Dockerfile.qwen3-embedding-8b"
    f.write_text(UNCLOSED_CMD)
    assert main(["lint", str(f), "--gpu", "L4"]) == 0
    assert capsys.readouterr().out == (
        f"{f}:4:1: SF105 the JSON array of CMD goes on past its line with no \\ at the line's end: docker build "
        "stops at line 5 ('\"python\",'), which is no instruction, so no image is built; end each line of the array "
        "but the last with \\, or write it on one line\n0 errors, 1 warning, 0 info in 1 file (0 servers)\n")
    # with a backslash at each line's end it is one instruction, the exec form Docker runs
    f.write_text(UNCLOSED_CMD.replace("[\n", "[ \\\n").replace(",\n", ", \\\n").replace('yaml"\n', 'yaml" \\\n'))
    main(["lint", str(f), "--gpu", "L4", "--format", "json"])
    assert [d["code"] for d in json.loads(capsys.readouterr().out) if d["code"] in ("SF105", "SF106")] == ["SF106"]


# paul-heyse/Medical_KG_rev's ops/k8s/base/deployment-vllm-server.yaml selects nodes with `accelerator: nvidia-gpu`, a
# label that says the node has a GPU, not which: lint said SF003 "unknown GPU 'nvidia-gpu'; did you mean: a10g,
# dgx-spark, t4?" and estimate refused the server for a GPU name nobody wrote. It is no GPU model: SF110, and --gpu
# sizes it.
GENERIC_LABEL = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-server
spec:
  template:
    spec:
      nodeSelector:
        accelerator: nvidia-gpu
      containers:
        - name: vllm-server
          image: vllm/vllm-openai:v0.11.0
          command: [python, -m, vllm.entrypoints.openai.api_server]
          args: [--model=Qwen/Qwen2.5-7B-Instruct, --max-model-len=32768]
          resources:
            limits:
              nvidia.com/gpu: 1
"""


def test_node_label_that_names_no_gpu_model_is_no_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "deployment-vllm-server.yaml"
    f.write_text(GENERIC_LABEL)
    main(["lint", str(f), "--format", "json"])
    assert [(d["code"], d["location"]["line"]) for d in json.loads(capsys.readouterr().out)] == [
        ("SEC004", 13), ("SF110", 13)]
    assert main(["estimate", str(f), "--gpu", "A100-80GB"]) == 0
    assert capsys.readouterr().out.startswith("vllm 0.11.0  ·  Qwen/Qwen2.5-7B-Instruct\n1 × NVIDIA A100-SXM4-80GB ")
    # a label value that names a model is still read
    f.write_text(GENERIC_LABEL.replace("nvidia-gpu", "nvidia-tesla-t4"))
    main(["estimate", str(f)])
    assert "1 × Tesla T4 " in capsys.readouterr().out


# paul-heyse/Medical_KG_rev's docker-compose.vllm.yml gives vllm/vllm-openai:v0.11.0 (ENTRYPOINT `vllm serve`) the command
# `python -m vllm.entrypoints.openai.api_server --model ...`: lint said SF106 "the engine rejects it", while estimate
# printed "verdict: starts" and tune proposed --max-num-seqs 512 for a container that exits at argparse.
DOUBLED_COMPOSE = """services:
  vllm-server:
    image: vllm/vllm-openai:v0.11.0
    command: >
      python -m vllm.entrypoints.openai.api_server
        --model Qwen/Qwen2.5-7B-Instruct
        --max-model-len 32768
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu]
"""
REFUSED = ("the container runs `vllm serve python -m vllm.entrypoints.openai.api_server ...` (vllm/vllm-openai:v0.11.0 "
           "already runs `vllm serve`), which the engine rejects: set the entrypoint or pass only the engine's arguments")


def test_command_doubled_on_the_images_entrypoint_is_not_estimated_as_starting(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "docker-compose.vllm.yml"
    f.write_text(DOUBLED_COMPOSE)
    main(["lint", str(f), "--gpu", "H100", "--format", "json"])
    assert [(d["code"], d["location"]["line"]) for d in json.loads(capsys.readouterr().out)] == [("SEC004", 5), ("SF106", 5)]
    assert main(["estimate", str(f), "--gpu", "H100"]) == 2
    assert capsys.readouterr().err == f"servefit: error: {REFUSED}\n"
    assert main(["explain", str(f), "--gpu", "H100"]) == 2
    assert capsys.readouterr().err == f"servefit: error: {REFUSED}\n"
    main(["tune", str(f), "--gpu", "H100", "--diff"])
    assert capsys.readouterr().out == f"compose/vllm-server ({f}:5)\n  error: {REFUSED}\n\nno changes to write\n"
    # the entrypoint set in the file: the server starts and is sized
    f.write_text(DOUBLED_COMPOSE.replace("    command: >", "    entrypoint: []\n    command: >"))
    assert main(["estimate", str(f), "--gpu", "H100"]) == 0
    assert "verdict: starts" in capsys.readouterr().out


# tomasruizt/lewidi2025's Makefile runs `vllm serve Qwen/Qwen3-4B ... --max-num-seqs 10`: estimate's assumptions said
# "scheduler defaults for this GPU: max_num_seqs=10, max_num_batched_tokens=8192", the user's own 10 called a default.
MAKEFILE = """vllm-qwen3-thinking:
\tvllm serve Qwen/Qwen3-4B \\
\t\t--max-model-len 20000 \\
\t\t--max-num-seqs 10 \\
\t\t--port 8000
"""


def test_scheduler_setting_the_command_gives_is_not_called_a_default(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "Makefile"
    f.write_text(MAKEFILE)
    assert main(["estimate", str(f), "--gpu", "H100", "--engine-version", "0.12.0"]) == 0
    out = capsys.readouterr().out
    assert "  - scheduler default for this GPU: max_num_batched_tokens=8192\n" in out
    assert "max_num_seqs=10" not in out
    f.write_text(MAKEFILE.replace("\t\t--max-num-seqs 10 \\\n", ""))
    main(["estimate", str(f), "--gpu", "H100", "--engine-version", "0.12.0"])
    assert "  - scheduler defaults for this GPU: max_num_seqs=1024, max_num_batched_tokens=8192\n" in \
        capsys.readouterr().out


# jspaulsen/llama-cpp-docker's Dockerfile builds llama.cpp at tag b7327 (before router mode) and ends with
# `ENTRYPOINT ["llama-server"]`, no CMD: lint said SF002 "models/7B/ggml-model-f16.gguf: cannot tell which model this
# GGUF is", llama-server's built-in default path, a file nobody wrote, where the model is what `docker run IMAGE ...`
# gives (as its Dockerfile-cpu, through a script, and every newer build were told: SF115).
BUILT_AT_TAG = """FROM nvidia/cuda:12.8.0-devel-ubuntu22.04 AS build
ARG LLAMA_CPP_TAG="b7327"
RUN git clone --branch ${LLAMA_CPP_TAG} https://github.com/ggerganov/llama.cpp.git && cd llama.cpp && \\
  cmake -B build -DGGML_CUDA=ON && cmake --build build --config Release
FROM nvidia/cuda:12.8.0-runtime-ubuntu22.04
COPY --from=build /srv/llama.cpp/build/bin/llama-server /usr/local/bin/llama-server
ENTRYPOINT ["llama-server"]
"""


def test_bare_entrypoint_of_an_old_llamacpp_build_takes_its_model_at_docker_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "Dockerfile"
    f.write_text(BUILT_AT_TAG)
    assert main(["lint", str(f), "--gpu", "L4"]) == 0
    assert capsys.readouterr().out == (
        f"{f}:7:14: SF115 the Dockerfile's command is the bare llama.cpp server: the model and settings are the "
        "arguments `docker run IMAGE ...` gives it, which are not in this file, so its memory was not checked: add "
        "`# servefit: model=REF` above it for the model it serves\n0 errors, 0 warnings, 1 info in 1 file (1 server)\n")
    # a script that runs that build with no -m does load the default path (llama-server b7327 falls back to it)
    s = tmp_path / "run.sh"
    s.write_text("llama-server --port 8080\n")
    f.unlink()
    main(["estimate", str(s), "--gpu", "L4", "--engine-version", "b7327"])
    assert "models/7B/ggml-model-f16.gguf" in capsys.readouterr().err


# MooseStack/containerized_llama.cpp_serving's ServingRuntime-llamacpp-Nvidia.yaml runs `llama-server --model
# /mnt/models/*.gguf` through `sh -c`: the GGUF KServe mounts there from an InferenceService's storageUri. Lint said
# SF002 "cannot tell which model this GGUF is (unknown model '*' ...)": llama.cpp's catalog name of the glob was
# compared with KServe's mount path, not the path as written.
LLAMACPP_RUNTIME = """apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata:
  name: llamacpp-nvidia
spec:
  containers:
    - name: kserve-container
      image: ghcr.io/ggerganov/llama.cpp:latest-cuda
      command:
        - "/bin/sh"
        - "-c"
        - /app/llama-server --model /mnt/models/*.gguf "$@"
        - '--'
      args:
        - --n-gpu-layers
        - 999
"""


def test_llamacpp_runtime_model_in_kserves_mount_is_the_inference_services(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "ServingRuntime-llamacpp-Nvidia.yaml"
    f.write_text(LLAMACPP_RUNTIME)
    main(["lint", str(f), "--gpu", "L40S", "--format", "json"])
    assert [(d["code"], d["location"]["line"], d["message"]) for d in json.loads(capsys.readouterr().out)] == [
        ("SF002", 12, "the model is the one KServe downloads to /mnt/models from the storageUri of an InferenceService "
                      "that uses this runtime, and no InferenceService in this file does, so its memory was not "
                      "checked: add `# servefit: model=ORG/NAME` beside the server, or put the InferenceService in "
                      "this file")]


# jhlu2019/GustoBot's scripts run `/home/kdsoft/miniconda3/envs/vllm-0.9.0/bin/vllm serve ...` and
# `.../envs/vllm-0.10.1/bin/vllm serve ...`: the environment is named after the release it holds, the file's only word
# for it, and servefit planned the newest release (or one its options date), SF005 "no version given".
CONDA_ENV_SCRIPT = """#!/bin/bash
/home/kdsoft/miniconda3/envs/vllm-0.9.0/bin/vllm serve "/data/models/Qwen3-30B-A3B" \\
  --tensor-parallel-size 4 \\
  --max-model-len 32768 \\
  --enable-reasoning \\
  --reasoning-parser deepseek_r1
"""


def test_release_named_by_the_environment_the_engine_runs_from(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "vllm_start_qwen3_30b_a3b.sh"
    f.write_text(CONDA_ENV_SCRIPT)
    main(["lint", str(f), "--gpu", "A100-80GB", "--format", "json"])
    assert [d["code"] for d in json.loads(capsys.readouterr().out) if d["code"].startswith(("SF005", "VLLM0"))] == [
        "VLLM023"]
    assert main(["estimate", str(f), "--gpu", "A100-80GB"]) == 0
    assert capsys.readouterr().out.startswith("vllm 0.9.0  ·  ")
    # another engine's environment, or one named without a release, says nothing of vLLM's: the options date it
    for env in ("sglang-0.4.6", "deepseekocr"):
        f.write_text(CONDA_ENV_SCRIPT.replace("vllm-0.9.0", env))
        main(["estimate", str(f), "--gpu", "A100-80GB"])
        assert capsys.readouterr().out.startswith("vllm 0.9.2  ·  ")


# arkady-emelyanov/vllm-sglang-demo's compose service builds its image (`build:` with BASE_IMAGE=vllm/vllm-openai) and
# runs `./serve.vllm.sh`, bind-mounted at /serve.sh, through `bash -c /serve.sh`: the service's server was looked for in
# the built image alone (the mount is no COPY), so none was read there, and the script was linted as if run on the host
# (SEC003 "every interface of this machine"), its published port and its .env.template unseen.
BUILT_AND_MOUNTED = """services:
  openai-endpoint:
    build:
      context: .
      args:
        - BASE_IMAGE=vllm/vllm-openai:latest
    ports:
      - "30000:30000"
    volumes:
      - ./serve.vllm.sh:/serve.sh
    entrypoint: ["/bin/bash", "-c"]
    command: ["/serve.sh"]
"""


def test_compose_service_that_builds_its_image_runs_the_script_it_mounts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "docker-compose.yaml").write_text(BUILT_AND_MOUNTED)
    (tmp_path / "Dockerfile").write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nUSER vllm\n")
    (tmp_path / "serve.vllm.sh").write_text("#!/usr/bin/env bash\nvllm serve ${MODEL_PATH} \\\n  --port 30000\n")
    (tmp_path / ".env.template").write_text("MODEL_PATH=TinyLlama/TinyLlama-1.1B-Chat-v1.0\n")
    main(["lint", str(tmp_path), "--gpu", "L4", "--format", "json"])
    got = [(d["code"], Path(d["location"]["file"]).name, d["location"]["line"], d.get("server"))
           for d in json.loads(capsys.readouterr().out)]
    assert got == [("SEC002", "docker-compose.yaml", 8, "compose/openai-endpoint"),
                   ("SF001", "serve.vllm.sh", 2, "compose/openai-endpoint")]


# paul-heyse/Medical_KG_rev's ops/k8s/base/kustomization.yaml lists deployment-mineru-workers.yaml, which the repository
# does not have: each overlay's SF104 repeated kustomize's whole accumulation chain, five absolute paths long, with the
# one fact (the missing file) at its end.
BASE_KUSTOMIZATION = """apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - deployment-vllm-server.yaml
  - deployment-mineru-workers.yaml
"""
VLLM_SERVER = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-server
spec:
  template:
    spec:
      containers:
        - name: vllm-server
          image: vllm/vllm-openai:v0.11.0
          args: [--model=Qwen/Qwen2.5-7B-Instruct]
"""


def test_kustomize_file_listed_but_missing_is_named(helm_on_path: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    base, prod = tmp_path / "ops/k8s/base", tmp_path / "ops/k8s/overlays/production"
    base.mkdir(parents=True)
    prod.mkdir(parents=True)
    (base / "kustomization.yaml").write_text(BASE_KUSTOMIZATION)
    (base / "deployment-vllm-server.yaml").write_text(VLLM_SERVER)
    (prod / "kustomization.yaml").write_text("resources:\n  - ../../base\n")
    main(["lint", "ops/k8s/overlays", "--format", "json"])
    assert [d["message"] for d in json.loads(capsys.readouterr().out) if d["code"] == "SF104"] == [
        "kustomize could not build this: ../../base/kustomization.yaml lists deployment-mineru-workers.yaml, which is "
        "not in the repository (kustomize stops there: `kubectl apply -k` fails the same way)"]


# louis030195/text-generation-inference-helm keeps its values.yaml at the repository's root, beside charts/: SF116 said
# "run `servefit lint --values values.yaml`", and run so, helm could not render the chart with it (its ingress template
# reads .Values.model, the values give `models:`); SF116 still said to run `servefit lint --values values.yaml`.
TGI_DEPLOYMENT = """{{- range .Values.models }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .shortName }}
spec:
  template:
    spec:
      containers:
      - name: text-generation-inference
        image: {{ $.Values.image.repository }}:{{ $.Values.image.tag }}
        args: ["--model-id", "{{ .name }}", "--num-shard", "1"]
---
{{- end }}
"""
TGI_INGRESS = """apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: {{ .Values.model.shortName }}
"""
TGI_VALUES = """models:
  - name: bigscience/bloomz-7b1
    shortName: bloomz-7b1
image:
  repository: ghcr.io/huggingface/text-generation-inference
  tag: latest
"""


def test_values_given_with_a_chart_that_does_not_render_gets_no_advice_to_give_it(
        helm_on_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    chart = tmp_path / "charts/text-generation-inference"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: text-generation-inference\nversion: 0.1.0\n")
    (chart / "templates/deployment.yaml").write_text(TGI_DEPLOYMENT)
    (chart / "templates/ingress.yaml").write_text(TGI_INGRESS)
    (tmp_path / "values.yaml").write_text(TGI_VALUES)
    main(["lint", ".", "--format", "json"])
    [before] = [d["message"] for d in json.loads(capsys.readouterr().out) if d["code"] == "SF116"]
    assert before.endswith("so this server's settings were not checked: run `servefit lint --values values.yaml`")
    main(["lint", ".", "--values", "values.yaml", "--format", "json"])
    [after] = [d["message"] for d in json.loads(capsys.readouterr().out) if d["code"] == "SF116"]
    assert after == (
        "ghcr.io/huggingface/text-generation-inference:latest runs Text Generation Inference, but the command it runs "
        "comes from the templates of chart charts/text-generation-inference, which helm could not render with this "
        "file (SF104 on the chart says why), so this server's settings were not checked")
