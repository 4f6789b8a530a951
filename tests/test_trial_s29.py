"""Found by running servefit as a new user on public deployment repositories (session 29): each
case is a minimal file written for the test, in the shape the repository had.

Repositories tried (owner/name@commit):
  ardge-timwu/vllm-helm@576266f46d7ee83c904cc37b7b8c2f6d0b2d6db7
  open-source-ai-dev/vllm-helm-chart@96a8b51ea80943ee7d0a53b352dcd36d293243d6
  castai/helm-charts@daa46281449593e410adc31f7fe169043c116895
  mattbucci/2x-3090-GA102-300-A1-sglang-inference@84aca7276bf4766179dcc683f91ae24b907bfa65
  mARTin-B78/dgx-spark_lite-llm_llama-swap_vllm_llama-cpp_ollama@71a180d656a1af665e41e660c908ecf3f41c3139
  dbrucknr/Ollama-Docker-NVIDIA-Toolkit@b6e7103fbce5b2d3bd2fbcd1f7dc17e98f2bbe83
  thebiss/llama-cpp-mkl-docker@abad8b8c830d2d73e139b5cd7df9c75ed81e8c7c
  Shuffle/python-apps@ab2f5f54989e3c94b68e4c4e5ae856813fcd7bd8
  dwdraju/gdg-ottawa@842ef45deaedb8ffe05ffacfae79273682a16117
  tchangkiat/aws-cdk-stacks@bfa0c600f74f64afcbb40a452f0e330ef856e76e
  charlescva/interactive-llama@e581ae740631791a4afb0fc93346ff9fc94d9245
  sarvamai/uidai-deployment@ddc9098d19e1e6e15fefc4449dff99eee2d3ad57
  lijiawei20161002/password_locking@19307205ab4724f1f1859f6bc8b4dc946e553450
  msbabo-dmatrix/koyeb-test@e594587a89dd396a4df6cc895cf9f4040fabb67f
  WohimLee/vLLM-Tutorial@fb3bf32c0cf2d946856a7fb533843bfca2e2705b
  lum7671/Scripts@a1944a492b8f0880081d776929529899b9b2ac11
  Tandemn-Labs/tandemn-tuna@6f9326b096e10ffaf35e6fa7d3a8d7837142ad80
  minish0/ollama-systemd@e757347be0c22d78d1614f43de553fbcb1a3b8b8
  mitchross/talos-argocd-proxmox@38e5c2f87d13d8b5037bd9f999195fa97956a8f3
  sostrowsk/dgx-spark-local-llm@4b5486468ec6941d55c25f0b4f9557c7893d8b58
  Seen-Tomorrow/blackwell-ops@439b4f706b7b9676890462a1236827e34a4d4cce
  pbseiya/vllm-tb250-mining-rig@7d123410957e4dda7ee8c2228894abbd1045ec2d
  mbT-Infrastructure/docker-ollama@ce7928c64cd9365e77b2ab0772c007ae3ca150ae
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servefit.cli import main


# A Cloud Build config whose step runs `gcloud run deploy` with the server's flags in `--args` (the
# deploy scripts Cloud Run GPU tutorials keep as cloudbuild.yaml): no server was found in it.
def test_a_cloud_build_step_that_deploys_a_cloud_run_service(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "cloudbuild.yaml"
    f.write_text("substitutions:\n"
                 "  _MODEL: Qwen/Qwen3-8B\n"
                 "steps:\n"
                 "- name: 'gcr.io/cloud-builders/docker'\n"
                 "  args: ['build', '-t', 'gcr.io/$PROJECT_ID/app', '.']\n"
                 "- name: 'gcr.io/cloud-builders/gcloud'\n"
                 "  args: ['run', 'deploy', 'vllm', '--image', 'vllm/vllm-openai:v0.9.2', '--gpu', '1',\n"
                 "         '--gpu-type', 'nvidia-l4', '--args', '--model=${_MODEL},--max-model-len=32768']\n")
    assert main(["lint", str(f)]) == 1
    assert capsys.readouterr().out == (
        f"{f}:8:82: VLLM003 max-model-len 32,768 needs 4.50 GiB of KV cache per GPU, 3.11 GiB is left on the "
        "NVIDIA L4; the largest that fits is 22,624 [GPU: nvidia-l4 ×1 from gcloud run deploy --gpu-type]\n"
        "1 error, 0 warnings, 0 info in 1 file (1 server)\n")
    main(["models", str(f)])
    assert capsys.readouterr().out == f"{f}:8  vllm  Qwen/Qwen3-8B  -> Qwen/Qwen3-8B (8.19B) from catalog\n"
    main(["tune", str(f), "--diff"])
    out = capsys.readouterr().out
    assert ("-         '--gpu-type', 'nvidia-l4', '--args', '--model=${_MODEL},--max-model-len=32768']\n"
            "+         '--gpu-type', 'nvidia-l4', '--args', '--model=${_MODEL},--max-model-len=16384']\n") in out


# The same with the Cloud SDK image, whose program is the step's `entrypoint`, and the server's flags in
# one `--args=` item; a step whose builder runs a program not known here is passed over.
def test_a_cloud_build_step_with_an_entrypoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "cloudbuild.yaml"
    f.write_text("steps:\n"
                 "  - name: 'gcr.io/example/tool'\n"
                 "    args: ['vllm', 'serve', 'Qwen/Qwen3-8B']\n"
                 "  - name: 'gcr.io/google.com/cloudsdktool/cloud-sdk'\n"
                 "    entrypoint: gcloud\n"
                 "    args:\n"
                 "      - 'beta'\n"
                 "      - 'run'\n"
                 "      - 'deploy'\n"
                 "      - 'vllm-gemma'\n"
                 "      - '--image=vllm/vllm-openai:v0.9.2'\n"
                 "      - '--gpu=1'\n"
                 "      - '--args=--model=google/gemma-2-9b-it,--max-model-len=8192'\n")
    main(["lint", "--list-sites", str(f)])
    out = capsys.readouterr().out
    assert f"{f}:13  vllm    google/gemma-2-9b-it" in out
    assert out.count("\n") == 2


# mattbucci/2x-3090-GA102-300-A1-sglang-inference's probe.sh serves a REAP-pruned AWQ GLM-4.5-Air (82B, a
# size the catalog has no entry for) under `--served-model-name glm45-air-reap`: the path "named no model"
# and the server was sized as the alias, the full 106B GLM-4.5-Air in bf16 (99.71 GiB per GPU at TP 2).
def test_a_path_that_names_an_uncatalogued_model_is_not_sized_as_its_served_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "probe.sh"
    f.write_text("MODEL=/data/models/hf-3rdparty/GLM-4.5-Air-REAP-82B-A12B-AWQ-4bit\n"
                 "python -m sglang.launch_server \\\n"
                 "  --model-path \"$MODEL\" --served-model-name glm45-air-reap \\\n"
                 "  --tp 2 --port 23334 --context-length 4096\n")
    main(["models", str(f)])
    assert capsys.readouterr().out == (
        f"{f}:2  sglang  /data/models/hf-3rdparty/GLM-4.5-Air-REAP-82B-A12B-AWQ-4bit  -> not resolved: unknown model "
        "'/data/models/hf-3rdparty/GLM-4.5-Air-REAP-82B-A12B-AWQ-4bit'; no catalogued model has a similar family and "
        "size. Pass --model-config PATH/config.json or a local model directory\n")
    # a path that names no model is still sized as the name the command serves it under
    f.write_text("python -m sglang.launch_server --model-path /data/ckpt --served-model-name Qwen2.5-7B-Instruct\n")
    main(["models", str(f)])
    assert "-> Qwen/Qwen2.5-7B-Instruct (7.62B) from assumed base" in capsys.readouterr().out


# mattbucci/2x-3090-GA102-300-A1-sglang-inference's Dockerfile ends `CMD ["python", "-m",
# "sglang.launch_server", "--help"]` (its entrypoint script takes the real arguments): read as a server,
# with "SGL002 the following arguments are required: --model-path" and "SGL001 unrecognized argument:
# --help (did you mean --ep?)". A command that asks an engine for its usage or version starts no server.
@pytest.mark.parametrize("command", [
    'CMD ["python", "-m", "sglang.launch_server", "--help"]',
    "CMD vllm serve Qwen/Qwen3-8B -h",
    "CMD text-generation-launcher --version",
    "CMD llama-server --usage",
])
def test_a_command_that_prints_the_engines_usage_is_no_server(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              command: str) -> None:
    f = tmp_path / "Dockerfile"
    f.write_text(f"FROM python:3.12\n{command}\n")
    main(["lint", str(f), "--gpu", "L4"])
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (0 servers)\n"
    f.write_text("FROM python:3.12\nCMD vllm serve Qwen/Qwen3-8B --max-model-len 4096\n")
    main(["lint", str(f), "--gpu", "L4"])
    assert "(1 server)" in capsys.readouterr().out


# mattbucci/2x-3090-GA102-300-A1-sglang-inference's scripts/bench/bench_llamacpp.sh loads
# `$HOME/AI/models/Devstral-.../Devstral-Small-2-24B-Q4_K_M.gguf` (MODELS_DIR="$HOME/AI/models"): the whole
# path was "a variable", nothing sized, though the file name says which model it is, as it does written out.
def test_a_model_path_whose_folder_is_a_variable_is_sized_by_its_name(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "bench.sh"
    f.write_text('MODELS_DIR="$HOME/AI/models"\n'
                 'MODEL="${1:-$MODELS_DIR/qwen2.5-7b-instruct-q4_k_m.gguf}"\n'
                 'llama-server -m "$MODEL" -ngl 99 -c 8192\n')
    main(["models", str(f)])
    assert capsys.readouterr().out == (
        f"{f}:3  llamacpp  $HOME/AI/models/qwen2.5-7b-instruct-q4_k_m.gguf  -> Qwen/Qwen2.5-7B-Instruct (7.62B) from "
        "assumed base (by its name; $HOME is not set here)\n"
        "    assumed: GGUF 'qwen2.5-7b-instruct-q4_k_m.gguf' taken as Qwen/Qwen2.5-7B-Instruct (by its name, quant "
        "Q4_K_M; no file to read)\n")
    main(["lint", str(f), "--gpu", "L4"])
    assert capsys.readouterr().out == (
        f"{f}:2:13: SF004 GGUF 'qwen2.5-7b-instruct-q4_k_m.gguf' taken as Qwen/Qwen2.5-7B-Instruct (by its name, "
        "quant Q4_K_M; no file to read)\n0 errors, 0 warnings, 1 info in 1 file (1 server)\n")
    main(["estimate", str(f), "--gpu", "L4"])
    out = capsys.readouterr().out
    assert out.startswith("llamacpp b10309  ·  $HOME/AI/models/qwen2.5-7b-instruct-q4_k_m.gguf (→ Qwen/Qwen2.5-7B-Instruct)")
    assert ("  - model $HOME/AI/models/qwen2.5-7b-instruct-q4_k_m.gguf: $HOME is not set here, so the model is sized "
            "by the name the path ends in, qwen2.5-7b-instruct-q4_k_m.gguf\n") in out
    f.write_text("llama-server -m ${HOME}/models/qwen2.5-7b-instruct-q4_k_m.gguf -ngl 99 -c 8192\n")
    main(["lint", str(f), "--gpu", "L4"])
    assert capsys.readouterr().out == (
        f"{f}:1:17: SF004 GGUF 'qwen2.5-7b-instruct-q4_k_m.gguf' taken as Qwen/Qwen2.5-7B-Instruct (by its name, "
        "quant Q4_K_M; no file to read)\n0 errors, 0 warnings, 1 info in 1 file (1 server)\n")
    # vLLM's model folder likewise (lijiawei20161002/password_locking serves `--model $HOME/models/NAME`)
    f.write_text("python -m vllm.entrypoints.openai.api_server \\\n"
                 "  --model $HOME/models/DeepSeek-R1-Distill-Qwen-1.5B --max-model-len 2048\n")
    main(["models", str(f)])
    assert "-> deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B (1.78B) from assumed base (by its name; $HOME is not set " \
           "here)\n" in capsys.readouterr().out
    # a folder name that names no model is still not known, and said so
    f.write_text("python -m vllm.entrypoints.openai.api_server --model $HOME/models/password_locked_model\n")
    main(["models", str(f)])
    assert "-> not resolved: the model is a variable ($HOME/models/password_locked_model)" in capsys.readouterr().out


# sostrowsk/dgx-spark-local-llm's start-vllm-int4.sh pins `--revision 67dbeda4...` of poolside/Laguna-S-2.1-INT4,
# because main was re-quantized with bfloat16 experts (92.84 GiB there, 66.96 GiB at the pinned commit): the
# estimate sized main's checkpoint and did not say the pinned revision was not what it sized.
def test_a_pinned_revision_that_is_not_what_was_sized_is_said(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "start-vllm-int4.sh"
    f.write_text("MODELL_REV=67dbeda456e68139f281c40831f9d12049d8fc11\n"
                 "exec vllm serve poolside/Laguna-S-2.1-INT4 \\\n"
                 "  --revision \"$MODELL_REV\" --max-model-len 65536 --host 127.0.0.1\n")
    main(["estimate", str(f), "--gpu", "H200"])
    assert ("  - --revision 67dbeda456e68139f281c40831f9d12049d8fc11 is not what was sized: poolside/Laguna-S-2.1-INT4 "
            "is sized as servefit's catalog holds it (the repository as read, not a pinned commit), which may differ "
            "from that commit in weights or layout\n") in capsys.readouterr().out
    f.write_text("exec vllm serve poolside/Laguna-S-2.1-INT4 --revision main --max-model-len 65536\n")
    main(["estimate", str(f), "--gpu", "H200"])
    assert "--revision" not in capsys.readouterr().out


# The same script with --trust-remote-code: SEC005 advised "pin --revision to a reviewed commit", which it does.
def test_remote_code_pinned_to_a_commit_is_not_told_to_pin_it(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "start.sh"
    f.write_text("vllm serve poolside/Laguna-S-2.1-INT4 --trust-remote-code --host 127.0.0.1 --revision 67dbeda\n")
    main(["lint", str(f)])
    assert "SEC005" not in capsys.readouterr().out
    f.write_text("vllm serve poolside/Laguna-S-2.1-INT4 --trust-remote-code --host 127.0.0.1 --revision v2\n")
    main(["lint", str(f)])
    assert f"{f}:1:39: SEC005 --trust-remote-code runs the Python files of poolside/Laguna-S-2.1-INT4" \
           in capsys.readouterr().out


# sarvamai/uidai-deployment's yamls/llama-guard/deployment.yaml runs its own build of vLLM
# (`.../vllm-release-llama-guard:0.5.2.post1.dynlen`) with no command, the model in env MODEL1 that its entrypoint
# reads: lint and models said "no model given in the command (pass --model REF)", as if the engine's own image
# had been started bare.
def test_an_own_build_of_an_engine_image_run_without_a_command(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "deployment.yaml"
    f.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: vllm-llama-gaurd\nspec:\n  template:\n"
                 "    spec:\n      containers:\n      - name: vllm\n"
                 "        image: \"registry.example/sarvam/inference/llm/vllm-release-llama-guard:0.5.2.post1.dynlen\"\n"
                 "        env:\n        - name: MODEL1\n          value: \"/workspace/meta-llama/Llama-Guard-3-8B\"\n"
                 "        resources:\n          limits:\n            nvidia.com/gpu: \"1\"\n")
    said = ("the image registry.example/sarvam/inference/llm/vllm-release-llama-guard:0.5.2.post1.dynlen is not the "
            "vLLM project's own, and this file gives it no command: the model it serves is set inside the image (its "
            "ENTRYPOINT, CMD or a script reading the environment), which is not in this repository, so its memory "
            "was not checked: add `# servefit: model=REF` above the server")
    main(["lint", str(f), "--gpu", "L4"])
    assert f"{f}:10:1: SF002 {said}\n" in capsys.readouterr().out
    main(["models", str(f)])
    assert capsys.readouterr().out == f"{f}:10  vllm  (none)  -> not resolved: {said}\n"
    # the vLLM project's image started bare does take its model from the command
    f.write_text(f.read_text().replace("registry.example/sarvam/inference/llm/vllm-release-llama-guard:0.5.2.post1.dynlen",
                                       "vllm/vllm-openai:v0.9.2"))
    main(["models", str(f)])
    assert capsys.readouterr().out.endswith(
        "-> not resolved: no model given in the command: vLLM 0.9.2 would load its default, facebook/opt-125m (pass "
        "--model REF to check the model you mean)\n")  # vLLM's --model default before 0.10 (Qwen/Qwen3-0.6B from 0.10)


# thebiss/llama-cpp-mkl-docker's start-server.sh sets LLAMA_ARG_* and runs `export $(compgen -v LLAMA_)` before a
# bare `llama-server`: the variables were not taken as exported, so the server read as a router with no -m
# (LCPP015) and none of its LLAMA_ARG_ settings counted.
def test_export_of_the_variables_compgen_lists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "start-server.sh"
    f.write_text("#!/bin/bash\n"
                 'LLAMA_ARG_CTX_SIZE=${LLAMA_ARG_CTX_SIZE:-"24000"}\n'
                 "LLAMA_ARG_MODEL=/var/models/qwen2.5-7b-instruct-q4_k_m.gguf\n"
                 "OTHER_SETTING=1\n"
                 "export $(compgen -v LLAMA_)\n"
                 "llama-server\n")
    main(["lint", "--list-sites", str(f), "--format", "json"])
    site = json.loads(capsys.readouterr().out)[0]
    assert site["settings"] == {"ctx_size": 24000}
    assert site["env"] == {"LLAMA_ARG_CTX_SIZE": "24000", "LLAMA_ARG_MODEL": "/var/models/qwen2.5-7b-instruct-q4_k_m.gguf"}
    main(["models", str(f)])
    assert capsys.readouterr().out.startswith(
        f"{f}:6  llamacpp  /var/models/qwen2.5-7b-instruct-q4_k_m.gguf  -> Qwen/Qwen2.5-7B-Instruct (7.62B)")


# open-source-ai-dev/vllm-helm-chart's values.yaml gives the vLLM image `args: ["--load-format auto"]`, and its
# templates (not rendered without helm) write `vllm serve {{ .Values.model.name }} ...` around them: the values
# file was said to have "no model given in the command (pass --model REF)", as if the args were the whole command.
def test_a_values_files_command_without_a_model_says_the_templates_were_not_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "values.yaml"
    f.write_text("model:\n  organization: \"meta-llama\"\n  name: \"Llama-3.2-1B\"\n"
                 "image:\n  name: \"vllm/vllm-openai\"\n  tag: \"\"\nargs: [\"--load-format auto\"]\n")
    said = ("this values file's command for vLLM names no model: its chart's templates may add one, and servefit read "
            "the values file without them, so its memory was not checked: render the chart (helm on PATH) or add "
            "`# servefit: model=REF` above the server")
    main(["lint", str(f), "--gpu", "L4"])
    assert f"{f}:7:9: SF002 {said}\n" in capsys.readouterr().out
    main(["models", str(f)])
    assert capsys.readouterr().out == f"{f}:7  vllm  (none)  -> not resolved: {said}\n"


# Seen-Tomorrow/blackwell-ops's scripts/majestic/majestic.ps1 builds paths to its llama-server builds with
# `$server = Join-Path (Get-FoundryArtifactsRoot) "$ProviderId\$ProfileId\Release\llama-server.exe"` and only tests
# that they exist: each Join-Path was read as a llama-server started (a router with no model, SF001 on the path's
# variables). Join-Path names a path; a variable it sets is that path, for the `& $server ...` that runs it.
def test_join_path_names_a_server_it_does_not_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "majestic.ps1"
    f.write_text('$server = Join-Path (Get-FoundryArtifactsRoot) "$ProviderId\\$ProfileId\\Release\\llama-server.exe"\n'
                 "if (Test-Path -LiteralPath $server) { Write-Majestic \"found llama-server.exe\" }\n")
    main(["lint", str(f), "--gpu", "L4"])
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (0 servers)\n"
    f.write_text('$root = "C:\\llama"\n'
                 '$server = Join-Path $root "cuda\\Release\\llama-server.exe"\n'
                 "& $server -m C:\\models\\qwen2.5-7b-instruct-q4_k_m.gguf -c 4096 -ngl 99\n")
    main(["lint", "--list-sites", str(f), "--gpu", "L4", "--format", "json"])
    [site] = json.loads(capsys.readouterr().out)
    assert (site["line"], site["engine"], site["model_ref"]["written"], site["settings"]["ctx_size"]) == (
        3, "llamacpp", "C:\\models\\qwen2.5-7b-instruct-q4_k_m.gguf", 4096)


# tchangkiat/aws-cdk-stacks's scripts/eks/install-vllm-meta-llama.sh writes its vLLM Deployment from a heredoc
# (`cat <<EOF >>vllm-meta-llama.yaml` ... `kubectl apply -f vllm-meta-llama.yaml`): no server was read from it.
def test_a_manifest_a_script_writes_from_a_heredoc(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "install-vllm.sh"
    f.write_text("cat <<EOF >>vllm.yaml\n"
                 "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: vllm\nspec:\n  template:\n    spec:\n"
                 "      containers:\n      - name: vllm\n"
                 "        image: ${AWS_ACCOUNT_ID}.dkr.ecr.${AWS_REGION}.amazonaws.com/vllm:arm64\n"
                 "        command: [\"/bin/sh\", \"-c\"]\n"
                 "        args: [\"vllm serve meta-llama/Llama-3.2-1B-Instruct --max-model-len 4096\"]\n"
                 "        resources:\n          limits:\n            nvidia.com/gpu: \"1\"\n"
                 "EOF\n"
                 "kubectl apply -f vllm.yaml\n")
    main(["lint", str(f), "--gpu", "T4"])
    assert capsys.readouterr().out == (
        f"{f}:13:17: SEC004 vLLM has no API key and listens on all interfaces (its default without --host): anything "
        "on the pod network can use it\n"
        f"{f}:13:17: VLLM021 meta-llama/Llama-3.2-1B-Instruct is bfloat16; the Tesla T4 (compute capability 7.5) runs "
        "it in float16 [GPU: T4 ×1 from --gpu; count from nvidia.com/gpu limit]\n"
        "0 errors, 0 warnings, 2 info in 1 file (1 server)\n")
    main(["tune", str(f), "--gpu", "T4", "--min-context", "8192", "--diff"])
    assert ('-        args: ["vllm serve meta-llama/Llama-3.2-1B-Instruct --max-model-len 4096"]\n'
            '+        args: ["vllm serve meta-llama/Llama-3.2-1B-Instruct --max-model-len 8192 --max-num-seqs 128"]\n') in capsys.readouterr().out


# mattbucci/2x-3090-GA102-300-A1-sglang-inference's scripts/launch.sh builds `CMD=(python -m sglang.launch_server)`
# in the `else` of `if [[ "$SGLANG_SECURE_LAUNCH" == "1" ]]` (SGLANG_SECURE_LAUNCH="${SGLANG_SECURE_LAUNCH:-0}"),
# then `CMD+=(... --port "$PORT" ...)` and `exec "${CMD[@]}"`: the comparison was not evaluated, so the `then`
# branch's program (a wrapper) stood and no server was found, nothing said; and with the server found, the
# array's `"$PORT"` (set in a sourced file) was an error, "invalid int value: '$PORT'", not a value not known.
def test_an_array_command_chosen_by_a_string_comparison(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "launch.sh"
    f.write_text('#!/bin/bash\nSECURE="${SGLANG_SECURE_LAUNCH:-0}"\n'
                 'if [[ "$SECURE" == "1" ]]; then\n    CMD=(/usr/local/libexec/secure-launch.py)\nelse\n'
                 "    CMD=(python -m sglang.launch_server)\nfi\n"
                 'CMD+=(\n    --model-path Qwen/Qwen3-8B\n    --context-length 8192\n    --port "$PORT"\n)\n'
                 'exec "${CMD[@]}"\n')
    main(["lint", str(f), "--gpu", "H100"])
    assert capsys.readouterr().out == (
        f"{f}:11:13: SF001 ${{PORT}} is not set in this repository: the value it gives SGLang is not known, so it is "
        "not checked\n0 errors, 0 warnings, 1 info in 1 file (1 server)\n")
    # the branch each comparison takes (a pattern in [[ ]] is not compared: both branches read, the first stands)
    for test, found in (('[ "$SECURE" = 0 ]', False), ('[[ "$SECURE" != "0" ]]', True),
                        ('! [[ "$SECURE" == "1" ]]', False), ('[[ "$SECURE" == 1* ]]', False)):
        g = tmp_path / "g.sh"
        g.write_text(f.read_text().replace('[[ "$SECURE" == "1" ]]', test, 1))
        main(["models", str(g)])
        out = capsys.readouterr().out
        assert ("sglang  Qwen/Qwen3-8B" in out) is found, test


# thebiss/llama-cpp-mkl-docker's start-server.sh runs `source ./settings.sh` (LLAMA_ARG_HOST=0.0.0.0,
# LLAMA_ARG_CTX_SIZE=24000, ...) before `export $(compgen -v LLAMA_)` and a bare `llama-server`: what the sourced
# file sets was not read, so the server's settings (and its listening on every interface) were not checked.
def test_the_variables_a_sourced_file_sets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "settings.sh").write_text('LLAMA_ARG_HOST=${LLAMA_ARG_HOST:-"0.0.0.0"}\n'
                                          'LLAMA_ARG_CTX_SIZE=${LLAMA_ARG_CTX_SIZE:-"24000"}\n')
    f = repo / "start-server.sh"
    f.write_text("#!/bin/bash\nsource ./settings.sh\nLLAMA_ARG_MODEL=/var/models/qwen2.5-7b-instruct-q4_k_m.gguf\n"
                 "export $(compgen -v LLAMA_)\nllama-server\n")
    main(["lint", "--list-sites", str(f), "--format", "json"])
    assert json.loads(capsys.readouterr().out)[0]["settings"] == {"ctx_size": 24000, "host": "0.0.0.0"}
    main(["lint", str(f), "--gpu", "L4"])
    assert capsys.readouterr().out.startswith(
        f"{repo / 'settings.sh'}:1:35: SEC003 llama-server has no API key and listens on every interface of this "
        "machine (--host 0.0.0.0)")
    main(["tune", str(f), "--gpu", "L4", "--diff"])
    assert ('-LLAMA_ARG_CTX_SIZE=${LLAMA_ARG_CTX_SIZE:-"24000"}\n'
            '+LLAMA_ARG_CTX_SIZE=${LLAMA_ARG_CTX_SIZE:-"262144"}\n') in capsys.readouterr().out
    # mattbucci's launch.sh: `source "$SCRIPT_DIR/common.sh"` with SCRIPT_DIR the script's own folder
    f.write_text('#!/bin/bash\nSCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"\nsource "$SCRIPT_DIR/settings.sh"\n'
                 "LLAMA_ARG_MODEL=/var/models/qwen2.5-7b-instruct-q4_k_m.gguf\nexport $(compgen -v LLAMA_)\nllama-server\n")
    main(["lint", "--list-sites", str(f), "--format", "json"])
    assert json.loads(capsys.readouterr().out)[0]["settings"] == {"ctx_size": 24000, "host": "0.0.0.0"}
    f.write_text(f.read_text().replace('source "$SCRIPT_DIR/settings.sh"', '. "$(dirname "$0")/settings.sh"'))
    main(["lint", "--list-sites", str(f), "--format", "json"])
    assert json.loads(capsys.readouterr().out)[0]["settings"] == {"ctx_size": 24000, "host": "0.0.0.0"}
    # a file outside the repository is not read, nor one that sources itself twice
    f.write_text("#!/bin/bash\nsource ../settings.sh\nsource ./start-server.sh\n"
                 "LLAMA_ARG_MODEL=/var/models/qwen2.5-7b-instruct-q4_k_m.gguf\nexport $(compgen -v LLAMA_)\nllama-server\n")
    (tmp_path / "settings.sh").write_text("LLAMA_ARG_CTX_SIZE=1000\n")
    main(["lint", "--list-sites", str(f), "--format", "json"])
    assert json.loads(capsys.readouterr().out)[0]["settings"] == {}


# minish0/ollama-systemd's 0-download/ollama-download.sh runs `c=$(printf "curl -LO '...ollama-linux-${arch}.tar.zst'")`
# then `eval "$c"`: SF108 said the eval's server was not read, though the command is a download.
def test_an_eval_of_a_download_is_not_a_server_not_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "ollama-download.sh"
    f.write_text("#!/bin/sh\narch=$(uname -m)\n"
                 "c=$(printf \"curl -LO 'https://ollama.com/download/ollama-linux-${arch}.tar.zst'\")\n"
                 "printf \"%s\\n\" \"$c\"\neval \"$c\"\n")
    main(["lint", str(f)])
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (0 servers)\n"
    # a command line built elsewhere is still said
    f.write_text("#!/bin/sh\n# starts ollama\nc=$(build_command)\neval \"$c\"\n")
    main(["lint", str(f)])
    assert capsys.readouterr().out.startswith(f"{f}:4:1: SF108 `eval \"$c\"` runs a command line the script builds")


# mARTin-B78/dgx-spark_lite-llm_llama-swap_vllm_llama-cpp_ollama's vllm/vllm.Dockerfile ends
# `ENTRYPOINT ["python3", "-m", "vllm.entrypoints.openai.api_server"]` with no CMD: the arguments come from what runs
# the image; it was told "no model given in the command (pass --model REF)".
def test_a_dockerfile_whose_entrypoint_takes_its_arguments_at_run_time(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "vllm.Dockerfile"
    f.write_text("FROM nvidia/cuda:12.8.0-devel-ubuntu24.04 AS build\nCMD [\"bash\"]\n"
                 "FROM nvidia/cuda:12.8.0-runtime-ubuntu24.04\nRUN pip install vllm==0.9.2\n"
                 'ENTRYPOINT ["python3", "-m", "vllm.entrypoints.openai.api_server"]\n')
    said = ("this Dockerfile's ENTRYPOINT starts vLLM with no model and it has no CMD: the arguments come from what runs "
            "the image (`docker run IMAGE ...`, a compose or Kubernetes file), so its memory was not checked here: lint "
            "that file, or add `# servefit: model=REF` above the ENTRYPOINT")
    main(["models", str(f)])
    assert capsys.readouterr().out == f"{f}:5  vllm  (none)  -> not resolved: {said}\n"
    f.write_text(f.read_text() + 'CMD ["--port", "8000"]\n')  # a CMD that names no model: vLLM's default loads
    main(["models", str(f)])
    assert capsys.readouterr().out.endswith(
        "-> not resolved: no model given in the command: vLLM 0.9.2 would load its default, facebook/opt-125m (pass "
        "--model REF to check the model you mean)\n")
