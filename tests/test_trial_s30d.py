"""Found by running servefit as a new user on SGLang / TGI / vLLM deployment files for HPC launchers
(Slurm `srun`, `docker exec` into a running container) and cloud run configurations (dstack, SkyPilot)
from public repositories (session 30, fourth trial): each case is a minimal file written for the test, in
the shape the repository had.

Repositories tried (owner/name@commit):
  dstackai/dstack@511c318c8a7672fb2a925041bfc2d7301a26272e (mkdocs/docs/examples/inference/{sglang,vllm}.md)
  crazyguitar/pysheeet@fbe35ba514d08ede114004716ead573fe99441a4 (src/llm/{sglang,vllm}/run.sbatch, src/nixl)
  shenpeijun0212/S-GRPO@75c354075441add65f368b98e858b489471af63d (deploy_dpsk/serving.sh)
  nebius/nebius-ps-services@eaaa35f68c0b8fdfde65e56418f742e6f4115e84 (examples/inference/vllm SkyPilot tasks)
  princeton-ddss/blackfish@c13f9ae6bf5fb603068a7c7c17ad300e0c97362e (Jinja job templates, image templated: no server)
  Strivin0311/llms-tgl-service@3650735ade3eea34e061d9183625896f8b58b4ca (tgl_server.sh, TGI docker run)
  uv-python/raycluster@bafa8402bbb21a1f43db555c346b791cb0d755a4 (slurm-jobs: its own start-cluster.py builds the command)
  Dmitriuso/bot-antosha-tgi@e77b2f9fe804d6984ba46dd56ec8ae0b57daa676 (run_tgi.sh)
  nichnikov/train-llm-tutorial@5c304913eca91340b9315272abc1a25537ac94f7 (run_llm.bash, TGI env vars)
  jbohnslav/modal_chat@8cdd8bb92757813b1c8959bd6d5c59b4ab1ccffb (vllm_server.py, a Modal app: Python is not read)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.cli import main

# dstackai/dstack's mkdocs/docs/examples/inference/sglang.md runs SGLang as a dstack service: `commands` in the
# `image`, `env` as `- K=V` items, `--tp $DSTACK_GPUS_NUM` from `resources.gpu: H100:4`. servefit read the file as
# an image reference only (SF116 "the program that reads it builds the command") and checked nothing.
DSTACK_SERVICE = """type: service
name: qwen

image: lmsysorg/sglang:v0.5.10.post1

env:
  - HF_TOKEN
  - MODEL_ID=Qwen/Qwen2.5-7B-Instruct

commands:
  - |
    python3 -m sglang.launch_server \\
      --model-path $MODEL_ID \\
      --port 30000 \\
      --tp $DSTACK_GPUS_NUM \\
      --mem-fraction-static 0.8 \\
      --context-length 32768

port: 30000

resources:
  gpu: L4:2
"""


def test_dstack_service_commands_are_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "qwen.dstack.yml"
    f.write_text(DSTACK_SERVICE)
    assert main(["lint", str(f)]) == 0
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (1 server)\n"
    assert main(["estimate", str(f)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("sglang 0.5.10.post1  ·  Qwen/Qwen2.5-7B-Instruct\n2 × NVIDIA L4 (22.03 GiB as the driver "
                          "reports it; dstack resources.gpu)  ·  TP 2 PP 1\n")
    assert main(["tune", str(f), "--diff"]) == 0
    assert capsys.readouterr().out.endswith(
        "       --tp $DSTACK_GPUS_NUM \\\n-      --mem-fraction-static 0.8 \\\n+      --mem-fraction-static 0.88 \\\n"
        "       --context-length 32768\n \n port: 30000\n")
    assert main(["tune", str(f), "--write"]) == 0
    capsys.readouterr()
    assert f.read_text() == DSTACK_SERVICE.replace("0.8 \\", "0.88 \\")
    assert main(["tune", str(f), "--write"]) == 0
    assert "wrote" not in capsys.readouterr().out
    assert f.read_text() == DSTACK_SERVICE.replace("0.8 \\", "0.88 \\")
    # --gpu overrides the file's GPU; the count still comes from resources.gpu
    assert main(["estimate", str(f), "--gpu", "A100-80GB"]) == 0
    assert "TP 2 PP 1" in capsys.readouterr().out.splitlines()[1]


# dstack's disaggregated example: each `replicas` group has its own `commands`, `resources` and `image`; a
# service with `auth: false` is open to anyone through the gateway (by default it asks for the user's token).
DSTACK_REPLICAS = """type: service
name: prefill-decode
auth: false

env:
  MODEL_ID: Qwen/Qwen2.5-7B-Instruct

replicas:
  - count: 1
    commands:
      - pip install smg
    resources:
      cpu: 4
  - count: 1..4
    image: lmsysorg/sglang:v0.5.10.post1
    commands:
      - |
        python3 -m sglang.launch_server --model-path $MODEL_ID \\
          --disaggregation-mode prefill --host 0.0.0.0 --port 8000 --tp $DSTACK_GPUS_NUM
    resources:
      gpu: {name: [H100, H200], count: 2}

port: 8000
"""


def test_dstack_replica_groups(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "pd.dstack.yml"
    f.write_text(DSTACK_REPLICAS)
    assert main(["lint", str(f)]) == 1
    assert capsys.readouterr().out == (
        f"{f}:3:7: SEC002 SGLang has no API key and listens on all interfaces (--host 0.0.0.0); dstack service with "
        "auth: false (open through the dstack gateway) publishes it: anyone who can reach that address can run "
        "prompts on this server\n"
        "1 error, 0 warnings, 0 info in 1 file (1 server)\n")
    assert main(["estimate", str(f)]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith(
        "2 × NVIDIA H100 80GB HBM3 (79.19 GiB as the driver reports it; dstack resources.gpu (first of 2 names); ")
    # without `auth: false` the gateway asks for a token: the --host 0.0.0.0 inside the container is a machine's
    f.write_text(DSTACK_REPLICAS.replace("auth: false\n", ""))
    main(["lint", str(f)])
    assert "SEC002" not in capsys.readouterr().out


# crazyguitar/pysheeet's src/llm/sglang/run.sbatch starts SGLang on each node as
# `srun --nodes=1 --nodelist=N bash -c "docker exec -d NAME bash -c 'python3 -m sglang.launch_server ...'"`: neither
# the `bash -c` behind srun nor the command `docker exec` runs in a container was read, so the file had no server.
SRUN_EXEC = """#!/bin/bash
#SBATCH --nodes=1
#SBATCH --gres=gpu:4
srun --nodes=1 --nodelist="$HEAD_NODE" bash -c "
  docker exec -d sglang-node-0 bash -c 'python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct --tp 4 --host 127.0.0.1'
"
srun --ntasks-per-node=1 bash -c "vllm serve Qwen/Qwen2.5-7B-Instruct --tensor-parallel-size 4 --host 127.0.0.1"
"""


def test_srun_bash_c_and_docker_exec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "run.sbatch"
    f.write_text(SRUN_EXEC)
    assert main(["lint", str(f), "--gpu", "L4"]) == 0
    assert capsys.readouterr().out == (
        f"{f}:7:46: VLLM018 max-model-len is not set: vLLM uses Qwen/Qwen2.5-7B-Instruct's 32,768 tokens [GPU: L4 ×4 "
        "from --gpu; count from Slurm #SBATCH --gres=gpu:4]\n0 errors, 1 warning, 0 info in 1 file (2 servers)\n")
    assert main(["estimate", str(f), "--gpu", "H100"]) == 0
    out = capsys.readouterr().out
    assert "sglang " in out and "vllm " in out and out.count("TP 4 PP 1") == 2
    # `docker exec` alone, and a plain `bash -c` after other launcher words
    f.write_text("docker exec -it -e X=1 box python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct\n")
    main(["lint", str(f)])
    assert capsys.readouterr().out.endswith("(1 server)\n")
    # an Ollama client command inside a container is still not a server
    f.write_text("docker exec -it ollama ollama run llama3\ndocker exec ollama ollama pull qwen2.5:7b\n")
    main(["lint", str(f)])
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (0 servers)\n"


# pysheeet's run.sbatch passes the script's own arguments to SGLang as `${SERVE_ARGS_STR}` (a `printf '%q '` of
# them): SGL002 "the following arguments are required: --model-path" was an error, though those words may hold it.
SPLAT = """#!/bin/bash
SERVE_ARGS=("$@")
SERVE_ARGS_STR=$(printf '%q ' "${SERVE_ARGS[@]}")
python3 -m sglang.launch_server ${SERVE_ARGS_STR} --host 127.0.0.1 --port 30000
"""


def test_sglang_model_path_may_come_from_a_variable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "serve.sh"
    f.write_text(SPLAT)
    main(["lint", str(f)])
    out = capsys.readouterr().out
    assert "SGL002" not in out
    assert f"{f}:3:16: SF001 $(printf '%q ' \"${{SERVE_ARGS[@]}}\") is computed when the server starts" in out
    # no such word: the engine's own error stands
    f.write_text("python3 -m sglang.launch_server --host 127.0.0.1\n")
    main(["lint", str(f)])
    assert f"{f}:1:1: SGL002 the following arguments are required: --model-path\n" in capsys.readouterr().out


# A SkyPilot task for SGLang over two GKE nodes writes `resources.gpus: H100:8`: `gpus` is SkyPilot's alias of
# `accelerators` (sky/resources.py RESOURCE_CONFIG_ALIASES = {'gpus': 'accelerators'}), but only `accelerators`
# was read, so the server had no GPU (SF110) and `--tp 16` over the 2 x 8 GPUs was not checked.
SKY_GPUS = """resources:
  infra: k8s
  gpus: H100:8

num_nodes: 2

run: |
  python -m sglang.launch_server --model-path Qwen/Qwen2.5-72B-Instruct --tp 16 --nnodes 2 \\
    --node-rank $SKYPILOT_NODE_RANK --dist-init-addr 10.0.0.1:5000 --host 127.0.0.1 --port 30000
"""


def test_skypilot_gpus_alias(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "sglang-tcpx.yaml"
    f.write_text(SKY_GPUS)
    assert main(["lint", str(f)]) == 0
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (1 server)\n"
    assert main(["estimate", str(f)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        "8 × NVIDIA H100 80GB HBM3 (79.19 GiB as the driver reports it; SkyPilot resources.gpus; 'H100' taken as the "
        "H100 SXM5 80 GB (NVIDIA H100 80GB HBM3); use h100-pcie or h100-nvl for the others)  ·  TP 16 PP 1")
    # in an any_of alternative too
    f.write_text(SKY_GPUS.replace("  gpus: H100:8\n", "  any_of:\n    - gpus: A100-80GB:8\n"))
    main(["estimate", str(f)])
    assert "SkyPilot resources.gpus (first of resources.any_of)" in capsys.readouterr().out


# HPC sites run the engines' Docker images with Apptainer / Singularity from Slurm jobs (princeton-ddss/blackfish's
# job templates: `apptainer instance run --nv ... vllm-openai_v0.8.3.sif NAME --model ...`; Snellius and LUMI
# guides: `apptainer run --nv docker://vllm/vllm-openai:TAG --model ...`): `run` starts the image's entrypoint with
# the arguments after the image, which was not read (no server), and `exec IMAGE CMD` did not take the release
# from a `docker://` image's tag.
APPTAINER = """#!/bin/bash
#SBATCH --gres=gpu:a100:1
apptainer run --nv --bind /scratch:/scratch docker://vllm/vllm-openai:v0.8.5 --model Qwen/Qwen2.5-7B-Instruct --max-model-len 8192
singularity exec --nv -e --env VLLM_USE_V1=1 docker://vllm/vllm-openai:v0.9.2 vllm serve Qwen/Qwen2.5-7B-Instruct --host 127.0.0.1
apptainer instance run --nv docker://ghcr.io/huggingface/text-generation-inference:2.3.0 tgi --model-id Qwen/Qwen2.5-7B-Instruct --hostname 127.0.0.1
apptainer run --nv ./vllm.sif --model Qwen/Qwen2.5-7B-Instruct
"""


def test_apptainer_run_and_exec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "serve.sbatch"
    f.write_text(APPTAINER)
    assert main(["lint", str(f)]) == 0
    assert capsys.readouterr().out == (  # a local .sif's runscript is not known: 3 servers, not 4, and said so
        f"{f}:3:78: SEC003 vLLM has no API key and listens on every interface of this machine (its default without "
        "--host): anyone who can reach it can use it; bind 127.0.0.1 or pass --api-key\n"
        f"{f}:4:90: VLLM018 max-model-len is not set: vLLM uses Qwen/Qwen2.5-7B-Instruct's 32,768 tokens [GPU: a100 "
        "×1 from Slurm #SBATCH --gres=gpu:a100:1; 'A100' taken as the 80 GB SXM4 card (NVIDIA A100-SXM4-80GB); older "
        "clouds often mean the 40 GB one: use a100-sxm4-40gb or a100-pcie-80gb]\n"
        f"{f}:6:20: SF108 `apptainer run` starts the runscript of ./vllm.sif, which servefit cannot read, so the "
        "server it starts with these options was not checked: run the engine's image as docker://REPO:TAG, or keep "
        "the name `apptainer pull docker://REPO:TAG` gives it (NAME_TAG.sif)\n"
        "0 errors, 2 warnings, 1 info in 1 file (3 servers)\n")
    assert main(["estimate", str(f)]) == 0
    heads = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(("vllm ", "tgi "))]
    assert heads == ["vllm 0.8.5  ·  Qwen/Qwen2.5-7B-Instruct", "vllm 0.9.2  ·  Qwen/Qwen2.5-7B-Instruct",
                     "tgi 2.3.0  ·  Qwen/Qwen2.5-7B-Instruct"]
    assert main(["tune", str(f), "--write"]) == 0
    capsys.readouterr()
    lines = f.read_text().splitlines()
    assert lines[2] == ("apptainer run --nv --bind /scratch:/scratch docker://vllm/vllm-openai:v0.8.5 --model "
                        "Qwen/Qwen2.5-7B-Instruct --max-model-len 16384 --max-num-seqs 64 --max-num-batched-tokens 4096")
    after = f.read_text()
    main(["tune", str(f), "--write"])
    assert "wrote" not in capsys.readouterr().out and f.read_text() == after


# dstack's TGI task: the model and limits in `env` (TGI reads MODEL_ID, MAX_INPUT_LENGTH, MAX_TOTAL_TOKENS from
# its environment), `NUM_SHARD=$DSTACK_GPUS_NUM`, and `gpu: 24GB`, a memory-only spec: one GPU of any model with
# that much memory, so DSTACK_GPUS_NUM is 1 (no SF001), and no GPU model is named (SF110 asks for one).
DSTACK_TGI = """type: task
name: llama31-task-tgi

image: ghcr.io/huggingface/text-generation-inference:3.3.6

env:
  - HUGGING_FACE_HUB_TOKEN
  - MODEL_ID=meta-llama/Meta-Llama-3.1-8B-Instruct
  - MAX_INPUT_LENGTH=4000
  - MAX_TOTAL_TOKENS=4096
commands:
  - NUM_SHARD=$DSTACK_GPUS_NUM text-generation-launcher --hostname 127.0.0.1
ports: [80]

resources:
  gpu: 24GB
"""


def test_dstack_tgi_memory_only_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "task.dstack.yml"
    f.write_text(DSTACK_TGI)
    assert main(["lint", str(f)]) == 0
    assert capsys.readouterr().out == (
        f"{f}:12:32: SF110 no GPU is known for this server, so its memory was not checked: pass --gpu NAME or add "
        "`# servefit: gpu=NAME` to the file\n0 errors, 0 warnings, 1 info in 1 file (1 server)\n")
    assert main(["estimate", str(f), "--gpu", "L4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tgi 3.3.6  ·  meta-llama/Meta-Llama-3.1-8B-Instruct (→ meta-llama/Llama-3.1-8B-Instruct)\n"
                          "1 × NVIDIA L4 (22.03 GiB as the driver reports it; --gpu; count from dstack resources.gpu)  ·  "
                          "TP 1 PP 1\n")


# vLLM multi-node data parallel from Slurm: the head node serves the API, the others run `vllm serve ... --headless`,
# which starts no API server (vllm/entrypoints/cli/serve.py ServeSubcommand.cmd: `if args.headless or
# args.api_server_count < 1: run_headless(args)`); SEC003 said the headless nodes listened on every interface.
DP_HEADLESS = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --gpus-per-node=rtx_4090:4
srun --nodes=1 -w "$HEAD" bash -c "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --tensor-parallel-size 4 \\
  --data-parallel-size 2 --data-parallel-size-local 1 --data-parallel-address 10.0.0.1 --host 127.0.0.1" &
srun --nodes=1 -w "$WORKER" bash -c "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --tensor-parallel-size 4 \\
  --data-parallel-size 2 --data-parallel-size-local 1 --data-parallel-start-rank 1 --data-parallel-address 10.0.0.1 \\
  --headless" &
wait
"""


def test_headless_vllm_node_serves_no_api(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "dp.sbatch"
    f.write_text(DP_HEADLESS)
    assert main(["lint", str(f)]) == 0
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (2 servers)\n"
    # without --headless the second node runs an API server on every interface
    f.write_text(DP_HEADLESS.replace(" \\\n  --headless", ""))
    main(["lint", str(f)])
    assert f"{f}:6:38: SEC003 vLLM has no API key and listens on every interface of this machine (its default " \
           "without --host)" in capsys.readouterr().out
    f.write_text(DP_HEADLESS.replace("--headless", "--api-server-count 0"))
    main(["lint", str(f)])
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (2 servers)\n"


# The worker nodes of a Slurm data-parallel job are started in `for i in $(seq 1 7); do srun ... --data-parallel-
# start-rank $i ...; done`: SF001 said "${i} is not set in this repository", though the loop sets it.
LOOP = """#!/bin/bash
for i in $(seq 1 7); do
  vllm serve Qwen/Qwen2.5-7B-Instruct --host 127.0.0.1 --max-model-len 4096 --data-parallel-size 8 \\
    --data-parallel-size-local 1 --data-parallel-start-rank $i --headless &
done
"""


def test_for_loop_variable_is_said_to_come_from_the_loop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "workers.sh"
    f.write_text(LOOP)
    main(["lint", str(f), "--gpu", "L4"])
    assert capsys.readouterr().out == (
        f"{f}:2:5: SF001 ${{i}} takes each value of its `for` loop in turn: the value it gives vLLM is not known here\n"
        "0 errors, 0 warnings, 1 info in 1 file (1 server)\n")
