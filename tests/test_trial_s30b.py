"""Found by running servefit as a new user on deployment files off the vLLM-in-Kubernetes path (llama.cpp,
Ollama, TGI, SGLang, vLLM outside Kubernetes) from public repositories (session 30, second trial): each case
is a minimal file written for the test, in the shape the repository had.

Repositories tried (owner/name@commit):
  sheeanit/cli@842fd5d69c22ea6bfca0642d57d00189f75d05c7
  WittenYeh/LSMCache@ca5b85a509483244df999b747eabd529ad7ebb10 (a fork of SGLang: its CI workflows, docker/, scripts)
  GardenVarietyAI/rose@7f68e761e748512680c8d5305741c1411a11fcd5 (compose with a CUDA overlay, entrypoint scripts)
  djismgaming/docs-llama-swap@8f59e427d224ba892b5c44477e21ae606e18b767 (llama-swap with macros, Windows paths, --fit-ctx)
  muhac/llm-action@9baa2771838a1f23a74db0a0fd62dc7fa09f670c (vLLM in GitHub Actions)
  realtmxi/local-deployment@aeff2ba4d5467ec706f1bee27ce9d7f6aca3c232 (Slurm jobs of SGLang, a DGX Spark vLLM in docker run)
  SEPIA-Framework/sepia-llm-experiments@aa6a6d68a71267231ee8549a49bca92cb8b0c8b5 (llama-server scripts)
  Arihant25/askIIIT@4d2c72c30d0b3aa4f1834cbc4cf283eae31cb794 (TGI docker run)
  Ewen2015/GenAI-DevOps@e861cc8038a13cf9aa0f30cdc107a0810987295e (ollama.service)
  xiz2002/Practice_NestedCompose@3d41c232491d0b20150cb93b88012c555b00e78a (an Ollama image built with `ollama create`)
  av/harbor@76469b1bdd7bc600f0be6dd7307bdd876bff5876 (compose files of llama.cpp, Ollama, TGI, SGLang, vLLM; Modelfiles)
  D-Hank/coding-tasks@0b9c926201b9bbed3531956c98e35ccbd43a4dcf (vLLM docker run)
  Hiroaki-Masuzawa/llm_vlm_memo@397ae0120f3001471fd102430b95c0e8efbc7e84 (vLLM CPU / GPU docker run, supervisord)
  fpaupier/TP-LLM-finetuning-centrale@d4d5eac7a1bb06799489c2a4394e85bac1e3155c (vLLM docker run, Makefile)
  kaizau/llama-server-osx@3a3cf1e6514a4b5c5c0c0bffe94eea19da2643a4 (a menu-bar launcher: no server in the repository)
  stur86/tinyfacts-gen@9a798ccbf4be5c151df01797b2129dffcb4e8eb7 (OLLAMA_* environment only)
  dfy37/lifesim@8880227ee3ed37036eae8607775ebb3eba5165ac (no serving file left at this commit)
  menloresearch/visual-thinker@9d1472fff7d89f86390d2693fba30f89e6351bc3 (vllm serve script)
  shirayu/llama_swap_config_autogen@989f4e8163fc225efff18c0b4e41af9706cec974 (llama-swap configs)
  and one Makefile the code index holds without naming its repository (find_string "TOOL_CALL_PARSER ?= hermes",
  read_file id 2075637502): vLLM in docker run with commented make variables and $(if ...)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.cli import main

# sheeanit/cli's llama-serv.sh starts llama-server with `--no-escape`: llama.cpp's common/arg.cpp has it as the
# negation of `-e, --escape` (a switch), and it was read as a flag taking a value, so the next flag was eaten
# and lint said LCPP002 "expected one argument" (estimate stopped there). The same for `-no-ag` (b10001+).
# Its 20 of 33 layers on the GPU keep the rest of the KV cache in system memory, which estimate put down to
# "layers with a sliding window or a state" (Llama 3.1 has neither).
LLAMA_SERV = """#!/bin/bash
BIN=/opt/llamacpp/llama-server
MODEL="/models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"
LAYERS=20

$BIN -m "$MODEL" \\
    --ctx-size 2048 -ngl $LAYERS \\
    --no-escape \\
    --host 127.0.0.1 --port 8080
"""


def test_llamacpp_negation_of_a_short_switch_takes_no_value(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "llama-serv.sh"
    f.write_text(LLAMA_SERV)
    assert main(["lint", str(f), "--gpu", "L4", "--engine-version", "b6301"]) == 0
    assert capsys.readouterr().out == (
        f"{f}:3:8: SF004 GGUF 'Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf' taken as meta-llama/Llama-3.1-8B-Instruct "
        "(by its name, quant Q4_K_M; no file to read)\n"
        f"{f}:4:8: LCPP009 offloaded 20/33 layers to GPU (-ngl); 13 layers run on the CPU [GPU: L4 ×1 from --gpu]\n"
        "0 errors, 1 warning, 1 info in 1 file (1 server)\n")
    f.write_text(LLAMA_SERV.replace("--no-escape", "-no-ag"))
    assert main(["lint", str(f), "--gpu", "L4", "--engine-version", "b10001"]) == 0
    assert "LCPP002" not in capsys.readouterr().out


def test_llamacpp_kv_cache_of_cpu_layers_is_said_as_system_memory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "llama-serv.sh"
    f.write_text(LLAMA_SERV)
    assert main(["estimate", str(f), "--gpu", "L4", "--engine-version", "b6301"]) == 0
    out = capsys.readouterr().out
    assert ("KV cache: 131,072 bytes per token; 2,048 tokens; 0.09 GiB of it in system memory, with the layers "
            "-ngl leaves on the CPU\n") in out
    assert "llama_kv_cache:        CPU KV buffer size =    96.00 MiB" in out
    # pipeline stages each hold their own layers' cache: the sum over the GPUs is the whole of it
    for cmd in (["llama-server", "-m", "/m/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "-c", "8192", "-ngl", "99"],
                ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192", "-pp", "2"]):
        main(["estimate", "--gpu", "L4", "--gpus", "2", "--", *cmd])
        line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("KV cache:"))
        assert line.startswith("KV cache: 131,072 bytes per token; ") and line.count(";") == 1, line
    # a sliding window still says so
    main(["estimate", "--gpu", "L4", "--", "vllm", "serve", "google/gemma-3-4b-it", "--max-model-len", "8192"])
    assert "; layers with a sliding window or a state hold less than every token" in capsys.readouterr().out


# tune on the same script said "now context 2,048 x 0 users, ...: offloaded": its own outcome word, and 0 users
# for a server that starts with one slot. Each outcome tune gives a plan that starts but does not count as
# serving is said in words, and such a plan shows no user count.
def test_tune_says_why_the_file_does_not_count_in_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from servefit.report.plan import VERDICT

    f = tmp_path / "llama-serv.sh"
    f.write_text(LLAMA_SERV)
    assert main(["tune", str(f), "--gpu", "L4", "--engine-version", "b6301", "--diff"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        "  now     context 2,048, KV f16, weights Q4_K_M, headroom 84.4%: starts, but with layers on the CPU "
        "(slow); --allow offload counts it")
    # explain's table of users says why the config as written serves none
    assert main(["explain", str(f), "--gpu", "L4", "--engine-version", "b6301"]) == 0
    assert capsys.readouterr().out.endswith(
        "  131,072 |             0             0             0\n"
        "as configured, no context serves a user; the server starts, but with layers on the CPU (slow)\n")
    for outcome in ("offloaded", "context_past_training", "slots_too_short", "oom_under_load",
                    "no_room_for_another_model", "little_headroom"):
        assert VERDICT[outcome].startswith("starts, but ")


# realtmxi/local-deployment's production_scripts/service.sh (run by its Slurm jobs) restarts SGLang in a loop in a
# background function that kills the server when it is stopped (`trap '...; kill $SGLANG_PID; exit' SIGTERM EXIT`)
# and waits for it; the script then waits for that function. The trap read as "started for the script's own use
# and stopped when it exits" (a model-pull Job's `ollama serve &`), so no server was found (0 servers).
SERVICE_SH = """#!/bin/bash
MODEL_PATH=/models/Llama-3.1-8B-Instruct
manage_sglang() {
    local SGLANG_PID
    trap 'echo "[SGLANG_MGR] Exiting"; kill $SGLANG_PID 2>/dev/null; exit' SIGTERM EXIT
    while true; do
        /opt/llm/.venv/bin/python3 -m sglang.launch_server \\
            --model-path "$MODEL_PATH" \\
            --host 127.0.0.1 \\
            --tp-size 1 \\
            --trust-remote-code &
        SGLANG_PID=$!
        wait $SGLANG_PID
        sleep 15
    done
}
manage_sglang &
SGLANG_MGR_PID=$!
wait $SGLANG_MGR_PID
"""


def test_a_server_a_script_waits_for_is_one_though_a_trap_kills_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    f = tmp_path / "service.sh"
    f.write_text(SERVICE_SH)
    assert main(["lint", str(f), "--gpu", "H100", "--list-sites", "--format", "json"]) == 0
    [site] = json.loads(capsys.readouterr().out)
    assert (site["line"], site["engine"], site["model_ref"]["resolved"], site["verdict"]) == (
        7, "sglang", "meta-llama/Llama-3.1-8B-Instruct", "started")
    assert site["settings"] == {"host": "127.0.0.1", "model_path": "/models/Llama-3.1-8B-Instruct", "tp_size": 1,
                                "trust_remote_code": True}
    # a script that pulls a model with a server it starts and stops (no wait) still starts none
    f.write_text("ollama serve &\npid=$!\ntrap 'kill $pid' EXIT\nsleep 5\nollama pull llama3.2:3b\n")
    main(["lint", str(f), "--gpu", "H100", "--list-sites", "--format", "json"])
    assert json.loads(capsys.readouterr().out) == []


# realtmxi/local-deployment's glm_4.7_flash.sh runs `scitrera/dgx-spark-vllm:0.14.0-t5`: scitrera's DGX Spark builds
# follow vLLM's releases (scitrera/cuda-containers README: `0.15.0-t4` is vLLM 0.15.0 with Transformers 4), and
# servefit said "the tag counts that build's own releases, not vLLM's" and modelled the newest vLLM.
SPARK_RUN = """docker run --gpus all --network host \\
    scitrera/dgx-spark-vllm:0.15.0-t4 \\
    vllm serve Qwen/Qwen3-8B --max-model-len 32768 --host 127.0.0.1 --port 8004
"""


def test_scitrera_dgx_spark_image_tag_names_the_vllm_release(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "run.sh"
    f.write_text(SPARK_RUN)
    assert main(["estimate", str(f), "--gpu", "DGX Spark"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("vllm 0.15.0  ·  Qwen/Qwen3-8B\n")
    assert "assumed" not in out.split("assumptions:")[1].split("\n")[1]
    assert "counts that build's own releases" not in out


# WittenYeh/LSMCache's CI (a fork of SGLang) starts a container with `docker run -dt ... IMAGE` and no command, to
# `docker exec` into it. lmsysorg/sglang sets no server entrypoint (its Dockerfile has none: docs.sglang.ai always
# gives `python3 -m sglang.launch_server` as the command), so such a container runs a shell; it was read as
# `python3 -m sglang.launch_server` with no arguments: SGL002 "the following arguments are required: --model-path".
CI_RUN = """docker run -dt \\
  -v /work:/sglang-checkout/ --ipc=host \\
  --name ci_sglang \\
  lmsysorg/sglang:v0.5.3-cu126
"""


def test_sglang_image_run_without_a_command_is_no_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "ci.sh"
    f.write_text(CI_RUN)
    assert main(["lint", str(f), "--gpu", "A100-80GB"]) == 0
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (0 servers)\n"
    # given SGLang's arguments, the container runs them as before
    f.write_text(CI_RUN.replace("cu126\n", "cu126 python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B\n"))
    assert main(["lint", str(f), "--gpu", "A100-80GB", "--exit-zero"]) == 0
    assert "(1 server)" in capsys.readouterr().out


# WittenYeh/LSMCache's scripts/playground/launch_tgi.sh mounts the weights at the container's root and serves
# `--model-id /Llama-2-7b-chat-hf`: sized as meta-llama/Llama-2-7b-hf without a word, where `/models/NAME` says
# SF004 "resolved ... by name (a local folder of that name)". A folder at the root is a local folder too.
LAUNCH_TGI = """docker run --name tgi --rm -ti --gpus all -p 127.0.0.1:24000:24000 \\
  -v /home/ubuntu/model_weights/Llama-2-7b-chat-hf:/Llama-2-7b-chat-hf \\
  ghcr.io/huggingface/text-generation-inference:1.1.0 \\
  --model-id /Llama-2-7b-chat-hf --num-shard 1 \\
  --max-input-length 2048 --max-total-tokens 4096 \\
  --port 24000
"""


def test_model_in_a_folder_at_the_root_is_said_resolved_by_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "launch_tgi.sh"
    f.write_text(LAUNCH_TGI)
    assert main(["lint", str(f), "--gpu", "H100"]) == 0
    assert capsys.readouterr().out == (
        f"{f}:4:3: SEC004 TGI has no API key and listens on all interfaces (its default without --hostname): anything "
        "on the container network can use it\n"
        f"{f}:4:14: SF004 resolved '/Llama-2-7b-chat-hf' to catalog entry 'meta-llama/Llama-2-7b-hf' by name (a local "
        "folder of that name); assumed the same checkpoint\n0 errors, 0 warnings, 2 info in 1 file (1 server)\n")
    # the repository's own name without its organization is still the catalog's entry, said nothing of
    main(["lint", "--gpu", "H100", "--", "vllm", "serve", "Llama-2-7b-chat-hf", "--max-model-len", "4096",
          "--host", "127.0.0.1"])
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (1 server)\n"


# GardenVarietyAI/rose's docker-compose.yml runs llama.cpp's CPU image with a mounted llama-server/entrypoint.sh, and
# docker-compose.cuda.yml (its overlay) the CUDA image with entrypoint-cuda.sh. The layered service is the deployment
# and the base alone gives way to it; the base's script then came back as a server of its own ("script:", no image,
# SEC003 "listens on every interface of this machine"), and the base's SF001 stayed behind for a server not reported.
ROSE_BASE = """services:
  llama-server:
    image: ghcr.io/ggml-org/llama.cpp:server-b7464
    ports:
      - "127.0.0.1:8080:8080"
    volumes:
      - ./llama-server/entrypoint.sh:/entrypoint.sh:ro
    entrypoint: [ "/entrypoint.sh" ]
"""
ROSE_CUDA = """services:
  llama-server:
    image: ghcr.io/ggml-org/llama.cpp:server-cuda-b7464
    deploy:
      resources:
        reservations:
          devices:
            - capabilities: ["gpu"]
              count: 1
              driver: nvidia
    volumes:
      - ./llama-server/entrypoint-cuda.sh:/entrypoint-cuda.sh:ro
    entrypoint: ["/entrypoint-cuda.sh"]
"""
ROSE_SCRIPT = """#!/bin/sh
set -e
exec /app/llama-server \\
  -m "$LLAMA_MODEL_PATH" \\
  --host 0.0.0.0 --port 8080 \\
  -ngl -1 \\
  -c {ctx}
"""


def test_script_of_a_compose_service_an_overlay_shadows_is_not_a_server_of_its_own(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    (tmp_path / "docker-compose.yml").write_text(ROSE_BASE)
    (tmp_path / "docker-compose.cuda.yml").write_text(ROSE_CUDA)
    (tmp_path / "llama-server").mkdir()
    (tmp_path / "llama-server" / "entrypoint.sh").write_text(ROSE_SCRIPT.format(ctx=2048))
    (tmp_path / "llama-server" / "entrypoint-cuda.sh").write_text(ROSE_SCRIPT.format(ctx=32768))
    assert main(["lint", str(tmp_path), "--gpu", "L4", "--list-sites", "--format", "json"]) == 0
    sites = json.loads(capsys.readouterr().out)
    assert [(s["name"], s["settings"]["ctx_size"], s["engine_version"]) for s in sites] == [
        ("compose/llama-server+docker-compose.cuda.yml", 32768, "b7464")]
    main(["lint", str(tmp_path), "--gpu", "L4", "--format", "json"])
    assert [(f["code"], f["location"]["file"], f["location"]["line"]) for f in json.loads(capsys.readouterr().out)] == [
        ("SF001", str(tmp_path / "llama-server" / "entrypoint-cuda.sh"), 4),
        ("SEC004", str(tmp_path / "llama-server" / "entrypoint-cuda.sh"), 5)]


# muhac/llm-action's .github/workflows/dev.yml starts `vllm serve` in a job on `runs-on: ubuntu-latest` (it builds
# vLLM's CPU wheel first): GitHub's standard hosted runners have no GPU, and servefit planned the server on the
# --gpu it was given. Such a job is said not planned (SF120), as a pod that asks for no GPU is.
WORKFLOW = """name: Run LLMs
on: push
jobs:
  code:
    runs-on: {runner}
    steps:
      - name: Run vLLM server
        run: vllm serve Qwen/Qwen3-1.7B --max-model-len 4096 --host 127.0.0.1 &> vllm.log &
"""


def test_server_in_a_job_on_a_github_hosted_runner_has_no_gpu(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / ".github" / "workflows"
    d.mkdir(parents=True)
    f = d / "dev.yml"
    for runner in ("ubuntu-latest", "[ubuntu-24.04]", "windows-2022"):
        f.write_text(WORKFLOW.format(runner=runner))
        assert main(["lint", str(f), "--gpu", "L4"]) == 0  # a warning; fail-on is error
        assert capsys.readouterr().out == (
            f"{f}:8:14: SF120 the job runs on GitHub's hosted runner {runner.strip('[]')}, which has no GPU: vLLM sees no "
            "GPU (it needs one unless it is a CPU build), so its memory is not checked (for a GPU add a GPU runner: "
            "`runs-on:` the label of a self-hosted or GPU larger runner)\n0 errors, 1 warning, 0 info in 1 file (1 server)\n")
        assert main(["estimate", str(f), "--gpu", "L4"]) == 2
        assert "the job runs on GitHub's hosted runner" in capsys.readouterr().err
    # a self-hosted or larger runner's labels say nothing of its GPUs: planned on --gpu as before
    for runner in ("[self-hosted, gpu]", "ubuntu-22.04-gpu-t4", "${{ matrix.os }}"):
        f.write_text(WORKFLOW.format(runner=runner))
        assert main(["lint", str(f), "--gpu", "L4"]) == 0
        assert "SF120" not in capsys.readouterr().out


# A public Makefile (see the module docstring) sets `DTYPE ?= auto # auto, bfloat16, ...`, `QUANTIZATION ?= # fp8, awq`
# and runs vLLM with `--dtype $(DTYPE) $(if $(QUANTIZATION),--quantization $(QUANTIZATION))`. make drops the comment
# of a variable definition (GNU make manual 6.2) and keeps one branch of `$(if ...)` (8.4): the comments were read
# as the values (13 VLLM001 "unrecognized arguments", the model taken as '#'), and the `$(if ...)` word as the model.
MAKEFILE = """MODEL      ?= Qwen/Qwen2.5-7B-Instruct
DTYPE      ?= auto # auto, bfloat16, half, float16, float32
QUANTIZATION ?= {quant}# fp8, awq, gptq, gguf (empty = no quantization)
TENSOR_PARALLEL ?= 1 # number of GPUs for tensor parallelism
TAG = v\\#1

run:
\tdocker run -d --name vllm --gpus all -p 127.0.0.1:8000:8000 --ipc=host \\
\t  vllm/vllm-openai:v0.10.1 \\
\t  --model "$(MODEL)" \\
\t  --served-model-name "$(TAG)" \\
\t  --dtype $(DTYPE) \\
\t  $(if $(QUANTIZATION),--quantization $(QUANTIZATION),--max-model-len 8192) \\
\t  --tensor-parallel-size $(TENSOR_PARALLEL)
"""


def test_makefile_variable_comments_and_if_are_make_s(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    f = tmp_path / "Makefile"
    for quant, settings in (("", {"max_model_len": 8192}), ("fp8 ", {"quantization": "fp8"})):
        f.write_text(MAKEFILE.format(quant=quant))
        assert main(["lint", str(f), "--gpu", "H100", "--list-sites", "--format", "json"]) == 0
        [site] = json.loads(capsys.readouterr().out)
        assert (site["model"], site["settings"]) == ("Qwen/Qwen2.5-7B-Instruct", {
            "dtype": "auto", "served_model_name": ["v#1"], "tensor_parallel_size": 1, **settings})
        assert main(["lint", str(f), "--gpu", "H100"]) == 0
        assert "VLLM001" not in capsys.readouterr().out
    # a condition on a variable the file does not set is not known: said, not guessed
    f.write_text(MAKEFILE.format(quant="").replace("$(if $(QUANTIZATION)", "$(if $(QUANT)"))
    main(["lint", str(f), "--gpu", "H100"])
    assert "SF001 $(if ${QUANT},--quantization ${QUANTIZATION},--max-model-…) is computed" in capsys.readouterr().out


# djismgaming/docs-llama-swap's config.yaml serves Qwen3-Coder-30B-A3B Q4_K_M on a 24 GB Radeon with `--fit-ctx 60000`
# and no -c / -ngl: --fit keeps that context by moving the experts of one layer to the CPU. LCPP009 said so on the
# model's first line, column 1 (no -ngl or -c to point at), not on --fit-ctx; and tune wrote `--ctx-size 131072
# --parallel 2` as "safe", which --fit meets by moving the experts of 20 layers to the CPU: the file's --fit-ctx
# lets fit move as many experts as it moves for the file's own config, not more.
SWAP = """macros:
  "llamacpp-rocm": >
    /opt/llamacpp-rocm/llama-server
    --port ${PORT}

models:
  Qwen3 Coder 30B A3B Q4_K_M ROCm:
    ttl: 900
    cmd: |
      ${llamacpp-rocm}
      -m /models/Qwen3-Coder-30B-A3B-Instruct-GGUF/Qwen3-Coder-30B-A3B-Instruct-Q4_K_M.gguf
      --jinja
      --fit-ctx 60000
"""


def test_fit_ctx_moves_experts_said_there_and_tune_moves_no_more(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "config.yaml"
    f.write_text(SWAP)
    gpu = ["--gpu", "RX 7900 XTX", "--engine-version", "b10309"]
    assert main(["lint", str(f), *gpu]) == 0
    assert (f"{f}:13:17: LCPP009 offloaded 49/49 layers to GPU (--fit); the experts of 1 layer run on the CPU"
            in capsys.readouterr().out)
    assert main(["tune", str(f), *gpu, "--write"]) == 0
    out = capsys.readouterr().out
    assert "  now     context 60,160 x 1 user, KV f16, weights Q4_K_M, headroom 4.3%: meets the needs\n" in out
    assert "  change  none: the config is already the best one\n" in out
    assert f.read_text() == SWAP


# Setup scripts of public repositories install Ollama with its Linux installer and pull a model
# (`curl -fsSL https://ollama.com/install.sh | sh` then `ollama pull qwen2.5:7b`), some writing the environment
# drop-in a line at a time (`echo 'Environment="OLLAMA_HOST=0.0.0.0:11434"' | sudo tee -a .../override.conf`, the
# code index's find_string "ollama.service.d/override.conf"). The installer writes ollama.service and starts it
# (scripts/install.sh, configure_systemd); no server was found in either, and the echoed drop-in was not read.
INSTALL = """#!/bin/bash
curl -fsSL https://ollama.com/install.sh | sh
sudo mkdir -p /etc/systemd/system/ollama.service.d
echo '[Service]'                              | sudo tee /etc/systemd/system/ollama.service.d/override.conf
echo 'Environment="OLLAMA_HOST=0.0.0.0:11434"' | sudo tee -a /etc/systemd/system/ollama.service.d/override.conf
echo 'Environment="OLLAMA_NUM_PARALLEL=4"' | sudo tee -a /etc/systemd/system/ollama.service.d/override.conf
sudo systemctl daemon-reload && sudo systemctl restart ollama
ollama pull qwen2.5:7b
"""


def test_ollama_installer_starts_a_server_with_the_drop_in_the_script_echoes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    f = tmp_path / "setup.sh"
    f.write_text(INSTALL)
    assert main(["lint", str(f), "--gpu", "L4", "--list-sites", "--format", "json"]) == 0
    [site] = json.loads(capsys.readouterr().out)
    assert (site["engine"], site["model_ref"]["resolved"], site["env"]) == (
        "ollama", "Qwen/Qwen2.5-7B-Instruct", {"OLLAMA_HOST": "0.0.0.0:11434", "OLLAMA_NUM_PARALLEL": "4"})
    main(["lint", str(f), "--gpu", "L4"])
    assert f"{f}:5:32: SEC003 Ollama has no authentication at all and listens on every interface" in capsys.readouterr().out
    # the installer alone: its unit with the defaults, serving what the script pulls
    f.write_text("#!/bin/bash\ncurl -fsSL https://ollama.com/install.sh | sh\nollama pull qwen2.5:7b\n")
    main(["lint", str(f), "--gpu", "L4", "--list-sites", "--format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert (site["line"], site["name"], site["env"], site["model_ref"]["resolved"]) == (
        2, "systemd/ollama.service", {}, "Qwen/Qwen2.5-7B-Instruct")
    main(["estimate", str(f), "--gpu", "L4"])
    assert ("Ollama's Linux installer (ollama.com/install.sh) writes ollama.service and starts it: the server is its "
            "ExecStart=/usr/local/bin/ollama serve, with the defaults") in capsys.readouterr().out
    # one that starts `ollama serve` itself, or only prints the installer's line, adds none
    f.write_text("curl -fsSL https://ollama.com/install.sh | sh\nollama serve &\nollama pull qwen2.5:7b\n")
    main(["lint", str(f), "--gpu", "L4", "--list-sites", "--format", "json"])
    assert [s["line"] for s in json.loads(capsys.readouterr().out)] == [2]
    f.write_text('echo "run: curl -fsSL https://ollama.com/install.sh | sh"\n')
    main(["lint", str(f), "--gpu", "L4", "--list-sites", "--format", "json"])
    assert json.loads(capsys.readouterr().out) == []


# realtmxi/local-deployment's Slurm jobs (glm_4.6.sh: `#SBATCH --gres=gpu:nvidia_h200:4`, MODEL_PATH=..., TP_SIZE=4)
# run `bash ".../production_scripts/service.sh" $MODEL_PATH $PORT $TP_SIZE $REMOTE_SSH_URL`, and service.sh starts
# SGLang with `--model-path "$MODEL_PATH" --tp-size "$TP_SIZE"` from `MODEL_PATH=$1` ...: the jobs had no server,
# and service.sh read alone had a model "$1" (SF001). The called script is read with the call's arguments.
JOB = """#!/bin/bash
#SBATCH --job-name=sglang-server
#SBATCH --gres=gpu:nvidia_h200:4

PORT=12003
MODEL_PATH=/models/Llama-3.3-70B-Instruct
TP_SIZE=4

bash "/n/lab/llm-workload/production_scripts/service.sh" $MODEL_PATH $PORT $TP_SIZE
"""
SERVICE = """#!/bin/bash
MODEL_PATH=$1
PORT=$2
TP_SIZE=$3
python3 -m sglang.launch_server \\
    --model-path "$MODEL_PATH" \\
    --host 127.0.0.1 \\
    --port "$PORT" \\
    --tp-size "$TP_SIZE" \\
    --enable-metrics &
wait
"""


def test_slurm_job_runs_the_service_script_with_its_arguments(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    d = tmp_path / "production_scripts"
    d.mkdir()
    (d / "job.sh").write_text(JOB)
    (d / "service.sh").write_text(SERVICE)
    assert main(["lint", str(d), "--gpu", "H200", "--list-sites", "--format", "json"]) == 0
    [site] = json.loads(capsys.readouterr().out)
    assert (site["file"], site["line"], site["name"], site["model_ref"]["resolved"], site["gpu"]["count"]) == (
        str(d / "job.sh"), 9, "run/service.sh@9", "meta-llama/Llama-3.3-70B-Instruct", 4)
    assert site["settings"] == {"enable_metrics": True, "host": "127.0.0.1", "model_path": "/models/Llama-3.3-70B-Instruct",
                                "port": 12003, "tp_size": 4}
    assert main(["lint", str(d), "--gpu", "H200"]) == 0
    assert "SF001" not in capsys.readouterr().out
    # a new flag has no place in the job (its words are variables' values): said by hand, the file kept
    f = d / "job.sh"
    assert main(["tune", str(f), "--gpu", "H200", "--min-concurrency", "64", "--write"]) in (0, 1)
    out = capsys.readouterr().out
    assert "by hand: --context-length" in out
    assert f.read_text() == JOB and (d / "service.sh").read_text() == SERVICE


# tune inserted new flags after `vllm` when every word after `serve` is a variable's value
# (`vllm --max-num-seqs 128 --max-model-len 32768 serve $MODEL --tensor-parallel-size $TP`), and after a variable's
# assigned value (`TP_SIZE=4 --context-length 32768`): both break the script; they are said by hand.
def test_tune_writes_no_flag_between_program_words_or_into_an_assignment(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "serve.sh"
    text = "MODEL=Qwen/Qwen2.5-7B-Instruct\nTP=1\nvllm serve $MODEL --tensor-parallel-size $TP\n"
    f.write_text(text)
    main(["tune", str(f), "--gpu", "L4", "--engine-version", "0.10.1", "--write"])
    out = capsys.readouterr().out
    assert "by hand: --max-model-len" in out
    assert f.read_text() == text
    # a word written in the command still takes them after it
    f.write_text("MODEL=Qwen/Qwen2.5-7B-Instruct\nvllm serve $MODEL --tensor-parallel-size 1\n")
    assert main(["tune", str(f), "--gpu", "L4", "--engine-version", "0.10.1", "--write"]) == 0
    assert f.read_text().startswith("MODEL=Qwen/Qwen2.5-7B-Instruct\nvllm serve $MODEL --tensor-parallel-size 1 --max")


# The same for `sbatch deploy.sbatch MODEL` (a TGI launcher job taking its model as $1, the shape of public
# alignment repositories' deploy scripts): Slurm runs the batch script with the arguments, and its own #SBATCH
# request is the server's GPUs.
TGI_JOB = """#!/bin/bash
#SBATCH --job-name=tgi
#SBATCH --gres=gpu:a100:2
model_path=$1
max_input_tokens=3072
max_total_tokens=4096

text-generation-launcher --port 8001 --hostname 127.0.0.1 \\
--max-batch-prefill-tokens ${max_input_tokens} \\
--max-input-tokens ${max_input_tokens} \\
--max-total-tokens ${max_total_tokens} \\
--model-id ${model_path}
"""


def test_sbatch_of_a_batch_script_with_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    (tmp_path / "deploy.sbatch").write_text(TGI_JOB)
    (tmp_path / "submit.sh").write_text("sbatch --time=01:00:00 deploy.sbatch Qwen/Qwen2.5-7B-Instruct\n")
    for named in (tmp_path, tmp_path / "submit.sh"):  # the caller names no engine: read for the script it runs
        assert main(["lint", str(named), "--gpu", "A100-80GB", "--list-sites", "--format", "json"]) == 0
        [site] = json.loads(capsys.readouterr().out)
        assert (site["name"], site["model_ref"]["resolved"], site["gpu"]["count"], site["gpu"]["source"]) == (
            "run/deploy.sbatch@1", "Qwen/Qwen2.5-7B-Instruct", 2, "--gpu; Slurm #SBATCH --gres=gpu:a100:2")
    # run with bash, the #SBATCH lines are comments: the caller's GPUs, none here
    (tmp_path / "submit.sh").write_text("bash deploy.sbatch Qwen/Qwen2.5-7B-Instruct\n")
    main(["lint", str(tmp_path / "submit.sh"), "--gpu", "A100-80GB", "--list-sites", "--format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert site["gpu"]["count"] == 1
