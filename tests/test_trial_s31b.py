"""Session 31's second real-file trial (Ollama, llama.cpp, SGLang, TGI deployments): shapes from public
repositories (named with their commits) that servefit read wrongly or silently, each reduced to the part
that mattered.

- nemo6655/TDPFuzz@1d3b49e access_adapt/start_tgi_servers.sh (apptainer run of a pulled .sif)
- bradrlaw/ai-server@a3e705c config/llama-swap.base.yaml (Gemma 4 assistant drafter; LCPP006 breakdown)
- atoy3731/ai-stack@0fe3659 open-webui/values.yaml (`ollama: {enabled: false}`)
- FireBall1725/homelab-applications@c4f8e87 apps/app-ai/ollama-admin (a web UI, no Ollama server)
- altpsyche/local-llm@cb9a33c scripts/test-platform.ps1, scripts/gen-llama-swap.ps1 (PowerShell expressions)
- amasu/dgx-spark-qwen38@3b68c27 docker-compose.fp8-legacy.yml (a compose file for another engine)
- kevchoi/llm-platform@a68c51f old/tgi/docker-compose.yml (TGI001 on an option and value in one item)
- ThomasBrazier/ollama-open-research@2bad896 ollama_entrypoint.sh (`while read` loop variable)
- IsaacGHX/AgentFlow_Isaac@9ae78bb scripts/serve_vllm.sh (tmux send-keys; a command handed to a function)
- blockfeed/llama-swap_homelab@6474d9a config.yaml (`--n-gpu-layers 100,100`)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servefit.cli import main

# nemo6655/TDPFuzz@1d3b49e access_adapt/start_tgi_servers.sh: TGI 1.4.5 on an HPC cluster, run from the .sif
# `apptainer pull docker://ghcr.io/huggingface/text-generation-inference:1.4.5` writes (GetName in apptainer's
# internal/pkg/util/uri/uri.go names it NAME_TAG.sif), with `--env PORT=$PORT` and PORT never set in the script.
# servefit found no server in the file and said nothing.
TDPFUZZ = """#!/usr/bin/env bash
volume=/projects/x/hf_model
CONTAINER_HOME=/projects/x/containers
model=codellama/CodeLlama-13b-hf

apptainer run --nv --env HF_TOKEN=$TOKEN --env PORT=$PORT --bind $volume:/data:rw $CONTAINER_HOME/text-generation-inference_1.4.5.sif \\
--model-id $model \\
--dtype bfloat16 \\
--max-total-tokens 8192 --max-input-length 8000 --max-batch-prefill-tokens 8000 --enable-cuda-graphs --sharded false
apptainer run --nv ./my_server.sif --model-id $model
"""


def test_apptainer_run_of_a_pulled_sif_is_the_engine_image(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "start_tgi_servers.sh"
    f.write_text(TDPFUZZ)
    assert main(["lint", str(f), "--gpu", "A100-80GB"]) == 0
    assert capsys.readouterr().out == (
        f"{f}:6:53: SF001 ${{PORT}} is not set in this repository: the value it gives Text Generation Inference is "
        "not known, so it is not checked\n"
        f"{f}:7:1: SEC003 TGI has no API key and listens on every interface of this machine (its default without "
        "--hostname): anyone who can reach it can use it; bind 127.0.0.1 or pass --api-key\n"
        f"{f}:10:20: SF108 `apptainer run` starts the runscript of ./my_server.sif, which servefit cannot read, so "
        "the server it starts with these options was not checked: run the engine's image as docker://REPO:TAG, or "
        "keep the name `apptainer pull docker://REPO:TAG` gives it (NAME_TAG.sif)\n"
        "0 errors, 1 warning, 2 info in 1 file (1 server)\n")
    assert main(["estimate", str(f), "--gpu", "A100-80GB"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "tgi 1.4.5  ·  codellama/CodeLlama-13b-hf"
    assert "engine says: Setting max batch total tokens to 64656" in out


# bradrlaw/ai-server@a3e705c config/llama-swap.base.yaml: Gemma 4 31B with its MTP drafter, the separate ~490 MB
# gemma4-assistant GGUF (`--model-draft .../gemma4-31B-it-assistant-Q8_0.gguf --spec-type draft-mtp`). servefit took
# the drafter by its name for the 31B model itself at Q8_0 (+30 GiB) and said the server runs out of memory while
# loading (LCPP006, "needs 70.97 GiB (model 17.39 + KV 6.56 + compute 2.15)", a sum that did not add up); the
# author measured it at ~28 GB on the card. llama.cpp's gemma4-assistant arch is a few layers of the drafter's own
# width (src/models/gemma4-assistant.cpp), so a name with `assistant` never resolves to the base model.
GEMMA_SWAP = """macros:
  "llama-server": "/srv/ai/src/llama.cpp/build/bin/llama-server"
  "models_dir": "/srv/ai/models"
  "common": >
    --host 127.0.0.1 --port ${PORT}
    --n-gpu-layers 999
    --flash-attn on
models:
  "gemma-31b":
    env:
      - "CUDA_VISIBLE_DEVICES=1"
    cmd: |
      ${llama-server}
      --model ${models_dir}/gemma-4-31b/gemma-4-31B-it-qat-UD-Q4_K_XL.gguf
      --ctx-size 131072
      --cache-type-k q8_0 --cache-type-v q8_0
      --parallel 1
      --batch-size 2048 --ubatch-size 2048
      --model-draft ${models_dir}/gemma-4-31b/mtp-draft/gemma4-31B-it-assistant-Q8_0.gguf
      --spec-type draft-mtp --spec-draft-n-max 3 --n-gpu-layers-draft 99
      ${common}
"""


def test_a_gemma4_assistant_drafter_is_not_the_31b_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "llama-swap.yaml"
    f.write_text(GEMMA_SWAP)
    assert main(["estimate", str(f), "--gpu", "V100-32GB", "--engine-version", "b10309"]) == 0
    out = capsys.readouterr().out
    assert "verdict: starts" in out
    assert "engine says: common_params_fit_impl: projected to use 26723 MiB of device memory vs. 32163 MiB" in out
    assert "  - draft model gemma4-31B-it-assistant-Q8_0.gguf could not be sized; not counted\n" in out
    assert main(["lint", str(f), "--gpu", "V100-32GB", "--engine-version", "b10309"]) == 0
    assert "LCPP006" not in capsys.readouterr().out


def test_lcpp006_names_the_draft_models_share(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The out-of-memory breakdown adds up: a draft model's weights, KV and compute are named with the rest. A build
    before --fit (b7407) has no fit plan to leave the draft out of, nor a --fit-target to raise: no LCPP013."""
    f = tmp_path / "serve.sh"
    f.write_text("llama-server -m /m/Qwen2.5-32B-Instruct-Q4_K_M.gguf -md /m/Qwen2.5-7B-Instruct-Q8_0.gguf "
                 "-c 32768 -ngl 99 -ngld 99\n")
    assert main(["lint", str(f), "--gpu", "RTX-4090", "--engine-version", "b6800"]) == 1
    assert capsys.readouterr().out == (
        f"{f}:1:17: SF004 GGUF 'Qwen2.5-32B-Instruct-Q4_K_M.gguf' taken as Qwen/Qwen2.5-32B-Instruct (by its name, "
        "quant Q4_K_M; no file to read)\n"
        f"{f}:1:93: LCPP006 CUDA0 needs 36.11 GiB (model 18.07 + KV 8.00 + compute 0.37 + projector / draft model "
        "9.66) but has 23.16 GiB free [GPU: RTX-4090 ×1 from --gpu]\n"
        "1 error, 0 warnings, 1 info in 1 file (1 server)\n")


# atoy3731/ai-stack@0fe3659 open-webui/values.yaml: the Open WebUI chart's bundled Ollama turned off
# (`ollama: {enabled: false}`, the chart's dependency condition `ollama.enabled`) because Ollama runs from its own
# otwld chart beside it. servefit warned that this values file configures an Ollama server it could not read
# (SF116); with the subchart off there is no server there.
OPEN_WEBUI = """ollama:
  enabled: false

ollamaUrls:
  - http://ollama.ollama:11434

ingress:
  enabled: true
  host: ai.example.org
"""


def test_a_values_section_switched_off_starts_no_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "open-webui"
    d.mkdir()
    (d / "values.yaml").write_text(OPEN_WEBUI)
    assert main(["lint", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (0 servers)\n"
    (d / "values.yaml").write_text(OPEN_WEBUI.replace("enabled: false", "enabled: true", 1))
    main(["lint", str(tmp_path)])
    assert f"{d / 'values.yaml'}:1:1: SF116 this values file configures Ollama (its `ollama:` section)" in \
        capsys.readouterr().out


# FireBall1725/homelab-applications@c4f8e87 apps/app-ai/ollama-admin: the web UI ghcr.io/ollama-admin/ollama-admin,
# which manages an Ollama on another host (DEFAULT_OLLAMA_URL), was taken for an Ollama server by its image name:
# SEC004 (no authentication) and SF120 (no GPU) about a server that is not there.
OLLAMA_ADMIN = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: ollama-admin
spec:
  template:
    spec:
      containers:
        - name: main
          image: ghcr.io/ollama-admin/ollama-admin:0.15.5
          env:
            - name: DEFAULT_OLLAMA_URL
              value: http://ollama:11434
"""


def test_the_ollama_admin_web_ui_is_no_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "deploy.yaml").write_text(OLLAMA_ADMIN)
    assert main(["lint", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (0 servers)\n"
    (tmp_path / "deploy.yaml").write_text(OLLAMA_ADMIN.replace("ollama-admin/ollama-admin", "ollama/ollama"))
    main(["lint", str(tmp_path)])
    assert "(1 server)" in capsys.readouterr().out


# altpsyche/local-llm@cb9a33c scripts/test-platform.ps1 and scripts/gen-llama-swap.ps1: 'llama-server' as a string
# argument inside a parenthesized pipeline (`Assert "..." ((Get-BobExeName 'llama-server' -Os windows) -eq ...)`), and
# an array of option strings joined into a generated llama-swap macro (`$cfg.macros['srv'] = $srvParts -join ' '`),
# were read as llama-server launches: LCPP001 errors on `-Os`, `-eq`, `-join` and on the one-string "-ngl 99".
# PowerShell runs a program named by a string or variable only after `&`, and a `( )` group is one computed
# argument whose own pipeline runs apart.
PS_TEST = """Assert "exe name win -> .exe"     ((Get-BobExeName 'llama-server' -Os windows) -eq 'llama-server.exe')
'llama-server' -eq $name
$srvBin = '${env.LLAMA_LOCAL_ROOT}/bin/' + (Get-BobExeName 'llama-server')
$ngl = 99
$srvParts = @(
    $srvBin,
    '--port ${PORT}',
    "-ngl $ngl"
) | Where-Object { $_ -ne '' }
$cfg.macros['srv'] = $srvParts -join ' '
$v = (& llama-server -m C:\\m\\Qwen2.5-7B-Instruct-Q4_K_M.gguf -c 4096)
(& llama-server -m C:\\m\\Qwen2.5-7B-Instruct-Q4_K_M.gguf -c 8192) | Out-Null
"""


def test_powershell_strings_and_groups_are_no_launches(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "test-platform.ps1"
    f.write_text(PS_TEST)
    assert main(["models", str(f)]) == 0
    one = ("  llamacpp  C:\\m\\Qwen2.5-7B-Instruct-Q4_K_M.gguf  -> Qwen/Qwen2.5-7B-Instruct (7.62B) from assumed base\n"
           "    assumed: GGUF 'Qwen2.5-7B-Instruct-Q4_K_M.gguf' taken as Qwen/Qwen2.5-7B-Instruct (by its name, quant "
           "Q4_K_M; no file to read)\n")
    assert capsys.readouterr().out == f"{f}:11{one}{f}:12{one}"



# amasu/dgx-spark-qwen38@3b68c27: docker-compose.yml runs SGLang (a local image tag, `entrypoint: [python3, -m,
# sglang.launch_server]`) and docker-compose.fp8-legacy.yml, beside it, is a complete vLLM stack the README starts on
# its own (`docker compose -f docker-compose.fp8-legacy.yml up -d`). Read as an overlay of the base, the base's SGLang
# entrypoint ran the vLLM image and arguments: SGL001 errors on --gpu-memory-utilization, --max-model-len... A file
# beside the base whose service runs another engine is an alternative, read alone.
SGL_BASE = """services:
  qwen38:
    image: ${SERVE_IMAGE:-qwen38-dflash2:v1.2.2}
    network_mode: host
    entrypoint: ["python3", "-m", "sglang.launch_server"]
    command:
      - --model-path
      - Qwen/Qwen2.5-7B-Instruct
      - --mem-fraction-static
      - "0.50"
      - --host
      - 127.0.0.1
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: all
              capabilities: [gpu]
"""
VLLM_ALT = """services:
  qwen38:
    image: vllm/vllm-openai:v0.10.1
    command:
      - --model
      - Qwen/Qwen2.5-7B-Instruct
      - --gpu-memory-utilization
      - "0.85"
      - --max-model-len
      - "32768"
    ports:
      - "127.0.0.1:8000:8000"
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: all
              capabilities: [gpu]
"""


def test_a_compose_file_for_another_engine_is_read_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "docker-compose.yml").write_text(SGL_BASE)
    (tmp_path / "docker-compose.fp8-legacy.yml").write_text(VLLM_ALT)
    assert main(["lint", str(tmp_path), "--gpu", "H100"]) == 0
    assert capsys.readouterr().out == (
        f"{tmp_path / 'docker-compose.fp8-legacy.yml'}:5:9: SEC004 vLLM has no API key and listens on all interfaces "
        "(its default without --host): anything on the container network can use it\n"
        "0 errors, 0 warnings, 1 info in 2 files (2 servers)\n")
    assert main(["models", str(tmp_path)]) == 0
    assert capsys.readouterr().out == (
        f"{tmp_path / 'docker-compose.fp8-legacy.yml'}:5  vllm  Qwen/Qwen2.5-7B-Instruct  -> Qwen/Qwen2.5-7B-Instruct "
        "(7.62B) from catalog\n"
        f"{tmp_path / 'docker-compose.yml'}:5  sglang  Qwen/Qwen2.5-7B-Instruct  -> Qwen/Qwen2.5-7B-Instruct "
        "(7.62B) from catalog\n")


# kevchoi/llm-platform@a68c51f old/tgi/docker-compose.yml: `command: ['--model-id meta-llama/Llama-3.2-1B']`, the
# option and its value in one list item. clap takes the whole item as one unknown argument; servefit's message cut
# it at the space and ran the rest into the quote ("unexpected argument '--model-id' foundmeta-llama/Llama-3.2-1B").
TGI_ONE_ITEM = """services:
  tgi-server:
    image: ghcr.io/huggingface/text-generation-inference:3.3.4
    command:
      - '--model-id meta-llama/Llama-3.2-1B'
    ports:
      - "127.0.0.1:8080:80"
"""


def test_tgi_names_an_option_with_its_value_in_one_item_whole(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "docker-compose.yml"
    f.write_text(TGI_ONE_ITEM)
    assert main(["lint", str(f), "--gpu", "L4"]) == 1
    assert capsys.readouterr().out == (
        f"{f}:5:10: SEC004 TGI has no API key and listens on all interfaces (its default without --hostname): anything "
        "on the container network can use it\n"
        f"{f}:5:10: SF002 Text Generation Inference: no model given in the command: Text Generation Inference 3.3.4 "
        "would load its default, bigscience/bloom-560m (pass --model REF to check the model you mean)\n"
        f"{f}:5:10: TGI001 error: unexpected argument '--model-id meta-llama/Llama-3.2-1B' found; the option and its "
        "value are one argument here: write each as its own list item\n"
        "1 error, 1 warning, 1 info in 1 file (1 server)\n")
    g = tmp_path / "serve.sh"
    g.write_text("text-generation-launcher --model-id x/y --max_total_tokens 4096 --gpu-memory-utilization 0.9\n")
    main(["lint", str(g), "--gpu", "L4"])
    out = capsys.readouterr().out
    assert "TGI001 error: unexpected argument '--max_total_tokens' found; tip: a similar argument exists: " \
           "'--max-total-tokens'" in out
    assert "TGI001 error: unexpected argument '--gpu-memory-utilization' found (--gpu-memory-utilization is vllm's " \
           "memory fraction setting; TGI calls it --cuda-memory-fraction)" in out


# ThomasBrazier/ollama-open-research@2bad896 ollama_entrypoint.sh (a compose service's entrypoint): `ollama serve &`
# then `while read -r model; do ollama pull "$model"; done < models.txt`. servefit said ${model} "is not set in this
# repository"; bash's `read` sets it to each line of models.txt in turn.
PULL_LOOP = """#!/bin/bash
/bin/ollama serve &
pid=$!
sleep 5
while read -r model; do
  ollama pull "$model"
done < models.txt
wait $pid
"""


def test_a_while_read_loop_variable_is_said_to_take_each_line(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "ollama_entrypoint.sh"
    f.write_text(PULL_LOOP)
    assert main(["lint", str(f), "--gpu", "RTX-4090"]) == 0
    assert capsys.readouterr().out == (
        f"{f}:5:15: SF001 ${{model}} takes each line its `while read` loop reads in turn: the value it gives Ollama is "
        "not known here\n"
        "0 errors, 0 warnings, 1 info in 1 file (1 server)\n")


# IsaacGHX/AgentFlow_Isaac@9ae78bb scripts/serve_vllm.sh: the server's command line is a string typed into a tmux
# session (`tmux send-keys -t "$TMUX_SESSION:0" "$CMD_START" C-m`); a benchmark script hands one to a shell function
# (`run_engine sglang "source .../activate && exec python -m sglang.launch_server ..."`, run there with
# `setsid bash -c "$launch"`). servefit found no server in either file and said nothing.
TMUX = """#!/bin/bash
MODEL="Qwen/Qwen2.5-7B-Instruct"
PORT=8007
TMUX_SESSION="vllm_agentflow7"
tmux new-session -d -s "$TMUX_SESSION"
CMD_START="
    source .venv/bin/activate;
    export CUDA_VISIBLE_DEVICES=7;
    vllm serve \\"$MODEL\\" \\
        --host 0.0.0.0 \\
        --port $PORT
"
tmux send-keys -t "${TMUX_SESSION}:0" "$CMD_START" C-m
run_engine() {
  local name="$1" launch="$2"
  setsid bash -c "$launch" > "server_${name}.log" 2>&1 &
}
run_engine sglang "source .venvs/sglang/bin/activate && exec python -m sglang.launch_server --model-path $MODEL"
echo "vllm serve $MODEL"
log_info "Running: vllm serve $MODEL --port $PORT"
"""


def test_a_server_command_handed_over_as_one_string_is_read_or_said_unread(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """tmux's send-keys types the line and Enter (C-m) runs it in the pane's shell (tmux(1)): that server is read,
    with the variables the typed line exports; the shell function's string is said unread, a log line's text
    (`log_info "Running: vllm serve ..."`) is not."""
    f = tmp_path / "serve_vllm.sh"
    f.write_text(TMUX)
    assert main(["lint", str(f), "--gpu", "L4"]) == 0
    assert capsys.readouterr().out == (
        f"{f}:13:40: SEC003 vLLM has no API key and listens on every interface of this machine (--host 0.0.0.0): "
        "anyone who can reach port 8007 can use it; bind 127.0.0.1 or pass --api-key\n"
        f"{f}:13:40: VLLM018 max-model-len is not set: vLLM uses Qwen/Qwen2.5-7B-Instruct's 32,768 tokens [GPU: L4 ×1 "
        "from --gpu; count from CUDA_VISIBLE_DEVICES]\n"
        f"{f}:18:20: SF108 `run_engine` is given a server's command as one argument (`python -m "
        "sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct`): servefit does not run `run_engine`, so that "
        "server was not read; write the command on a line of its own, or lint it with `servefit lint -- COMMAND`\n"
        "0 errors, 2 warnings, 1 info in 1 file (1 server)\n")
    f.write_text(TMUX.replace('"$CMD_START" C-m', '"$CMD_START"'))  # typed, never run
    main(["lint", str(f), "--gpu", "L4"])
    assert capsys.readouterr().out.endswith("0 errors, 0 warnings, 1 info in 1 file (0 servers)\n")
    f.write_text('tmux new-session -d -s v "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192 --host 127.0.0.1"\n')
    assert main(["lint", str(f), "--gpu", "L4"]) == 0
    assert capsys.readouterr().out == "0 errors, 0 warnings, 0 info in 1 file (1 server)\n"


# blockfeed/llama-swap_homelab@6474d9a config.yaml: `--n-gpu-layers 100,100` on two vision models. llama.cpp reads
# -ngl with std::stoi (common/arg.cpp), the number the text starts with: 100, all layers. servefit refused it as
# an invalid value (LCPP002, an error) and planned with -ngl auto.
NGL_SWAP = """models:
  "qwen2vl-7b":
    cmd: >
      /opt/llama/bin/llama-server --port ${PORT} --host 127.0.0.1
      --model /opt/llama/models/Qwen2.5-7B-Instruct-Q6_K.gguf
      --n-gpu-layers 100,100
      --ctx-size 65536
"""


def test_ngl_is_read_as_stoi_reads_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "config.yaml"
    f.write_text(NGL_SWAP)
    assert main(["lint", str(f), "--gpu", "RTX-4090", "--engine-version", "b6800"]) == 0
    assert "LCPP002" not in capsys.readouterr().out
    assert main(["estimate", str(f), "--gpu", "RTX-4090", "--engine-version", "b6800"]) == 0
    assert "engine says: load_tensors: offloaded 29/29 layers to GPU" in capsys.readouterr().out
    f.write_text(NGL_SWAP.replace("100,100", "x100"))
    assert main(["lint", str(f), "--gpu", "RTX-4090", "--engine-version", "b6800"]) == 1
    assert "LCPP002 argument -ngl: invalid value 'x100' (a number, auto or all)" in capsys.readouterr().out
